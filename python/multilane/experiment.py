"""`multilane run`: every run of a scenario into one results folder, then the report."""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import mpi as mpimod
from . import paths
from .bench import (
    BenchRequest,
    PreparedRun,
    RunOutcome,
    execute,
    make_results_dir,
    new_results_dir,
    prepare,
    request_mpis,
)
from .benchmarks import get_benchmark
from .context import Context
from .errors import MultilaneError, RunError
from .report import Report, make_report
from .scenario import Scenario
from .testbed.check import streams_text
from .testbed.topology import format_time

if TYPE_CHECKING:
    from .testbed.bed import Testbed


def write_json(path: Path, doc: dict[str, Any]) -> None:
    """Strict, indented JSON."""
    path.write_text(json.dumps(doc, indent=2, allow_nan=False) + "\n")


@dataclass(frozen=True)
class ExperimentResult:
    """Where a scenario's results went and how its runs ended."""

    out_dir: Path
    outcomes: tuple[RunOutcome, ...]
    report: Report | None


CHECK_FILE = "testbed-check.json"


def plan(scenario: Scenario, ctx: Context, out_dir: Path) -> list[PreparedRun]:
    """Every run checked and its command built, before anything starts (UsageError if not)."""
    return [prepare(request, ctx, out_dir) for request in scenario.runs]


def precheck(scenario: Scenario, ctx: Context) -> None:
    """What can be checked before a test bed is brought up: each run's MPI is installed and
    its program built (UsageError if not)."""
    for request in scenario.runs:
        for mpi in request_mpis(request):
            mpimod.resolve(mpi, ctx.root, ctx.env, get_benchmark(request.benchmark).program)


def print_plan(
    scenario: Scenario, prepared: list[PreparedRun | BenchRequest], ctx: Context
) -> None:
    """The dry-run listing: one command per run (with how its ranks were chosen); a test-bed
    run planned without a live test bed (a BenchRequest) says where its ranks will go."""
    ctx.say(f"scenario {scenario.name}: {len(prepared)} runs ({paths.display(scenario.path)})")
    if scenario.network is not None and has_testbed_factors(scenario):
        for variant, delays in testbed_groups(scenario):
            steps = ", ".join(
                f"{'the scenario delay' if d is None else format_time(d)}: {len(i)} runs"
                for d, i in delays
            )
            ctx.say(f"test bed: the {variant} network; WAN delay {steps}")
    if scenario.testbed_check:
        streams = streams_text(scenario.check_streams)
        variants = [v for v, _ in testbed_groups(scenario)] if scenario.network else []
        where = (
            ", ".join(f"testbed-check-{v}.json" for v in variants)
            if len(variants) > 1
            else CHECK_FILE
        )
        each = " of each network" if len(variants) > 1 else ""
        ctx.say(f"first: testbed check{each} (RTT, loss, iperf3 with {streams}) -> {where}")
    for i, run in enumerate(prepared, 1):
        if isinstance(run, BenchRequest) and run.launch == "grid":
            trunks = (
                f"{run.trunks} trunk{'s' if run.trunks != 1 else ''}"
                if run.trunks
                else "a trunk per front-end"
            )
            where = f"every compute host, ppn {run.ppn}, {trunks}"
            if run.wan_delay_s is not None:
                where += f", WAN delay {format_time(run.wan_delay_s)}"
            ctx.say(
                f"({i}/{len(prepared)}) {run.label}: {run.benchmark} across the private sites "
                f"(multilane grid run, {run.mpi}: {where}): its command needs the test bed up "
                f"(multilane testbed up {paths.display(scenario.path)})"
            )
            continue
        if isinstance(run, BenchRequest):
            where = f"site {run.site}" if run.site else "the default placement"
            where += f", the first {run.hosts} hosts" if run.hosts else ""
            if run.network_variant is not None:
                where += f", {run.network_variant} network"
            if run.wan_delay_s is not None:
                where += f", WAN delay {format_time(run.wan_delay_s)}"
            ctx.say(
                f"({i}/{len(prepared)}) {run.label}: {run.benchmark} on the test bed ({where}, "
                f"ppn {run.ppn}): its command needs the test bed up "
                f"(multilane testbed up {paths.display(scenario.path)})"
            )
            continue
        note = f" [{run.note}]" if run.note else ""
        ctx.say(f"({i}/{len(prepared)}) {run.label}{note}: {run.describe()}")


