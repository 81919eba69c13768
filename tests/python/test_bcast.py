"""The broadcast across test-bed hosts, for real (root, namespaces, both MPIs).

Two sites of two hosts each, 2 ranks per host.  Each test-bed host is a network namespace with
its own hostname (UTS namespace) on the one real machine, and both MPIs start one daemon
(Open MPI's prted, MPICH's hydra proxy) per host: MPI_Comm_split_type(SHARED) gives one group
per test-bed host (4 nodes of 2 ranks; mpi_bcast prints what it sees), so no --node-size is
needed.  The C test program mpi_bcast (tests/c/mpi_bcast.c: every byte checked on every rank,
and mln_bcast_last_algo against what 4 nodes of 2 call for) runs with sme (2 leaders per node)
and hier; `multilane bench bcast` gives a valid, passing result whose bytes crossed the
emulated link, with sme below its threshold falling back to MPI_Bcast; `multilane run` of the
same file checks the test bed with the stream counts it names, then runs."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from conftest import (
    BUILT_MPIS,
    built_program,
    check_ok,
    multilane,
    private_testbed,
    run_across_testbed,
    two_sites_network,
)
from multilane.benchmarks import BCAST
from multilane.testbed import launch as tblaunch

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.mpi]

MPIS = BUILT_MPIS
HOSTS = ["a1", "a2", "b1", "b2"]  # every host, site by site
PPN = 2
# The module's test bed, and for `multilane run` a check with 1 and 2 streams and one run.
SCENARIO = (
    'name = "bcast-sites"\ntestbed_check = [1, 2]\n'
    f'[defaults]\nbenchmark = "bcast"\nppn = {PPN}\nalgo = "sme"\nleaders = 2\nsizes = "64K"\n'
    "reps = 2\nmax_iters = 5\ntimeout = 300\n"
    f'[[run]]\nmpi = "{MPIS[0] if MPIS else "openmpi"}"\n'
    + two_sites_network("500mbit", "2ms", "mtu = 9000\n", hosts=2)
)
# mpi_bcast's sub-tests in "all" (tests/c/mpi_bcast.c, subtests[]).
ALL_SUBTESTS = ("roots", "large", "types", "sequence", "comms", "args")
ALGOS = {"sme": ("--algo", "sme", "--leaders", "2"), "hier": ("--algo", "hier")}
# "large" broadcasts 64 MiB from the last rank (site b) and 8 Mi + 3 ints from rank 0 (site a):
# each crosses the WAN at least once.
LARGE_PAYLOAD_MIN = 64 * 2**20 + 4 * (8 * 2**20 + 3)
RUN_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], Path]]:
    """A private test bed of two sites x two hosts for the module; always taken down."""
    yield from private_testbed(tmp_path_factory.mktemp("tbbcast"), "bcast-sites", SCENARIO)


def _mpi_bcast(
    bed: tuple[dict[str, str], Path], mpi: str, args: Sequence[str]
) -> tuple[int, str, int | None]:
    """mpi_bcast on every host, PPN ranks each: (exit status, output, bytes the delay lines
    forwarded during the run or None without delay lines)."""
    program = [str(built_program(mpi, "mpi_bcast")), *args]
    status, out, crossed, hosts = run_across_testbed(
        bed, mpi, program, PPN, RUN_TIMEOUT_S, every_host=True
    )
    assert list(hosts) == HOSTS
    return status, out, crossed


@pytest.mark.parametrize("algo", list(ALGOS))
@pytest.mark.parametrize("mpi", MPIS)
def test_mpi_bcast_across_nodes(bed: tuple[dict[str, str], Path], mpi: str, algo: str):
    """Every sub-test of mpi_bcast on 4 real nodes (test-bed hosts) of 2 ranks: the bytes
    right on every rank, and the algorithm that ran the one 4 nodes of 2 call for."""
    args = [*ALGOS[algo], "--test", "all", "--watchdog", "120"]
    status, out, crossed = _mpi_bcast(bed, mpi, args)
    check_ok(status, out, ALL_SUBTESTS)
    assert f"# mpi_bcast: algo {algo}," in out, out[-3000:]
    # MPI's shared-memory groups: one per test-bed host
    assert "node size 0, 8 ranks (4 nodes, fewest ranks on one 2)" in out, out[-3000:]
    if crossed is not None:
        assert crossed >= LARGE_PAYLOAD_MIN, f"only {crossed} B crossed the emulated link"


@pytest.mark.parametrize("mpi", MPIS)
def test_bench_bcast_across_sites(bed: tuple[dict[str, str], Path], tmp_path: Path, mpi: str):
    """`multilane bench bcast` with --algo and --leaders: a valid, passing result from ranks
    on all four hosts; sme with 2 leaders from the 16K threshold up, MPI_Bcast below it; at
    least the payload it reports crossed the emulated link."""
    env, scenario = bed
    built_program(mpi, "mln-bcast")
    args = ["bench", "bcast", "--scenario", str(scenario), "--mpi", mpi, "--ppn", str(PPN)]
    args += ["--algo", "sme", "--leaders", "2", "--sizes", "1K,64K,2M", "--reps", "2"]
    args += ["--results", str(tmp_path), "--", "--max-iters", "5"]
    proc = multilane(args, env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    (result,) = tmp_path.glob("*/*.json")
    valid = multilane(["validate", str(result)], env, timeout=60)
    assert valid.returncode == 0, valid.stdout + valid.stderr
    doc = json.loads(result.read_text())
    assert doc["benchmark"] == "bcast"
    assert doc["status"] == "pass" and doc["errors"] == 0
    prov = doc["provenance"]
    assert prov["nhosts"] == 4 and prov["hosts"] == HOSTS and prov["nranks"] == 4 * PPN
    assert prov["params"]["algo"] == "sme" and prov["params"]["leaders"] == 2
    assert prov["meta"]["hosts"] == ",".join(HOSTS)
    assert {r["bytes"]: r["leaders"] for r in doc["rows"]} == {1024: 0, 65536: 2, 2**21: 2}
    # the stock and paired tests (MPI_Bcast beside mln_bcast) run below the 16K threshold only
    assert [r["bytes"] for r in doc["rows"] if "stock_time_us" in r] == [1024]
    assert [r["bytes"] for r in doc["rows"] if "paired_ratio" in r] == [1024]
    assert doc["rows"][0]["paired_ratio"] > 0
    crossed = prov["testbed"]
    assert crossed["hosts"] == HOSTS and crossed["ppn"] == PPN
    assert crossed["payload_bytes_min"] == tblaunch.payload_bytes(doc, BCAST.payload) > 0
    if "wan_tx_bytes" in crossed:
        assert crossed["wan_tx_bytes"] >= crossed["payload_bytes_min"]


def test_run_checks_the_streams_first(bed: tuple[dict[str, str], Path], tmp_path: Path):
    """`multilane run` on the live test bed of the same file: `testbed_check = [1, 2]` runs
    iperf3 with 1 and 2 streams first (and says so), then the bcast run on every host."""
    if shutil.which("iperf3") is None:
        pytest.skip("needs iperf3 (make system)")
    env, scenario = bed
    built_program(MPIS[0], "mln-bcast")
    proc = multilane(["run", str(scenario), "--results", str(tmp_path)], env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    assert "testbed check: RTT, loss, iperf3 with 1 and 2 streams ..." in proc.stdout
    (folder,) = tmp_path.iterdir()
    check = json.loads((folder / "testbed-check.json").read_text())
    assert check["schema"] == "multilane-testbed-check" and check["data_version"] == 1
    tcp = [r["values"] for r in check["rows"] if "streams" in r["values"]]
    assert [v["streams"] for v in tcp] == [1, 2] and all(v["bps"] > 0 for v in tcp)
    doc = json.loads((folder / f"{MPIS[0]}.json").read_text())
    assert doc["benchmark"] == "bcast" and doc["status"] == "pass"
    assert doc["provenance"]["hosts"] == HOSTS
