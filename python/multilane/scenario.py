"""Scenario files: a named experiment in TOML, expanded into benchmark runs.

    name = "pt2pt-local"              # results/<timestamp>-<name>/
    description = "..."
    [defaults]                        # keys every run starts from
    benchmark = "pt2pt"
    np = 2
    sizes = "1:64M"                   # options of the benchmark program
    [matrix]                          # every combination becomes a run, labelled mpi-transport
    mpi = ["openmpi", "mpich"]
    transport = ["shm", "tcp"]        # also any option of the benchmark: lanes = ["tcp:8"]
    [[run]]                           # and/or explicit runs, each overriding the defaults
    mpi = "openmpi"
    transport = "tcp"
    label = "openmpi-tcp-4"
    np = 4
    [network]                         # the emulated test bed (testbed/topology.py)
                                      # with it, runs take ppn = 2 (ranks per host),
                                      # hosts = 1 (only the first N hosts, site by site),
                                      # site = "a" (only that site's hosts), and a run
                                      # with testbed = false stays on this machine
                                      # (transport, np) while the test bed is up
                                      # With private sites two more factors:
                                      # network = "private" | "direct" (the same sites
                                      # made routable: Network.variant), wan_delay = "5ms"
                                      # (every WAN link's one-way delay): the runner
                                      # brings the test bed up per network and sets the
                                      # delay before the runs (experiment.py)
    testbed_check = true              # (top level) testbed check first: testbed-check.json
                                      # (iperf3 with 1 and 8 streams; [1, 2, 4]: those counts)

Problems are reported as ``FILE: WHERE: PROBLEM`` before anything runs."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from . import mpi as mpimod
from .bench import (
    DEFAULT_TIMEOUT_S,
    LAUNCHES,
    MAX_TRUNKS,
    BenchRequest,
    per_site_mpis,
    resolve_ranks,
    slug,
    with_option_env,
)
from .benchmarks import BENCHMARKS, get_benchmark, placement_text
from .errors import UsageError
from .launchers import TRANSPORTS
from .testbed.check import DEFAULT_STREAMS, StreamsError, stream_counts
from .testbed.topology import VARIANTS, Network, format_time, parse_network, parse_time

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11 only
    import tomli as tomllib

TOP_KEYS = ("name", "description", "testbed_check", "network", "defaults", "matrix", "run")
MATRIX_KEYS = (
    "benchmark",
    "mpi",
    "transport",
    "np",
    "ppn",
    "hosts",
    "site",
    "network",
    "wan_delay",
    "launch",
    "trunks",
)  # and options
RUN_KEYS = (*MATRIX_KEYS, "label", "timeout", "env", "args", "testbed")
LOCAL_ONLY_KEYS = ("transport", "np")  # a [network] scenario places ranks by site (ppn)
NETWORK_ONLY_KEYS = {
    "ppn": "ppn needs a [network] (ranks per host)",
    "hosts": "hosts needs a [network] (how many of its hosts the ranks go to)",
    "site": "site needs a [network] (the site whose hosts the ranks go to)",
    "testbed": "testbed needs a [network] (false: this run stays on this machine)",
    "network": "network needs a [network] (which variant of it the run takes)",
    "wan_delay": "wan_delay needs a [network] with a WAN link (its one-way delay)",
    "launch": 'launch needs a [network] with private sites ("grid": multilane grid run)',
    "trunks": 'trunks needs a [network] with private sites (and launch = "grid")',
}
LOCAL_RUN = "testbed = false"  # a run of a [network] scenario on this machine
DEFAULT_BENCHMARK = "pt2pt"


class ScenarioError(UsageError):
    """A scenario file that cannot be used; the message names file, key and problem."""


@dataclass(frozen=True)
class Scenario:
    """A validated scenario: its name, the runs it expands to (in order) and the emulated
    network of `multilane testbed` (None when the file has no [network] table)."""

    name: str
    description: str
    path: Path
    runs: tuple[BenchRequest, ...]
    network: Network | None = None
    # The iperf3 TCP stream counts of a `multilane testbed check` (RTT, loss, iperf3) before
    # the runs, stored as testbed-check.json beside the results; () for no check.
    check_streams: tuple[int, ...] = ()

    @property
    def testbed_check(self) -> bool:
        """Whether `multilane run` checks the test bed first (needs a [network])."""
        return bool(self.check_streams)


def _type_name(value: object) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
            dict: "table"}.get(type(value), type(value).__name__)  # fmt: skip


def _check_common(key: str, value: Any) -> str | None:
    """The problem with one run key's value, or None."""
    problem = None
    if key in ("benchmark", "mpi", "transport", "label", "site", "launch"):
        if not isinstance(value, str) or not value:
            problem = f"expected a non-empty string, got {_type_name(value)}"
        elif key == "benchmark" and value not in BENCHMARKS:
            problem = f"unknown benchmark '{value}' (known: {', '.join(BENCHMARKS)})"
        elif key == "mpi" and "=" in value:
            problem = _check_site_mpis(value)
        elif key == "mpi" and value not in mpimod.KNOWN:
            problem = f"unknown MPI '{value}' (known: {', '.join(mpimod.KNOWN)})"
        elif key == "launch" and value not in LAUNCHES:
            problem = f"expected one of {', '.join(LAUNCHES)}, got {value!r}"
        elif key == "transport" and value not in TRANSPORTS:
            problem = f"unknown transport '{value}' (known: {', '.join(TRANSPORTS)})"
    elif key in ("np", "ppn", "hosts"):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            problem = f"expected a positive integer, got {value!r}"
    elif key == "trunks":
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TRUNKS:
            problem = f"expected gateways per site from 1 to {MAX_TRUNKS}, got {value!r}"
    elif key == "network":
        if value not in VARIANTS:
            problem = f"expected one of {', '.join(VARIANTS)}, got {value!r}"
    elif key == "wan_delay":
        seconds = parse_time(value)
        if seconds is None or seconds > 10:
            problem = f"invalid time {value!r} (expected e.g. 5ms, 250us, 0, at most 10s)"
    elif key == "testbed":
        if not isinstance(value, bool):
            problem = f"expected true or false, got {value!r}"
    elif key == "timeout":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            problem = f"expected a positive number of seconds, got {value!r}"
    elif key == "env":
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            problem = 'expected a table of strings, e.g. env = { MLN_LOG = "info" }'
    elif key == "args" and (
        not isinstance(value, list) or not all(isinstance(v, str) for v in value)
    ):
        problem = "expected an array of strings"
    return problem


