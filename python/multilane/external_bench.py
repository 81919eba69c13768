"""`multilane bench exec`: an unmodified MPI program timed without and with the Multilane layer.

The two launches differ only in the ranks' `LD_PRELOAD` (and `MLN_PRELOAD_STATS=1`, so that
every layer run proves the layer was in effect).  They alternate (without, with, without, ...)
R times each; a run that exits non-zero, times out, or (with the layer) misses a rank's stats
line fails the benchmark.  The result is an ordinary result file (schemas/result-v1.json,
benchmark `exec`): one row with the wall time of each mode (median, min, max) and their
ratio, the layer's counters per run, every run's exit code and stats lines in
`provenance.params.runs`."""

from __future__ import annotations

import re
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from . import __version__, paths
from .bench import make_results_dir, new_results_dir, slug
from .context import Context
from .errors import RunError
from .external import (
    STATS_COUNTERS,
    ExecPlan,
    ExecRequest,
    clean_hosts,
    exit_status,
    missing_ranks,
    parse_stats_line,
    plan,
    stats_totals,
)
from .results import SCHEMA_NAME, format_problems, problems, write_result
from .runner import run_streaming

BENCHMARK = "exec"
DEFAULT_REPS = 3
TAIL_LINES = 12  # of a failed run's log, printed before the error
MPI_NAMES = {"openmpi": "Open MPI", "mpich": "MPICH"}
MODES = (("plain", "without layer"), ("layer", "with layer"))


@dataclass(frozen=True)
class TimedRun:
    """One run of the program."""

    rep: int
    layer: bool
    wall_s: float
    exit_code: int
    log: Path
    stats: tuple[str, ...] = ()  # the layer's lines, as printed
    counters: tuple[tuple[str, int], ...] = ()  # summed over the ranks


