"""`multilane run`: every run of a scenario into one results folder, then the report."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from . import paths
from .bench import (
    PreparedRun,
    RunOutcome,
    execute,
    make_results_dir,
    new_results_dir,
    prepare,
)
from .context import Context
from .errors import MultilaneError, RunError
from .report import Report, make_report
from .scenario import Scenario


@dataclass(frozen=True)
class ExperimentResult:
    """Where a scenario's results went and how its runs ended."""

    out_dir: Path
    outcomes: tuple[RunOutcome, ...]
    report: Report | None


def plan(scenario: Scenario, ctx: Context, out_dir: Path) -> list[PreparedRun]:
    """Every run checked and its command built, before anything starts (UsageError if not)."""
    return [prepare(request, ctx, out_dir) for request in scenario.runs]


def print_plan(scenario: Scenario, prepared: list[PreparedRun], ctx: Context) -> None:
    """The dry-run listing: one command per run."""
    ctx.say(f"scenario {scenario.name}: {len(prepared)} runs ({paths.display(scenario.path)})")
    for i, run in enumerate(prepared, 1):
        ctx.say(f"({i}/{len(prepared)}) {run.label}: {run.describe()}")


def run_scenario(
    scenario: Scenario, ctx: Context, results_base: Path, dry_run: bool = False
) -> ExperimentResult:
    """Run a scenario; RunError at the end when any run failed (the others still run)."""
    out_dir = new_results_dir(results_base, scenario.name)
    if dry_run:  # with a [network], the commands need its test bed up (the placement)
        print_plan(scenario, plan(scenario, ctx, out_dir), ctx)
        return ExperimentResult(out_dir, (), None)
    if scenario.network is None:
        return _execute_all(scenario, plan(scenario, ctx, out_dir), ctx, out_dir)
    from .testbed.commands import testbed_for  # noqa: PLC0415 - avoids an import cycle

    with testbed_for(scenario.path, ctx):
        # Planned once the test bed is up: the placement needs the live one.
        return _execute_all(scenario, plan(scenario, ctx, out_dir), ctx, out_dir)


def _execute_all(
    scenario: Scenario, prepared: list[PreparedRun], ctx: Context, out_dir: Path
) -> ExperimentResult:
    """Run every prepared run into `out_dir`, then report."""
    make_results_dir(out_dir)
    shutil.copyfile(scenario.path, out_dir / "scenario.toml")
    ctx.say(f"scenario {scenario.name}: {len(prepared)} runs into {paths.display(out_dir)}")
    outcomes = []
    for i, run in enumerate(prepared, 1):
        req = run.request
        ctx.say(
            f"({i}/{len(prepared)}) {run.install.name} {req.transport} {run.benchmark.name} "
            f"np={req.np} [{run.label}] ..."
        )
        outcome = execute(run, ctx, prefix=f"({i}/{len(prepared)} {run.tag}) ")
        ctx.say(f"({i}/{len(prepared)}) {outcome.message} in {outcome.duration_s:.1f} s")
        outcomes.append(outcome)
    report = None
    if any(o.json_path for o in outcomes):
        try:
            report = make_report(out_dir)
        except MultilaneError as exc:
            ctx.say(f"multilane: report failed: {exc}")
    if report is not None:
        print_report(report, ctx)
    failed = [o for o in outcomes if not o.ok]
    if failed:
        raise RunError(
            f"{len(failed)} of {len(outcomes)} runs failed: " + "; ".join(o.message for o in failed)
        )
    return ExperimentResult(out_dir, tuple(outcomes), report)


def print_report(report: Report, ctx: Context) -> None:
    """The tables, then where the report and plots are."""
    for note in report.notes:
        ctx.say(f"note: {note}")
    ctx.say(report.text)
    ctx.say("")
    for image in report.images:
        ctx.say(f"plot: {paths.display(image)}")
    ctx.say(f"report: {paths.display(report.markdown)}")