def dry_plan(scenario: Scenario, ctx: Context, out_dir: Path) -> list[PreparedRun | BenchRequest]:
    """What a dry run can check: every run's MPI and program (precheck) and options; the
    commands of runs on this machine; those of test-bed runs only when its test bed is up
    (their placement needs the live one), else the request itself."""
    from .testbed.bed import Testbed  # noqa: PLC0415 - avoids an import cycle

    live = None if scenario.network is None else Testbed.load(ctx)
    if scenario.network is None or (live is not None and not has_testbed_factors(scenario)):
        return list(plan(scenario, ctx, out_dir))
    precheck(scenario, ctx)
    out: list[PreparedRun | BenchRequest] = []
    for request in scenario.runs:
        variant = request.network_variant or scenario.network.variant_name
        if request.scenario is None or (live is not None and live.variant == variant):
            out.append(prepare(request, ctx, out_dir))
        else:
            get_benchmark(request.benchmark).option_args(request.options)
            out.append(request)
    return out


def run_scenario(
    scenario: Scenario, ctx: Context, results_base: Path, dry_run: bool = False
) -> ExperimentResult:
    """Run a scenario; RunError at the end when any run failed (the others still run)."""
    out_dir = new_results_dir(results_base, scenario.name)
    if dry_run:  # with a [network], the test-bed commands need it up (the placement)
        print_plan(scenario, dry_plan(scenario, ctx, out_dir), ctx)
        return ExperimentResult(out_dir, (), None)
    if scenario.network is None:
        return _execute_all(scenario, plan(scenario, ctx, out_dir), ctx, out_dir)
    from .testbed.commands import testbed_for  # noqa: PLC0415 - avoids an import cycle

    precheck(scenario, ctx)
    if has_testbed_factors(scenario):
        return _execute_grouped(scenario, ctx, out_dir)
    with testbed_for(scenario.path, ctx) as bed:
        # Planned once the test bed is up: the placement needs the live one.
        return _execute_all(scenario, plan(scenario, ctx, out_dir), ctx, out_dir, bed)


def has_testbed_factors(scenario: Scenario) -> bool:
    """Whether a run sets `network` or `wan_delay` (then the runs go in testbed_groups)."""
    return any(r.network_variant is not None or r.wan_delay_s is not None for r in scenario.runs)


DelayGroup = tuple[float | None, list[int]]


def testbed_groups(scenario: Scenario) -> list[tuple[str, list[DelayGroup]]]:
    """The order of a scenario's runs on the test bed, so that it is built once per network
    variant and its WAN delay changed once per value: per variant (in the order the variants
    first appear; a run without `network` takes the scenario's own), per WAN delay (likewise;
    None: the scenario's delays), the indexes of its runs in file order.  Runs that stay on
    this machine go first, with the first group."""
    assert scenario.network is not None
    default = scenario.network.variant_name
    groups: dict[str, dict[float | None, list[int]]] = {}
    local = []
    for i, req in enumerate(scenario.runs):
        if req.scenario is None:
            local.append(i)
            continue
        variant = req.network_variant or default
        groups.setdefault(variant, {}).setdefault(req.wan_delay_s, []).append(i)
    if not groups:
        groups[default] = {None: []}
    first = next(iter(groups.values()))
    delay = next(iter(first))
    first[delay] = local + first[delay]
    return [(variant, list(delays.items())) for variant, delays in groups.items()]


def _testbed_check(
    bed: Testbed, ctx: Context, out_dir: Path, streams: tuple[int, ...], name: str = CHECK_FILE
) -> str:
    """`testbed check` (iperf3 with each of `streams` TCP stream counts) into
    out_dir/NAME (testbed-check.json); '' or why it failed."""
    from .testbed.check import check, check_document, format_rows  # noqa: PLC0415

    ctx.say(f"testbed check: RTT, loss, iperf3 with {streams_text(streams)} ...")
    try:
        rows = check(ctx, bed.state, quiet=False, streams=streams)
    except MultilaneError as exc:
        return f"testbed check failed: {exc}"
    write_json(out_dir / name, check_document(bed.state, rows))
    ctx.say(format_rows(rows))
    ctx.say(f"testbed check: {paths.display(out_dir / name)}")
    return ""


def _clock(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes}m{secs:02d}s"


def _begin(scenario: Scenario, runs: int, ctx: Context, out_dir: Path) -> None:
    make_results_dir(out_dir)
    shutil.copyfile(scenario.path, out_dir / "scenario.toml")
    ctx.say(f"scenario {scenario.name}: {runs} runs into {paths.display(out_dir)}")


def _execute_each(
    prepared: list[PreparedRun], ctx: Context, start: float, first: int, total: int
) -> list[RunOutcome]:
    """Run each prepared run, numbered from `first` of `total`."""
    outcomes = []
    for i, run in enumerate(prepared, first):
        req = run.request
        note = f" ({run.note})" if run.note else ""
        ctx.say(
            f"({i}/{total}) {run.tag.replace('/', ' ')} {run.benchmark.name} "
            f"np={req.np} [{run.label}]{note} ..."
        )
        outcome = execute(run, ctx, prefix=f"({i}/{total} {run.tag}) ")
        elapsed = _clock(time.monotonic() - start)
        ctx.say(
            f"({i}/{total}) {outcome.message} in {outcome.duration_s:.1f} s "
            f"(scenario elapsed {elapsed})"
        )
        outcomes.append(outcome)
    return outcomes


