"""The benchmark programs the CLI knows, and the options each one takes from the command line
or a scenario (validated here, before anything is launched)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from .errors import UsageError
from .sizes import SizeSpecError, parse_size, parse_size_spec

PT2PT_TESTS = ("latency", "bw", "bibw")


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
class Option:
    """One program option: its flag and a checker that returns the argument text."""

    flag: str
    check: Callable[[object], str]
    help: str


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

    def option_args(self, values: Mapping[str, object], where: str = "") -> list[str]:
        """Program arguments for option values; UsageError naming the key when one is bad."""
        args: list[str] = []
        for key, value in values.items():
            option = self.options.get(key)
            if option is None:
                known = ", ".join(self.options)
                raise UsageError(f"{where}unknown option '{key}' for {self.name} (known: {known})")
            try:
                args += [option.flag, option.check(value)]
            except ValueError as exc:
                raise UsageError(f"{where}{key}: {exc}") from None
        return args


PT2PT = Benchmark(
    name="pt2pt",
    program="mln-pt2pt",
    description="point-to-point latency, bandwidth and bidirectional bandwidth, rank pairs "
    "(r, r + n/2)",
    options=MappingProxyType(
        {
            "sizes": Option("--sizes", _size_spec, "message sizes, e.g. 1:64M or 0,1,4K"),
            "reps": Option("--reps", _positive_int, "timed repetitions per size (median)"),
            "warmup": Option("--warmup", _non_negative_int, "warm-up repetitions per size"),
            "min_iters": Option("--min-iters", _positive_int, "iterations per repetition, min"),
            "max_iters": Option("--max-iters", _positive_int, "iterations per repetition, max"),
            "iter_budget": Option("--iter-budget", _size, "iterations = budget / bytes"),
            "tests": Option("--tests", _choices(PT2PT_TESTS), "subset of latency, bw, bibw"),
            "window": Option("--window", _positive_int, "messages in flight for bw and bibw"),
            "window_bytes": Option("--window-bytes", _size, "cap on window * message size"),
        }
    ),
    min_ranks=2,
    payload=MappingProxyType({"latency_us": "2", "bw_MBps": "window", "bibw_MBps": "2*window"}),
)

BENCHMARKS: Mapping[str, Benchmark] = MappingProxyType({b.name: b for b in (PT2PT,)})


def get_benchmark(name: str) -> Benchmark:
    """A registered benchmark; UsageError listing the known ones otherwise."""
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise UsageError(f"unknown benchmark '{name}' (known: {', '.join(BENCHMARKS)})") from None