def include_dirs(prefix: Path, flavour: str) -> list[Path]:
    """Where the MPI's compiler wrapper looks for headers (Debian: /usr/lib/<arch>/openmpi/
    include, /usr/include/<arch>/mpich), then prefix/include."""
    named = prefix / "bin" / f"mpicc.{flavour}"  # Debian names each MPI's tools so
    mpicc = named if named.exists() else prefix / "bin" / "mpicc"
    query = "--showme:incdirs" if flavour == "openmpi" else "-show"
    try:
        text = subprocess.run(  # noqa: S603 - argument list, no shell
            [str(mpicc), query], capture_output=True, text=True, timeout=20, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        text = ""
    dirs = [Path(w[2:]) for w in text.split() if w.startswith("-I")]
    if flavour == "openmpi":
        dirs += [Path(w) for w in text.split() if w.startswith("/")]
    return [*dirs, prefix / "include"]


def mpi_standard(prefix: Path, flavour: str) -> str:
    """MPI_VERSION.MPI_SUBVERSION from the MPI's mpi.h (the standard it implements);
    '0.0' when no mpi.h says."""
    for header in (d / "mpi.h" for d in include_dirs(prefix, flavour)):
        try:
            text = header.read_text(errors="replace")
        except OSError:
            continue
        major = re.search(r"^#\s*define\s+MPI_VERSION\s+([0-9]+)", text, re.MULTILINE)
        minor = re.search(r"^#\s*define\s+MPI_SUBVERSION\s+([0-9]+)", text, re.MULTILINE)
        if major and minor:
            return f"{major.group(1)}.{minor.group(1)}"
    return "0.0"


def _fail(prepared: ExecPlan, run: TimedRun, total: int, why: str) -> RunError:
    """Print the tail of a failed run's log on stderr and stop what a test-bed run left in
    the hosts; the error that fails the benchmark."""
    mode = "with" if run.layer else "without"
    try:
        tail = run.log.read_text(errors="replace").splitlines()[-TAIL_LINES:]
    except OSError:
        tail = []
    for line in tail:
        print(f"  | {line}", file=sys.stderr)
    log = paths.display(run.log)
    cleaned = clean_hosts(prepared)
    return RunError(f"exec: run {run.rep}/{total} {mode} the layer: {why} (log: {log}){cleaned}")


def _time_one(prepared: ExecPlan, ctx: Context, rep: int, total: int, log: Path) -> TimedRun:
    """Run once with output to `log`; RunError when it fails."""
    layer = prepared.library is not None
    lines: list[str] = []
    records: list[dict[str, int]] = []

    def collect(line: str) -> None:
        record = parse_stats_line(line)
        if record is not None:
            lines.append(line)
            records.append(record)

    result = run_streaming(
        prepared.launch.argv,
        env={**ctx.env, **prepared.launch.env},
        timeout_s=prepared.request.timeout_s,
        log_path=log,
        on_line=collect,
        watchdog=prepared.testbed.watchdog if prepared.testbed is not None else None,
    )
    code = -1 if result.returncode is None else exit_status(result.returncode)
    run = TimedRun(
        rep,
        layer,
        result.duration_s,
        code,
        log,
        tuple(lines),
        tuple(stats_totals(records).items()),
    )
    if result.timed_out or result.aborted:
        reason = result.aborted or f"timed out after {prepared.request.timeout_s:g} s"
        raise _fail(prepared, run, total, f"stopped: {reason}")
    if code != 0:
        raise _fail(prepared, run, total, f"exited with status {code}")
    if layer:
        gone = missing_ranks(records, prepared.np)
        if len(gone) == prepared.np:
            why = "no rank printed the layer's stats line: the layer was not in effect"
            raise _fail(prepared, run, total, why + " (a statically linked program?)")
        if gone:
            listing = ", ".join(map(str, gone))
            raise _fail(prepared, run, total, f"no layer stats line from rank(s) {listing}")
    return run


def _spread(values: Sequence[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def result_doc(
    plain: ExecPlan, layered: ExecPlan, runs: Sequence[TimedRun], label: str
) -> dict[str, Any]:
    """The result document of a finished benchmark (every run passed)."""
    install = layered.install
    without = _spread([r.wall_s for r in runs if not r.layer])
    with_layer = _spread([r.wall_s for r in runs if r.layer])
    ratio = (
        with_layer[0] / without[0],
        with_layer[1] / without[2],  # the smallest ratio any pair of runs can show
        with_layer[2] / without[1],  # the largest
    )
    row: dict[str, Any] = {"bytes": 0, "iters": sum(1 for r in runs if r.layer), "errors": 0}
    for name, (mid, low, high) in (
        ("wall_s", without),
        ("wall_layer_s", with_layer),
        ("ratio", ratio),
    ):
        row.update({name: mid, f"{name}_min": low, f"{name}_max": high})
    for key in STATS_COUNTERS:
        values = [dict(r.counters)[key] for r in runs if r.layer]
        row[key] = statistics.median(values)
    request = layered.request
    hosts = list(layered.hosts) or [socket.gethostname()]
    meta = {
        "mpi": install.name,
        "np": str(layered.np),
        "label": label,
        "program": Path(request.program[0]).name,
        "transport": layered.where if request.scenario is None else "tcp",
    }
    if request.scenario is not None:
        meta["testbed"] = request.scenario.stem
        meta["hosts"] = ",".join(hosts)
    params: dict[str, Any] = {
        "reps": row["iters"],
        "np": layered.np,
        "where": layered.where,
        "program": list(request.program),
        "layer_library": str(layered.library),
        "order": "alternating, without the layer first",
        "runs": [
            {
                "rep": r.rep,
                "layer": r.layer,
                "wall_s": r.wall_s,
                "exit_code": r.exit_code,
                "log": r.log.name,
                **({"counters": dict(r.counters), "stats": list(r.stats)} if r.layer else {}),
            }
            for r in runs
        ],
        "launch_plain": {"argv": list(plain.launch.argv), "env": dict(plain.launch.env)},
    }
    if request.ppn is not None or request.scenario is not None:
        params["ppn"] = request.ppn or 1
    provenance: dict[str, Any] = {
        "multilane_version": __version__,
        "mpi_library": f"{MPI_NAMES.get(install.flavour, install.flavour)} {install.version}",
        "mpi_standard": mpi_standard(Path(install.prefix), install.flavour),
        "nranks": layered.np,
        "nhosts": len(hosts),
        "hosts": hosts,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": shlex.join(request.program),
        "params": params,
        "meta": meta,
        "launch": {"argv": list(layered.launch.argv), "env": dict(layered.launch.env)},
    }
    if layered.testbed is not None:
        provenance["testbed"] = layered.testbed.to_json()
    return {
        "schema": SCHEMA_NAME,
        "data_version": 1,
        "benchmark": BENCHMARK,
        "status": "pass",
        "errors": 0,
        "provenance": provenance,
        "metrics": [
            {
                "name": "wall_s",
                "unit": "s",
                "statistic": "median",
                "description": "wall time of one run without the layer, launcher start to exit",
                "higher_is_better": False,
            },
            {
                "name": "wall_layer_s",
                "unit": "s",
                "statistic": "median",
                "description": "wall time of one run with the layer (LD_PRELOAD on the ranks)",
                "higher_is_better": False,
            },
            {
                "name": "ratio",
                "unit": "x",
                "statistic": "median / median",
                "description": "wall_layer_s / wall_s; _min: min with / max without, _max: "
                "max with / min without",
                "higher_is_better": False,
            },
        ],
        "rows": [row],
    }


def summary_table(runs: Sequence[TimedRun]) -> list[str]:
    """The stdout table: without / with / ratio, median and min, the exit codes."""
    plain = [r.wall_s for r in runs if not r.layer]
    layer = [r.wall_s for r in runs if r.layer]
    rows = [
        ("", "without", "with", "ratio"),
        (
            "wall median [s]",
            f"{statistics.median(plain):.3f}",
            f"{statistics.median(layer):.3f}",
            f"{statistics.median(layer) / statistics.median(plain):.3f}",
        ),
        (
            "wall min [s]",
            f"{min(plain):.3f}",
            f"{min(layer):.3f}",
            f"{min(layer) / min(plain):.3f}",
        ),
        (
            "exit codes",
            " ".join(str(r.exit_code) for r in runs if not r.layer),
            " ".join(str(r.exit_code) for r in runs if r.layer),
            "",
        ),
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths)))
             for row in rows]  # fmt: skip
    first = dict(next(r for r in runs if r.layer).counters)
    lines.append(
        "layer, one run: striped sends {striped_send_msgs} ({striped_send_bytes} B), "
        "receives {striped_recv_msgs} ({striped_recv_bytes} B), broadcasts {bcast_calls} "
        "({bcast_bytes} B)".format(**first)
    )
    return [line.rstrip() for line in lines]


