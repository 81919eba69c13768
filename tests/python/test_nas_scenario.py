"""Seed 004's NAS experiment without a test bed: scenarios/seed004-nas.toml and its quick
variant parse into the expected runs (the three kernels with their sizes, direct on the direct
network and relayed through `launch = "grid"` with 1, 2, 4, 8 trunks, WAN delays 0-10 ms, Open
MPI, one mixed grid per kernel), in the order the runner brings the networks up; the dry run
lists them; a relayed run's prepared launch is the grid plan with the kernel, --split 2, the
meta and --json, and a direct one the stock launch over a1, a2, b1, b2.  Fake MPIs and programs
(test_grid's stand-ins); nothing runs."""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

import pytest

from conftest import REPO_ROOT, clean_env, recorded_grid_bed
from multilane.bench import prepare
from multilane.context import Context
from multilane.experiment import run_scenario
from multilane.experiment import testbed_groups as groups_of
from multilane.scenario import load_scenario
from test_grid import fake_tree

FULL = REPO_ROOT / "scenarios" / "seed004-nas.toml"
QUICK = REPO_ROOT / "scenarios" / "seed004-nas-quick.toml"
RELAY = REPO_ROOT / "scenarios" / "seed004-relay.toml"
MIXED = "a=openmpi,b=mpich"
SIZES = {
    "nas-is": {"keys": 1048576, "max_key": 524288, "buckets": 1024, "iters": 10},
    "nas-mg": {"n": 64, "levels": 4, "smooth": 2, "cycles": 10},
    "nas-lu": {"nx": 192, "ny": 192, "nz": 192, "iters": 10},
}
PROGRAMS = ("mln-nas-is", "mln-nas-mg", "mln-nas-lu")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return fake_tree(tmp_path / "tree", PROGRAMS)


def _ctx(root: Path, state: Path) -> Context:
    env = clean_env(root, MULTILANE_TESTBED_DIR=str(state))
    return Context(root=root, env=env, ncpus=2, euid=0, out=io.StringIO())


def _run(scenario: Path, label: str):
    return next(r for r in load_scenario(scenario).runs if r.label == label)


def test_full_scenario() -> None:
    s = load_scenario(FULL)
    assert len(s.runs) == 63 and s.testbed_check
    assert Counter(r.benchmark for r in s.runs) == {"nas-is": 21, "nas-mg": 21, "nas-lu": 21}
    assert all(r.options == SIZES[r.benchmark] for r in s.runs)  # the same sizes everywhere
    direct = [r for r in s.runs if r.launch == "mpi"]
    grid = [r for r in s.runs if r.launch == "grid"]
    assert len(direct) == 12 and all(r.mpi == "openmpi" for r in direct)
    assert all(r.network_variant == "direct" and r.hosts == 4 and r.ppn == 1 for r in direct)
    assert all(r.network_variant == "private" and r.hosts is None for r in grid)
    assert Counter((r.mpi, r.trunks) for r in grid) == {
        **{("openmpi", k): 12 for k in (1, 2, 4, 8)},
        (MIXED, 8): 3,
    }
    assert {r.wan_delay_s for r in s.runs} == {0.0, 0.001, 0.005, 0.010}
    mixed = [r for r in s.runs if r.mpi == MIXED]
    assert {(r.benchmark, r.wan_delay_s) for r in mixed} == {
        (b, 0.005) for b in ("nas-is", "nas-mg", "nas-lu")
    }
    run = _run(FULL, "lu-delay10ms-trunks4")
    assert (run.benchmark, run.trunks, run.wan_delay_s, run.timeout_s) == ("nas-lu", 4, 0.01, 600)
    assert "split" not in run.options  # the runner sets it: the ranks of site a
    groups = groups_of(s)  # the direct network first, then the private one
    assert [v for v, _ in groups] == ["direct", "private"]
    assert [(d, len(i)) for d, i in groups[0][1]] == [(0.0, 3), (0.001, 3), (0.005, 3),
                                                      (0.01, 3)]  # fmt: skip
    assert [(d, len(i)) for d, i in groups[1][1]] == [(0.0, 12), (0.001, 12), (0.005, 15),
                                                      (0.01, 12)]  # fmt: skip


