"""Real runs of the halo benchmark (mln-halo) under both pinned MPIs, through the CLI.

Needs `make build` (build/<mpi>/bin/mln-halo); skipped with the reason when it is missing.
Every mode on a periodic 2-D grid of 4 ranks gives a valid, passing result whose auto column
names a measured mode; a mode disabled with MLN_HALO_DISABLE is skipped and the run still
passes; a flipped byte fails the run, also in the receive slot of an MPI_PROC_NULL neighbour
(which must stay untouched)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import BUILT_MPIS, REPO_ROOT, built_program, clean_env, multilane
from multilane.benchmarks import HALO_TESTS

pytestmark = [pytest.mark.mpi, pytest.mark.slow]

MPIS = BUILT_MPIS or ["openmpi"]
SIZES = "0,8,1280,64K"
QUICK = ["--max-iters", "5"]  # few iterations: the point is the whole path, not the numbers


def _metric(test: str) -> str:
    return f"{test.replace('-', '_')}_us"


def _bench(
    mpi: str, tmp_path: Path, extra: list[str], **env: str
) -> tuple[int, str, dict[str, Any]]:
    """`multilane bench halo` on 4 ranks: (exit status, output, the result document)."""
    built_program(mpi, "mln-halo")
    results = tmp_path / "results"
    args = ["bench", "halo", "--mpi", mpi, "--np", "4", "--sizes", SIZES, "--reps", "2"]
    args += ["--results", str(results), "--", *QUICK, *extra]
    proc = multilane(args, clean_env(REPO_ROOT, **env), timeout=300)
    (run,) = list(results.iterdir())
    (path,) = list(run.glob("*.json"))
    return proc.returncode, proc.stdout + proc.stderr, json.loads(path.read_text())


@pytest.mark.parametrize("mpi", MPIS)
def test_every_mode_2d(mpi: str, tmp_path: Path) -> None:
    status, out, doc = _bench(mpi, tmp_path, ["--dims", "2"])
    assert status == 0, out[-3000:]
    assert doc["status"] == "pass" and doc["errors"] == 0
    params = doc["provenance"]["params"]
    assert (params["dims"], params["radius"], params["periodic"]) == (2, 1, 1)
    assert (params["grid"], params["neighbors"]) == ("2x2", 4)
    assert params["order"] == "interleaved"  # the modes take turns in every repetition
    disabled = [m for m in params["disabled"].split(",") if m]
    assert set(disabled) <= set(HALO_TESTS) - {"p2p"}, params["disabled"]
    for mode in disabled:
        assert f"mln-halo: {mode}: disabled on this MPI" in out
    assert [m["name"] for m in doc["metrics"]] == [_metric(t) for t in HALO_TESTS]
    measured = [_metric(t) for t in HALO_TESTS if t not in disabled]
    ids = dict(item.split("=")[::-1] for item in params["mode_ids"].split(","))
    for row in doc["rows"]:
        assert [k for k in row if k.endswith("_us")] == measured, row
        # auto ran at every size, and chose a mode this MPI has
        chosen = [name for name, i in ids.items() if int(i) == row["auto_mode"]]
        assert chosen and chosen[0] not in disabled, row
        assert f"mln-halo: auto at {row['bytes']} bytes: {chosen[0]} (auto:" in out


@pytest.mark.parametrize("mpi", MPIS)
def test_disabled_mode_is_skipped(mpi: str, tmp_path: Path) -> None:
    status, out, doc = _bench(
        mpi, tmp_path, ["--dims", "1", "--tests", "p2p,rma-pscw"], MLN_HALO_DISABLE="rma-pscw"
    )
    assert status == 0, out[-3000:]
    assert doc["provenance"]["params"]["disabled"] == "rma-pscw"
    assert "mln-halo: rma-pscw: disabled on this MPI (MLN_HALO_DISABLE=rma-pscw" in out
    for row in doc["rows"]:
        assert "p2p_us" in row and "rma_pscw_us" not in row
        assert row["auto_mode"] == 0  # the auto test was not selected


@pytest.mark.parametrize("periodic", ["1", "0"])
def test_injected_error_fails(periodic: str, tmp_path: Path) -> None:
    """Rank 0 flips a byte of its first receive slot: a neighbour's message on the periodic
    ring, the untouched slot of an MPI_PROC_NULL entry at the edge of the open line."""
    extra = ["--dims", "1", "--periodic", periodic, "--tests", "p2p", "--inject-error", "1280"]
    status, out, doc = _bench(MPIS[0], tmp_path, extra)
    assert status == 1, out[-3000:]
    assert "wrong bytes received at 1280 bytes in test p2p" in out
    assert doc["status"] == "fail"
    assert [r["errors"] > 0 for r in doc["rows"]] == [False, False, True, False]
