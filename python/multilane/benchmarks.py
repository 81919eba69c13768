"""The benchmark programs the CLI knows, and the options each one takes from the command line
or a scenario (validated here, before anything is launched)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from .errors import UsageError
from .sizes import SizeSpecError, parse_size, parse_size_spec

PT2PT_TESTS = ("latency", "bw", "bibw")
BCAST_TESTS = ("bcast", "stock", "paired")
BCAST_ALGOS = ("stock", "mpi", "sme", "hier", "auto")
STRIPE_TESTS = ("pingpong", "stream", "overlap")
RELAY_TESTS = ("pingpong", "stream", "alltoall")
HALO_TESTS = ("p2p", "neighbor", "rma-fence", "rma-pscw", "rma-passive", "rma-single", "auto")
HALO_ELEMENT = 8  # bytes of one MPI_DOUBLE: a halo message size is whole elements
MATMUL_LAYOUTS = ("rows", "blocks2x2")
MATMUL_MAX_N = 46340  # mln-matmul's limit (N * N fits an int); the seed's largest N is 10000
GPU_TRANSFER_TESTS = ("host", "cuda-aware", "staged", "pipelined")
GPU_SLOTS = (2, 16)  # pinned staging slots of the pipelined path (mln-gpu-transfer's range)
GPU_MAX_CHUNK = 2**30  # bytes per chunk of the pipelined path, at most (mln-gpu-transfer's)
MAX_LANES = 64  # tcp:N and mpi:N
MAX_HELPERS = 16  # helper:K
LANES_HELP = (
    "stock (plain MPI), mpi or mpi:N, tcp:N (N 1..64 sockets), tcp:auto (the library finds "
    "the count per peer), helper:K (K 1..16 helper ranks per host)"
)
AUTO = "auto"  # tcp:auto: MLN_STRIPE_LANES=auto, the lane count found per peer by measurement
_LANES = re.compile(r"(stock|mpi|tcp:auto|(mpi|tcp|helper):([1-9][0-9]*))")
# The link security of the tcp lanes (src/link/): MLN_LINK_SECURITY, and MLN_LINK_PAYLOAD_MAC
# for auth+mac.  Ordered from the least to the most protection (reports list them so).
SECURITY_MODES = ("none", "auth", "auth+mac", "aead")
DEFAULT_SECURITY = "auth"  # MLN_LINK_SECURITY's default in the library
SECURITY_VAR = "MLN_LINK_SECURITY"
PAYLOAD_MAC_VAR = "MLN_LINK_PAYLOAD_MAC"
SECURITY_HELP = (
    "link security of the tcp lanes: auth (the library's default: handshake, headers MACed), "
    "auth+mac (payloads MACed too), aead (every frame encrypted), none (no protection)"
)
_TRUE = ("1", "yes", "true", "on", "y")  # the library's spellings of a true boolean tunable


def _positive_int(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"expected a positive integer, got {value!r}")
    return str(value)


def _non_negative_int(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"expected an integer >= 0, got {value!r}")
    return str(value)


def _size_spec(value: object) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise ValueError(f'expected a size spec string such as "1:64M", got {value!r}')
    try:
        parse_size_spec(value)
    except SizeSpecError as exc:
        raise ValueError(str(exc)) from None
    return value


def _size(value: object) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return str(value)
    if not isinstance(value, str):
        raise ValueError(f"expected a size such as 4M or 4194304, got {value!r}")
    try:
        if parse_size(value) < 1:
            raise SizeSpecError("a size of 0")
    except SizeSpecError as exc:
        raise ValueError(f"expected a size of at least 1 such as 4M: {exc}") from None
    return value


def _choices(allowed: tuple[str, ...]) -> Callable[[object], str]:
    def check(value: object) -> str:
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, list) or not items or not all(isinstance(i, str) for i in items):
            raise ValueError(f"expected a list of names from {', '.join(allowed)}")
        bad = [i for i in items if i.strip() not in allowed]
        if bad:
            raise ValueError(f"unknown name(s) {', '.join(bad)} (known: {', '.join(allowed)})")
        return ",".join(i.strip() for i in items)

    return check


@dataclass(frozen=True)
class Lanes:
    """A parsed lanes spec of the stripe benchmark: `kind` (stock, mpi, tcp, helper) and
    `count` (N sockets or MPI lanes, K helper ranks per host; 0 when not given); `auto` for
    tcp:auto, whose count the library finds per peer (count 0: the result's `lanes_used`
    column says what it chose)."""

    kind: str
    count: int = 0
    auto: bool = False

    def __str__(self) -> str:
        if self.auto:
            return f"{self.kind}:{AUTO}"
        return self.kind if not self.count else f"{self.kind}:{self.count}"

    @property
    def helpers(self) -> int:
        """Helper ranks each host needs beyond the benchmark's own."""
        return self.count if self.kind == "helper" else 0

    @property
    def paths(self) -> int | None:
        """How many parallel paths carry a large message: stock 1, tcp:N N, mpi:N N,
        helper:K 2K+1 (the direct path plus K helpers on each side); None for a bare `mpi`
        (the library's default lane count) and for tcp:auto (chosen per peer at run time)."""
        if self.kind == "stock":
            return 1
        if self.kind == "helper":
            return 2 * self.count + 1
        return self.count or None


