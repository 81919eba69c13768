"""mpi4py's own test suite across two sites under `multilane grid run --local`, beside one
plain job on one site (multilane.mpi4py_grid, issue 19).

First without MPI: the MPIs of a grid run and its ranks, the commands, the run in parts going
past a test that crashes or hangs (a stand-in rank program), the exact skips of
mpi4py_rank.py, and the comparison with a reference per MPI.  Then the CI subset for grid mode
(`--subset grid-ci`): 2 ranks, one per site, 2 trunks, each built MPI, the same outcomes as
the plain run of the same tests.  The whole suite, 2 and 4 ranks and the mixed pair:
docs/PRELOAD-MPI4PY.md, "Grid mode"."""

from __future__ import annotations

import json
import sys
import unittest
from pathlib import Path

import pytest

from conftest import BUILT_MPIS, REPO_ROOT
from multilane import mpi4py_grid as mg
from multilane import mpi4py_rank
from multilane import mpi4py_suite as suite
from multilane.external import preload_path

TRACEBACK = """Traceback (most recent call last):
  File "/x/test/test_cco_buf_inter.py", line 53, in setUp
    self.INTERCOMM = Create_intercomm(
                     ^^^^^^^^^^^^^^^^^
  File "src/mpi4py/MPI.src/Comm.pyx", line 2349, in mpi4py.MPI.Intracomm.Create_intercomm
mpi4py.MPI.Exception: MPI_ERR_UNSUPPORTED_OPERATION: operation not supported
"""


def test_grid_spec_sites_ranks_and_mpis() -> None:
    one = mg.GridSpec("openmpi", 4)
    assert one.site_mpis() == {"a": "openmpi", "b": "openmpi"}
    assert one.rank_sites() == ["a", "a", "b", "b"] and one.tag == "openmpi"
    mixed = mg.GridSpec("a=openmpi,b=mpich", 2)
    assert mixed.rank_mpis() == ["openmpi", "mpich"]
    assert mixed.tag == "a-openmpi-b-mpich"
    assert "OMPI_MCA_mpi_yield_when_idle" in mg.grid_env(mixed)
    assert "OMPI_MCA_mpi_yield_when_idle" not in mg.grid_env(mg.GridSpec("mpich", 2))


def test_mpi_option_keeps_a_pair_of_sites_together() -> None:
    assert suite._mpis("openmpi,mpich,a=openmpi,b=mpich") == [
        "openmpi", "mpich", "a=openmpi,b=mpich",
    ]  # fmt: skip
    assert suite._mpis("a=openmpi,b=mpich,a=mpich,b=openmpi") == [
        "a=openmpi,b=mpich", "a=mpich,b=openmpi",
    ]  # fmt: skip
    assert suite.mpis_of(["mpich", "a=openmpi,b=mpich"]) == ["mpich", "openmpi"]
    with pytest.raises(SystemExit):
        suite.parse_args(["--mpi", "a=openmpi,b=mpich"])  # not without --grid
    args = suite.parse_args(["--grid", "--mpi", "a=openmpi,b=mpich", "--np", "2,4"])
    assert args.mpi == ["a=openmpi,b=mpich"] and args.np == [2, 4] and args.trunks == 2
    assert mg.grid_modes(args.modes) == {"plain", "grid"}
    assert suite.parse_args([]).modes == ["plain", "layer"]


def test_grid_command_each_site_its_own_mpi4py(tmp_path: Path) -> None:
    spec = mg.GridSpec("a=openmpi,b=mpich", 2, 2, ("-v", "-i", "x"), {"MLN_X": "1"})
    argv = mg.grid_command(REPO_ROOT, spec, tmp_path, tmp_path / "skip", 100.0)
    head = argv[: argv.index("--")]
    assert head[3:7] == ["grid", "run", "--local", "--label"]
    assert head[head.index("--mpi") + 1] == "a=openmpi,b=mpich"
    assert head[head.index("--trunks") + 1] == "2" and head[head.index("--np") + 1] == "2"
    assert "MLN_PRELOAD_STATS=1" in head and "MLN_X=1" in head
    tail = argv[argv.index("--") + 1 :]
    assert tail[1] == str(suite.RANK_SCRIPT) and tail[3] == str(tmp_path)
    assert tail[tail.index("--path") + 1] == str(REPO_ROOT / ".deps" / "mpi4py-{mpi}")
    assert tail[-2:] == ["--mln-skip", str(tmp_path / "skip")]
    ref = mg.ReferenceSpec("mpich", 2, ("-v",), ())
    argv = mg.reference_command(REPO_ROOT, ref, tmp_path, tmp_path / "skip", 100.0)
    assert "--no-layer" in argv and argv[-2:] == ["--mln-skip", str(tmp_path / "skip")]