def _check_site_mpis(value: str) -> str | None:
    """The problem with an `mpi` value naming one MPI per site ("a=openmpi,b=mpich")."""
    try:
        given = per_site_mpis(value) or {}
    except ValueError as exc:
        return str(exc)
    if len(given) < 2:
        return f"expected an MPI for each of 2 sites or more, got {value!r}"
    unknown = [m for m in given.values() if m not in mpimod.KNOWN]
    if unknown:
        return f"unknown MPI '{unknown[0]}' (known: {', '.join(mpimod.KNOWN)})"
    return None


def check_grid(loader: _Loader, where: str, request: BenchRequest, network: Network | None) -> None:
    """A run's launch: "grid" goes across the private network of a test bed (not the direct
    one, not one site or the first hosts of it, not this machine); trunks and an MPI per site
    need it."""
    grid = request.launch == "grid"
    if not grid:
        if request.trunks is not None:
            raise loader.fail(where, 'trunks needs launch = "grid" (gateways per site)')
        if per_site_mpis(request.mpi) is not None:
            raise loader.fail(where, f'mpi = "{request.mpi}" (one per site) needs launch = "grid"')
        return
    if network is None or not network.private or request.scenario is None:
        raise loader.fail(where, 'launch = "grid" needs a test bed with private sites')
    if request.network_variant == "direct":
        raise loader.fail(
            where, 'launch = "grid" runs across the private network, not network = "direct"'
        )
    for key, value in (("hosts", request.hosts), ("site", request.site)):
        if value is not None:
            raise loader.fail(
                where, f'{key} is not for launch = "grid" (its ranks go on every compute host)'
            )
    named = per_site_mpis(request.mpi)
    if named is not None:
        known = [s.name for s in network.sites if s.private]
        if list(named) != known:
            raise loader.fail(
                where,
                f'mpi = "{request.mpi}": name every private site once, in order '
                f"({', '.join(known)})",
            )