def parse_lanes(value: object) -> Lanes:
    """A lanes spec: stock, mpi, mpi:N, tcp:N (N 1..64), tcp:auto, helper:K (K 1..16);
    ValueError saying what is accepted otherwise."""
    text = value.strip() if isinstance(value, str) else None
    match = _LANES.fullmatch(text) if text else None
    if match is None:
        raise ValueError(f"invalid lanes {value!r} (expected {LANES_HELP})")
    if text in ("stock", "mpi"):
        return Lanes(text)
    if text == f"tcp:{AUTO}":
        return Lanes("tcp", auto=True)
    kind, count = match.group(2), int(match.group(3))
    limit = MAX_HELPERS if kind == "helper" else MAX_LANES
    if count > limit:
        what = "helper ranks per host" if kind == "helper" else "lanes"
        raise ValueError(f"invalid lanes {value!r}: at most {limit} {what} ({kind}:1..{limit})")
    return Lanes(kind, count)


def _lanes(value: object) -> str:
    return str(parse_lanes(value))


def parse_security(value: object) -> str:
    """One link-security mode (auth, auth+mac, aead, none); ValueError otherwise."""
    text = value.strip() if isinstance(value, str) else ""
    if text not in SECURITY_MODES:
        raise ValueError(f"invalid security mode {value!r} (expected auth, auth+mac, aead or none)")
    return text


def parse_security_list(value: str) -> tuple[str, ...]:
    """Modes separated by commas, each once: "none,auth,aead" -> one run per mode."""
    modes = tuple(parse_security(item) for item in value.split(","))
    repeated = next((m for i, m in enumerate(modes) if m in modes[:i]), None)
    if repeated is not None:
        raise ValueError(f"security mode {repeated} is given twice")
    return modes


def security_env(mode: str) -> dict[str, str]:
    """The ranks' environment of a mode: both variables, so that a caller's
    MLN_LINK_PAYLOAD_MAC=1 cannot turn auth into auth+mac unseen."""
    base, _, mac = parse_security(mode).partition("+")
    return {SECURITY_VAR: base, PAYLOAD_MAC_VAR: "1" if mac else "0"}


def security_of(env: Mapping[str, str]) -> str:
    """The mode the ranks run in with this environment (the library's defaults for what it
    does not set): what a stripe result records as meta.link_security."""
    base = env.get(SECURITY_VAR, "").strip().lower() or DEFAULT_SECURITY
    mac = env.get(PAYLOAD_MAC_VAR, "").strip().lower() in _TRUE
    return f"{base}+mac" if base == "auth" and mac else base


def _zero_one(value: object) -> str:
    if value in (0, 1, "0", "1") and not isinstance(value, float):
        return str(int(value))  # True and False are 1 and 0
    raise ValueError(f"expected 0 or 1 (or true/false), got {value!r}")


def _no_helpers(_options: Mapping[str, object]) -> int:
    return 0


def _stripe_helpers(options: Mapping[str, object]) -> int:
    lanes = options.get("lanes")
    if lanes is None:
        return 0
    try:
        return parse_lanes(lanes).helpers
    except ValueError as exc:
        raise UsageError(f"lanes: {exc}") from None


@dataclass(frozen=True)
class Option:
    """One program option: its flag and a checker that returns the argument text.  A
    `switch` takes no argument: its checker answers "1" (pass the flag) or "0" (leave it out).
    An option with `env` is no program flag: it sets the ranks' environment (the tunables the
    library reads at mln_init), `env(text)` being the variables; its `flag` is the one of
    `multilane bench`."""

    flag: str
    check: Callable[[object], str]
    help: str
    switch: bool = False
    env: Callable[[str], Mapping[str, str]] | None = None

    def args(self, value: object) -> list[str]:
        """The program arguments for one value (ValueError when it is bad)."""
        text = self.check(value)
        if self.env is not None:
            return []
        if self.switch:
            return [self.flag] if text == "1" else []
        return [self.flag, text]

    def environment(self, value: object) -> dict[str, str]:
        """The ranks' environment for one value ({} for a program flag; ValueError when the
        value is bad)."""
        text = self.check(value)
        return dict(self.env(text)) if self.env is not None else {}


