"""Runs across test-bed hosts: the payload lower bound behind the link-crossing proof, and
the command-line rules of `bench --scenario` (no root needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import REPO_ROOT, clean_env, multilane
from multilane.bench import BenchRequest, prepare
from multilane.benchmarks import PT2PT
from multilane.context import Context
from multilane.errors import UsageError
from multilane.scenario import load_scenario
from multilane.testbed.launch import payload_bytes, placement
from multilane.testbed.state import State


def _doc(
    metrics: list[str], rows: list[dict[str, float]], reps: int = 3, pairs: int = 1
) -> dict[str, object]:
    return {
        "provenance": {"params": {"reps": reps, "pairs": pairs}},
        "metrics": [{"name": m} for m in metrics],
        "rows": rows,
    }


def test_payload_bytes_counts_each_test() -> None:
    row = {"bytes": 1000, "iters": 10, "window": 4, "latency_us": 5.0, "bw_MBps": 9.0}
    row["bibw_MBps"] = 9.0  # a metric counts in the rows that have it
    # latency: 2 messages per iteration; bw: window; bibw: 2 * window
    assert payload_bytes(_doc(["latency_us"], [row]), PT2PT.payload) == 1000 * 10 * 3 * 2
    assert payload_bytes(_doc(["bw_MBps"], [row]), PT2PT.payload) == 1000 * 10 * 3 * 4
    assert payload_bytes(_doc(["bibw_MBps"], [row]), PT2PT.payload) == 1000 * 10 * 3 * 8
    both = _doc(["latency_us", "bw_MBps", "bibw_MBps"], [row, {**row, "bytes": 0}], pairs=2)
    assert payload_bytes(both, PT2PT.payload) == 1000 * 10 * 3 * 2 * (2 + 4 + 8)
    partial = _doc(["latency_us", "bw_MBps"], [{k: v for k, v in row.items() if k != "bw_MBps"}])
    assert payload_bytes(partial, PT2PT.payload) == 1000 * 10 * 3 * 2  # bw not measured there


def test_payload_bytes_of_a_real_result(fixtures: Path) -> None:
    for path in sorted(fixtures.glob("*.json")):
        doc = json.loads(path.read_text())
        if doc.get("schema") == "multilane-result" and doc.get("rows"):
            assert payload_bytes(doc, PT2PT.payload) > 0
            return
    pytest.skip("no result fixture with rows")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ppn", "2"], "--ppn needs --scenario"),
        (["--scenario", "scenarios/wan-2site.toml", "--transport", "shm"], "leave out"),
        (["--scenario", "scenarios/wan-2site.toml", "--np", "4"], "leave out"),
    ],
)
def test_bench_scenario_usage_errors(args: list[str], message: str) -> None:
    proc = multilane(["bench", "pt2pt", *args], clean_env())
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr


# ---- where the ranks go: a recorded test bed (a state file; nothing is built or started) ---

BCAST_2SITE = REPO_ROOT / "scenarios" / "bcast-2site.toml"


def _recorded_bed(directory: Path, scenario: Path, complete: bool = True) -> Context:
    """A state file saying the test bed of `scenario` is up (the record of `testbed up`, as
    placement reads it), and a context that finds it."""
    network = load_scenario(scenario).network
    assert network is not None
    hosts = [
        {"name": h.name, "site": h.site, "namespace": f"mlnf00d-h-{h.name}",
         "address": h.address, "interface": h.interfaces[0].name}
        for h in network.hosts
    ]  # fmt: skip
    State(directory, "mlnf00d-", str(scenario.resolve()), complete=complete, hosts=hosts).save()
    env = clean_env(REPO_ROOT, MULTILANE_TESTBED_DIR=str(directory))
    return Context(root=REPO_ROOT, env=env, ncpus=2, euid=0)


def test_placement_every_host_site_by_site(tmp_path: Path) -> None:
    ctx = _recorded_bed(tmp_path / "state", BCAST_2SITE)
    network = load_scenario(BCAST_2SITE).network
    assert network is not None
    every = placement(ctx, BCAST_2SITE, network, 2, "bcast", every_host=True)
    assert every.placement.hosts == ("a1", "a2", "b1", "b2")
    assert (every.placement.ppn, every.placement.np) == (2, 8)
    assert every.to_json()["hosts"] == ["a1", "a2", "b1", "b2"]
    first = placement(ctx, BCAST_2SITE, network, 1, "pt2pt")
    assert first.placement.hosts == ("a1", "b1") and first.placement.np == 2


def test_placement_needs_the_same_complete_bed(tmp_path: Path) -> None:
    other = REPO_ROOT / "scenarios" / "wan-2site.toml"
    network = load_scenario(BCAST_2SITE).network
    assert network is not None
    ctx = _recorded_bed(tmp_path / "a", other)
    with pytest.raises(UsageError, match=r"built from .*wan-2site\.toml, not .*bcast-2site\.toml"):
        placement(ctx, BCAST_2SITE, network, 2, "bcast", every_host=True)
    ctx = _recorded_bed(tmp_path / "b", BCAST_2SITE, complete=False)
    with pytest.raises(UsageError, match="INCOMPLETE"):
        placement(ctx, BCAST_2SITE, network, 2, "bcast", every_host=True)


def test_bench_bcast_launch_on_every_host(fake_root: Path, tmp_path: Path) -> None:
    """`bench bcast --scenario` builds its launch for ranks on all four hosts (fake MPI tree;
    the command is built, not run)."""
    program = fake_root / "build" / "openmpi" / "bin" / "mln-bcast"
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    ctx = _recorded_bed(tmp_path / "state", BCAST_2SITE)
    ctx = Context(
        root=fake_root, env={**ctx.env, "MULTILANE_ROOT": str(fake_root)}, ncpus=2, euid=0
    )
    request = BenchRequest(
        "bcast", mpi="openmpi", options={"algo": "sme", "leaders": 2}, scenario=BCAST_2SITE, ppn=2
    )
    run = prepare(request, ctx, tmp_path / "out")
    assert run.request.np == 8 and run.request.transport == "tcp"
    argv = list(run.launch.argv)
    assert argv[:2] == [str(tmp_path / "state" / "agent"), "a1"]  # started inside the first host
    assert "--host a1:2,a2:2,b1:2,b2:2" in argv[2] and "-np 8" in argv[2]
    assert "--algo sme --leaders 2" in argv[2] and "--meta hosts=a1,a2,b1,b2" in argv[2]
    assert run.testbed is not None and run.testbed.placement.hosts == ("a1", "a2", "b1", "b2")
