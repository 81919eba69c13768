"""Benchmark runs across private sites (`launch = "grid"` in a scenario, seed 004): the same
benchmark program as a stock run, started by `multilane grid run` (grid.py: one MPI job per
private site of the live test bed, `trunks` gateways per site on the front-ends), in this
process, with everything a benchmark run has: the log and the progress echo, the timeout, the
delay-line watchdog, the CPU time, the schema-checked result JSON and the proof that its bytes
crossed the emulated WAN (bench.execute).

The result's provenance gets `grid`: the run's record as `multilane grid run --json` writes
it (sites with their ranks, MPI and version; gateways with host, addresses, exit code and,
from their summary line at exit, the frames and bytes each sent to and received from every
peer gateway and rank: per trunk, what crossed), and `launch.argv` the `multilane grid run`
command that repeats the run by hand."""

from __future__ import annotations

import resource
import shlex
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from . import grid as gridmod
from . import mpi as mpimod
from . import paths
from .bench import (
    BenchRequest,
    PreparedRun,
    per_site_mpis,
    request_mpis,
    resolve_ranks,
    slug,
    wan_rate_text,
    with_option_env,
)
from .benchmarks import get_benchmark
from .context import Context
from .errors import RunError, UsageError
from .grid_run import EXIT_TERMINATED, EXIT_TIMEOUT, RunOptions
from .launchers import HostPlacement, LaunchCommand
from .runner import RunResult
from .testbed.bed import SiteInfo, Testbed
from .testbed.launch import TestbedRun
from .testbed.topology import format_rate, format_time

GATEWAY_LOG = "info"  # the gateways' summary line at exit (frames per peer and rank)


@dataclass(frozen=True)
class GridLaunch:
    """The grid run of a prepared benchmark run: the request and its plan."""

    request: gridmod.GridRequest
    plan: gridmod.GridPlan


def grid_sites(bed: Testbed) -> list[SiteInfo]:
    """The sites a grid run spans: private, with compute hosts and front-ends (as grid.py)."""
    return [s for s in bed.sites if s.private and s.frontends and s.compute]


def _live_bed(request: BenchRequest, ctx: Context) -> Testbed:
    if ctx.euid != 0:
        raise UsageError("runs on the test bed need root (network namespaces): run as root")
    bed = Testbed.load(ctx)
    if bed is None:
        raise UsageError(f"no test bed is up: run multilane testbed up {request.scenario}")
    return bed


def _rates(bed: Testbed, hosts: list[str], key: str) -> str:
    """The distinct rates (bit/s) recorded under `key` for these hosts, as "125mbit"."""
    found = []
    for host in bed.state.hosts:
        if host["name"] in hosts:
            bps = int(host.get(key, 0) or 0)
            found.append(format_rate(bps) if bps else "unlimited")
    return ",".join(dict.fromkeys(found))


def prepare_grid(request: BenchRequest, ctx: Context, out_dir: Path) -> PreparedRun:
    """Check a grid request (benchmark, each site's MPI and build, options, the live private
    test bed, the layer, tunables: grid.plan) and plan its run; UsageError with one line on
    the first problem.  Ranks: ppn per compute host of each site; the benchmark's site split
    (relay's --split) = the ranks of the first site."""
    bench = get_benchmark(request.benchmark)
    if request.scenario is None:
        raise UsageError('launch = "grid" needs a test-bed scenario with private sites')
    if request.network_variant == "direct":
        raise UsageError(
            'launch = "grid" runs across the private network, not network = "direct" '
            "(there one stock MPI job spans the sites)"
        )
    try:
        per_site = per_site_mpis(request.mpi)
    except ValueError as exc:
        raise UsageError(f"mpi: {exc}") from None
    installs = [mpimod.resolve(m, ctx.root, ctx.env, bench.program) for m in request_mpis(request)]
    bench.option_args(request.options)  # a bad option: one line before the test bed is read
    request = with_option_env(request, bench)
    request, note = resolve_ranks(request)
    ppn = request.ppn or 1
    bed = _live_bed(request, ctx)
    sites = grid_sites(bed)
    counts = {s.name: ppn * len(s.compute) for s in sites}
    np_text = ",".join(f"{name}={n}" for name, n in counts.items()) or None
    trunks = request.trunks
    if sites:
        fewest = min(len(s.frontends) for s in sites)
        if trunks is None or trunks > fewest:
            if trunks is not None:
                note += f"{'; ' if note else ''}trunks {trunks}: a site has {fewest} front-ends"
            trunks = fewest
    options = dict(request.options)
    if bench.site_split is not None and bench.site_split not in options and len(sites) >= 2:
        options[bench.site_split] = counts[sites[0].name]
    option_args = bench.option_args(options)
    request = replace(request, options=options, trunks=trunks, transport="tcp")
    mpi_text = request.mpi or installs[0].name
    label = request.label or f"{mpi_text}-grid-trunks{trunks}"
    json_path = out_dir / f"{slug(label)}.json"
    hosts = [h.name for s in sites for h in s.compute]
    fronts = [fe.name for s in sites for fe in s.frontends[: trunks or 0]]
    meta = {
        **request.meta,
        "mpi": mpi_text,
        "transport": "tcp",
        "np": str(sum(counts.values())),
        "label": label,
        "testbed": Path(request.scenario).stem,
        "hosts": ",".join(hosts),
        "nic_rate": _rates(bed, hosts, "nic_rate_bps") or "unlimited",
        "network": "private",
        "launch": "grid",
        "trunks": str(trunks),
        "site_mpi": ",".join(
            f"{s.name}={(per_site or {}).get(s.name, installs[0].name)}" for s in sites
        ),
    }
    frontend_rate = _rates(bed, fronts, "wan_nic_rate_bps")
    if frontend_rate:
        meta["frontend_nic_rate"] = frontend_rate
    wan = wan_rate_text(bed)
    if wan:
        meta["wan_rate"] = wan
    if request.wan_delay_s is not None:
        meta["wan_delay"] = format_time(request.wan_delay_s)
    program = [str(paths.program_path(ctx.root, "{mpi}", bench.program)), *option_args]
    for key, value in meta.items():
        program += ["--meta", f"{key}={value}"]
    program += ["--json", str(json_path), *request.extra_args]
    grid_request = gridmod.GridRequest(
        program=tuple(program),
        scenario=request.scenario,
        np=np_text,
        mpi=request.mpi,
        trunks=trunks,
        env=dict(request.env),
        gateway_log=GATEWAY_LOG,
        timeout_s=request.timeout_s,
    )
    plan = gridmod.plan(grid_request, ctx)
    if plan.np < bench.min_ranks:
        raise UsageError(f"{bench.name} needs at least {bench.min_ranks} ranks, got {plan.np}")
    request = replace(request, np=plan.np, trunks=plan.trunks)
    subnets = ",".join(s.subnet for s in sites)
    place = HostPlacement(tuple(hosts), ppn, str(bed.agent), subnets, sites[0].compute[0].interface)
    rates = tuple(int(h.get("nic_rate_bps", 0) or 0) for h in bed.state.hosts if h["name"] in hosts)
    testbed = TestbedRun(
        bed, place, str(Path(request.scenario).resolve()), len(plan.sites), nic_rates=rates
    )
    launch = LaunchCommand(tuple(gridmod.command_line(grid_request)), dict(request.env))
    return PreparedRun(
        request,
        bench,
        installs[0],
        label,
        json_path,
        json_path.with_suffix(".log"),
        launch,
        testbed,
        note,
        GridLaunch(grid_request, plan),
    )