@dataclass(frozen=True)
class Benchmark:
    """A benchmark program built in build/<mpi>/bin/."""

    name: str
    program: str
    description: str
    options: Mapping[str, Option]
    min_ranks: int = 1
    # Payload per timed iteration of each metric's test, as a multiple of the message size
    # ("2", "window", "2*window": numbers or row columns); used to prove test-bed bytes.
    payload: Mapping[str, str] = field(default_factory=dict)
    # Extra ranks per host the program needs for these option values (stripe's helper:K).
    helpers_per_host: Callable[[Mapping[str, object]], int] = _no_helpers
    # On a test bed: ranks on every host, site by site (a collective over nodes), instead of
    # the first host of each site (rank pairs across the WAN).
    every_host: bool = False
    # The option that names the first rank of the second site (relay's split), which a run
    # across two test-bed sites sets to the ranks of the first site unless it is given.
    site_split: str | None = None

    def option_args(self, values: Mapping[str, object], where: str = "") -> list[str]:
        """Program arguments for option values; UsageError naming the key when one is bad."""
        args: list[str] = []
        for key, value in values.items():
            option = self.options.get(key)
            if option is None:
                known = ", ".join(self.options)
                raise UsageError(f"{where}unknown option '{key}' for {self.name} (known: {known})")
            try:
                args += option.args(value)
            except ValueError as exc:
                raise UsageError(f"{where}{key}: {exc}") from None
        return args

    def option_env(self, values: Mapping[str, object]) -> dict[str, str]:
        """The ranks' environment that option values set (options with `env`); call
        option_args first: it names an unknown option or a bad value."""
        env: dict[str, str] = {}
        for key, value in values.items():
            option = self.options.get(key)
            if option is not None and option.env is not None:
                try:
                    env.update(option.environment(value))
                except ValueError as exc:
                    raise UsageError(f"{key}: {exc}") from None
        return env


def _sweep_options(example: str) -> dict[str, Option]:
    """The harness's options of every benchmark: the size sweep and iteration scaling."""
    return {
        "sizes": Option("--sizes", _size_spec, f"message sizes, e.g. {example}"),
        "reps": Option("--reps", _positive_int, "timed repetitions per size (median)"),
        "warmup": Option("--warmup", _non_negative_int, "warm-up repetitions per size"),
        "min_iters": Option("--min-iters", _positive_int, "iterations per repetition, min"),
        "max_iters": Option("--max-iters", _positive_int, "iterations per repetition, max"),
        "iter_budget": Option("--iter-budget", _size, "iterations = budget / bytes"),
    }


PT2PT = Benchmark(
    name="pt2pt",
    program="mln-pt2pt",
    description="point-to-point latency, bandwidth and bidirectional bandwidth, rank pairs "
    "(r, r + n/2)",
    options=MappingProxyType(
        {
            **_sweep_options("1:64M or 0,1,4K"),
            "tests": Option("--tests", _choices(PT2PT_TESTS), "subset of latency, bw, bibw"),
            "window": Option("--window", _positive_int, "messages in flight for bw and bibw"),
            "window_bytes": Option("--window-bytes", _size, "cap on window * message size"),
        }
    ),
    min_ranks=2,
    payload=MappingProxyType({"latency_us": "2", "bw_MBps": "window", "bibw_MBps": "2*window"}),
)

STRIPE = Benchmark(
    name="stripe",
    program="mln-stripe",
    description="striped point-to-point (mln_stripe_*): one-way ping-pong time and streaming "
    "bandwidth over the chosen lanes, rank pairs (r, r + n/2)",
    options=MappingProxyType(
        {
            "lanes": Option("--lanes", _lanes, LANES_HELP),
            "security": Option("--security", parse_security, SECURITY_HELP, env=security_env),
            "local": Option("--local", _zero_one, "1: stripe between ranks of one host too"),
            **_sweep_options("100K,1M,10M"),
            "tests": Option(
                "--tests", _choices(STRIPE_TESTS), "subset of pingpong, stream, overlap"
            ),
            "compute_us": Option(
                "--compute-us", _non_negative_int, "overlap: work (us) between post and wait"
            ),
            "window": Option("--window", _positive_int, "messages in flight for stream"),
            "window_bytes": Option("--window-bytes", _size, "cap on window * message size"),
        }
    ),
    min_ranks=2,
    payload=MappingProxyType({"time_us": "2", "bw_Mbps": "window", "overlap_us": "window"}),
    helpers_per_host=_stripe_helpers,
)