class _Loader:
    """Validation state for one file: every message names it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, where: str, problem: str) -> ScenarioError:
        return ScenarioError(f"{self.path}: {where + ': ' if where else ''}{problem}")

    def table(self, doc: Mapping[str, Any], key: str) -> dict[str, Any]:
        value = doc.get(key, {})
        if not isinstance(value, dict):
            raise self.fail(key, f"expected a table, got {_type_name(value)}")
        return value

    def check_streams(self, value: object) -> tuple[int, ...]:
        """testbed_check: true (1 and 8 streams), false (no check) or an array of counts."""
        if isinstance(value, bool):
            return DEFAULT_STREAMS if value else ()
        if not isinstance(value, list):
            raise self.fail(
                "testbed_check",
                f"expected true, false or an array of iperf3 stream counts such as [1, 2, 4, 8], "
                f"got {_type_name(value)}",
            )
        try:
            return stream_counts(value)
        except StreamsError as exc:
            where = "testbed_check" + ("" if exc.index is None else f"[{exc.index}]")
            raise self.fail(where, str(exc)) from None

    def check_keys(self, table: Mapping[str, Any], where: str, allowed: tuple[str, ...]) -> None:
        """Unknown keys (other than benchmark options, checked later) and bad values."""
        options = {o for b in BENCHMARKS.values() for o in b.options}
        for key, value in table.items():
            if key not in allowed and key not in options:
                known = ", ".join([*allowed, *sorted(options)])
                raise self.fail(f"{where}.{key}", f"unknown key (allowed: {known})")
            problem = _check_common(key, value) if key in RUN_KEYS else None
            if problem:
                raise self.fail(f"{where}.{key}", problem)

    def request(self, merged: Mapping[str, Any], where: str, name: str) -> BenchRequest:
        """A BenchRequest from defaults + matrix values + run table."""
        if "mpi" not in merged:
            raise self.fail(where, "no MPI given (set mpi in [defaults], [matrix] or the run)")
        bench = get_benchmark(merged.get("benchmark", DEFAULT_BENCHMARK))
        options = {k: v for k, v in merged.items() if k not in RUN_KEYS}
        try:
            bench.option_args(options)
            with_option_env(
                BenchRequest(bench.name, options=options, env=merged.get("env", {})), bench
            )
        except UsageError as exc:
            raise self.fail(where, str(exc)) from None
        return BenchRequest(
            benchmark=bench.name,
            mpi=merged["mpi"],
            np=merged.get("np"),
            transport=merged.get("transport", "shm"),
            options=options,
            extra_args=tuple(merged.get("args", ())),
            timeout_s=float(merged.get("timeout", DEFAULT_TIMEOUT_S)),
            label=merged.get("label"),
            env=dict(merged.get("env", {})),
            meta={"scenario": name},
            ppn=merged.get("ppn"),
            hosts=merged.get("hosts"),
            site=merged.get("site"),
            network_variant=merged.get("network"),
            wan_delay_s=parse_time(merged["wan_delay"]) if "wan_delay" in merged else None,
            launch=merged.get("launch", "mpi"),
            trunks=merged.get("trunks"),
        )

    def matrix_group(
        self, key: str, tables: list[dict[str, Any]], matrix: Mapping[str, Any]
    ) -> list[dict[str, Any]]:
        """A [matrix] key whose values are tables (a group): each table sets several run keys
        and options at once, e.g. path = [{ network = "direct" }, { launch = "grid", trunks =
        8, label = "trunks8" }]; its `label` (else its values) names it in the run's label."""
        if key in MATRIX_KEYS:
            raise self.fail(f"matrix.{key}", "expected an array of values, not of tables")
        for i, table in enumerate(tables):
            where = f"matrix.{key}[{i}]"
            if not table:
                raise self.fail(where, "an empty table")
            self.check_keys(table, where, RUN_KEYS)
            for name in table:
                if name in matrix:
                    raise self.fail(f"{where}.{name}", f"also a key of [matrix] ({name})")
                if name in ("testbed", "args"):
                    raise self.fail(f"{where}.{name}", "not in a [matrix] group: set it per run")
        return tables

    def matrix_option(self, key: str, values: list[Any], benchmark: str | None) -> None:
        """A benchmark option varied by [matrix] (e.g. lanes = ["stock", "tcp:8"]): every
        value checked by the benchmark of [defaults] (per run, when the matrix varies it)."""
        if benchmark is None:
            return  # [matrix] varies the benchmark: each combination is checked as a run
        bench = BENCHMARKS.get(benchmark)
        if bench is None:
            return  # reported as defaults.benchmark
        option = bench.options.get(key)
        if option is None:
            raise self.fail(
                f"matrix.{key}",
                f"not an option of benchmark {bench.name} (its options: "
                f"{', '.join(bench.options)}; set benchmark in [defaults])",
            )
        for i, value in enumerate(values):
            try:
                option.check(value)
            except ValueError as exc:
                raise self.fail(f"matrix.{key}[{i}]", str(exc)) from None


