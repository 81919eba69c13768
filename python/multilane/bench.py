"""One benchmark run: check everything up front, launch it with progress, then validate and
store its result JSON (with the launch provenance) and its output log."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from . import hostload, paths
from . import mpi as mpimod
from .benchmarks import Benchmark, get_benchmark, security_of
from .context import Context
from .errors import MultilaneError, RunError, UsageError
from .launchers import HOSTS_COMMANDS, LaunchCommand, launcher_for
from .results import (
    SKIP_SCHEMA,
    ResultError,
    format_problems,
    problems,
    read_json,
    write_result,
)
from .runner import RunResult, run_streaming
from .testbed import launch as tblaunch
from .testbed.launch import TestbedRun
from .testbed.topology import format_time

DEFAULT_TIMEOUT_S = 1800.0
CONFIG_PROGRAM = "mln-config"
CHECK_TIMEOUT_S = 30.0
EXIT_MEANING: Mapping[int, str] = MappingProxyType(
    {
        1: "wrong data, verdict FAIL",
        2: "usage or start-up error",
        3: "failure while running",
    }
)
# A program that cannot measure here (mln-matmul --gpu, mln-gpu-transfer without a GPU) exits
# with the status Automake and CTest take for "skipped": neither a pass nor a failure.
EXIT_SKIPPED = 77
GB = 1e9  # bytes (docs/METRICS.md: decimal units)
CPU_SCOPE = (
    "user + system CPU time of the launcher and of every process it waited for (the ranks, "
    "helper ranks, MPI daemons and proxies), for the whole run: start-up, every test and size, "
    "warm-ups, data validation; per GB of the payload the tests moved between pair partners "
    "(timed and warm-up iterations, GB = 10^9 B)"
)


@dataclass(frozen=True)
class BenchRequest:
    """What to run, as given on the command line or by one scenario run."""

    benchmark: str
    mpi: str | None = None
    np: int | None = None  # None: the default (resolve_ranks); on a test bed: sites x ppn
    transport: str = "shm"
    options: Mapping[str, object] = field(default_factory=dict)
    extra_args: tuple[str, ...] = ()
    timeout_s: float | None = DEFAULT_TIMEOUT_S
    label: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    meta: Mapping[str, str] = field(default_factory=dict)  # more --meta KEY=VALUE
    scenario: Path | None = None  # run across the hosts of this scenario's live test bed
    ppn: int | None = None  # ranks per test-bed host; None: the default (resolve_ranks)
    hosts: int | None = None  # only the first N test-bed hosts, in site order; None: placement
    site: str | None = None  # only the hosts of this test-bed site; None: placement
    # The test bed's network as this run wants it ("private", "direct": topology.VARIANTS;
    # None: as written) and its WAN links' one-way delay (None: the scenario's); the runner
    # brings the test bed up per network and sets the delay before the run.
    network_variant: str | None = None
    wan_delay_s: float | None = None
    # How the ranks start: "mpi" (one MPI job, the MPI's own launcher) or "grid" (one MPI job
    # per private site joined by gateways: `multilane grid run`, `trunks` gateways per site;
    # `mpi` may then name one per site: "a=openmpi,b=mpich").
    launch: str = "mpi"
    trunks: int | None = None


LAUNCHES = ("mpi", "grid")
MAX_TRUNKS = 64  # mln-gateway's MLN_RELAY_MAX_TRUNKS


def per_site_mpis(text: str | None) -> dict[str, str] | None:
    """An `mpi` value that names one MPI per site ("a=openmpi,b=mpich", for a grid launch)
    as {site: MPI}; None for a plain MPI name (or None).  ValueError when it is malformed."""
    if text is None or "=" not in text:
        return None
    found: dict[str, str] = {}
    for item in text.split(","):
        site, eq, mpi = (part.strip() for part in item.partition("="))
        if not eq or not site or not mpi or site in found:
            raise ValueError(f"expected one MPI per site such as a=openmpi,b=mpich, got {text!r}")
        found[site] = mpi
    return found


def request_mpis(request: BenchRequest) -> list[str | None]:
    """The MPIs a request runs under: its `mpi`, or each site's (once each, in order)."""
    per_site = per_site_mpis(request.mpi)
    return [request.mpi] if per_site is None else list(dict.fromkeys(per_site.values()))