RELAY = Benchmark(
    name="relay",
    program="mln-relay",
    description="traffic between two sites, direct or relayed (seed 004): ping-pong and "
    "streaming from rank 0 to the first rank of site b, all-to-all across the sites; a plain "
    "MPI program (no Multilane library), so the same binary runs under multilane grid run",
    options=MappingProxyType(
        {
            **_sweep_options("1:4M or 0,1,4K"),
            "tests": Option(
                "--tests", _choices(RELAY_TESTS), "subset of pingpong, stream, alltoall"
            ),
            "window": Option("--window", _positive_int, "messages in flight for stream"),
            "window_bytes": Option("--window-bytes", _size, "cap on window * message size"),
            "split": Option(
                "--split", _non_negative_int, "first rank of site b (0: n/2, the default)"
            ),
        }
    ),
    min_ranks=2,
    # every message of the three tests crosses between the halves (the sites): a round trip,
    # a window, and cross_msgs = 2 s (n - s) messages per iteration
    payload=MappingProxyType(
        {"latency_us": "2", "stream_Mbps": "window", "alltoall_Mbps": "cross_msgs"}
    ),
    site_split="split",
)


def _one_of(allowed: tuple[str, ...]) -> Callable[[object], str]:
    def check(value: object) -> str:
        if not isinstance(value, str) or value.strip() not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}, got {value!r}")
        return value.strip()

    return check


def _leaders(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1024:
        raise ValueError(
            f"expected leaders per node from 1 to 1024 (0: the default), got {value!r}"
        )
    return str(value)


BCAST = Benchmark(
    name="bcast",
    program="mln-bcast",
    description="broadcast from one root to every rank: mln_bcast (sme: L leaders per node, "
    "hier: one) against the MPI's own MPI_Bcast (stock)",
    options=MappingProxyType(
        {
            "algo": Option("--algo", _one_of(BCAST_ALGOS), "stock, mpi, sme, hier or auto"),
            "leaders": Option("--leaders", _leaders, "sme: leaders per node L (0: default)"),
            "root": Option("--root", _non_negative_int, "the broadcasting rank"),
            "node_size": Option(
                "--node-size", _non_negative_int, "N: blocks of N ranks of a host are one node"
            ),
            "paired_spin": Option(
                "--paired-spin",
                _non_negative_int,
                "NS: test paired: busy-wait NS ns at the start of each --algo call (calibration)",
            ),
            **_sweep_options("1K:64M"),
            "tests": Option(
                "--tests",
                _choices(BCAST_TESTS),
                "bcast, stock (MPI_Bcast beside it), paired (the two in turn, call by call): "
                "the last two below the threshold",
            ),
        }
    ),
    min_ranks=2,
    # every broadcast crosses each WAN link at least once (the root's site to the others);
    # an iteration of paired is two broadcasts
    payload=MappingProxyType({"time_us": "1", "stock_time_us": "1", "paired_ratio": "2"}),
    every_host=True,
)


def _int_from(low: int, high: int, what: str) -> Callable[[object], str]:
    def check(value: object) -> str:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"expected {what} from {low} to {high}, got {value!r}")
        return str(value)

    return check


def _halo_sizes(value: object) -> str:
    text = _size_spec(value)
    odd = [n for n in parse_size_spec(text) if n % HALO_ELEMENT]
    if odd:
        raise ValueError(
            f"expected multiples of {HALO_ELEMENT} bytes (whole doubles), not "
            f"{', '.join(map(str, odd[:3]))}{' ...' if len(odd) > 3 else ''}"
        )
    return text