def _matrix_label(combo: Mapping[str, Any]) -> str:
    """A run's label from its matrix values: 'openmpi-tcp', 'np4', 'openmpi-tcp:8',
    'tcp:8-aead', 'window16'."""
    parts = []
    for key, value in combo.items():
        if isinstance(value, dict):  # a group: its label, else its own values' label
            rest = {k: v for k, v in value.items() if k != "label"}
            parts.append(str(value["label"]) if "label" in value else _matrix_label(rest))
        elif key in ("np", "hosts"):
            parts.append(f"{key}{value}")
        elif key == "wan_delay":
            seconds = parse_time(value)
            parts.append(f"delay{format_time(seconds) if seconds is not None else value}")
        elif key in ("trunks",):
            parts.append(f"trunks{value}")
        elif key in MATRIX_KEYS or key in ("lanes", "security"):
            parts.append(str(value))
        else:
            parts.append(f"{key}{value}")
    return "-".join(parts)


def check_site(loader: _Loader, where: str, value: object, network: Network) -> None:
    """`site` (or each value of matrix.site) names a site of the test bed."""
    known = [s.name for s in network.sites]
    for i, name in enumerate(value if isinstance(value, list) else [value]):
        if name not in known:
            raise loader.fail(
                where + (f"[{i}]" if isinstance(value, list) else ""),
                f"no site {name!r} in the [network] (its sites: {', '.join(known)})",
            )


def check_variant(loader: _Loader, where: str, key: str, value: object, network: Network) -> None:
    """`network = "private"` needs a private site; `wan_delay` a WAN link."""
    for i, item in enumerate(value if isinstance(value, list) else [value]):
        at = where + (f"[{i}]" if isinstance(value, list) else "")
        if key == "network" and item == "private" and not network.private:
            raise loader.fail(at, 'the [network] has no private site: only "direct"')
        if key == "wan_delay" and not network.wan:
            raise loader.fail(at, "the [network] has no WAN link to delay")


def check_site_hosts(loader: _Loader, where: str, request: BenchRequest, network: Network) -> None:
    """A run with both `site` and `hosts`: at most the site's host count."""
    if request.site is None or request.hosts is None:
        return
    hosts = network.site(request.site).hosts
    if request.hosts > len(hosts):
        names = ", ".join(h.name for h in hosts)
        raise loader.fail(
            where,
            f"{request.hosts} hosts asked in site {request.site}, which has {len(hosts)} "
            f"({names}): expected 1 to {len(hosts)}",
        )


def check_hosts(loader: _Loader, where: str, value: object, network: Network) -> None:
    """`hosts` (or each value of matrix.hosts) from 1 to the test bed's host count."""
    hosts = network.hosts
    for i, count in enumerate(value if isinstance(value, list) else [value]):
        if isinstance(count, int) and not isinstance(count, bool) and count > len(hosts):
            names = ", ".join(h.name for h in hosts)
            raise loader.fail(
                where + (f"[{i}]" if isinstance(value, list) else ""),
                f"{count} hosts asked, the test bed has {len(hosts)} ({names}): "
                f"expected 1 to {len(hosts)}",
            )