def _execute_all(
    scenario: Scenario,
    prepared: list[PreparedRun],
    ctx: Context,
    out_dir: Path,
    bed: Testbed | None = None,
) -> ExperimentResult:
    """Run every prepared run into `out_dir` (after the test-bed check when the scenario
    asks for one), then report."""
    _begin(scenario, len(prepared), ctx, out_dir)
    start = time.monotonic()
    problems = []
    if scenario.testbed_check and bed is not None:
        problem = _testbed_check(bed, ctx, out_dir, scenario.check_streams)
        if problem:
            ctx.say(f"multilane: {problem}")
            problems.append(problem)
    outcomes = _execute_each(prepared, ctx, start, 1, len(prepared))
    return _finish(scenario, outcomes, problems, ctx, out_dir)


def _execute_grouped(scenario: Scenario, ctx: Context, out_dir: Path) -> ExperimentResult:
    """The runs of a scenario whose runs set `network` or `wan_delay`, in testbed_groups
    order: the test bed brought up per network variant (checked first when the scenario
    asks: testbed-check.json, or testbed-check-VARIANT.json with several variants), each
    group's runs planned once it is up, the WAN delay set before each delay group and the
    scenario's delays restored after the variant's last."""
    from .testbed.commands import testbed_for  # noqa: PLC0415 - avoids an import cycle

    groups = testbed_groups(scenario)
    total = len(scenario.runs)
    _begin(scenario, total, ctx, out_dir)
    start = time.monotonic()
    problems: list[str] = []
    outcomes: list[RunOutcome] = []
    delays = any(r.wan_delay_s is not None for r in scenario.runs)
    for variant, delay_groups in groups:
        with testbed_for(scenario.path, ctx, variant) as bed:
            if scenario.testbed_check:
                name = CHECK_FILE if len(groups) == 1 else f"testbed-check-{variant}.json"
                problem = _testbed_check(bed, ctx, out_dir, scenario.check_streams, name)
                if problem:
                    ctx.say(f"multilane: {problem}")
                    problems.append(problem)
            for delay, indexes in delay_groups:
                if delays:
                    for line in bed.set_delay(delay):
                        ctx.say(f"multilane: {variant} network: {line}")
                prepared = [prepare(scenario.runs[i], ctx, out_dir) for i in indexes]
                outcomes += _execute_each(prepared, ctx, start, len(outcomes) + 1, total)
            if delays:
                bed.set_delay(None)
    return _finish(scenario, outcomes, problems, ctx, out_dir)


def _finish(
    scenario: Scenario,
    outcomes: list[RunOutcome],
    problems: list[str],
    ctx: Context,
    out_dir: Path,
) -> ExperimentResult:
    """The report, the summary line; RunError when a run or the check failed."""
    report = None
    if any(o.json_path for o in outcomes):
        try:
            report = make_report(out_dir)
        except MultilaneError as exc:
            ctx.say(f"multilane: report failed: {exc}")
    if report is not None:
        print_report(report, ctx)
    ctx.say(summary_line(scenario, outcomes))
    failed = [o for o in outcomes if o.failed]
    if failed:
        problems.insert(
            0,
            f"{len(failed)} of {len(outcomes)} runs failed: "
            + "; ".join(o.message for o in failed),
        )
    if problems:
        raise RunError("; ".join(problems))
    return ExperimentResult(out_dir, tuple(outcomes), report)


def summary_line(scenario: Scenario, outcomes: list[RunOutcome]) -> str:
    """How the runs ended, e.g. "scenario x: 5 runs: 3 ok, 1 skipped (openmpi-gpu: no GPU
    (...)), 1 failed (mpich-tcp)"; a skipped run (it cannot measure on this machine) is
    neither ok nor failed."""
    ok = [o for o in outcomes if o.ok]
    skipped = [o for o in outcomes if o.skipped]
    failed = [o for o in outcomes if o.failed]
    parts = [f"{len(ok)} ok"]
    if skipped:
        why = "; ".join(o.message for o in skipped)
        parts.append(f"{len(skipped)} skipped ({why})")
    if failed:
        parts.append(f"{len(failed)} failed ({', '.join(o.prepared.label for o in failed)})")
    return f"scenario {scenario.name}: {len(outcomes)} runs: " + ", ".join(parts)


def print_report(report: Report, ctx: Context) -> None:
    """The tables, then where the report and plots are."""
    for note in report.notes:
        ctx.say(f"note: {note}")
    ctx.say(report.text)
    ctx.say("")
    for image in report.images:
        ctx.say(f"plot: {paths.display(image)}")
    ctx.say(f"report: {paths.display(report.markdown)}")