def test_launcher_failed_reads_the_part_log(tmp_path: Path) -> None:
    # the one launcher failure a part is run again for: Open MPI's PMIx listener (a CI run of the
    # grid's mixed pair ran no test: "[a] The PMIx server's listener thread failed to start")
    log = tmp_path / "log"
    assert not mg.launcher_failed(log)  # no log: no such failure
    log.write_text("[b] multilane grid: gateway 0 of site b lost (closed by the peer)\n")
    assert not mg.launcher_failed(log)
    log.write_text(f"[a] {mg.PMIX_FLAKE}. We cannot\n[a] continue.\n")
    assert mg.launcher_failed(log)


def test_exception_line_and_mpi4py_call() -> None:
    assert mg.exception_line(TRACEBACK).startswith("mpi4py.MPI.Exception: MPI_ERR_UNSUPP")
    assert mg.mpi4py_call(TRACEBACK) == "Create_intercomm"
    cython = TRACEBACK.replace('"/x/test/test_cco_buf_inter.py"', '"/x/other.py"')
    assert mg.mpi4py_call(cython) == "Intracomm.Create_intercomm"
    assert mg.exception_line("crash: site a: exited\nresults/x/part-0") == "crash: site a: exited"
    assert mg.exception_line("") == "" and mg.mpi4py_call("no frames") == ""


def test_skip_exactly_leaves_out_only_the_named_ids() -> None:
    class Loader(unittest.TestLoader):
        pass

    class Case(unittest.TestCase):
        def testReduce(self) -> None:
            pass

        def testReduceScatter(self) -> None:
            pass

    mpi4py_rank.skip_exactly(Loader, {f"{Case.__module__}.{Case.__qualname__}.testReduce"})
    assert Loader().getTestCaseNames(Case) == ["testReduceScatter"]
    assert mpi4py_rank.own_options(["-v", "--mln-skip", "f", "-i", "x"]) == ("f", ["-v", "-i", "x"])


# --- a run in parts, with a stand-in for the ranks -----------------------------------------

# Writes what mpi4py_rank.py writes for tests t.A.a .. t.A.e on 2 ranks, leaving out those its
# skip file names.  First rank 1 lags in t.A.b (a test of its own) while rank 0 has ended it and
# dies of a signal in t.A.c (its fault file says so); in the next part rank 1 ends t.A.b, and
# in t.A.d both ranks stop writing (a hang).
FAKE_RANKS = r"""
import json, os, sys, time
outdir, skip = sys.argv[1], sys.argv[2]
skipped = set(open(skip).read().split())
tests = [t for t in ("t.A.a", "t.A.b", "t.A.c", "t.A.d", "t.A.e") if t not in skipped]
files = [open(os.path.join(outdir, f"rank-{r}.jsonl"), "w") for r in (0, 1)]
for r in (0, 1):
    open(os.path.join(outdir, f"rank-{r}.fault"), "w").close()
def put(rank, **record):
    files[rank].write(json.dumps(record) + "\n"); files[rank].flush()
for test in tests:
    for rank in (0, 1):
        put(rank, event="start", id=test)
    if test == "t.A.d":
        time.sleep(60)
    if test == "t.A.c" and "t.A.b" in tests:
        with open(os.path.join(outdir, "rank-0.fault"), "w") as f:
            f.write("Fatal Python error: Segmentation fault\n\n"
                    '  File "/x/test/test_c.py", line 7 in testC\n')
        print("[a] multilane grid: site a: its job (python under mpirun) exited with status 139")
        sys.exit(139)
    put(0, event="end", id=test, outcome="pass", detail="")
    if test != "t.A.b" or "t.A.c" not in tests:
        put(1, event="end", id=test, outcome="pass", detail="")
for rank in (0, 1):
    put(rank, event="done", tests=len(tests))
"""