def load_scenario(path: Path) -> Scenario:
    """Read and validate a scenario file; ScenarioError on the first problem."""
    loader = _Loader(path)
    try:
        doc = tomllib.loads(path.read_text())
    except OSError as exc:
        raise loader.fail("", f"cannot read: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise loader.fail("", f"invalid TOML: {exc}") from None
    for key in doc:
        if key not in TOP_KEYS:
            raise loader.fail(key, f"unknown key (allowed: {', '.join(TOP_KEYS)})")
    name = doc.get("name", path.stem)
    description = doc.get("description", "")
    for key, value in (("name", name), ("description", description)):
        if not isinstance(value, str):
            raise loader.fail(key, f"expected a string, got {_type_name(value)}")
    if not name.strip():
        raise loader.fail("name", "must not be empty")
    defaults = loader.table(doc, "defaults")
    loader.check_keys(defaults, "defaults", RUN_KEYS)
    check_streams = loader.check_streams(doc.get("testbed_check", False))
    matrix = loader.table(doc, "matrix")
    options = {o for b in BENCHMARKS.values() for o in b.options}
    matrix_bench = None if "benchmark" in matrix else defaults.get("benchmark", DEFAULT_BENCHMARK)
    groups: dict[str, list[dict[str, Any]]] = {}
    for key, values in matrix.items():
        if isinstance(values, list) and values and all(isinstance(v, dict) for v in values):
            groups[key] = loader.matrix_group(key, values, matrix)
            continue
        if key not in MATRIX_KEYS and key not in options:
            allowed = ", ".join([*MATRIX_KEYS, *sorted(options)])
            raise loader.fail(f"matrix.{key}", f"unknown key (allowed: {allowed})")
        if not isinstance(values, list) or not values:
            raise loader.fail(f"matrix.{key}", "expected a non-empty array")
        if key not in MATRIX_KEYS:
            loader.matrix_option(key, values, matrix_bench)
            continue
        for i, value in enumerate(values):
            problem = _check_common(key, value)
            if problem:
                raise loader.fail(f"matrix.{key}[{i}]", problem)
    runs_table = doc.get("run", [])
    if not isinstance(runs_table, list) or not all(isinstance(r, dict) for r in runs_table):
        raise loader.fail("run", "expected an array of tables ([[run]])")
    requests: list[BenchRequest] = []
    if matrix:
        for i, values in enumerate(itertools.product(*matrix.values())):
            combo = dict(zip(matrix, values))
            flat: dict[str, Any] = {}
            for key, value in combo.items():  # a group's table sets several keys at once
                if key in groups:
                    flat.update((k, v) for k, v in value.items() if k != "label")
                else:
                    flat[key] = value
            merged = {**defaults, **flat, "label": _matrix_label(combo)}
            requests.append(loader.request(merged, f"matrix (combination {i + 1})", name))
    for i, run in enumerate(runs_table):
        loader.check_keys(run, f"run[{i}]", RUN_KEYS)
        requests.append(loader.request({**defaults, **run}, f"run[{i}]", name))
    network = parse_network(doc["network"], loader.fail) if "network" in doc else None
    if not requests and network is None:
        raise loader.fail("", "no runs: add a [matrix] table or [[run]] tables (or a [network])")
    # A table is local (its runs stay on this machine) when it, or the [defaults] it inherits,
    # says testbed = false; the [matrix] follows [defaults].
    on_bed = defaults.get("testbed", True)
    tables = [("defaults", defaults, on_bed), ("matrix", matrix, on_bed)]
    tables += [
        (f"matrix.{key}[{i}]", t, on_bed)
        for key, group in groups.items()
        for i, t in enumerate(group)
    ]
    tables += [(f"run[{i}]", r, r.get("testbed", on_bed)) for i, r in enumerate(runs_table)]
    for where, table, bed in tables:
        for key in table:
            if network is not None and bed and key in LOCAL_ONLY_KEYS:
                raise loader.fail(
                    f"{where}.{key}",
                    f"not for a scenario with a [network]: its runs go {placement_text()} "
                    f"over the emulated network (use ppn for ranks per host; {LOCAL_RUN} "
                    "keeps a run on this machine)",
                )
            if network is not None and not bed and key in NETWORK_ONLY_KEYS and key != "testbed":
                raise loader.fail(
                    f"{where}.{key}",
                    f"not for a run with {LOCAL_RUN}: it runs on this machine (transport, np)",
                )
            if (
                network is None
                and key in NETWORK_ONLY_KEYS
                and (key, table[key]) != ("launch", "mpi")
            ):
                raise loader.fail(f"{where}.{key}", NETWORK_ONLY_KEYS[key])
            if network is not None and key == "hosts":
                check_hosts(loader, f"{where}.{key}", table[key], network)
            if network is not None and key == "site":
                check_site(loader, f"{where}.{key}", table[key], network)
            if network is not None and key in ("network", "wan_delay"):
                check_variant(loader, f"{where}.{key}", key, table[key], network)
    matrix_runs = len(requests) - len(runs_table)
    local = [on_bed is False] * matrix_runs + [
        r.get("testbed", on_bed) is False for r in runs_table
    ]
    if network is not None:
        requests = [
            r if here else replace(r, scenario=path, transport="tcp")
            for r, here in zip(requests, local)
        ]
        for i, req in enumerate(requests):
            if local[i]:  # [defaults] keys of test-bed runs do not apply to it
                requests[i] = replace(
                    req, ppn=None, hosts=None, site=None, network_variant=None, wan_delay_s=None
                )
    elif check_streams:
        raise loader.fail("testbed_check", "needs a [network] (the test bed to measure)")
    seen: dict[str, int] = {}
    for i, req in enumerate(requests):
        on_testbed = req.scenario is not None
        label = req.label or (req.mpi if on_testbed else f"{req.mpi}-{req.transport}")
        if slug(label) in seen:
            first = seen[slug(label)] + 1
            raise loader.fail(f"run {i + 1}", f"label '{label}' repeats run {first}; set label")
        seen[slug(label)] = i
        if network is not None and on_testbed:
            check_site_hosts(loader, f"run {i + 1} ({label})", req, network)
        check_grid(loader, f"run {i + 1} ({label})", req, network)
        try:
            requests[i], _ = resolve_ranks(replace(req, label=label))
        except UsageError as exc:
            raise loader.fail(f"run {i + 1} ({label})", str(exc)) from None
    return Scenario(name, description, path, tuple(requests), network, check_streams)
