"""mpi4py's own test suite without and with the layer (multilane.mpi4py_suite, issue 16).

The CI subset (point-to-point, probe and matched probe, requests, persistent and partitioned
requests, broadcasts), 2 ranks on this machine with MLN_NODE_SIZE=1 (every peer remote to
the layer) and the thresholds at 1K, for each built MPI: the same tests pass, fail and skip
with the layer as without it, and the layer striped bytes.  The whole suite, both rank
counts and the test bed: scripts/mpi4py-suite.sh, docs/PRELOAD-MPI4PY.md.  Skipped only
where the mpi4py sdist (or its build tools) cannot be fetched; a failed build fails.

The comparison itself is tested first on hand-written rank files (no MPI)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import BUILT_MPIS, REPO_ROOT
from multilane import mpi4py_suite as suite
from multilane.external import preload_path

CI_RUN_TIMEOUT_S = 240.0


def _rank_file(folder: Path, rank: int, outcomes: dict[str, str], done: bool = True) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for test, outcome in outcomes.items():
        lines.append({"event": "start", "id": test})
        if outcome != "hung":
            lines.append({"event": "end", "id": test, "outcome": outcome, "detail": "why"})
    if done:
        lines.append({"event": "done", "tests": len(outcomes)})
    (folder / f"rank-{rank}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def _run(folder: Path, layer: bool, per_rank: list[dict[str, str]], done: bool = True):
    for rank, outcomes in enumerate(per_rank):
        _rank_file(folder, rank, outcomes, done)
    run = suite.SuiteRun("openmpi", len(per_rank), "local", layer, folder, returncode=0)
    suite.read_rank_files(run)
    return run


def test_same_outcomes_compare_equal(tmp_path: Path) -> None:
    tests = {"t.A.a": "pass", "t.A.b": "skip", "t.B.c": "fail"}
    plain = _run(tmp_path / "p", False, [tests, tests])
    layer = _run(tmp_path / "l", True, [tests, tests])
    same, lines = suite.compare(plain, layer)
    assert same, lines
    assert plain.counts() == {"tests": 3, "pass": 1, "fail": 1, "error": 0, "skip": 1,
                              "xfail": 0, "xpass": 0, "crash": 0, "hang": 0}  # fmt: skip
    assert "SAME" in lines[0]


def test_a_differing_test_is_named_with_rank_and_detail(tmp_path: Path) -> None:
    tests = {"t.A.a": "pass", "t.A.b": "pass"}
    plain = _run(tmp_path / "p", False, [tests, tests])
    layer = _run(tmp_path / "l", True, [tests, {"t.A.a": "pass", "t.A.b": "error"}])
    same, lines = suite.compare(plain, layer)
    assert not same
    assert any("rank 1 t.A.b: plain pass, layer error  why" in line for line in lines), lines


def test_a_hung_rank_is_unfinished_and_names_its_test(tmp_path: Path) -> None:
    tests = {"t.A.a": "pass", "t.A.b": "pass"}
    plain = _run(tmp_path / "p", False, [tests, tests])
    layer = _run(tmp_path / "l", True, [{"t.A.a": "pass", "t.A.b": "hung"}] * 2, done=False)
    assert layer.unfinished == {0: "t.A.b", 1: "t.A.b"}
    same, lines = suite.compare(plain, layer)
    assert not same
    assert any("rank 1: 1 tests missing in the layer run: t.A.b" in line for line in lines)
    assert any("did not finish" in line for line in lines)
    assert "rank 0 did not finish: it was in t.A.b" in layer.summary()


def test_a_missing_rank_file_is_unfinished(tmp_path: Path) -> None:
    run = _run(tmp_path / "p", False, [{"t.A.a": "pass"}])
    run.np = 2
    suite.read_rank_files(run)
    assert 1 in run.unfinished
    assert not run.complete()


def test_exec_command_local_and_testbed(tmp_path: Path) -> None:
    spec = suite.RunSpec("mpich", 2, True, ("-v", "-i", "x"), {"MLN_NODE_SIZE": "1"})
    argv = suite.exec_command(REPO_ROOT, spec, tmp_path)
    assert argv[argv.index("--np") + 1] == "2"
    assert "--stats" in argv and "--no-layer" not in argv
    assert argv[argv.index("--env") + 1] == "MLN_NODE_SIZE=1"
    tail = argv[argv.index("--") + 1 :]
    assert tail[1] == str(suite.RANK_SCRIPT) and tail[-3:] == ["-v", "-i", "x"]
    wan = REPO_ROOT / "scenarios" / "wan-2site.toml"
    spec = suite.RunSpec("openmpi", 4, False, ("-v",), {}, scenario=wan)
    argv = suite.exec_command(REPO_ROOT, spec, tmp_path)
    assert "--np" not in argv and argv[argv.index("--ppn") + 1] == "2"
    assert "--no-layer" in argv and argv[argv.index("--scenario") + 1] == str(wan)


def test_rank_environment_is_the_same_for_both_modes() -> None:
    env = suite.rank_env(REPO_ROOT, "openmpi", None, ["MLN_STRIPE_LANES=2"])
    assert env["MLN_NODE_SIZE"] == "1" and env["MLN_STRIPE_LANES"] == "2"
    assert env["PYTHONPATH"] == str(suite.install_dir(REPO_ROOT, "openmpi"))
    assert "MLN_NODE_SIZE" not in suite.rank_env(REPO_ROOT, "mpich", Path("x.toml"), [])


# --- the real suite ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def sdist() -> Path:
    try:
        return suite.ensure_sdist(REPO_ROOT, print)
    except suite.SdistUnavailable as exc:
        pytest.skip(f"the mpi4py {suite.MPI4PY_VERSION} sdist cannot be had here: {exc}")


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("mpi", BUILT_MPIS)
def test_ci_subset_same_with_and_without_the_layer(mpi: str, sdist: Path, tmp_path: Path) -> None:
    if not preload_path(REPO_ROOT, mpi).is_file():
        pytest.skip(f"build/{mpi}/src/preload/libmultilane-preload.so is not built: make build")
    suite.ensure_build(REPO_ROOT, mpi, print)  # minutes the first time; a failure fails
    include, exclude, skip = suite.SUBSETS["ci"]
    options = tuple(suite.main_options(include, exclude, skip))
    env = suite.rank_env(REPO_ROOT, mpi, None, [])
    runs = {}
    for layer in (False, True):
        spec = suite.RunSpec(mpi, 2, layer, options, env, timeout_s=CI_RUN_TIMEOUT_S)
        runs[layer] = suite.run_suite(REPO_ROOT, spec, tmp_path / spec.mpi / str(layer))
    plain, layer = runs[False], runs[True]
    report = "\n".join([plain.summary(), layer.summary()])
    same, lines = suite.compare(plain, layer)
    assert same, "\n".join([*lines, report])
    assert plain.counts()["pass"] >= 100, report  # the subset ran
    assert layer.stats_ranks == 2, report  # the layer was in effect on both ranks
    assert layer.stats["striped_send_bytes"] > 0, report
    assert layer.stats["bcast_calls"] > 0, report
