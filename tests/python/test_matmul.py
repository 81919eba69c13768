"""Real runs of the matrix-multiply benchmark (mln-matmul, bench/matmul.c) under both pinned MPIs,
launched directly through the MPI's launcher (the CLI's own tests run it through `multilane`).

Needs `make build` (build/<mpi>/bin/mln-matmul); skipped with the reason when it is missing.
A correct run passes with a result valid against the schema, remainder rows (P not dividing N)
and ranks without rows (P > N) included; an element of C changed after the product fails the
run with exactly one wrong element per repetition, found by the exact comparison and by
Freivalds' check alone; bad options stop with exit 2 and one clear line; --gpu without a GPU
is skipped (exit 77, no result)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from conftest import BUILT_MPIS, REPO_ROOT, built_program, clean_env, run_group
from multilane.launchers import launcher_for
from multilane.results import problems

pytestmark = [pytest.mark.mpi]

MPIS = BUILT_MPIS or ["openmpi"]
TIME_METRICS = ["total_s", "bcast_s", "scatter_s", "dgemm_s", "gather_s"]
GPU_METRICS = ["h2d_s", "kernel_s", "d2h_s"]


def _run(
    mpi: str, np: int, args: list[str], timeout: float = 180, vmem_kib: int = 0
) -> tuple[int, str]:
    """mln-matmul ARGS on np ranks of one host: (exit status, stdout + stderr); vmem_kib > 0
    limits the virtual memory of the launcher and the ranks (ulimit -v)."""
    program = built_program(mpi, "mln-matmul")
    launcher = launcher_for(mpi, REPO_ROOT / ".deps" / mpi)
    cmd = launcher.command(
        [str(program), *args], np, "shm", ncpus=os.cpu_count() or 1, euid=os.geteuid()
    )
    argv = list(cmd.argv)
    if vmem_kib:
        argv = ["bash", "-c", f'ulimit -v {vmem_kib} && exec "$@"', "bash", *argv]
    return run_group(argv, {**clean_env(), **cmd.env}, timeout)


def _run_json(
    mpi: str, np: int, args: list[str], tmp_path: Path
) -> tuple[int, str, dict[str, Any]]:
    """The same with --json: (exit status, output, the result document, checked valid)."""
    path = tmp_path / "matmul.json"
    status, out = _run(mpi, np, [*args, "--json", str(path)])
    assert path.exists(), out[-3000:]
    doc = json.loads(path.read_text())
    assert problems(doc) == [], problems(doc)
    return status, out, doc


def _metric_names(doc: dict[str, Any]) -> list[str]:
    return [m["name"] for m in doc["metrics"]]


@pytest.mark.parametrize("mpi", MPIS)
def test_remainder_rows(mpi: str, tmp_path: Path) -> None:
    """P = 3 does not divide N = 100 (rows 34, 33, 33) nor 7; N = 1 leaves two ranks empty."""
    status, out, doc = _run_json(mpi, 3, ["--n", "100,7,1", "--reps", "2"], tmp_path)
    assert status == 0, out[-3000:]
    assert doc["benchmark"] == "matmul" and doc["status"] == "pass" and doc["errors"] == 0
    assert "# verdict: PASS" in out
    params = doc["provenance"]["params"]
    assert params["n"] == "1,7,100"  # ascending, as the rows
    assert (params["reps"], params["layout"], params["gpu"]) == (2, "rows", 0)
    assert params["exact_max_n"] == 512 and params["blas_threads"] == 1
    assert params["blas"].startswith("OpenBLAS"), params["blas"]
    assert doc["provenance"]["nranks"] == 3
    assert _metric_names(doc) == [*TIME_METRICS, "gflops", "comm_share"]
    assert [r["n"] for r in doc["rows"]] == [1, 7, 100]
    for row in doc["rows"]:
        n = row["n"]
        assert (row["bytes"], row["iters"], row["errors"], row["exact"]) == (8 * n * n, 2, 0, 1)
        for name in TIME_METRICS:
            assert row[f"{name}_min"] <= row[name] <= row[f"{name}_max"]
        # every phase ran inside the total (barriers between them), so none exceeds it
        assert max(row[f"{p}_max"] for p in TIME_METRICS[1:]) <= row["total_s_max"]
        assert row["comm_share"] > 0 and row["gflops"] > 0


@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize(
    ("np", "n"),
    [(1, "1,64,257"), (2, "7,257"), (4, "1,3,100")],  # P = 1: no communication; P > N
)
def test_rank_counts(mpi: str, np: int, n: str) -> None:
    status, out = _run(mpi, np, ["--n", n, "--reps", "2"])
    assert status == 0, out[-3000:]
    assert "# verdict: PASS" in out
    assert f"# nranks: {np}\n" in out


@pytest.mark.parametrize("mpi", MPIS)
def test_blocks2x2(mpi: str, tmp_path: Path) -> None:
    """The seed's 2x2 blocks: odd N gives halves of unequal size; N = 1 leaves three ranks
    with empty blocks.  There is no broadcast phase, so no bcast_s."""
    args = ["--layout", "blocks2x2", "--n", "1,7,101", "--reps", "2"]
    status, out, doc = _run_json(mpi, 4, args, tmp_path)
    assert status == 0, out[-3000:]
    assert doc["provenance"]["params"]["layout"] == "blocks2x2"
    blocks_metrics = ["total_s", "scatter_s", "dgemm_s", "gather_s", "gflops", "comm_share"]
    assert _metric_names(doc) == blocks_metrics
    assert all(r["errors"] == 0 and "bcast_s" not in r for r in doc["rows"])


@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize(
    ("np", "args"),
    [
        (3, ["--n", "100,600", "--exact-max-n", "100"]),  # exact path, then Freivalds only
        (4, ["--n", "3,101", "--layout", "blocks2x2", "--exact-max-n", "50"]),
        (1, ["--n", "1,50"]),  # one rank: rank 0 corrupts its own C
    ],
)
def test_injected_error_fails(mpi: str, np: int, args: list[str], tmp_path: Path) -> None:
    """One element of C changed after the product in every repetition: exactly one wrong
    element per repetition at every N, whichever check ran there."""
    reps = 3
    status, out, doc = _run_json(mpi, np, [*args, "--reps", str(reps), "--inject-error"], tmp_path)
    assert status == 1, out[-3000:]
    assert "# verdict: FAIL" in out
    assert doc["status"] == "fail" and doc["errors"] == reps * len(doc["rows"])
    assert doc["provenance"]["params"]["inject_error"] == 1
    exact_max = int(args[args.index("--exact-max-n") + 1]) if "--exact-max-n" in args else 512
    for row in doc["rows"]:
        assert row["errors"] == reps, row
        assert row["exact"] == (row["n"] <= exact_max)
        lines = re.findall(
            rf"mln-matmul: error: N = {row['n']}, repetition (\d): 1 wrong element\(s\) of C in "
            r"1 row\(s\) \(first: C\[\d+\]\[\d+\] = (-?\d+), expected (-?\d+)\)",
            out,
        )
        assert [int(rep) for rep, _, _ in lines] == list(range(reps)), out[-3000:]
        assert all(int(got) == int(want) + 1 for _, got, want in lines)


@pytest.mark.parametrize(
    ("np", "args", "message"),
    [
        (2, ["--n", "0"], "--n: invalid order '0' (expected an integer from 1 to 46340"),
        (2, ["--n", "46341"], "--n: invalid order '46341'"),
        (2, ["--n", "10,,20"], "--n: invalid list '10,,20'"),
        (2, ["--reps", "0"], "--reps: invalid value '0' (expected an integer from 1 to"),
        (2, ["--layout", "cols"], "--layout: unknown layout 'cols' (choose rows or blocks2x2)"),
        (3, ["--layout", "blocks2x2"], "--layout blocks2x2 needs exactly 4 ranks"),
        (2, ["--blas-threads", "0"], "--blas-threads: invalid value '0'"),
        (2, ["--exact-max-n", "-1"], "--exact-max-n: invalid value '-1'"),
        (2, ["--gpu=1"], "--gpu takes no value"),
        (2, ["--meta", "novalue"], "--meta: invalid pair 'novalue' (expected KEY=VALUE)"),
        (2, ["--bogus"], "unknown option '--bogus' (see --help)"),
        (2, ["stray"], "unexpected argument 'stray' (see --help)"),
        (2, ["--json", "/nonexistent-dir/x.json"], "--json: cannot write '/nonexistent-dir/"),
    ],
)
def test_bad_options(np: int, args: list[str], message: str) -> None:
    status, out = _run(MPIS[0], np, args)
    assert status == 2, out[-3000:]
    errors = [line for line in out.splitlines() if line.startswith("mln-matmul: error:")]
    assert len(errors) == 1 and message in errors[0], out[-3000:]
    assert "# verdict" not in out  # nothing ran


def test_memory_refused() -> None:
    """N = 20000 needs 9.6 GB on rank 0 (A, B, C): under a 3 GB limit every rank stops before
    the run with one line naming the rank, the size and N (exit 2), nobody hangs."""
    if "mpich" not in MPIS:
        pytest.skip("needs the MPICH build (its launcher runs under a virtual-memory limit)")
    status, out = _run("mpich", 2, ["--n", "100,20000"], vmem_kib=3_000_000)
    assert status == 2, out[-3000:]
    assert "mln-matmul: error: rank 0: cannot allocate 9600.1 MB for N = 20000" in out
    assert "# verdict" not in out


def test_help_lists_the_options() -> None:
    status, out = _run(MPIS[0], 1, ["--help"])
    assert status == 0, out
    flags = set(re.findall(r"^  (--[a-z-]+)", out, re.MULTILINE))
    assert flags >= {"--n", "--reps", "--layout", "--gpu", "--blas-threads", "--exact-max-n"}
    assert flags >= {"--json", "--meta", "--quiet", "--inject-error", "--help", "--version"}


@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize("layout", ["rows", "blocks2x2"])
def test_gpu_or_skip(mpi: str, layout: str, tmp_path: Path) -> None:
    """--gpu: skipped with the reason (exit 77, no result) where no GPU can be used, as on the
    CI machines; on a GPU, a passing run with the device parts of dgemm_s."""
    path = tmp_path / "gpu.json"
    np = 4 if layout == "blocks2x2" else 3
    args = ["--gpu", "--layout", layout, "--n", "7,101", "--reps", "2", "--json", str(path)]
    status, out = _run(mpi, np, args)
    if status == 77:
        skipped = re.findall(
            r"^mln-matmul: skipped: no GPU(?: on rank [1-9]\d*)? \((.+)\)$", out, re.MULTILINE
        )
        assert len(skipped) == 1 and skipped[0], out[-3000:]
        assert not path.exists() and "# verdict" not in out
        return
    assert status == 0, out[-3000:]
    doc = json.loads(path.read_text())
    assert problems(doc) == []
    assert doc["provenance"]["params"]["gpu"] == 1
    assert set(GPU_METRICS) <= set(_metric_names(doc))
    for row in doc["rows"]:
        assert row["errors"] == 0
        # the device parts are timed inside the local product, on every rank
        assert all(row[f"{part}_max"] <= row["dgemm_s_max"] for part in GPU_METRICS), row
