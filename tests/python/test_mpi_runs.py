"""Real runs of the pt2pt benchmark under both pinned MPIs, over shared memory and TCP.

Needs `make build` (build/<mpi>/bin/mln-pt2pt); skipped with the reason when a build folder
is missing.  For TCP the loopback byte counter must grow by at least what the benchmark moved
(other traffic can only add to it)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO_ROOT, clean_env, multilane

pytestmark = [pytest.mark.mpi, pytest.mark.slow]

ROOT = Path(os.environ.get("MULTILANE_ROOT", REPO_ROOT))
MPIS = ("openmpi", "mpich")
REPS = 2
# few iterations: the point is the whole path, not the numbers
QUICK = ["--", "--max-iters", "50", "--warmup", "2"]


def _need_build(mpi: str) -> None:
    program = ROOT / "build" / mpi / "bin" / "mln-pt2pt"
    if not program.exists():
        pytest.skip(f"{program} is missing: run make build")


def _lo_rx_bytes() -> int:
    for line in Path("/proc/net/dev").read_text().splitlines():
        name, _, counters = line.partition(":")
        if name.strip() == "lo":
            return int(counters.split()[0])
    raise AssertionError("no lo interface in /proc/net/dev")


def _bytes_moved(doc: dict[str, Any]) -> int:
    """A lower bound of the payload one pair moved: the latency ping-pong (2 messages per
    iteration) and the bw window (window messages per iteration), per repetition."""
    tests = doc["provenance"]["params"].get("tests", "latency,bw,bibw")
    total = 0
    for row in doc["rows"]:
        per_iter = 2 if "latency" in tests else 0
        if "bw" in tests.split(","):
            per_iter += int(row.get("window", 1))
        total += per_iter * row["bytes"] * row["iters"] * REPS
    return total


def _result(folder: Path) -> dict[str, Any]:
    (run,) = list(folder.iterdir())
    (path,) = list(run.glob("*.json"))
    return json.loads(path.read_text())


@pytest.mark.parametrize("transport", ["shm", "tcp"])
@pytest.mark.parametrize("mpi", MPIS)
def test_bench(mpi: str, transport: str, tmp_path: Path) -> None:
    _need_build(mpi)
    results = tmp_path / "results"
    before = _lo_rx_bytes()
    proc = multilane(
        ["bench", "pt2pt", "--mpi", mpi, "--np", "2", "--transport", transport,
         "--sizes", "1:4K", "--reps", str(REPS), "--timeout", "240",
         "--results", str(results), *QUICK],
        clean_env(ROOT),
    )  # fmt: skip
    grown = _lo_rx_bytes() - before
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    assert f"[{mpi}/{transport}] # verdict: PASS" in proc.stdout
    doc = _result(results)
    # validated by the CLI already; check the essentials again
    assert doc["status"] == "pass" and doc["errors"] == 0
    assert [r["bytes"] for r in doc["rows"]] == [1 << e for e in range(13)]
    assert doc["provenance"]["nranks"] == 2
    meta = doc["provenance"]["meta"]
    assert (meta["mpi"], meta["transport"], meta["np"]) == (mpi, transport, "2")
    assert doc["provenance"]["launch"]["argv"][0].endswith(("mpirun", "mpiexec"))
    if transport == "tcp":
        moved = _bytes_moved(doc)
        assert moved > 1_000_000
        assert grown >= moved, f"lo grew by {grown} bytes, the benchmark moved {moved}"


@pytest.mark.parametrize("mpi", MPIS)
def test_injected_error_fails(mpi: str, tmp_path: Path) -> None:
    _need_build(mpi)
    results = tmp_path / "results"
    proc = multilane(
        ["bench", "pt2pt", "--mpi", mpi, "--sizes", "1:64", "--reps", "1",
         "--results", str(results), "--", "--max-iters", "10", "--inject-error", "8"],
        clean_env(ROOT),
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr
    assert "exited with status 1 (wrong data, verdict FAIL)" in proc.stderr
    assert "Traceback" not in proc.stderr
    doc = _result(results)
    assert doc["status"] == "fail" and doc["errors"] > 0


def test_invalid_tunable_with_real_mln_config() -> None:
    _need_build("openmpi")
    proc = multilane(["bench", "pt2pt", "--mpi", "openmpi"], clean_env(ROOT, MLN_LOG="loud"))
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "multilane: error: MLN_LOG: invalid value 'loud' "
        "(expected one of: none, error, warn, info, debug, trace)"
    ]


def test_config_and_mpi_list() -> None:
    _need_build("openmpi")
    proc = multilane(["config", "--mpi", "openmpi", "--json"], clean_env(ROOT, MLN_LOG="info"))
    assert proc.returncode == 0, proc.stderr
    table = {row["env"]: row for row in json.loads(proc.stdout)}
    assert table["MLN_LOG"]["value"] == "info"
    listing = json.loads(multilane(["mpi", "list", "--json"], clean_env(ROOT)).stdout)
    by_name = {m["name"]: m for m in listing}
    assert by_name["openmpi"]["version"] == "5.0.11"
    assert by_name["openmpi"]["cuda_aware"] == "no"
    assert by_name["mpich"]["version"] == "5.0.2"