def test_quick_scenario() -> None:
    s = load_scenario(QUICK)
    assert len(s.runs) == 19 and not s.testbed_check
    assert {r.wan_delay_s for r in s.runs} == {0.0, 0.005}
    assert Counter(r.trunks for r in s.runs) == {None: 6, 1: 6, 8: 7}
    assert all(r.options == SIZES[r.benchmark] for r in s.runs)
    assert s.runs[0].label == "is-delay0ms-direct" and s.runs[-1].mpi == MIXED
    network = FULL.read_text()[FULL.read_text().index("[network]") :]
    assert network in QUICK.read_text()  # the same network
    assert network == RELAY.read_text()[RELAY.read_text().index("[network]") :]  # seed004-relay's


def test_dry_run(tree: Path, tmp_path: Path) -> None:
    ctx = _ctx(tree, tmp_path / "state")
    run_scenario(load_scenario(QUICK), ctx, tmp_path / "results", dry_run=True)
    out = ctx.out.getvalue()  # type: ignore[attr-defined]
    assert "scenario seed004-nas-quick: 19 runs" in out
    assert "test bed: the direct network; WAN delay 0ms: 3 runs, 5ms: 3 runs" in out
    assert "test bed: the private network; WAN delay 0ms: 6 runs, 5ms: 7 runs" in out
    assert (
        "(19/19) mixed-is-delay5ms-trunks8: nas-is across the private sites (multilane grid "
        f"run, {MIXED}: every compute host, ppn 1, 8 trunks, WAN delay 5ms)"
    ) in out
    assert "(7/19) mg-delay0ms-direct: nas-mg on the test bed (the default placement" in out
    assert not (tmp_path / "results").exists()


def test_grid_launch(tree: Path, tmp_path: Path) -> None:
    """A relayed run on the live private test bed: multilane grid run of the kernel with its
    sizes, --split 2 (the ranks of site a), the meta and --json; gateways on the front-ends."""
    recorded_grid_bed(tmp_path / "state", FULL, "private")
    out = tmp_path / "out"
    run = prepare(_run(FULL, "is-delay0ms-trunks8"), _ctx(tree, tmp_path / "state"), out)
    assert run.grid is not None and run.tag == "openmpi/grid:8" and run.request.np == 4
    argv = list(run.launch.argv)
    assert argv[: argv.index("--")] == [
        "multilane", "grid", "run", str(FULL), "--np", "a=2,b=2", "--mpi", "openmpi",
        "--trunks", "8", "--timeout", "600", "--gateway-log", "info",
    ]  # fmt: skip
    program = argv[argv.index("--") + 1 :]
    assert program[0] == str(tree / "build" / "{mpi}" / "bin" / "mln-nas-is")
    assert program[1:11] == ["--keys", "1048576", "--max-key", "524288", "--buckets", "1024",
                             "--iters", "10", "--split", "2"]  # fmt: skip
    assert program[-2:] == ["--json", str(out / "is-delay0ms-trunks8.json")]
    metas = dict(program[i + 1].split("=", 1) for i, w in enumerate(program) if w == "--meta")
    assert {k: metas[k] for k in ("launch", "trunks", "network", "wan_delay", "site_mpi")} == {
        "launch": "grid", "trunks": "8", "network": "private", "wan_delay": "0ms",
        "site_mpi": "a=openmpi,b=openmpi",
    }  # fmt: skip
    a, b = run.grid.plan.sites
    assert a.hosts == ("a1", "a2") and b.hosts == ("b1", "b2") and len(b.gateways) == 8
    assert run.testbed is not None and run.testbed.sites == 2


def test_mixed_and_direct_launch(tree: Path, tmp_path: Path) -> None:
    recorded_grid_bed(tmp_path / "private", FULL, "private")
    run = prepare(_run(FULL, "mixed-mg-delay5ms-trunks8"), _ctx(tree, tmp_path / "private"),
                  tmp_path / "out")  # fmt: skip
    a, b = run.grid.plan.sites
    assert (a.install.name, b.install.name) == ("openmpi", "mpich")
    assert str(tree / "build" / "mpich" / "bin" / "mln-nas-mg") in b.launch.argv[-1]
    recorded_grid_bed(tmp_path / "direct", FULL, "direct")
    run = prepare(_run(FULL, "lu-delay1ms-direct"), _ctx(tree, tmp_path / "direct"),
                  tmp_path / "out")  # fmt: skip
    assert run.grid is None and run.request.np == 4 and run.request.options["split"] == 2
    assert run.testbed is not None and run.testbed.placement.hosts == ("a1", "a2", "b1", "b2")
    inner = run.launch.argv[-1]
    assert "mln-nas-lu --nx 192 --ny 192 --nz 192 --iters 10 --split 2" in inner
    assert "--meta launch=mpi" in inner and "--meta network=direct" in inner