HALO = Benchmark(
    name="halo",
    program="mln-halo",
    description="halo exchange (mln_halo_exchange) on a Cartesian grid of all ranks, one test "
    "per mode (p2p, neighbor, rma-fence, rma-pscw, rma-passive, rma-single, auto); a size is "
    "the bytes of one neighbour's message",
    options=MappingProxyType(
        {
            "dims": Option("--dims", _int_from(1, 3, "grid axes"), "axes of the grid: 1, 2 or 3"),
            "radius": Option(
                "--radius", _int_from(1, 4, "a radius"), "neighbours per side of each axis"
            ),
            "periodic": Option("--periodic", _zero_one, "1: every axis wraps around"),
            **_sweep_options("8:1M or 0,1280"),
            "sizes": Option("--sizes", _halo_sizes, "bytes per neighbour message, multiples of 8"),
            "tests": Option(
                "--tests",
                _choices(HALO_TESTS),
                "subset of the modes; a mode disabled on the MPI is skipped",
            ),
        }
    ),
    min_ranks=1,
    # the grid is connected, so with ranks on two sites at least one neighbour message per
    # iteration crosses between them
    payload=MappingProxyType({f"{t.replace('-', '_')}_us": "1" for t in HALO_TESTS}),
    every_host=True,
)


def _matrix_sizes(value: object) -> str:
    """N of the matrix product: an integer, a list of them or "1000,2000"; each from 1 to
    MATMUL_MAX_N, increasing (a result's rows are sorted by size, one per N)."""
    if isinstance(value, str):
        items: list[object] = [int(t) if t.strip().isdigit() else t for t in value.split(",")]
    elif isinstance(value, list) and value:
        items = list(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        items = [value]
    else:
        raise ValueError(f"expected N or a list of N such as [1000, 2000], got {value!r}")
    bad = [
        i
        for i in items
        if isinstance(i, bool) or not isinstance(i, int) or not 1 <= i <= MATMUL_MAX_N
    ]
    numbers = [i for i in items if isinstance(i, int)]
    if bad:
        raise ValueError(
            f"expected matrix sizes N from 1 to {MATMUL_MAX_N}, got {', '.join(map(repr, bad))}"
        )
    if any(b <= a for a, b in zip(numbers, numbers[1:])):
        raise ValueError(f"expected N in increasing order without repeats, got {numbers}")
    return ",".join(map(str, numbers))


MATMUL = Benchmark(
    name="matmul",
    program="mln-matmul",
    description="matrix product C = A x B of N x N doubles (ALGORITHMS.md M1): rank 0 holds A "
    "and B, broadcasts B, scatters row blocks of A, every rank multiplies its block (BLAS "
    "DGEMM, or cuBLAS with gpu), rank 0 gathers C; one row per N",
    options=MappingProxyType(
        {
            "n": Option("--n", _matrix_sizes, "matrix sizes N, e.g. 1000,2000,4000"),
            "reps": Option("--reps", _positive_int, "timed repetitions per N (median)"),
            "layout": Option(
                "--layout",
                _one_of(MATMUL_LAYOUTS),
                "rows (row blocks of A, all of B) or blocks2x2 (the seed's GPU split, 4 ranks)",
            ),
            "gpu": Option("--gpu", _zero_one, "1: the local product on the GPU", switch=True),
            "exact_max_n": Option(
                "--exact-max-n",
                _non_negative_int,
                "check C exactly against a serial product up to this N (above: Freivalds)",
            ),
            "blas_threads": Option(
                "--blas-threads", _int_from(1, 1024, "BLAS threads"), "threads of each DGEMM"
            ),
        }
    ),
    min_ranks=1,
    # No payload: a row's iters are its repetitions, which payload_bytes would count twice
    # (iters x params.reps); a WAN run is not proven to cross (seed003-cluster has no WAN).
)


def _chunk(value: object) -> str:
    text = _size(value)
    if parse_size(text) > GPU_MAX_CHUNK:
        raise ValueError(f"expected a chunk of at most 1G, got {value!r}")
    return text


GPU_TRANSFER = Benchmark(
    name="gpu-transfer",
    program="mln-gpu-transfer",
    description="a GPU buffer between 2 ranks (ALGORITHMS.md M2): host memory, device "
    "pointers straight to a CUDA-aware MPI, naive staging through the host, pipelined staging "
    "through pinned slots; bandwidth per path",
    options=MappingProxyType(
        {
            **_sweep_options("1:64M"),
            "tests": Option(
                "--tests",
                _choices(GPU_TRANSFER_TESTS),
                "subset of host, cuda-aware, staged, pipelined",
            ),
            "chunk": Option("--chunk", _chunk, "pipelined: bytes per chunk, e.g. 1M"),
            "slots": Option(
                "--slots", _int_from(*GPU_SLOTS, "pinned slots"), "pipelined: pinned slots"
            ),
        }
    ),
    min_ranks=2,
    # an iteration is a round trip: one message of `bytes` each way between the two ranks
    payload=MappingProxyType({f"{t.replace('-', '_')}_MBps": "2" for t in GPU_TRANSFER_TESTS}),
)


def _count(low: int, high: int, what: str) -> Callable[[object], str]:
    """An integer from low to high, also as its decimal text (`multilane bench nas-mg --n
    64` gives text)."""
    check = _int_from(low, high, what)

    def parse(value: object) -> str:
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        return check(value)

    return parse


def _nas(name: str, description: str, sizes: Mapping[str, Option]) -> Benchmark:
    """One of seed 004's NAS-style kernels (issue 19; docs/METRICS.md, nas): mln-NAME, a
    plain MPI program whose ranks span every host (a collective kernel); its sizes, and the
    split between the sites, which a test-bed run sets to the ranks of the first site.  Its one
    row's bytes are what an iteration sends between the sites (iters of them in all)."""
    return Benchmark(
        name=name,
        program=f"mln-{name}",
        description=description,
        options=MappingProxyType(
            {
                **sizes,
                "split": Option(
                    "--split", _non_negative_int, "first rank of the second site (0: n/2)"
                ),
            }
        ),
        min_ranks=1,
        payload=MappingProxyType({"total_s": "1"}),
        every_host=True,
        site_split="split",
    )


NAS_IS = _nas(
    "nas-is",
    "integer sort in the style of NAS IS (seed 004): MPI_Allreduce of a bucket histogram, "
    "MPI_Alltoall of the counts, MPI_Alltoallv of the keys, a counting sort; verified; "
    "bandwidth-bound across a WAN",
    {
        "keys": Option("--keys", _count(256, 2**28, "keys per rank"), "keys per rank"),
        "max_key": Option(
            "--max-key", _count(128, 2**30, "a key bound"), "keys in [0, K), K a multiple of B"
        ),
        "buckets": Option("--buckets", _count(1, 2**30, "buckets"), "buckets B dividing K"),
        "iters": Option("--iters", _count(1, 64, "iterations"), "timed iterations (1 to 64)"),
        "warmup": Option(
            "--warmup", _count(0, 1, "untimed iterations"), "untimed first iteration (0 or 1)"
        ),
    },
)
NAS_MG = _nas(
    "nas-mg",
    "multigrid-style stencil in the style of NAS MG (seed 004): V-cycles of a 7-point Jacobi "
    "over z slabs, halo planes by MPI_Sendrecv shrinking with the level; verified bit for "
    "bit; latency-bound across a WAN",
    {
        "n": Option("--n", _count(2, 1024, "a grid edge"), "the N^3 grid's edge"),
        "levels": Option("--levels", _count(1, 10, "levels"), "grid levels L"),
        "smooth": Option("--smooth", _count(1, 100, "steps"), "Jacobi steps per level and leg"),
        "cycles": Option("--cycles", _count(1, 1000, "V-cycles"), "timed V-cycles"),
    },
)
NAS_LU = _nas(
    "nas-lu",
    "pipelined Gauss-Seidel wavefront in the style of NAS LU (seed 004): lower and upper "
    "sweeps over y bands, a row per plane to the next rank; verified bit for bit; "
    "compute-bound",
    {
        "nx": Option("--nx", _count(1, 4096, "a grid edge"), "grid points along x"),
        "ny": Option("--ny", _count(1, 4096, "a grid edge"), "along y (a multiple of ranks)"),
        "nz": Option("--nz", _count(1, 4096, "a grid edge"), "along z (pipeline steps)"),
        "iters": Option("--iters", _count(1, 10000, "iterations"), "timed iterations"),
    },
)
NAS_KERNELS = (NAS_IS, NAS_MG, NAS_LU)

BENCHMARKS: Mapping[str, Benchmark] = MappingProxyType(
    {b.name: b for b in (PT2PT, STRIPE, BCAST, HALO, MATMUL, GPU_TRANSFER, RELAY, *NAS_KERNELS)}
)


def placement_text() -> str:
    """Where the ranks of a test-bed run go: 'one host per site (bcast, halo: every host)'."""
    every = [b.name for b in BENCHMARKS.values() if b.every_host]
    return "one host per site" + (f" ({', '.join(every)}: every host)" if every else "")


def get_benchmark(name: str) -> Benchmark:
    """A registered benchmark; UsageError listing the known ones otherwise."""
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise UsageError(f"unknown benchmark '{name}' (known: {', '.join(BENCHMARKS)})") from None