def test_a_run_goes_on_past_a_crash_and_a_hang(tmp_path: Path) -> None:
    script = tmp_path / "ranks.py"
    script.write_text(FAKE_RANKS)
    run = mg.GridSuiteRun("openmpi", 2, "grid", True, tmp_path / "run", kind="grid",
                          spec=mg.GridSpec("openmpi", 2))  # fmt: skip

    def build(outdir: Path, skip: Path, left: float) -> list[str]:
        del left
        return [sys.executable, str(script), str(outdir), str(skip)]

    said: list[str] = []
    limits = mg.Limits(timeout_s=120.0, test_timeout_s=2.0)
    mg.run_in_parts(tmp_path, run, build, stop=mg.stop_grid, limits=limits, say=said.append)
    assert [p.culprit for p in run.parts] == ["t.A.c", "t.A.d", ""]
    assert [p.stopped for p in run.parts] == ["", "stalled", ""]
    for rank in (0, 1):  # t.A.b: run again for rank 1, which had not ended it
        assert run.outcomes[rank] == {"t.A.a": "pass", "t.A.b": "pass", "t.A.c": "crash",
                                      "t.A.d": "hang", "t.A.e": "pass"}  # fmt: skip
    assert "rank 0: Fatal Python error: Segmentation fault; File" in run.details[1]["t.A.c"]
    assert (run.outdir / "part-1" / "skip").read_text().split() == ["t.A.a", "t.A.c"]
    assert run.complete() and run.counts()["tests"] == 5
    assert run.counts(1)["crash"] == 1 and run.counts(1)["hang"] == 1
    assert any("crash in t.A.c" in line for line in said)


# --- comparison ----------------------------------------------------------------------------