def run_grid_streaming(
    prepared: PreparedRun, ctx: Context, on_line: Callable[[str], None]
) -> tuple[RunResult, dict[str, Any]]:
    """Run a prepared grid launch to its end: every line of the jobs into the log and
    `on_line`, the gateways' lines into the log only; (how it ended, as run_streaming says it;
    the grid's record, for the result's provenance).  SIGTERM to multilane stops the run and
    then the scenario (RunError)."""
    launch: GridLaunch = prepared.grid
    testbed = prepared.testbed
    log_path = prepared.log_path
    log_path.parent.mkdir(parents=True, exist_ok=True)
    aborted: list[str] = []

    def watchdog() -> str:
        why = testbed.watchdog() if testbed is not None else ""
        if why and not aborted:
            aborted.append(why)
        return why

    start = time.monotonic()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with log_path.open("w") as log:
        log.write(f"# {shlex.join(prepared.launch.argv)}\n")
        for line in launch.plan.describe():
            log.write(f"# {line}\n")
        log.flush()

        def line_of(role: str, site: str, text: str) -> None:
            del site  # a job's lines as the program wrote them; a gateway names itself
            log.write(f"{text}\n")
            log.flush()
            if role == "job":
                on_line(text)

        options = RunOptions(
            timeout_s=launch.request.timeout_s,
            start_timeout_s=launch.request.start_timeout_s,
            on_line=line_of,
            watchdog=watchdog,
        )
        status, run = gridmod.execute(launch.plan, launch.request, ctx, options)
        for text in ([run.failure] if run.failure else []) + run.warnings:
            log.write(f"multilane grid: {text}\n")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    record = gridmod.summary(launch.plan, run, launch.request, status)
    record.pop("schema", None)
    record.pop("data_version", None)
    if status == EXIT_TERMINATED:
        raise RunError(f"{prepared.label}: {run.failure}")
    timed_out = status == EXIT_TIMEOUT and not aborted
    result = RunResult(
        None if timed_out or aborted else status,
        timed_out,
        time.monotonic() - start,
        log_path,
        aborted[0] if aborted else "",
        max(0.0, after.ru_utime - before.ru_utime),
        max(0.0, after.ru_stime - before.ru_stime),
    )
    return result, record


def trunk_bytes(record: Mapping[str, Any]) -> dict[str, dict[int, int]]:
    """From a grid record (provenance.grid): per site, per trunk, the bytes its gateway sent
    to the peer gateways (what crossed the WAN on that trunk from that site)."""
    out: dict[str, dict[int, int]] = {}
    for site in record.get("sites", []):
        for gw in site.get("gateways", []):
            peers = (gw.get("summary") or {}).get("peers", {})
            sent = sum(int(p.get("bytes_out", 0)) for p in peers.values())
            out.setdefault(str(site.get("name")), {})[int(gw.get("trunk", 0))] = sent
    return out