def check_request(request: ExecRequest, ctx: Context) -> tuple[ExecPlan, ExecPlan]:
    """Both launches (without, with the layer) with every check passed; UsageError if not."""
    plain = plan(replace(request, layer=False, stats=False), ctx, BENCHMARK)
    layered = plan(replace(request, layer=True, stats=True), ctx, BENCHMARK)
    return plain, layered


def run_bench_exec(
    request: ExecRequest,
    ctx: Context,
    results_base: Path,
    reps: int,
    *,
    label: str | None = None,
    copy_to: Path | None = None,
) -> Path:
    """`multilane bench exec`: check, run both modes `reps` times alternating, write and
    validate the result; its path.  RunError when a run fails."""
    plain, layered = check_request(request, ctx)
    name = Path(request.program[0]).name
    label = label or f"{layered.install.name}-{layered.where}-{name}"
    out_dir = new_results_dir(results_base, BENCHMARK)
    make_results_dir(out_dir)
    stem = slug(label)
    ctx.say(
        f"multilane: exec {name} on {layered.install.name}/{layered.where}, {layered.np} ranks, "
        f"{reps} runs without and with the layer, alternating"
    )
    ctx.say(f"multilane: without: {plain.describe()}")
    ctx.say(f"multilane: with:    {layered.describe()}")
    runs: list[TimedRun] = []
    for rep in range(1, reps + 1):
        for (tag, text), prepared in zip(MODES, (plain, layered)):
            log = out_dir / f"{stem}.{tag}-{rep}.log"
            run = _time_one(prepared, ctx, rep, reps, log)
            runs.append(run)
            ctx.say(f"[exec] run {rep}/{reps} {text}: {run.wall_s:.3f} s, exit {run.exit_code}")
    doc = result_doc(plain, layered, runs, label)
    path = out_dir / f"{stem}.json"
    found = problems(doc)
    if found:
        raise RunError(format_problems(path, found))
    write_result(path, doc)
    for line in summary_table(runs):
        ctx.say(line)
    ctx.say(f"multilane: result: {paths.display(path)}")
    if copy_to is not None:
        copy_to.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, copy_to)
        ctx.say(f"multilane: copied to {paths.display(copy_to)}")
    return path
