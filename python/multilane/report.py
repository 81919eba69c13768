"""Reports from result files only (STYLE 20): one PNG per metric, a combined figure per
benchmark, and report.md with a table per metric and the provenance of every run."""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from . import (
    __version__,
    bcast_report,
    gpu_report,
    halo_report,
    hostload,
    matmul_report,
    paths,
    stripe_report,
)
from .errors import MultilaneError
from .figures import size_axis
from .reports import nas_report, relay_report
from .results import is_result, is_skip_record, load_result, read_json, run_label
from .sizes import format_size
from .testbed.check import CHECK_SCHEMA

MAX_CELL = 60
DPI = 110
SUMMARY_COLUMNS = 4  # panels per row of <benchmark>-summary.png
# Benchmarks whose section has its own tables of every metric (matmul: a row per N, a table per
# MPI x transport x ranks): the generic size x run tables and plots are left out for them.
# relay: a table per metric of MPI x WAN delay x path; the NAS kernels: one row per run
OWN_TABLES = ("matmul", "relay", *nas_report.KERNELS)


@dataclass(frozen=True)
class Run:
    """One validated result file and how it is named in the report."""

    label: str
    path: Path
    doc: dict[str, Any]

    @property
    def failed(self) -> bool:
        return bool(self.doc["status"] != "pass")


@dataclass(frozen=True)
class Report:
    """What `make_report` wrote and the text to print."""

    markdown: Path
    images: tuple[Path, ...]
    text: str
    notes: tuple[str, ...]


def collect(in_dir: Path) -> tuple[dict[str, list[Run]], list[str]]:
    """Result files of a folder grouped by benchmark, and notes on files skipped (a folder
    with only skip records of runs that could not measure has no group)."""
    if not in_dir.is_dir():
        raise MultilaneError(f"{in_dir}: not a folder")
    groups: dict[str, list[Run]] = {}
    notes: list[str] = []
    for path in sorted(in_dir.glob("*.json")):
        try:
            doc = read_json(path)
        except MultilaneError:
            notes.append(f"skipped {path.name}: not valid JSON")
            continue
        if is_check(doc) or is_skip_record(doc):
            continue  # the test bed's check, a skipped run: read by load_checks, load_skipped
        if not is_result(doc):
            notes.append(f"skipped {path.name}: not a multilane result")
            continue
        doc = load_result(path)  # a result that does not validate stops the report
        groups.setdefault(doc["benchmark"], []).append(Run(run_label(doc, path.stem), path, doc))
    if not groups and not load_skipped(in_dir):
        raise MultilaneError(f"{in_dir}: no multilane result files (*.json) found")
    for runs in groups.values():
        runs.sort(key=lambda r: (r.doc["provenance"]["date"], r.path.name))
        counts: dict[str, int] = {}
        for run in runs:
            counts[run.label] = counts.get(run.label, 0) + 1
        for i, run in enumerate(runs):
            if counts[run.label] > 1:
                runs[i] = Run(f"{run.label} ({run.path.stem})", run.path, run.doc)
    return groups, notes


def is_check(doc: Any) -> bool:
    """Whether a parsed JSON document is a stored `testbed check` (testbed-check.json)."""
    return isinstance(doc, dict) and doc.get("schema") == CHECK_SCHEMA


def load_checks(in_dir: Path) -> list[dict[str, Any]]:
    """The stored test-bed checks of a folder (iperf3, RTT, loss), by file name."""
    checks = []
    for path in sorted(in_dir.glob("*.json")):
        try:
            doc = read_json(path)
        except MultilaneError:
            continue
        if is_check(doc) and isinstance(doc.get("rows"), list):
            checks.append(doc)
    return checks


