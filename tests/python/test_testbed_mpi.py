"""MPI across test-bed hosts, for real (root, namespaces, both MPIs): pt2pt between two sites
proves its bytes crossed the emulated link; MPI sees one node per host; the proof catches an
MPI that takes a shortcut (MPICH's UCX netmod through shared memory); a delay line killed
mid-run stops the run with a clear message instead of a hang."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import (
    BUILT_MPIS,
    REPO_ROOT,
    clean_env,
    multilane,
    private_testbed,
    testbed_skip_reason,
    two_sites_network,
)
from multilane.benchmarks import PT2PT
from multilane.context import Context
from multilane.launchers import HOSTS_COMMANDS
from multilane.scenario import load_scenario
from multilane.testbed import launch as tblaunch

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.mpi]

TWO_SITES = 'name = "two-sites"\n' + two_sites_network("200mbit", "1ms", "mtu = 9000\n")
MPIS = BUILT_MPIS


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], Path]]:
    """A private two-site test bed for the module; always taken down."""
    yield from private_testbed(tmp_path_factory.mktemp("tbmpi"), "two-sites", TWO_SITES)


def _context(env: dict[str, str]) -> Context:
    return Context(root=REPO_ROOT, env=env, ncpus=os.cpu_count() or 1, euid=os.geteuid())


def _bench(env: dict[str, str], scenario: Path, mpi: str, results: Path, *extra: str):
    args = ["bench", "pt2pt", "--scenario", str(scenario), "--mpi", mpi, "--results", str(results)]
    return multilane([*args, *extra], env, timeout=600)


@pytest.mark.parametrize("mpi", MPIS)
def test_pt2pt_across_two_sites(bed: tuple[dict[str, str], Path], tmp_path: Path, mpi: str):
    env, scenario = bed
    # few iterations per size: the launch and the proof are tested here, not the timings
    extra = ("--sizes", "1,4K,256K", "--reps", "2", "--", "--max-iters", "10")
    proc = _bench(env, scenario, mpi, tmp_path, *extra)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    (result,) = tmp_path.glob("*/*.json")
    doc = json.loads(result.read_text())
    assert doc["status"] == "pass" and doc["errors"] == 0
    prov = doc["provenance"]
    assert prov["nhosts"] == 2 and sorted(prov["hosts"]) == ["a1", "b1"]
    crossed = prov["testbed"]
    assert crossed["payload_bytes_min"] == tblaunch.payload_bytes(doc, PT2PT.payload) > 0
    assert crossed["wan_tx_bytes"] >= crossed["payload_bytes_min"]


@pytest.mark.parametrize("mpi", MPIS)
def test_one_node_per_host(bed: tuple[dict[str, str], Path], mpi: str) -> None:
    """Two ranks on each of two hosts: MPI_Comm_split_type(SHARED) gives two groups."""
    env, scenario = bed
    ctx = _context(env)
    network = load_scenario(scenario).network
    assert network is not None
    run = tblaunch.placement(ctx, scenario, network, 2, "mpi_nodes")
    program = [str(REPO_ROOT / "build" / mpi / "bin" / "mpi_nodes")]
    cmd = HOSTS_COMMANDS[mpi](REPO_ROOT / ".deps" / mpi, program, run.placement, euid=0)
    proc = subprocess.run(
        run.wrap(cmd.argv),
        env={**env, **cmd.env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "mpi_nodes: 4 ranks, 2 hosts, 2 shared-memory groups" in proc.stdout


@pytest.mark.skipif("mpich" not in MPIS, reason="MPICH is not built")
def test_shortcut_through_shared_memory_is_caught(
    bed: tuple[dict[str, str], Path], tmp_path: Path
) -> None:
    """MPICH's UCX netmod moves the bytes between namespaces through shared memory: the
    benchmark passes, but the delay line never sees them, and the proof says so."""
    env, scenario = bed
    ctx = _context(env)
    network = load_scenario(scenario).network
    assert network is not None
    run = tblaunch.placement(ctx, scenario, network, 1, "ucx")
    out = tmp_path / "ucx.json"
    program = [
        str(REPO_ROOT / "build" / "mpich" / "bin" / "mln-pt2pt"),
        *("--sizes", "1M", "--reps", "2", "--max-iters", "5", "--json", str(out)),
    ]
    cmd = HOSTS_COMMANDS["mpich"](REPO_ROOT / ".deps" / "mpich", program, run.placement, euid=0)
    argv = ["ucx" if word == "ofi" else word for word in cmd.argv]  # the netmod -genv
    # UCX with its default transports (shared memory among them), not the tcp-only settings
    # that mpich_tcp_env gives Debian's UCX-only MPICH
    for i in range(len(argv) - 2, -1, -1):
        if argv[i] == "-genv" and argv[i + 1].startswith("UCX_"):
            del argv[i : i + 3]
    cmd_env = {k: v for k, v in cmd.env.items() if not k.startswith("UCX_")}
    before = run.wan_tx_bytes()
    proc = subprocess.run(
        run.wrap(argv),
        env={**env, **cmd_env, "MPIR_CVAR_CH4_NETMOD": "ucx"},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    if proc.returncode != 0:
        pytest.skip(f"MPICH with UCX did not run across namespaces here: {proc.stderr[-300:]}")
    moved = tblaunch.payload_bytes(json.loads(out.read_text()), PT2PT.payload)
    record, problem = tblaunch.crossed_link(run, before, moved)
    assert record["wan_tx_bytes"] < moved
    assert "did not cross the emulated link" in problem


@pytest.mark.parametrize("mpi", MPIS[:1])
def test_delayline_killed_mid_run(bed: tuple[dict[str, str], Path], tmp_path: Path, mpi: str):
    """Runs last in this module (it leaves the test bed without its delay line)."""
    env, scenario = bed
    status = json.loads(multilane(["testbed", "status", "--json"], env).stdout)
    (line,) = [p for p in status["processes"] if p["role"] == "delayline"]
    args = ["--sizes", "4M", "--reps", "1000", "--", "--max-iters", "5"]
    cmd = [sys.executable, "-m", "multilane", "bench", "pt2pt", "--scenario", str(scenario)]
    cmd += ["--mpi", mpi, "--results", str(tmp_path), *args]
    child = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob("*/*.log")) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(3)  # well into the transfer
        os.kill(line["pid"], signal.SIGKILL)
        killed = time.monotonic()
        out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 1, out[-1000:] + err
    assert "delay line of WAN link" in err and "died during the run" in err, err
    assert time.monotonic() - killed < 60
    # The rank on the far side lost its launcher and its link: it was stopped, not left
    # spinning inside the host.
    for host in status["hosts"]:
        pids = subprocess.run(
            ["ip", "netns", "pids", host["namespace"]], capture_output=True, text=True, check=True
        ).stdout.split()
        assert pids == [], f"left in {host['name']}: {pids}"


def test_run_scenario_with_network(tmp_path: Path) -> None:
    """`multilane run` on a file with a [network] and runs: its own test bed is brought up,
    every run goes across the sites, the report is drawn, and the test bed is taken down."""
    reason = testbed_skip_reason()
    if reason:
        pytest.skip(reason)
    scenario = tmp_path / "tb-run.toml"
    text = TWO_SITES.replace('name = "two-sites"', 'name = "tb-run"')
    scenario.write_text(
        text + '\n[defaults]\nsizes = "1,64K"\nreps = 2\nargs = ["--max-iters", "5"]\n'
        f"[matrix]\nmpi = {json.dumps(MPIS)}\n"
    )
    env = clean_env(REPO_ROOT, MULTILANE_TESTBED_DIR=str(tmp_path / "state"))
    proc = multilane(["run", str(scenario), "--results", str(tmp_path / "res")], env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    (out,) = (tmp_path / "res").iterdir()
    for mpi in MPIS:
        doc = json.loads((out / f"{mpi}.json").read_text())
        assert doc["status"] == "pass" and doc["provenance"]["nhosts"] == 2
        crossed = doc["provenance"]["testbed"]
        assert crossed["wan_tx_bytes"] >= crossed["payload_bytes_min"] > 0
    assert (out / "report.md").exists()
    assert "taken down" in proc.stdout
    assert not (tmp_path / "state" / "state.json").exists()