def _run(folder: Path, per_rank: list[dict[str, str]], **kw: object) -> mg.GridSuiteRun:
    folder.mkdir(parents=True)
    for rank, outcomes in enumerate(per_rank):
        lines = []
        for test, outcome in outcomes.items():
            detail = TRACEBACK if outcome == "error" else ""
            end = {"event": "end", "id": test, "outcome": outcome, "detail": detail}
            lines += [{"event": "start", "id": test}, end]
        lines.append({"event": "done"})
        (folder / f"rank-{rank}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    run = mg.GridSuiteRun("x", len(per_rank), "local", False, folder, **kw)  # type: ignore[arg-type]
    suite.read_rank_files(run)
    return run


def test_each_rank_is_compared_with_the_reference_of_its_mpi(tmp_path: Path) -> None:
    ompi = _run(tmp_path / "o", [{"t.a": "pass", "t.b": "skip"}] * 2)
    mpich = _run(tmp_path / "m", [{"t.a": "pass", "t.b": "pass"}] * 2)
    spec = mg.GridSpec("a=openmpi,b=mpich", 2)
    same = _run(tmp_path / "g1", [{"t.a": "pass", "t.b": "skip"}, {"t.a": "pass", "t.b": "pass"}],
                kind="grid", spec=spec)  # fmt: skip
    assert mg.compare_grid({"openmpi": ompi, "mpich": mpich}, same) == []
    other = _run(tmp_path / "g2", [{"t.a": "error", "t.b": "skip"}, {"t.a": "error"}],
                 kind="grid", spec=spec)  # fmt: skip
    diffs = mg.compare_grid({"openmpi": ompi, "mpich": mpich}, other)
    assert [(d.test, d.ranks, d.reference, d.grid) for d in diffs] == [
        ("t.a", (0, 1), "pass", "error"), ("t.b", (1,), "pass", "missing"),
    ]  # fmt: skip
    assert diffs[0].call == "Create_intercomm"
    assert diffs[0].message.startswith("mpi4py.MPI.Exception: MPI_ERR_UNSUPPORTED_OPERATION")
    causes = mg.by_cause(diffs)
    assert causes[0][1] == 1 and "[Create_intercomm]" in causes[0][0]
    lines, doc = mg.report(tmp_path, ["-v"], [ompi, mpich, other], [(other, diffs)])
    assert any("2 tests DIFFER" in line for line in lines)
    twice = [diffs[0], mg.Difference("t.a", (1,), "pass", "error", "another message", "")]
    assert mg.differing(twice) == "1 tests (2 ways)"
    assert mg.by_module([*diffs, twice[1]]) == {"t": {"error": 1, "missing": 1}}
    assert doc["comparisons"][0]["counts"].keys() == {"0", "1"}  # type: ignore[index]


def test_tests_one_mpi_skips_are_left_out_of_a_mixed_grid(tmp_path: Path) -> None:
    ompi = _run(tmp_path / "o", [{"t.a": "pass", "t.b": "skip", "t.c": "skip"}] * 2)
    mpich = _run(tmp_path / "m", [{"t.a": "pass", "t.b": "pass", "t.c": "skip"}] * 2)
    assert mg.one_mpi_skips([ompi, mpich]) == ["t.b"]  # t.c: both skip it, in step
    spec = mg.GridSpec("a=openmpi,b=mpich", 2)
    grid = _run(tmp_path / "g", [{"t.a": "pass", "t.c": "skip"}] * 2, kind="grid", spec=spec,
                left_out=["t.b"])  # fmt: skip
    assert mg.compare_grid({"openmpi": ompi, "mpich": mpich}, grid) == []
    assert "1 tests left out" in grid.summary()


def test_refusal_lines_counted_per_call_and_site(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.write_text(
        "[a] multilane grid: MPI_Intercomm_create on a communicator that spans sites is not "
        "supported yet\n[b] multilane grid: MPI_Intercomm_create on a communicator that spans "
        "sites is not supported yet\n[b] multilane grid: MPI_Comm_spawn under `multilane grid "
        "run` is not supported yet\n[a] multilane-preload: rank=0 size=2 relayed_send_msgs=3\n"
    )
    run = mg.GridSuiteRun("openmpi", 2, "grid", True, tmp_path, kind="grid")
    mg.read_log(run, log, ["a", "b"])
    assert run.refusals == {"MPI_Intercomm_create": {"a": 1, "b": 1}, "MPI_Comm_spawn": {"b": 1}}
    assert run.stats == {"relayed_send_msgs": 3} and run.stats_ranks == 1


# --- the CI subset of grid mode, for real --------------------------------------------------

GRID_CI_TIMEOUT_S = 240.0
GRID_CI_TEST_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def sdist() -> Path:
    try:
        return suite.ensure_sdist(REPO_ROOT, print)
    except suite.SdistUnavailable as exc:
        pytest.skip(f"the mpi4py {suite.MPI4PY_VERSION} sdist cannot be had here: {exc}")


MIXED = [f"a={a},b={b}" for a, b in (("openmpi", "mpich"),) if {a, b} <= set(BUILT_MPIS)]


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("mpi", [*BUILT_MPIS, *MIXED])
def test_grid_ci_subset_same_as_one_site(mpi: str, sdist: Path, tmp_path: Path) -> None:
    del sdist
    spec = mg.GridSpec(mpi, 2, 2, tuple(suite.main_options(*suite.SUBSETS["grid-ci"])))
    mpis = sorted(set(spec.rank_mpis()))
    for m in mpis:
        for needed in (preload_path(REPO_ROOT, m), REPO_ROOT / "build" / m / "bin" / "mln-gateway"):
            if not needed.exists():
                pytest.skip(f"{needed.relative_to(REPO_ROOT)} is not built: make build")
        suite.ensure_build(REPO_ROOT, m, print)  # minutes the first time; a failure fails
    limits = mg.Limits(GRID_CI_TIMEOUT_S, GRID_CI_TEST_TIMEOUT_S)
    refs = {
        m: mg.run_reference(
            REPO_ROOT, mg.ReferenceSpec(m, 2, spec.options), tmp_path, limits, print
        )
        for m in mpis
    }
    left_out = mg.one_mpi_skips(list(refs.values()))
    run = mg.run_grid(REPO_ROOT, spec, tmp_path, limits, print, left_out=left_out)
    report = "\n".join([*(r.summary() for r in refs.values()), run.summary()])
    diffs = mg.compare_grid(refs, run)
    assert not diffs, "\n".join([*(d.line() for d in diffs[:20]), report])
    assert all(r.complete() for r in refs.values()), report
    assert run.complete() and len(run.parts) == 1, report  # no crash, no hang
    assert left_out == [] and run.counts()["pass"] >= 300, report  # the subset ran, all of it
    assert run.refusals == {}, report
    assert run.stats_ranks == 2 and run.stats["relayed_send_bytes"] > 0, report  # across sites
