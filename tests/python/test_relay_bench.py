"""Real runs of the seed-004 benchmark (mln-relay) under both pinned MPIs, through the CLI.

Needs `make build` (build/<mpi>/bin/mln-relay); skipped with the reason when it is missing.
On one machine (loopback: shm) at 2 and 4 ranks (and 3, site b from rank 1) every test gives a
valid, passing result with no wrong byte; a flipped byte on the receiving side fails the run
(exit 1, one line per test naming the size); a --split with no rank left for site b is a usage
error.  And the binary is what `multilane grid run` needs: no Multilane library among its
dependencies, and no MPI function but those the grid's interposition layer carries across sites
(point-to-point, MPI_Barrier, ...) or that take no communicator."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import BUILT_MPIS, REPO_ROOT, built_program, clean_env, multilane
from multilane.benchmarks import RELAY, RELAY_TESTS
from multilane.results import problems
from multilane.testbed.launch import payload_bytes

pytestmark = [pytest.mark.mpi, pytest.mark.slow]

MPIS = BUILT_MPIS or ["openmpi"]
SIZES = "0,1,4K,64K"
QUICK = ["--max-iters", "20"]  # few iterations: the point is the whole path, not the numbers
METRICS = ["latency_us", "stream_Mbps", "alltoall_Mbps"]
# What mln-relay may call: MPI_COMM_WORLD's calls that work across sites in grid mode, and
# calls that take no communicator.
GRID_CALLS = {
    "MPI_Send",
    "MPI_Recv",
    "MPI_Isend",
    "MPI_Irecv",
    "MPI_Wait",
    "MPI_Waitall",
    "MPI_Test",
    "MPI_Barrier",
    "MPI_Wtime",
    "MPI_Abort",
    "MPI_Comm_rank",
    "MPI_Comm_size",
    "MPI_Get_processor_name",
    "MPI_Get_library_version",
    "MPI_Init",
    "MPI_Finalize",
    "MPI_Initialized",
    "MPI_Get_version",
    "MPI_Error_string",
}


def _bench(
    mpi: str, np: int, tmp_path: Path, extra: list[str]
) -> tuple[int, str, dict[str, Any] | None]:
    """`multilane bench relay`: (exit status, output, the result document or None)."""
    built_program(mpi, "mln-relay")
    results = tmp_path / "results"
    args = ["bench", "relay", "--mpi", mpi, "--np", str(np), "--sizes", SIZES, "--reps", "2"]
    args += ["--results", str(results), "--", *QUICK, *extra]
    proc = multilane(args, clean_env(REPO_ROOT), timeout=300)
    found = list(results.glob("*/*.json"))
    doc = json.loads(found[0].read_text()) if found else None
    return proc.returncode, proc.stdout + proc.stderr, doc


@pytest.mark.parametrize("np", [2, 4])
@pytest.mark.parametrize("mpi", MPIS)
def test_relay_passes(mpi: str, np: int, tmp_path: Path) -> None:
    status, out, doc = _bench(mpi, np, tmp_path, [])
    assert status == 0, out[-3000:]
    assert doc is not None and problems(doc) == []
    assert doc["benchmark"] == "relay" and doc["status"] == "pass" and doc["errors"] == 0
    assert [m["name"] for m in doc["metrics"]] == METRICS
    params = doc["provenance"]["params"]
    half = np // 2
    assert params["tests"] == ",".join(RELAY_TESTS)
    assert params["halves"] == f"a = ranks 0..{half - 1}, b = ranks {half}..{np - 1}"
    assert params["pair"] == f"0,{half}"
    assert params["collectives"] == "p2p"  # the harness's own traffic: point-to-point only
    assert params["cross_msgs"] == 2 * half * (np - half)
    assert [r["bytes"] for r in doc["rows"]] == [0, 1, 4096, 65536]
    for row in doc["rows"]:
        assert row["errors"] == 0, row
        assert row["cross_msgs"] == params["cross_msgs"]
        assert all(k in row for k in METRICS), row
        if row["bytes"]:
            assert row["stream_Mbps"] > 0 and row["alltoall_Mbps"] > 0, row
            # the column is the ping-pong's bandwidth: 8 bytes / one-way time
            assert row["pingpong_Mbps"] == pytest.approx(8 * row["bytes"] / row["latency_us"])
    # the test-bed proof's lower bound (RELAY.payload: 2, window, cross_msgs messages per timed
    # iteration) reads the program's own columns
    per_rep = sum(
        r["bytes"] * r["iters"] * (2 + r["window"] + r["cross_msgs"]) for r in doc["rows"]
    )
    moved = params["reps"] * per_rep
    assert payload_bytes(doc, RELAY.payload) == moved


def test_relay_split(tmp_path: Path) -> None:
    """Site a of one rank, site b of two: every byte of the uneven all-to-all checked."""
    status, out, doc = _bench(MPIS[0], 3, tmp_path, ["--split", "1", "--tests", "alltoall"])
    assert status == 0, out[-3000:]
    assert doc is not None and doc["status"] == "pass"
    params = doc["provenance"]["params"]
    assert (params["halves"], params["cross_msgs"]) == ("a = ranks 0..0, b = ranks 1..2", 4)
    assert [m["name"] for m in doc["metrics"]] == ["alltoall_Mbps"]


@pytest.mark.parametrize("mpi", MPIS)
def test_flipped_byte_fails(mpi: str, tmp_path: Path) -> None:
    """The harness flips one received byte per repetition at 4K on the lowest receiving rank
    (--inject-error): every test must count it, and the run must fail."""
    status, out, doc = _bench(mpi, 4, tmp_path, ["--inject-error", "4K"])
    assert status != 0, out[-3000:]
    assert "mln-relay exited with status 1 (wrong data, verdict FAIL)" in out
    for test in RELAY_TESTS:
        assert f"mln-relay: error: 2 wrong bytes received at 4096 bytes in test {test}" in out
    assert doc is not None and problems(doc) == []
    assert doc["status"] == "fail" and doc["errors"] == 2 * len(RELAY_TESTS)
    assert [r["errors"] for r in doc["rows"]] == [0, 0, 2 * len(RELAY_TESTS), 0]


def test_split_without_site_b_is_usage_error(tmp_path: Path) -> None:
    status, out, _ = _bench(MPIS[0], 2, tmp_path, ["--split", "2"])
    assert status != 0
    assert "mln-relay: error: --split 2: site b must have ranks (expected 1 to 1" in out
    assert "exited with status 2 (usage or start-up error)" in out


@pytest.mark.parametrize("mpi", MPIS)
def test_binary_is_grid_safe(mpi: str) -> None:
    """No Multilane library is loaded, and every MPI function it calls crosses sites."""
    exe = built_program(mpi, "mln-relay")
    if shutil.which("nm") is None or shutil.which("readelf") is None:
        pytest.skip("needs binutils (nm, readelf)")
    dynamic = subprocess.run(
        ["readelf", "-d", str(exe)], capture_output=True, text=True, check=True
    ).stdout
    needed = [line for line in dynamic.splitlines() if "(NEEDED)" in line]
    assert needed and not [line for line in needed if "multilane" in line], needed
    symbols = subprocess.run(
        ["nm", "--undefined-only", str(exe)], capture_output=True, text=True, check=True
    ).stdout.split()
    calls = {s for s in symbols if s.startswith(("MPI_", "PMPI_"))}
    assert {"MPI_Send", "MPI_Recv", "MPI_Isend", "MPI_Irecv", "MPI_Waitall"} <= calls
    assert calls <= GRID_CALLS, sorted(calls - GRID_CALLS)
    defined = subprocess.run(
        ["nm", "--defined-only", str(exe)], capture_output=True, text=True, check=True
    ).stdout
    assert "mln_init" not in defined.split()  # nothing of libmultilane was linked in
