"""Striped point-to-point across test-bed hosts, for real (root, namespaces, both MPIs).

The C test program mpi_stripe (tests/c/mpi_stripe.c: MPI's semantics, every byte checked) runs
between two sites with the tcp backend and with helper ranks (one per host), and `multilane
bench stripe` gives a valid, passing result whose bytes crossed the emulated link; the
differential test (tests/c/mpi_stripe_diff.c) finds every receive equal to MPI's with every
backend.  Striping is left to the library's site detection (--local 0): the peer is remote.
Faults (a lane reset, a killed rank, a blackholed lane, strangers at a lane port) are tested in
test_stripe_faults.py."""

from __future__ import annotations

import json
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

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.mpi]

NETWORK = 'name = "stripe-sites"\n' + two_sites_network("500mbit", "2ms", "mtu = 9000\n")
MPIS = BUILT_MPIS
# mpi_stripe's sub-tests in "all" (tests/c/mpi_stripe.c, subtests[]).
ALL_SUBTESTS = (
    "sizes",
    "order",
    "anysrc",
    "exchange",
    "many",
    "blocking",
    "test",
    "types",
    "truncate",
    "args",
    "truncate_plain",
    "progress",
    "upto",
    "tags",
)
# backend -> (ranks per host, mpi_stripe arguments): helper takes the last rank of each host.
BACKENDS = {
    "tcp": (1, ("--backend", "tcp", "--lanes", "4")),
    "helper": (2, ("--backend", "helper", "--helpers", "1")),
}
PPN = {"tcp": 1, "mpi": 1, "helper": 2}
# At least this much striped payload crosses the link in a run of "all" (it moves ~130 MB).
ALL_PAYLOAD_MIN = 64 * 2**20
RUN_TIMEOUT_S = 300


def _in_turn(cases: Sequence[object]) -> list[tuple[str, object]]:
    """Each case with one MPI, the MPIs in turn: across the sites every case and every MPI
    runs, not every pair (each case runs with both MPIs on loopback in ctest; a test-bed run
    costs 5-15 s on 2 cores, and CI's budget is 30 minutes)."""
    return [(MPIS[i % len(MPIS)], case) for i, case in enumerate(cases)] if MPIS else []


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], Path]]:
    """A private two-site test bed for the module; always taken down."""
    yield from private_testbed(tmp_path_factory.mktemp("tbstripe"), "stripe-sites", NETWORK)


def _mpi_stripe(
    bed: tuple[dict[str, str], Path], mpi: str, ppn: int, args: Sequence[str]
) -> tuple[int, str, int | None]:
    """mpi_stripe across the two sites: (exit status, output, bytes the delay lines forwarded
    during the run or None without delay lines)."""
    program = [str(built_program(mpi, "mpi_stripe")), "--local", "0", *args]
    status, out, crossed, _ = run_across_testbed(bed, mpi, program, ppn, RUN_TIMEOUT_S)
    return status, out, crossed


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("mpi", MPIS)
def test_mpi_stripe_across_sites(bed: tuple[dict[str, str], Path], mpi: str, backend: str):
    """Every sub-test of mpi_stripe between two sites, striped because the peer is remote."""
    ppn, args = BACKENDS[backend]
    status, out, crossed = _mpi_stripe(bed, mpi, ppn, [*args, "--test", "all"])
    check_ok(status, out, ALL_SUBTESTS)
    assert f"# mpi_stripe: backend {backend}," in out
    assert "2 application ranks of " + str(2 * ppn) in out
    if crossed is not None:
        assert crossed >= ALL_PAYLOAD_MIN, f"only {crossed} B crossed the emulated link"


# mpi_stripe_diff across the sites, every backend: (ranks per host, arguments); a fixed seed.
DIFF_BACKENDS = {
    "tcp": (1, ("--backend", "tcp", "--lanes", "4")),
    "mpi": (1, ("--backend", "mpi", "--lanes", "3")),
    "helper": (2, ("--backend", "helper", "--helpers", "1")),
}
DIFF_ARGS = ("--seed", "201", "--ops", "300", "--threshold", "64K", "--max-size", "2M")


# tcp (the lanes of every striped run across a WAN) with every MPI; the others in turn.
DIFF_CASES = [(mpi, "tcp") for mpi in MPIS] + [
    (mpi, str(b)) for mpi, b in _in_turn([b for b in DIFF_BACKENDS if b != "tcp"])
]