def load_skipped(in_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """The CLI's records of skipped runs (exit 77, e.g. no GPU) by benchmark, by label."""
    found: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(in_dir.glob("*.json")):
        try:
            doc = read_json(path)
        except MultilaneError:
            continue
        if is_skip_record(doc):
            found.setdefault(str(doc.get("benchmark", "?")), []).append({**doc, "file": path.name})
    for records in found.values():
        records.sort(key=lambda r: str(r.get("label", "")))
    return found


def skipped_table(records: list[dict[str, Any]]) -> list[str]:
    """Runs that could not measure here: label, why, MPI, ranks, date, record file."""
    rows = [
        [_cell(r.get("label", "?")), _cell(r.get("reason", "?")), _cell(r.get("mpi", "?")),
         str(r.get("np", "?")), _cell(r.get("date", "?")), r["file"]]
        for r in records
    ]  # fmt: skip
    header = ["run", "skipped: why", "MPI", "ranks", "date", "record"]
    return _table(header, rows, right=len(header))


def metrics_of(runs: list[Run]) -> list[dict[str, Any]]:
    """The metric definitions of a benchmark's runs, first definition wins, in order."""
    seen: dict[str, dict[str, Any]] = {}
    for run in runs:
        for metric in run.doc["metrics"]:
            seen.setdefault(metric["name"], metric)
    return list(seen.values())


def _series(run: Run, name: str) -> tuple[list[int], list[float], list[float], list[float]]:
    """(x, y, ymin, ymax) of a metric, only the points a log-log plot can show."""
    xs, ys, lows, highs = [], [], [], []
    for row in run.doc["rows"]:
        value = row.get(name)
        if row["bytes"] <= 0 or value is None or value <= 0:
            continue
        xs.append(row["bytes"])
        ys.append(value)
        lows.append(row.get(f"{name}_min", value))
        highs.append(row.get(f"{name}_max", value))
    return xs, ys, lows, highs


def _draw(
    ax: Any, runs: list[Run], metric: dict[str, Any], title: str, max_ticks: int = 14
) -> None:
    name, unit = metric["name"], metric["unit"]
    all_x: list[int] = []
    for run in runs:
        xs, ys, lows, highs = _series(run, name)
        if not xs:
            continue
        all_x += xs
        label = run.label + (" (FAIL)" if run.failed else "")
        (line,) = ax.plot(xs, ys, marker="o", markersize=3, linewidth=1.5, label=label)
        ax.fill_between(xs, lows, highs, color=line.get_color(), alpha=0.15, linewidth=0)
    size_axis(ax, all_x, max_ticks)
    ax.set_yscale("log")
    ax.set_ylabel(f"{name} [{unit}], {metric['statistic']}")
    ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    ax.grid(True, which="minor", axis="y", alpha=0.1)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small")


def plot_metric(runs: list[Run], benchmark: str, metric: dict[str, Any], path: Path) -> None:
    """One PNG: a metric against message size, one line per run, min-max band shaded."""
    fig = Figure(figsize=(7.5, 5), dpi=DPI, layout="constrained")
    _draw(fig.subplots(), runs, metric, f"{benchmark}: {metric['name']} [{metric['unit']}]")
    fig.savefig(path, format="png")


def plot_summary(
    runs: list[Run], benchmark: str, metrics: list[dict[str, Any]], path: Path
) -> None:
    """One PNG with a panel per metric (latency and bandwidths side by side), at most
    SUMMARY_COLUMNS panels a row (halo has seven metrics, one per mode)."""
    ncols = min(len(metrics), SUMMARY_COLUMNS)
    nrows = -(-len(metrics) // ncols)
    fig = Figure(figsize=(6 * ncols, 4.8 * nrows), dpi=DPI, layout="constrained")
    axes = [ax for row in fig.subplots(nrows, ncols, squeeze=False) for ax in row]
    for ax in axes[len(metrics) :]:
        ax.set_axis_off()
    for ax, metric in zip(axes, metrics):
        _draw(ax, runs, metric, f"{metric['name']} [{metric['unit']}]", max_ticks=8)
    fig.suptitle(f"{benchmark} ({len(runs)} runs)")
    fig.savefig(path, format="png")


def _cell(text: object) -> str:
    value = " ".join(str(text).split()).replace("|", "\\|")
    return value if len(value) <= MAX_CELL else value[: MAX_CELL - 3] + "..."


def _table(header: list[str], rows: list[list[str]], right: int = 0) -> list[str]:
    """A Markdown table padded to line up in a terminal; the first `right` columns are text."""
    widths = [max(len(c) for c in col) for col in zip(header, *rows)]

    def line(cells: list[str]) -> str:
        padded = [
            c.ljust(w) if i < right else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
        ]
        return "| " + " | ".join(padded) + " |"

    rule = ["-" * w if i < right else "-" * (w - 1) + ":" for i, w in enumerate(widths)]
    return [line(header), line(rule), *(line(r) for r in rows)]


def format_value(value: float | None) -> str:
    """4 significant digits, no exponent for large values; '-' when missing."""
    if value is None:
        return "-"
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def metric_table(runs: list[Run], metric: dict[str, Any]) -> list[str]:
    """Rows = sizes, columns = runs; '-' where a run has no value."""
    name = metric["name"]
    sizes = sorted({row["bytes"] for run in runs for row in run.doc["rows"]})
    by_run = [{row["bytes"]: row.get(name) for row in run.doc["rows"]} for run in runs]
    rows = []
    for size in sizes:
        values = [by.get(size) for by in by_run]
        rows.append([format_size(size), *(format_value(v) for v in values)])
    return _table(["bytes", *(_cell(r.label) for r in runs)], rows, right=0)


def steal_of(run: Run) -> float | None:
    """The machine's steal over the run (provenance.host.steal_pct), None if not recorded."""
    host = run.doc["provenance"].get("host")
    value = host.get("steal_pct") if isinstance(host, dict) else None
    return float(value) if isinstance(value, (int, float)) else None


def provenance_table(runs: list[Run], base: Path) -> list[str]:
    """Who ran what where: MPI library, ranks, hosts, date, the machine's steal over the run
    (hostload), status, file."""
    rows = []
    for run in runs:
        prov = run.doc["provenance"]
        hosts = ", ".join(sorted(set(prov["hosts"])))
        status = run.doc["status"] + (f" ({run.doc['errors']} errors)" if run.doc["errors"] else "")
        steal = steal_of(run)
        rows.append(
            [
                _cell(run.label),
                _cell(prov["mpi_library"].splitlines()[0] if prov["mpi_library"] else ""),
                str(prov["nranks"]),
                _cell(f"{prov['nhosts']}: {hosts}"),
                _cell(prov["date"]),
                "-" if steal is None else f"{steal:.1f}%",
                status,
                paths.display(run.path, base),
            ]
        )
    header = ["run", "MPI library", "ranks", "hosts", "date", "steal", "status", "file"]
    return _table(header, rows, right=len(header))


def steal_notes(runs: list[Run]) -> list[str]:
    """A note naming the runs during which the hypervisor took more than
    hostload.NOTE_STEAL_PCT of this machine's CPU."""
    high = [(r, s) for r in runs if (s := steal_of(r)) is not None and s > hostload.NOTE_STEAL_PCT]
    if not high:
        return []
    named = ", ".join(f"{r.label} ({s:.1f}%)" for r, s in high)
    return [
        f"the hypervisor took more than {hostload.NOTE_STEAL_PCT:g}% of this machine's CPU "
        f"(steal, column 'steal' of the runs' table) during {named}: their rates and times "
        "are less comparable with the other runs'."
    ]


def _commands(runs: list[Run]) -> list[str]:
    lines = []
    for run in runs:
        prov = run.doc["provenance"]
        launch = prov.get("launch", {})
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in launch.get("env", {}).items())
        argv = shlex.join(launch.get("argv", [])) or prov["command"]
        lines.append(f"- `{run.label}`: `{(env + ' ' if env else '') + argv}`")
    return lines


def make_report(in_dir: Path, out_dir: Path | None = None) -> Report:
    """Read the results of `in_dir`, write PNGs and report.md into `out_dir` (default: same)."""
    out_dir = in_dir if out_dir is None else out_dir
    groups, notes = collect(in_dir)
    checks = load_checks(in_dir)
    skipped = load_skipped(in_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    images: list[Path] = []
    md = [
        f"# Multilane report: {in_dir.name}",
        "",
        f"{sum(len(r) for r in groups.values())} runs from `{in_dir}`"
        + (f" ({sum(map(len, skipped.values()))} more skipped)" if skipped else "")
        + "; written by multilane "
        f"{__version__} on {time.strftime('%Y-%m-%d %H:%M:%S %Z')}. Metrics are defined in "
        "docs/METRICS.md; the shaded band on each plot spans the min and max of the "
        "repetitions. Zero-byte rows appear in the tables only (log axes).",
    ]
    text: list[str] = []
    for benchmark in sorted(set(groups) | set(skipped)):
        runs, gone = groups.get(benchmark, []), skipped.get(benchmark, [])
        md += ["", f"## {benchmark}"]
        metrics = metrics_of(runs) if benchmark not in OWN_TABLES else []
        if metrics:
            summary = out_dir / f"{benchmark}-summary.png"
            plot_summary(runs, benchmark, metrics, summary)
            images.append(summary)
            md += ["", f"![{benchmark}: all metrics]({summary.name})"]
        for metric in metrics:
            png = out_dir / f"{benchmark}-{metric['name']}.png"
            plot_metric(runs, benchmark, metric, png)
            images.append(png)
            title = f"{benchmark}: {metric['name']} [{metric['unit']}], {metric['statistic']}"
            table = metric_table(runs, metric)
            md += ["", f"### {metric['name']} [{metric['unit']}]", "", metric["description"]]
            md += ["", *table, "", f"![{title}]({png.name})"]
            text += ["", title, *table]
        sections = {
            "stripe": stripe_report.section,
            "bcast": bcast_report.section,
            "halo": halo_report.section,
            "relay": relay_report.section,
            **dict.fromkeys(nas_report.KERNELS, nas_report.section),
        }
        with_skips = {
            "matmul": matmul_report.section,
            "gpu-transfer": gpu_report.section,
        }
        part = None
        if benchmark in with_skips:
            part = with_skips[benchmark](runs, checks, out_dir, _table, gone)
        elif benchmark in sections and runs:
            part = sections[benchmark](runs, checks, out_dir, _table)
        if part is not None:
            md += part.markdown
            images += part.images
            text += part.text
            notes += part.notes
        if runs:
            notes += steal_notes(runs)
            md += ["", f"### {benchmark}: runs", "", *provenance_table(runs, out_dir)]
            md += ["", "Commands:", "", *_commands(runs)]
        if gone:
            table = skipped_table(gone)
            md += ["", f"### {benchmark}: skipped runs", "", *table]
            text += ["", f"{benchmark}: skipped runs", *table]
    if checks:
        table = stripe_report.check_table(checks, _table)
        md += ["", "## Test bed check", "", "Stored in testbed-check.json.", "", *table]
        text += ["", "testbed check", *table]
    if notes:
        md += ["", "## Notes", "", *(f"- {n}" for n in notes)]
    markdown = out_dir / "report.md"
    markdown.write_text("\n".join(md) + "\n")
    return Report(markdown, tuple(images), "\n".join(text).strip("\n"), tuple(notes))
