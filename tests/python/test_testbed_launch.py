"""Runs across test-bed hosts: the payload lower bound behind the link-crossing proof, and
the command-line rules of `bench --scenario` (no root needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import FAKE_CONFIG, REPO_ROOT, _script, clean_env, multilane, recorded_bed
from multilane.bench import BenchRequest, prepare
from multilane.benchmarks import PT2PT
from multilane.context import Context
from multilane.errors import UsageError
from multilane.scenario import load_scenario
from multilane.testbed.launch import crossed_link, payload_bytes, placement


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


def test_placement_every_host_site_by_site(tmp_path: Path) -> None:
    ctx = recorded_bed(tmp_path / "state", BCAST_2SITE)
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
    ctx = recorded_bed(tmp_path / "a", other)
    with pytest.raises(UsageError, match=r"built from .*wan-2site\.toml, not .*bcast-2site\.toml"):
        placement(ctx, BCAST_2SITE, network, 2, "bcast", every_host=True)
    ctx = recorded_bed(tmp_path / "b", BCAST_2SITE, complete=False)
    with pytest.raises(UsageError, match="INCOMPLETE"):
        placement(ctx, BCAST_2SITE, network, 2, "bcast", every_host=True)


def test_bench_bcast_launch_on_every_host(fake_root: Path, tmp_path: Path) -> None:
    """`bench bcast --scenario` builds its launch for ranks on all four hosts (fake MPI tree;
    the command is built, not run)."""
    program = fake_root / "build" / "openmpi" / "bin" / "mln-bcast"
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    ctx = recorded_bed(tmp_path / "state", BCAST_2SITE)
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


def test_placement_first_hosts(tmp_path: Path) -> None:
    """hosts = N: the first N hosts site by site, whatever the benchmark's own placement."""
    ctx = recorded_bed(tmp_path / "state", BCAST_2SITE)
    network = load_scenario(BCAST_2SITE).network
    assert network is not None
    one = placement(ctx, BCAST_2SITE, network, 8, "halo", every_host=True, hosts=1)
    assert one.placement.hosts == ("a1",) and one.placement.np == 8 and one.sites == 1
    assert one.to_json()["hosts"] == ["a1"] and one.to_json()["host_limit"] == 1
    three = placement(ctx, BCAST_2SITE, network, 2, "pt2pt", hosts=3)
    assert three.placement.hosts == ("a1", "a2", "b1") and three.sites == 2
    every = placement(ctx, BCAST_2SITE, network, 2, "bcast", every_host=True)
    assert every.sites == 2 and "host_limit" not in every.to_json()
    for bad in (0, 5):
        with pytest.raises(UsageError, match=rf"halo: hosts {bad}: the test bed has 4 hosts "
                           r"\(a1, a2, b1, b2\): expected 1 to 4"):  # fmt: skip
            placement(ctx, BCAST_2SITE, network, 2, "halo", every_host=True, hosts=bad)


def test_no_crossing_to_prove_within_one_site(tmp_path: Path) -> None:
    """Ranks on the hosts of one site move nothing over the WAN: no delay-line proof."""
    ctx = recorded_bed(tmp_path / "state", BCAST_2SITE)
    network = load_scenario(BCAST_2SITE).network
    assert network is not None
    run = placement(ctx, BCAST_2SITE, network, 2, "halo", every_host=True, hosts=2)
    assert run.placement.hosts == ("a1", "a2") and run.sites == 1
    assert crossed_link(run, 0, 12345) == ({"payload_bytes_min": 12345}, "")


def test_bench_halo_launch_on_one_host(fake_root: Path, tmp_path: Path) -> None:
    """A halo run with hosts = 1: every rank on the first host (fake MPI tree; the command
    is built, not run), for both MPIs' launchers."""
    ctx = recorded_bed(tmp_path / "state", BCAST_2SITE)
    ctx = Context(
        root=fake_root, env={**ctx.env, "MULTILANE_ROOT": str(fake_root)}, ncpus=2, euid=0
    )
    mpich = fake_root / ".deps" / "mpich"  # a fake MPICH beside the fake Open MPI
    (mpich / ".multilane-mpi").parent.mkdir(parents=True)
    (mpich / ".multilane-mpi").write_text("mpich 9.9.9\n")
    _script(mpich / "bin" / "mpichversion", 'print("MPICH Version:      9.9.9")')
    _script(mpich / "bin" / "mpiexec", "")
    _script(mpich / "bin" / "mpicc", "")
    _script(fake_root / "build" / "mpich" / "bin" / "mln-config", FAKE_CONFIG)
    for mpi in ("openmpi", "mpich"):
        _script(fake_root / "build" / mpi / "bin" / "mln-halo", "")
        request = BenchRequest(
            "halo", mpi=mpi, options={"dims": 3}, scenario=BCAST_2SITE, ppn=8, hosts=1
        )
        run = prepare(request, ctx, tmp_path / f"out-{mpi}")
        assert run.request.np == 8 and run.request.transport == "tcp"
        assert run.note == "8 ranks on 1 host (hosts = 1: the first of the test bed's)"
        argv = list(run.launch.argv)
        assert argv[:2] == [str(tmp_path / "state" / "agent"), "a1"]
        where = "--host a1:8" if mpi == "openmpi" else "-hosts a1 -ppn 8 -n 8"
        assert where in argv[2] and "--dims 3" in argv[2], argv[2]
        assert "--meta hosts=a1 " in argv[2]
        assert run.testbed is not None and run.testbed.to_json()["host_limit"] == 1


SEED004 = REPO_ROOT / "scenarios" / "seed004-relay-small.toml"


def test_placement_on_private_and_direct_networks(tmp_path: Path) -> None:
    """A private network has no route between sites: a run across them is refused (it needs
    the direct network), one inside a site is placed on its compute hosts; a run needs the
    variant that is up."""
    scenario = load_scenario(SEED004).network
    assert scenario is not None
    ctx = recorded_bed(tmp_path / "private", SEED004)
    across_sites = 'no route between them: a run across sites needs network = "direct"'
    with pytest.raises(
        UsageError, match=f"pt2pt: the sites of the private network have {across_sites}"
    ):
        placement(ctx, SEED004, scenario, 1, "pt2pt")
    inside = placement(ctx, SEED004, scenario, 2, "halo", site="a")
    assert inside.placement.hosts == ("a1",) and inside.sites == 1  # front-ends: no ranks
    direct = scenario.variant("direct")
    wanted = r'the run needs the direct one \(network = "direct"\)'
    with pytest.raises(
        UsageError, match=f"the test bed that is up is the private network .*{wanted}"
    ):
        placement(ctx, SEED004, direct, 1, "pt2pt")
    ctx = recorded_bed(tmp_path / "direct", SEED004, variant="direct")
    across = placement(ctx, SEED004, direct, 1, "pt2pt")
    assert across.placement.hosts == ("a1", "b1") and across.sites == 2