@pytest.mark.parametrize(("mpi", "backend"), DIFF_CASES)
def test_mpi_stripe_diff_across_sites(bed: tuple[dict[str, str], Path], mpi: str, backend: str):
    """The differential test between two sites: the same random operations through
    mln_stripe_* and through MPI, every receive's bytes and status equal (it prints the seed and
    the first mismatches otherwise)."""
    ppn, args = DIFF_BACKENDS[backend]
    program = [str(built_program(mpi, "mpi_stripe_diff")), "--local", "0", *args, *DIFF_ARGS]
    status, out, _, _ = run_across_testbed(bed, mpi, program, ppn, RUN_TIMEOUT_S)
    assert status == 0 and "mismatches=0: PASS" in out, out[-3000:]
    assert f"backend {backend}," in out and "2 application ranks of " + str(2 * ppn) in out


@pytest.mark.parametrize(("mpi", "lanes"), _in_turn(["tcp:4", "helper:1"]))
def test_bench_stripe_across_sites(
    bed: tuple[dict[str, str], Path], tmp_path: Path, mpi: str, lanes: str
):
    """`multilane bench stripe` on the test bed: a valid result, status pass, two hosts, and
    at least the payload it reports crossed the emulated link."""
    env, scenario = bed
    built_program(mpi, "mln-stripe")
    args = ["bench", "stripe", "--scenario", str(scenario), "--mpi", mpi, "--lanes", lanes]
    args += ["--sizes", "1,64,300K,2M", "--reps", "2", "--results", str(tmp_path)]
    proc = multilane([*args, "--", "--max-iters", "5"], env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    (result,) = tmp_path.glob("*/*.json")
    valid = multilane(["validate", str(result)], env, timeout=60)
    assert valid.returncode == 0, valid.stdout + valid.stderr
    doc = json.loads(result.read_text())
    assert doc["benchmark"] == "stripe"
    assert doc["status"] == "pass" and doc["errors"] == 0
    prov = doc["provenance"]
    assert prov["nhosts"] == 2 and sorted(prov["hosts"]) == ["a1", "b1"]
    crossed = prov["testbed"]
    if "wan_tx_bytes" in crossed:
        assert crossed["wan_tx_bytes"] >= crossed["payload_bytes_min"] > 0


# The regressions of the striping engine's findings (tests/c/mpi_stripe_fixes.c) between the
# two sites, per backend: (sub-tests, mpi_stripe arguments).  MLN_STRIPE_FAULT goes to a world
# rank: with helpers (2 ranks per host) application rank 1 is world rank 2.
FIXES_ARGS = ("--tags", "32", "--stripe-timeout", "1")
FIXES_TESTS = ("upto", "tags", "inline", "gap")


def _fixes_cases() -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    cases = []
    for backend in ("tcp", "mpi", "helper"):
        receiver = "2" if backend == "helper" else "1"
        cases.append((backend, FIXES_TESTS, FIXES_ARGS))
        cases.append(
            (
                backend,
                ("rabort",),
                ("--tags", "32", "--fault", "rabort:1:65536", "--fault-rank", receiver),
            )
        )
        cases.append(
            (
                backend,
                ("sabort",),
                ("--tags", "32", "--fault", "sabort:1:65536", "--fault-rank", "0"),
            )
        )
    cases.append(("tcp", ("eintr", "listener"), ()))
    return cases


@pytest.mark.parametrize(
    ("mpi", "backend", "tests", "args"), [(m, *case) for m, case in _in_turn(_fixes_cases())]
)
def test_fixes_across_sites(
    bed: tuple[dict[str, str], Path],
    mpi: str,
    backend: str,
    tests: tuple[str, ...],
    args: tuple[str, ...],
):
    """The regression sub-tests of the striping engine's findings between two sites: receive
    up to N against MPI_Recv, 12 messages in flight on 32 chunk tags, 64-byte payloads matched
    out of order, each side asleep past MLN_STRIPE_TIMEOUT, a message failed on purpose (nothing
    written after the error, later ones whole), signals while lanes connect, connections that
    never say hello."""
    run_args = ["--backend", backend, *args, "--test", ",".join(tests)]
    status, out, _ = _mpi_stripe(bed, mpi, PPN[backend], run_args)
    check_ok(status, out, tests)


@pytest.mark.parametrize("mpi", MPIS)
def test_helper_config_across_sites(bed: tuple[dict[str, str], Path], mpi: str):
    """The helper backend with an (emulated) host of too few ranks: MLN_ERR_CONFIG on every
    rank of both sites, no rank left waiting."""
    program = [str(built_program(mpi, "mpi_stripe_life")), "helper-config"]
    status, out, _, _ = run_across_testbed(bed, mpi, program, 3, RUN_TIMEOUT_S)
    assert status == 0 and "ok helper-config (6 ranks)" in out, out[-3000:]
