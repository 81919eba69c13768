"""The CLI's table of benchmark options matches what the built programs accept.

`python/multilane/benchmarks.py` validates scenario and command-line options before anything
is launched, so it must name exactly the options and tests of each C program: this test reads
the program's own `--help` and fails when the two drift apart.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from multilane.benchmarks import (
    BCAST,
    BENCHMARKS,
    HALO,
    STRIPE,
    Lanes,
    parse_lanes,
    parse_security,
    parse_security_list,
    placement_text,
    security_env,
    security_of,
)
from multilane.errors import UsageError
from multilane.testbed.launch import payload_bytes

ROOT = Path(__file__).resolve().parents[2]
BUILT = [m for m in ("openmpi", "mpich") if (ROOT / "build" / m / "bin").is_dir()]
# Options every harness program has that the CLI sets itself or never passes on.
HARNESS_ONLY = {"--json", "--meta", "--quiet", "--inject-error", "--version", "--help"}


def _help_sections(text: str) -> dict[str, list[str]]:
    """First words of the indented lines under each 'name:' heading of a --help text."""
    sections: dict[str, list[str]] = {}
    current = ""
    for line in text.splitlines():
        heading = re.match(r"^([a-z0-9 ]+):$", line)
        if heading:
            current = heading.group(1)
            sections[current] = []
        elif current and re.match(r"^  \S", line):
            sections[current].append(line.split()[0])
    return sections


@pytest.mark.skipif(not BUILT, reason="no build folder: run `make build` first")
@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_options_match_program_help(name: str) -> None:
    bench = BENCHMARKS[name]
    exe = ROOT / "build" / BUILT[0] / "bin" / bench.program
    if not exe.exists():
        pytest.skip(f"{bench.program} is not built in build/{BUILT[0]}: run `make build`")
    proc = subprocess.run([str(exe), "--help"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    sections = _help_sections(proc.stdout)
    program_flags = {
        flag for key, flags in sections.items() if key.endswith("options") for flag in flags
    }
    # an option with env sets the ranks' environment (stripe's security), no program flag
    cli_flags = {option.flag for option in bench.options.values() if option.env is None}
    assert cli_flags == program_flags - HARNESS_ONLY
    tests = sections.get("tests", [])
    if "tests" not in bench.options:  # mln-matmul: one product, no tests to choose
        assert not tests
        return
    check = bench.options["tests"].check
    assert check(",".join(tests)) == ",".join(tests)  # every program test is accepted
    with pytest.raises(ValueError):
        check("no_such_test")


# ---- the stripe benchmark's options (no build needed) -----------------------------------


@pytest.mark.parametrize(
    ("spec", "kind", "count", "helpers", "paths"),
    [
        ("stock", "stock", 0, 0, 1),
        ("mpi", "mpi", 0, 0, None),
        ("mpi:4", "mpi", 4, 0, 4),
        ("tcp:1", "tcp", 1, 0, 1),
        ("tcp:64", "tcp", 64, 0, 64),
        ("helper:1", "helper", 1, 1, 3),
        ("helper:16", "helper", 16, 16, 33),
        (" tcp:8 ", "tcp", 8, 0, 8),
    ],
)
def test_lanes_accepted(spec: str, kind: str, count: int, helpers: int, paths: int | None) -> None:
    lanes = parse_lanes(spec)
    assert lanes == Lanes(kind, count)
    assert (lanes.helpers, lanes.paths) == (helpers, paths)
    assert str(lanes) == spec.strip()
    assert STRIPE.option_args({"lanes": spec}) == ["--lanes", spec.strip()]


def test_lanes_tcp_auto() -> None:
    """tcp:auto: tcp lanes whose count the library finds per peer; no fixed count, so no
    number of paths, and it reads back as given (labels, meta.lanes, --lanes)."""
    lanes = parse_lanes(" tcp:auto ")
    assert lanes == Lanes("tcp", auto=True) and lanes != Lanes("tcp", 0)
    assert (lanes.kind, lanes.count, lanes.helpers, lanes.paths) == ("tcp", 0, 0, None)
    assert str(lanes) == "tcp:auto"
    assert STRIPE.option_args({"lanes": "tcp:auto"}) == ["--lanes", "tcp:auto"]
    assert STRIPE.helpers_per_host({"lanes": "tcp:auto"}) == 0
    assert "tcp:auto" in STRIPE.options["lanes"].help


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ("tcp", "expected stock (plain MPI), mpi or mpi:N, tcp:N (N 1..64"),
        ("tcp:0", "expected stock"),
        ("tcp:08", "expected stock"),
        ("tcp:65", "at most 64 lanes (tcp:1..64)"),
        ("mpi:65", "at most 64 lanes (mpi:1..64)"),
        ("helper:17", "at most 16 helper ranks per host (helper:1..16)"),
        ("helper:0", "helper:K (K 1..16"),
        ("mpi:auto", "tcp:auto (the library finds the count per peer)"),
        ("helper:auto", "expected stock"),
        ("tcp:AUTO", "expected stock"),
        ("auto", "expected stock"),
        ("helper", "expected stock"),
        ("udp:4", "expected stock"),
        ("Stock", "expected stock"),
        ("tcp:4,tcp:8", "expected stock"),
        ("", "expected stock"),
        (8, "invalid lanes 8"),
    ],
)
def test_lanes_rejected(spec: object, why: str) -> None:
    with pytest.raises(ValueError, match="invalid lanes") as info:
        parse_lanes(spec)
    assert why in str(info.value)
    with pytest.raises(UsageError, match=r"^lanes: invalid lanes"):
        STRIPE.option_args({"lanes": spec})


def test_stripe_options() -> None:
    args = STRIPE.option_args(
        {"local": True, "tests": "pingpong", "window": 4, "window_bytes": "32M", "sizes": "1M"}
    )
    assert args == [
        "--local", "1", "--tests", "pingpong", "--window", "4", "--window-bytes", "32M",
        "--sizes", "1M",
    ]  # fmt: skip
    assert STRIPE.option_args({"local": 0}) == ["--local", "0"]
    for bad, message in ((2, "expected 0 or 1"), ("yes", "expected 0 or 1")):
        with pytest.raises(UsageError, match=message):
            STRIPE.option_args({"local": bad})
    with pytest.raises(UsageError, match=r"unknown name\(s\) latency"):
        STRIPE.option_args({"tests": "latency"})
    with pytest.raises(UsageError, match="unknown option 'transport' for stripe"):
        STRIPE.option_args({"transport": "tcp"})
    assert STRIPE.min_ranks == 2 and STRIPE.program == "mln-stripe"


def test_stripe_helpers_per_host() -> None:
    assert STRIPE.helpers_per_host({}) == 0
    assert STRIPE.helpers_per_host({"lanes": "tcp:8"}) == 0
    assert STRIPE.helpers_per_host({"lanes": "helper:3"}) == 3
    with pytest.raises(UsageError, match="lanes: invalid lanes 'helper:99'"):
        STRIPE.helpers_per_host({"lanes": "helper:99"})
    assert BENCHMARKS["pt2pt"].helpers_per_host({"lanes": "helper:3"}) == 0


def test_stripe_payload_factors() -> None:
    """The test-bed byte proof: ping-pong moves 2 messages per iteration, stream a window."""
    row = {"bytes": 1 << 20, "iters": 2, "window": 3, "time_us": 9.0, "bw_Mbps": 5.0}
    doc = {
        "provenance": {"params": {"reps": 3, "pairs": 1}},
        "metrics": [{"name": "time_us"}, {"name": "bw_Mbps"}],
        "rows": [row],
    }
    assert payload_bytes(doc, STRIPE.payload) == (1 << 20) * 2 * 3 * (2 + 3)


# ---- stripe's link security: an option that sets the ranks' environment ------------------


@pytest.mark.parametrize(
    ("mode", "env"),
    [
        ("auth", {"MLN_LINK_SECURITY": "auth", "MLN_LINK_PAYLOAD_MAC": "0"}),
        ("auth+mac", {"MLN_LINK_SECURITY": "auth", "MLN_LINK_PAYLOAD_MAC": "1"}),
        ("aead", {"MLN_LINK_SECURITY": "aead", "MLN_LINK_PAYLOAD_MAC": "0"}),
        (" none ", {"MLN_LINK_SECURITY": "none", "MLN_LINK_PAYLOAD_MAC": "0"}),
    ],
)
def test_security_sets_the_ranks_environment(mode: str, env: dict[str, str]) -> None:
    """No program argument: both variables, so that a caller's MLN_LINK_PAYLOAD_MAC=1 does
    not turn auth into auth+mac; the mode read back from them is the one asked for."""
    assert parse_security(mode) == mode.strip()
    assert security_env(mode) == env
    assert STRIPE.option_args({"security": mode, "lanes": "tcp:8"}) == ["--lanes", "tcp:8"]
    assert STRIPE.option_env({"security": mode, "lanes": "tcp:8"}) == env
    assert security_of(env) == mode.strip()


@pytest.mark.parametrize(
    ("env", "mode"),
    [
        ({}, "auth"),  # the library's default
        ({"MLN_LINK_SECURITY": ""}, "auth"),
        ({"MLN_LINK_PAYLOAD_MAC": "yes"}, "auth+mac"),
        ({"MLN_LINK_SECURITY": "AEAD", "MLN_LINK_PAYLOAD_MAC": "1"}, "aead"),  # mac: auth only
        ({"MLN_LINK_SECURITY": "none", "PATH": "/bin"}, "none"),
    ],
)
def test_security_of_an_environment(env: dict[str, str], mode: str) -> None:
    assert security_of(env) == mode


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("tls", "invalid security mode 'tls' (expected auth, auth+mac, aead or none)"),
        ("auth,aead", "invalid security mode 'auth,aead'"),  # a list is the CLI's, one per run
        ("", "invalid security mode ''"),
        (1, "invalid security mode 1"),
        ("Auth", "invalid security mode 'Auth'"),
    ],
)
def test_security_refused(value: object, why: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_security(value)
    assert why in str(info.value)
    with pytest.raises(UsageError, match=r"^security: invalid security mode"):
        STRIPE.option_args({"security": value})
    with pytest.raises(UsageError, match=r"unknown option 'security' for pt2pt"):
        BENCHMARKS["pt2pt"].option_args({"security": "auth"})


def test_security_list() -> None:
    assert parse_security_list("none,auth,aead") == ("none", "auth", "aead")
    assert parse_security_list("auth+mac") == ("auth+mac",)
    with pytest.raises(ValueError, match="security mode auth is given twice"):
        parse_security_list("auth,aead,auth")
    with pytest.raises(ValueError, match="invalid security mode ''"):
        parse_security_list("auth,,aead")


# ---- the broadcast benchmark's options (no build needed) --------------------------------


def test_bcast_options() -> None:
    args = BCAST.option_args({"algo": " hier ", "leaders": 4, "root": 3, "tests": "bcast"})
    assert args == ["--algo", "hier", "--leaders", "4", "--root", "3", "--tests", "bcast"]
    for algo in ("stock", "mpi", "sme", "hier", "auto"):
        assert BCAST.option_args({"algo": algo}) == ["--algo", algo]
    assert BCAST.option_args({"leaders": 0}) == ["--leaders", "0"]  # the library's default
    assert BCAST.option_args({"leaders": 1024, "root": 0}) == ["--leaders", "1024", "--root", "0"]
    assert BCAST.min_ranks == 2 and BCAST.program == "mln-bcast"


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("algo", "fast", "algo: expected one of stock, mpi, sme, hier, auto, got 'fast'"),
        ("algo", "SME", "algo: expected one of stock, mpi, sme, hier, auto, got 'SME'"),
        ("algo", 1, "algo: expected one of"),
        (
            "leaders",
            -1,
            "leaders: expected leaders per node from 1 to 1024 (0: the default), got -1",
        ),
        ("leaders", 1025, "leaders: expected leaders per node from 1 to 1024"),
        ("leaders", True, "got True"),
        ("leaders", "2", "got '2'"),
        ("leaders", 2.0, "got 2.0"),
        ("root", -1, "root: expected an integer >= 0, got -1"),
        ("root", "0", "root: expected an integer >= 0, got '0'"),
        ("tests", "latency", r"tests: unknown name(s) latency (known: bcast, stock, paired)"),
        ("lanes", "tcp:4", "unknown option 'lanes' for bcast (known: algo, leaders, root"),
    ],
)
def test_bcast_options_refused(key: str, value: object, message: str) -> None:
    with pytest.raises(UsageError) as info:
        BCAST.option_args({key: value})
    assert message in str(info.value)


def test_bcast_placement_and_payload() -> None:
    """bcast and halo run on every test-bed host (collectives over nodes), pt2pt and stripe on the
    first host of each site; every timed broadcast crosses the WAN at least once."""
    every = ["bcast", "halo", "nas-is", "nas-mg", "nas-lu"]  # the NAS kernels: collectives too
    assert [b.name for b in BENCHMARKS.values() if b.every_host] == every
    assert placement_text() == f"one host per site ({', '.join(every)}: every host)"
    assert BCAST.helpers_per_host({"leaders": 4}) == 0
    doc = {
        "provenance": {"params": {"reps": 2}},
        "metrics": [{"name": "time_us"}, {"name": "stock_time_us"}],
        "rows": [
            {"bytes": 4096, "iters": 5, "leaders": 2, "time_us": 7.0, "stock_time_us": 6.0},
            {"bytes": 1 << 20, "iters": 1, "time_us": 9.0},  # the stock test ran below 16K only
        ],
    }
    assert payload_bytes(doc, BCAST.payload) == (2 * 4096 * 5 + (1 << 20)) * 2


# ---- the halo benchmark's options (no build needed) ----------------------------------------


def test_halo_options() -> None:
    args = HALO.option_args(
        {"dims": 3, "radius": 4, "periodic": False, "sizes": "0,8:1M,1280", "tests": "p2p,auto"}
    )
    assert args == [
        "--dims", "3", "--radius", "4", "--periodic", "0", "--sizes", "0,8:1M,1280",
        "--tests", "p2p,auto",
    ]  # fmt: skip
    every = "p2p,neighbor,rma-fence,rma-pscw,rma-passive,rma-single,auto"
    assert HALO.option_args({"tests": every}) == ["--tests", every]
    assert HALO.min_ranks == 1 and HALO.program == "mln-halo"


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("dims", 0, "dims: expected grid axes from 1 to 3, got 0"),
        ("dims", 4, "dims: expected grid axes from 1 to 3, got 4"),
        ("dims", "2", "dims: expected grid axes from 1 to 3, got '2'"),
        ("radius", 5, "radius: expected a radius from 1 to 4, got 5"),
        ("radius", True, "radius: expected a radius from 1 to 4, got True"),
        ("periodic", 2, "periodic: expected 0 or 1"),
        (
            "sizes",
            "1:4M",
            "sizes: expected multiples of 8 bytes (whole doubles), not 1, 2, 4",
        ),
        ("sizes", "1280,12", "sizes: expected multiples of 8 bytes (whole doubles), not 12"),
        ("sizes", "3,5,7,9,16", "not 3, 5, 7 ..."),
        ("sizes", "8:", "sizes: "),
        ("tests", "rma", "tests: unknown name(s) rma (known: p2p, neighbor, rma-fence"),
        ("algo", "sme", "unknown option 'algo' for halo (known: dims, radius, periodic"),
    ],
)
def test_halo_options_refused(key: str, value: object, message: str) -> None:
    with pytest.raises(UsageError) as info:
        HALO.option_args({key: value})
    assert message in str(info.value)


def test_halo_payload() -> None:
    """Every mode's metric counts one message per iteration as crossing between sites; a mode
    disabled on the MPI (no key in the rows) counts nothing."""
    assert set(HALO.payload) == {
        "p2p_us", "neighbor_us", "rma_fence_us", "rma_pscw_us", "rma_passive_us",
        "rma_single_us", "auto_us",
    }  # fmt: skip
    doc = {
        "provenance": {"params": {"reps": 2}},
        "metrics": [{"name": "p2p_us"}, {"name": "rma_pscw_us"}, {"name": "auto_us"}],
        "rows": [{"bytes": 1280, "iters": 10, "auto_mode": 1, "p2p_us": 5.0, "auto_us": 5.1}],
    }
    assert payload_bytes(doc, HALO.payload) == 1280 * 10 * 2 * 2