@dataclass(frozen=True)
class PreparedRun:
    """A request with every check passed and its launch command built."""

    request: BenchRequest
    benchmark: Benchmark
    install: mpimod.MpiInstall
    label: str
    json_path: Path
    log_path: Path
    launch: LaunchCommand
    testbed: TestbedRun | None = None
    note: str = ""  # how the ranks were chosen, when the benchmark chose them
    grid: Any = None  # a grid launch (grid_bench.GridLaunch): multilane grid run, in-process

    @property
    def tag(self) -> str:
        """Progress prefix, e.g. openmpi/tcp, openmpi/grid:8 (a grid launch, 8 trunks)."""
        if self.grid is not None:
            return f"{self.request.mpi or self.install.name}/grid:{self.request.trunks}"
        return f"{self.install.name}/{self.request.transport}"

    def describe(self) -> str:
        """The command as a shell would read it, environment first."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.launch.env.items())
        return (env + " " if env else "") + shlex.join(self.launch.argv)


@dataclass(frozen=True)
class RunOutcome:
    """How one run ended and where its files are.  A skipped run (exit EXIT_SKIPPED: it
    cannot measure on this machine) is neither ok nor failed; its json_path is the skip
    record."""

    prepared: PreparedRun
    ok: bool
    message: str
    returncode: int | None
    json_path: Path | None
    log_path: Path
    duration_s: float
    skipped: bool = False

    @property
    def failed(self) -> bool:
        return not self.ok and not self.skipped


def slug(text: str) -> str:
    """A file-name-safe form of a label."""
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", text).strip("._") or "run"


DEFAULT_NP = 2
DEFAULT_PPN = 1


def resolve_ranks(request: BenchRequest) -> tuple[BenchRequest, str]:
    """The request with its rank counts filled in, and a note ('' if none) saying how they
    follow from the benchmark's options; UsageError when a given count conflicts.

    Without helper ranks: np 2 on one machine, ppn 1 on a test bed.  With helper:K lanes
    (stripe) the library takes K ranks at the end of each host's ranks as helpers, so one
    benchmark pair needs K + 1 ranks per host on a test bed (np = sites x (K + 1)) and
    2 + K ranks on one machine."""
    bench = get_benchmark(request.benchmark)
    helpers = bench.helpers_per_host(request.options)
    lanes = request.options.get("lanes", "")
    ranks = f"{helpers} helper rank{'s' if helpers != 1 else ''}"
    if request.scenario is not None:
        if not helpers:
            return replace(request, ppn=request.ppn or DEFAULT_PPN), ""
        need = 1 + helpers
        if request.ppn is not None and request.ppn != need:
            raise UsageError(
                f"lanes {lanes} needs {need} ranks per host (1 benchmark rank + {ranks}), "
                f"got ppn {request.ppn}: leave ppn out, it is set for you"
            )
        note = (
            f"lanes {lanes}: {need} ranks per host (1 benchmark rank + {ranks} the library "
            "takes from the end of each host's ranks)"
        )
        return replace(request, ppn=need), note
    if not helpers:
        return replace(request, np=request.np or DEFAULT_NP), ""
    need = 2 + helpers
    if request.np is not None and request.np != need:
        raise UsageError(
            f"lanes {lanes} needs {need} ranks on one host (a benchmark pair + {ranks}), "
            f"got np {request.np}: leave np out, it is set for you"
        )
    note = f"lanes {lanes}: {need} ranks (a benchmark pair + {ranks})"
    return replace(request, np=need), note


def check_tunables(ctx: Context, install_name: str, env: Mapping[str, str]) -> None:
    """Run mln-config --check; UsageError with its one line when an MLN_* value is invalid."""
    program = paths.program_path(ctx.root, install_name, CONFIG_PROGRAM)
    if not program.exists():
        raise UsageError(f"{CONFIG_PROGRAM} is not built for {install_name}: run make build")
    try:
        proc = subprocess.run(  # noqa: S603 - argument list, no shell
            [str(program), "--check"],
            env={**ctx.env, **env},
            capture_output=True,
            text=True,
            timeout=CHECK_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise UsageError(f"cannot run {program} --check: {exc}") from None
    if proc.returncode != 0:
        lines = (proc.stderr + proc.stdout).strip().splitlines()
        reason = lines[0] if lines else f"{CONFIG_PROGRAM} --check exited {proc.returncode}"
        raise UsageError(reason.removeprefix("mln-config: error: "))


def prepare(request: BenchRequest, ctx: Context, out_dir: Path) -> PreparedRun:
    """Check a request (benchmark, MPI, build, tunables, options) and build its command.

    Raises UsageError with one line on the first problem; nothing is started."""
    if request.launch == "grid":
        from .grid_bench import prepare_grid  # noqa: PLC0415 - grid imports this module

        return prepare_grid(request, ctx, out_dir)
    bench = get_benchmark(request.benchmark)
    install = mpimod.resolve(request.mpi, ctx.root, ctx.env, bench.program)
    launcher = launcher_for(install.flavour, Path(install.prefix))
    option_args = bench.option_args(request.options)
    request = with_option_env(request, bench)
    request, note = resolve_ranks(request)
    testbed = _testbed_run(request, ctx, bench.name)
    if testbed is not None:
        request = replace(request, np=testbed.placement.np, transport="tcp")
        if note or request.hosts is not None or request.site is not None:
            on = len(testbed.placement.hosts)
            note += f"{'; ' if note else ''}{testbed.placement.np} ranks on {on} host"
            note += "s" if on != 1 else ""
            whose = "the test bed's" if request.site is None else f"site {request.site}'s"
            if request.hosts is not None:
                note += f" (hosts = {request.hosts}: the first of {whose})"
            elif request.site is not None:
                note += f" (site = {request.site}: all of its hosts)"
        split = site_split(bench, request, testbed)
        if split is not None:
            request = replace(request, options={**request.options, bench.site_split: split})
            option_args = bench.option_args(request.options)
    assert request.np is not None
    if request.np < bench.min_ranks:
        raise UsageError(f"{bench.name} needs at least {bench.min_ranks} ranks, got {request.np}")
    check_tunables(ctx, install.name, request.env)
    where = request.transport if testbed is None else Path(testbed.scenario).stem
    lanes, security = request.options.get("lanes"), request.options.get("security")
    label = request.label or "-".join(str(p) for p in (install.name, lanes, security, where) if p)
    json_path = out_dir / f"{slug(label)}.json"
    program = paths.program_path(ctx.root, install.name, bench.program)
    meta = {
        **request.meta,
        "mpi": install.name,
        "transport": request.transport,
        "np": str(request.np),
        "label": label,
    }
    if "lanes" in request.options:
        meta["lanes"] = bench.options["lanes"].check(request.options["lanes"])
    if "security" in bench.options:  # what the ranks run in: the option, the caller's, default
        meta["link_security"] = security_of({**ctx.env, **request.env})
    if testbed is not None:
        meta["testbed"] = Path(testbed.scenario).stem
        meta["hosts"] = ",".join(testbed.placement.hosts)
        meta["nic_rate"] = testbed.nic_rate  # reports name the link by it (matmul_report)
        if request.site is not None:
            meta["site"] = request.site
        if request.network_variant is not None:
            meta["network"] = request.network_variant
        if request.wan_delay_s is not None:
            meta["wan_delay"] = format_time(request.wan_delay_s)
        if request.network_variant is not None:  # seed 004: direct against relayed runs
            meta["launch"] = "mpi"
            wan = wan_rate_text(testbed.bed)
            if wan:
                meta["wan_rate"] = wan
    program_argv = [str(program), *option_args]
    for key, value in meta.items():
        program_argv += ["--meta", f"{key}={value}"]
    program_argv += ["--json", str(json_path), *request.extra_args]
    if testbed is None:
        launch = launcher.command(
            program_argv, request.np, request.transport, ncpus=ctx.ncpus, euid=ctx.euid
        )
    else:
        hosts_command = HOSTS_COMMANDS[install.flavour]
        launch = hosts_command(
            Path(install.prefix), program_argv, testbed.placement, euid=ctx.euid, ncpus=ctx.ncpus
        )
        launch = LaunchCommand(tuple(testbed.wrap(launch.argv)), launch.env)
    launch = LaunchCommand(launch.argv, {**request.env, **launch.env})
    log_path = json_path.with_suffix(".log")
    return PreparedRun(request, bench, install, label, json_path, log_path, launch, testbed, note)


def site_split(bench: Benchmark, request: BenchRequest, testbed: TestbedRun) -> int | None:
    """For a benchmark whose ranks are two sites (relay's --split: the first rank of site b),
    when the request does not set it: the ranks of the placement's first site (its hosts
    come first, ppn ranks each); None otherwise or when the placement is in one site."""
    if bench.site_split is None or bench.site_split in request.options or testbed.sites < 2:
        return None
    hosts = testbed.placement.hosts
    first = testbed.bed.host(hosts[0]).site
    return sum(testbed.bed.host(h).site == first for h in hosts) * testbed.placement.ppn


def wan_rate_text(bed: Any) -> str:
    """The WAN links' rate as the scenario wrote it ("1gbit"; each distinct one joined by
    commas; "" when the test bed has no WAN link or records no rate)."""
    from .testbed.topology import format_rate  # noqa: PLC0415

    rates = []
    for wan in bed.state.wan:
        bps = wan.get("ab", {}).get("rate_bps")
        if isinstance(bps, (int, float)):
            rates.append(format_rate(int(bps)) if bps else "unlimited")
    return ",".join(dict.fromkeys(rates))


def with_option_env(request: BenchRequest, bench: Benchmark) -> BenchRequest:
    """The request with the ranks' environment that its options set (stripe's security: the
    MLN_LINK_* tunables) added to its env; UsageError when its env sets one of those
    variables to another value."""
    added: dict[str, str] = {}
    for key, value in request.options.items():
        option = bench.options.get(key)
        if option is None or option.env is None:
            continue
        env = bench.option_env({key: value})
        for name, text in env.items():
            given = request.env.get(name, text)
            if given != text:
                raise UsageError(
                    f"env sets {name}={given}, {key} = {value!r} sets {name}={text}: "
                    "give one of them"
                )
        added.update(env)
    return replace(request, env={**request.env, **added}) if added else request


def _testbed_run(request: BenchRequest, ctx: Context, name: str) -> TestbedRun | None:
    """The test-bed placement of a request with a scenario (None without one)."""
    if request.scenario is None:
        return None
    from .scenario import load_scenario  # noqa: PLC0415 - avoids an import cycle

    scenario = load_scenario(request.scenario)
    if scenario.network is None:
        raise UsageError(f"{request.scenario}: no [network] table: not a test-bed scenario")
    if ctx.euid != 0:
        raise UsageError("runs on the test bed need root (network namespaces): run as root")
    ppn = request.ppn or DEFAULT_PPN
    every_host = get_benchmark(request.benchmark).every_host
    try:
        network = scenario.network.variant(request.network_variant or scenario.network.variant_name)
    except ValueError as exc:
        raise UsageError(f"{request.scenario}: network {request.network_variant}: {exc}") from None
    return tblaunch.placement(
        ctx,
        request.scenario,
        network,
        ppn,
        name,
        every_host=every_host,
        hosts=request.hosts,
        site=request.site,
    )


class ProgressEcho:
    """Echoes a benchmark's table rows with a prefix: the two header lines just before the
    first row, every row, error text and the verdict; not the provenance block."""

    def __init__(self, ctx: Context, prefix: str) -> None:
        self._ctx = ctx
        self._prefix = prefix
        self._comments: list[str] = []
        self._rows = 0
        self.first_error = ""  # the first line that says "error", for the summary
        self.skip_reason = ""  # what follows "skipped: " in the program's first such line

    def __call__(self, line: str) -> None:
        if not line.strip():
            return
        if not self.first_error and "error" in line.lower() and not line.startswith("#"):
            self.first_error = " ".join(line.split())
        if not self.skip_reason and "skipped: " in line:
            self.skip_reason = " ".join(line.split("skipped: ", 1)[1].split())
        if line.startswith("#") and not line.startswith("# verdict"):
            self._comments = [*self._comments[-1:], line]
            return
        if self._rows == 0 and not line.startswith("#"):
            for header in self._comments:
                self._ctx.say(f"{self._prefix}{header}")
        self._rows += 1
        self._ctx.say(f"{self._prefix}{line}")


def _with_warmups(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The result with each row's iters raised by the warm-up iterations of a repetition
    (params.warmup; "auto": max(1, iters / 10), as the harness does), so that payload_bytes
    counts every iteration that moved data."""
    warm = str(doc["provenance"]["params"].get("warmup", "auto"))

    def more(iters: int) -> int:
        return iters + (int(warm) if warm.isdigit() else max(1, iters // 10))

    return {**doc, "rows": [{**row, "iters": more(int(row["iters"]))} for row in doc["rows"]]}


def cpu_record(prepared: PreparedRun, doc: Mapping[str, Any], result: RunResult) -> dict[str, Any]:
    """provenance.cpu: the run's CPU seconds (RunResult) and, for a benchmark whose payload
    is known, the CPU seconds per GB it moved (cpu_s_per_gb; see CPU_SCOPE)."""
    record: dict[str, Any] = {
        "user_s": round(result.cpu_user_s, 3),
        "sys_s": round(result.cpu_sys_s, 3),
        "cpu_s": round(result.cpu_s, 3),
    }
    payload = prepared.benchmark.payload
    try:
        moved = tblaunch.payload_bytes(_with_warmups(doc), payload) if payload else 0
    except (KeyError, TypeError, ValueError):  # a row without the column a factor names
        moved = 0
    if moved > 0:
        record["payload_bytes"] = moved
        record["cpu_s_per_gb"] = round(result.cpu_s / (moved / GB), 4)
    record["scope"] = CPU_SCOPE
    return record


def _finish_json(
    prepared: PreparedRun,
    result: RunResult,
    grid: Mapping[str, Any] | None = None,
    host: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any] | None, str]:
    """Validate the program's JSON and add the launch provenance, the run's CPU time, the
    machine's steal over the run (hostload.host_record) and, for a grid launch, the grid's
    record (sites, gateways and their frames per trunk); (doc, problem)."""
    path = prepared.json_path
    if not path.exists():
        return None, f"{prepared.benchmark.program} wrote no result file ({path})"
    try:
        doc = read_json(path)
    except ResultError as exc:
        return None, str(exc)
    found = problems(doc)
    if found:
        return None, format_problems(path, found)
    doc["provenance"]["launch"] = {
        "argv": list(prepared.launch.argv),
        "env": dict(prepared.launch.env),
    }
    doc["provenance"]["cpu"] = cpu_record(prepared, doc, result)
    if host is not None:
        doc["provenance"]["host"] = dict(host)
    if grid is not None:
        doc["provenance"]["grid"] = dict(grid)
    write_result(path, doc)
    return doc, ""


def _clean_hosts(prepared: PreparedRun) -> str:
    """After a failed test-bed run: stop what it left in the hosts; a note, or ''."""
    if prepared.testbed is None:
        return ""
    stopped = prepared.testbed.bed.stop_host_processes()
    return f"; stopped {len(stopped)} processes it left in the test-bed hosts" if stopped else ""


def _prove_crossing(prepared: PreparedRun, doc: dict[str, Any], before: int) -> str:
    """Record the test-bed placement and the delay lines' bytes in the result; a problem
    when fewer bytes crossed the emulated link than the benchmark moved."""
    run = prepared.testbed
    assert run is not None
    moved = tblaunch.payload_bytes(doc, prepared.benchmark.payload)
    record, problem = tblaunch.crossed_link(run, before, moved)
    doc["provenance"]["testbed"] = {**run.to_json(), **record}
    write_result(prepared.json_path, doc)
    return problem


def execute(prepared: PreparedRun, ctx: Context, prefix: str | None = None) -> RunOutcome:
    """Launch a prepared run with progress, then validate and complete its JSON."""
    prepared.json_path.parent.mkdir(parents=True, exist_ok=True)
    request = prepared.request
    echo = ProgressEcho(ctx, f"[{prepared.tag}] " if prefix is None else prefix)
    wan_before = prepared.testbed.wan_tx_bytes() if prepared.testbed is not None else 0
    cpu_before = hostload.sample()
    grid_record: dict[str, Any] | None = None
    if prepared.grid is not None:
        from .grid_bench import run_grid_streaming  # noqa: PLC0415 - grid imports this module

        result, grid_record = run_grid_streaming(prepared, ctx, echo)
    else:
        result = run_streaming(
            prepared.launch.argv,
            env={**ctx.env, **prepared.launch.env},
            timeout_s=request.timeout_s,
            log_path=prepared.log_path,
            on_line=echo,
            watchdog=prepared.testbed.watchdog if prepared.testbed is not None else None,
        )
    host = hostload.host_record(cpu_before, hostload.sample())
    log = paths.display(prepared.log_path)
    if result.aborted or result.timed_out:
        reason = result.aborted or f"timed out after {request.timeout_s:g} s"
        message = f"{prepared.label}: stopped: {reason} (log: {log})" + _clean_hosts(prepared)
        return RunOutcome(
            prepared, False, message, None, None, prepared.log_path, result.duration_s
        )
    if result.returncode == EXIT_SKIPPED:
        return _skipped(prepared, echo.skip_reason, result.duration_s)
    doc, problem = _finish_json(prepared, result, grid_record, host)
    if doc is not None and prepared.testbed is not None and not problem:
        problem = _prove_crossing(prepared, doc, wan_before)
    json_path = prepared.json_path if doc is not None else None
    program = prepared.benchmark.program
    if result.returncode != 0:
        why = EXIT_MEANING.get(result.returncode or 0, "see the log")
        message = f"{prepared.label}: {program} exited with status {result.returncode} ({why})"
        if grid_record is not None and grid_record.get("failure"):
            message = f"{prepared.label}: {grid_record['failure']}"
        elif echo.first_error:
            message += f": {echo.first_error}"
        ok = False
    elif problem:
        message, ok = f"{prepared.label}: {problem}", False
    elif doc is not None and doc["status"] != "pass":
        message, ok = f"{prepared.label}: status {doc['status']}", False
    else:
        message, ok = f"{prepared.label}: ok", True
    if not ok:
        message += f" (log: {log})" + _clean_hosts(prepared)
    return RunOutcome(
        prepared, ok, message, result.returncode, json_path, prepared.log_path, result.duration_s
    )


def skip_path(prepared: PreparedRun) -> Path:
    """Where the skip record of a run goes: <label>.skipped.json beside its result file."""
    return prepared.json_path.with_suffix(".skipped.json")


def _skipped(prepared: PreparedRun, reason: str, duration_s: float) -> RunOutcome:
    """A run whose program exited EXIT_SKIPPED: store a skip record for the report (which
    reads JSON only) and say why, e.g. "openmpi-gpu: skipped: no GPU (...)"."""
    reason = reason or f"the program exited {EXIT_SKIPPED} (skipped) without saying why"
    request = prepared.request
    record = {
        "schema": SKIP_SCHEMA,
        "data_version": 1,
        "benchmark": prepared.benchmark.name,
        "label": prepared.label,
        "reason": reason,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "mpi": prepared.install.name,
        "transport": request.transport,
        "np": request.np,
        "options": {k: str(v) for k, v in request.options.items()},
        "args": list(request.extra_args),
        "launch": {"argv": list(prepared.launch.argv), "env": dict(prepared.launch.env)},
        "log": prepared.log_path.name,
    }
    path = skip_path(prepared)
    path.write_text(json.dumps(record, indent=2) + "\n")
    message = f"{prepared.label}: skipped: {reason}"
    return RunOutcome(
        prepared, False, message, EXIT_SKIPPED, path, prepared.log_path, duration_s, True
    )


def new_results_dir(base: Path, name: str, now: float | None = None) -> Path:
    """A results/<YYYYmmdd-HHMMSS>-<name>/ path that does not exist yet (suffixed -2, -3...
    when taken); create it with make_results_dir once every check has passed."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    for n in range(1, 1000):
        candidate = base / f"{stamp}-{slug(name)}{'' if n == 1 else f'-{n}'}"
        if not candidate.exists():
            return candidate
    raise RunError(f"cannot find a free results folder name under {base}")


def make_results_dir(path: Path) -> None:
    """Create a results folder chosen by new_results_dir; RunError if it cannot be made."""
    try:
        path.mkdir(parents=True)
    except OSError as exc:
        raise RunError(f"cannot create {path}: {exc.strerror or exc}") from None


def run_benches(
    requests: Sequence[BenchRequest],
    ctx: Context,
    results_base: Path,
    copy_to: Path | None = None,
) -> list[RunOutcome]:
    """`multilane bench`: prepare (all checks), run, store, copy (`copy_to`: with one request
    only, which the CLI checks before a test bed comes up).
    One run per request (stripe --security none,auth,aead: one per mode): every run checked
    before the first starts, all into one folder, each to its end even when one fails; with
    several, then the folder's report (as `multilane run` makes it).  RunError at the end
    when any run failed."""
    out_dir = new_results_dir(results_base, requests[0].benchmark)
    prepared = [prepare(r, ctx, out_dir) for r in requests]  # every check, before the folder
    names = [p.json_path.name for p in prepared]
    if len(set(names)) != len(names):
        raise UsageError(f"two runs would write the same result file: {', '.join(names)}")
    make_results_dir(out_dir)
    outcomes = []
    for i, run in enumerate(prepared, 1):
        prefix = None if len(prepared) == 1 else f"({i}/{len(prepared)} {run.tag}) "
        outcomes.append(_bench_one(run, ctx, out_dir, copy_to, prefix))
    if len(outcomes) > 1 and any(o.json_path is not None and not o.skipped for o in outcomes):
        _report(out_dir, ctx)
    failed = [o for o in outcomes if o.failed]
    if failed:
        raise RunError("; ".join(o.message for o in failed))
    return outcomes


def _bench_one(
    prepared: PreparedRun, ctx: Context, out_dir: Path, copy_to: Path | None, prefix: str | None
) -> RunOutcome:
    """One run of `bench` with its progress and where its files went."""
    ranks = prepared.request.np
    ctx.say(f"multilane: {prepared.benchmark.name} on {prepared.tag}, {ranks} ranks")
    if prepared.note:
        ctx.say(f"multilane: {prepared.note}")
    ctx.say(f"multilane: {prepared.describe()}")
    outcome = execute(prepared, ctx, prefix)
    if outcome.skipped:
        ctx.say(f"multilane: {outcome.message}")
        ctx.say(f"multilane: skip record: {paths.display(outcome.json_path or out_dir)}")
        ctx.say(f"multilane: log: {paths.display(outcome.log_path)}")
        return outcome
    if outcome.json_path is not None:
        ctx.say(f"multilane: result: {paths.display(outcome.json_path)}")
        if copy_to is not None:
            copy_to.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(outcome.json_path, copy_to)
            ctx.say(f"multilane: copied to {paths.display(copy_to)}")
    ctx.say(f"multilane: log: {paths.display(outcome.log_path)}")
    return outcome


def _report(out_dir: Path, ctx: Context) -> None:
    """The report of a folder of several runs, printed (a failure to make it is a note)."""
    from .experiment import print_report  # noqa: PLC0415 - matplotlib only when needed
    from .report import make_report  # noqa: PLC0415

    try:
        print_report(make_report(out_dir), ctx)
    except MultilaneError as exc:
        ctx.say(f"multilane: report failed: {exc}")
