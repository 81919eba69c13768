"""The NAS part of a report (benchmarks `nas-is`, `nas-mg`, `nas-lu`: seed 004's application
kernels, issue 19, docs/METRICS.md "nas"): each kernel run direct (one stock MPI job over the
routable sites) and relayed (one MPI job per private site joined by 1, 2, 4 or 8 trunks:
`launch = "grid"`), per MPI and WAN one-way delay, as scenarios/seed004-nas.toml runs them.

Per kernel, one figure (the seed's): (a) the run's time (total_s) against the WAN delay, a line
per path (direct, K trunks) and MPI, a run with one MPI per site as its own line; (b) the speed
of each path relative to direct (direct's time / its time: 1 = as fast as direct) and (c) the
speedup of K trunks over 1 trunk (1 trunk's time / K trunks' time), both against the delay.

Tables: the time of each path per MPI x delay, with its rate (Mkeys/s, Mpoints/s); the speedup
of K trunks over 1 trunk and the ratio to direct at each delay, the integer sort's targets at
0 ms marked (4 trunks >= 2.5x, 8 trunks >= 3.4x 1 trunk: issue 19); the runs with one MPI per
site against the same path under the first site's MPI; every run's verification.  A run that
failed its verification (status fail) is listed, loudly, and left out of every comparison.

A run's place comes from its meta as the CLI writes it (reports/seed004.py).  Everything is
computed from the result files: no number or statement here is written by hand."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from ..benchmarks import NAS_KERNELS
from ..figures import draw_figures, y_scale
from ..stripe_report import DPI, Section, format_number
from .seed004 import (
    DIRECT,
    Place,
    delay_axis,
    delay_name,
    delay_order,
    direct_mpi,
    line_style,
    mpi_order,
    path_name,
    place_of,
)

TOTAL = "total_s"
KERNELS = tuple(b.name for b in NAS_KERNELS)  # nas-is, nas-mg, nas-lu
# Issue 19's targets for the integer sort at 0 ms: K trunks' speedup over 1 trunk, at least.
SPEEDUP_TARGETS: Mapping[str, Mapping[int, float]] = {"nas-is": {4: 2.5, 8: 3.4}}
TARGET_DELAY_S = 0.0
MB = 1e6


@dataclass(frozen=True)
class NasRun:
    """One kernel result: its place, time (total_s), rate (the higher-is-better metric, with
    its name and unit), the bytes one iteration sent between the sites, and whether it was
    verified."""

    label: str
    place: Place
    total_s: float | None
    rate: float | None
    rate_name: str
    rate_unit: str
    cross_bytes: int
    iters: int
    verified: bool

    @property
    def mpi(self) -> str:
        return self.place.mpi

    @property
    def delay_s(self) -> float | None:
        return self.place.delay_s

    @property
    def trunks(self) -> int:
        return self.place.trunks


def _number(row: Mapping[str, Any], name: str) -> float | None:
    value = row.get(name)
    return float(value) if isinstance(value, (int, float)) and value >= 0 else None


def nas_runs(runs: Sequence[Any]) -> tuple[list[NasRun], list[str]]:
    """Every run of one kernel that says its place (verified or not), in MPI, delay and path
    order; notes on the others and on every run that failed its verification."""
    found: list[NasRun] = []
    notes: list[str] = []
    for run in runs:
        place = place_of(run.label, run.doc)
        if isinstance(place, str):
            notes.append(f"{place}: left out of the NAS part")
            continue
        rate = next((m for m in run.doc["metrics"] if m.get("higher_is_better")), None)
        row = run.doc["rows"][0] if run.doc["rows"] else {}
        verified = run.doc["status"] == "pass" and not run.doc["errors"]
        if not verified:
            notes.append(
                f"{run.label}: NOT verified (status {run.doc['status']}, {run.doc['errors']} "
                "errors): left out of every comparison"
            )
        found.append(
            NasRun(
                run.label,
                place,
                _number(row, TOTAL),
                _number(row, rate["name"]) if rate else None,
                rate["name"] if rate else "",
                rate["unit"] if rate else "",
                int(row.get("bytes", 0)),
                int(row.get("iters", 0)),
                verified,
            )
        )
    mpis = mpi_order(r.mpi for r in found)
    found.sort(key=lambda r: (mpis.index(r.mpi), r.delay_s or 0.0, r.trunks))
    return found, notes


class Matrix:
    """The verified runs by (MPI, WAN delay, trunks): the first run of a cell counts."""

    def __init__(self, runs: Sequence[NasRun]) -> None:
        self.all = list(runs)
        self.runs = [r for r in runs if r.verified and r.total_s]
        self.cells: dict[tuple[str, float | None, int], NasRun] = {}
        for run in self.runs:
            self.cells.setdefault((run.mpi, run.delay_s, run.trunks), run)
        self.mpis = mpi_order(r.mpi for r in self.all)
        self.single = [m for m in self.mpis if "=" not in m]  # one MPI for every site
        self.mixed = [m for m in self.mpis if "=" in m]
        self.delays = delay_order(r.delay_s for r in self.all)
        self.trunks = sorted({r.trunks for r in self.all if r.trunks != DIRECT})
        self.many = [k for k in self.trunks if k > 1]  # compared with 1 trunk
        self.rate_name = next((r.rate_name for r in self.all if r.rate_name), "")
        self.rate_unit = next((r.rate_unit for r in self.all if r.rate_unit), "")

    def time(self, mpi: str, delay: float | None, trunks: int) -> float | None:
        run = self.cells.get((mpi, delay, trunks))
        return None if run is None else run.total_s

    def speedup(self, mpi: str, delay: float | None, trunks: int) -> float | None:
        """1 trunk's time / K trunks' time, same MPI and delay."""
        one, many = self.time(mpi, delay, 1), self.time(mpi, delay, trunks)
        return one / many if one and many else None

    def vs_direct(self, mpi: str, delay: float | None, trunks: int) -> float | None:
        """Direct's time / this path's time at the same delay (1: as fast as direct); a run
        with one MPI per site against the direct run of the first site's MPI."""
        direct, path = self.time(direct_mpi(mpi), delay, DIRECT), self.time(mpi, delay, trunks)
        return direct / path if direct and path else None


# --- tables ---------------------------------------------------------------------------------


def _times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _target(kernel: str, delay: float | None, k: int) -> float | None:
    return SPEEDUP_TARGETS.get(kernel, {}).get(k) if delay == TARGET_DELAY_S else None


def time_rows(m: Matrix) -> list[list[str]]:
    """Per MPI (one for every site) and delay: total_s of each path, and its rate."""
    rows = []
    for mpi in m.single:
        for delay in m.delays:
            paths = (DIRECT, *m.trunks)
            cells = [m.cells.get((mpi, delay, k)) for k in paths]
            if not any(cells):
                continue
            rows.append(
                [
                    mpi,
                    delay_name(delay),
                    *(_seconds(c.total_s if c else None) for c in cells),
                    *(format_number(c.rate if c else None) for c in cells),
                ]
            )
    return rows


def time_header(m: Matrix) -> list[str]:
    paths = [path_name(k) for k in (DIRECT, *m.trunks)]
    return [
        "MPI",
        "WAN delay",
        *(f"{p} [s]" for p in paths),
        *(f"{p} [{m.rate_unit}]" for p in paths),
    ]


def speedup_rows(m: Matrix, kernel: str) -> list[list[str]]:
    """Per MPI and delay: K trunks over 1 trunk (marked against a target where the kernel has
    one at that delay), then each path's speed relative to direct."""
    rows = []
    for mpi in m.single:
        for delay in m.delays:
            ups = []
            for k in m.many:
                value, goal = m.speedup(mpi, delay, k), _target(kernel, delay, k)
                mark = (
                    "" if value is None or goal is None else (" pass" if value >= goal else " FAIL")
                )
                ups.append(_times(value) + mark)
            direct = [_times(m.vs_direct(mpi, delay, k)) for k in m.trunks]
            if all(c == "-" for c in ups + direct):
                continue
            rows.append([mpi, delay_name(delay), *ups, *direct])
    return rows


def speedup_header(m: Matrix) -> list[str]:
    return [
        "MPI",
        "WAN delay",
        *(f"{path_name(k)} / 1 trunk" for k in m.many),
        *(f"{path_name(k)} vs direct" for k in m.trunks),
    ]


def mixed_rows(m: Matrix) -> list[list[str]]:
    """Each run with one MPI per site: its time and verification against the same path and
    delay under the first site's MPI alone, and against direct."""
    rows = []
    for run in m.all:
        if "=" not in run.mpi:
            continue
        alone = direct_mpi(run.mpi)
        same = m.time(alone, run.delay_s, run.trunks)
        ratio = same / run.total_s if same and run.total_s and run.verified else None
        rows.append(
            [
                run.mpi,
                delay_name(run.delay_s),
                path_name(run.trunks),
                _seconds(run.total_s),
                format_number(run.rate),
                "yes" if run.verified else "NO",
                _seconds(same),
                _times(ratio),
                _times(m.vs_direct(run.mpi, run.delay_s, run.trunks) if run.verified else None),
            ]
        )
    return rows


MIXED_HEADER = ["MPI per site", "WAN delay", "path", "time [s]", "rate", "verified",
                "first site's MPI alone [s]", "vs alone", "vs direct"]  # fmt: skip


def verified_rows(m: Matrix) -> list[list[str]]:
    """Every run: its place, verification, time, rate and the MB an iteration sent between the
    sites."""
    return [
        [
            r.label,
            r.mpi,
            delay_name(r.delay_s),
            path_name(r.trunks),
            "yes" if r.verified else "NO",
            _seconds(r.total_s),
            format_number(r.rate),
            str(r.iters),
            f"{r.cross_bytes / MB:.2f}",
        ]
        for r in m.all
    ]


VERIFIED_HEADER = ["run", "MPI", "WAN delay", "path", "verified", "time [s]", "rate", "iters",
                   "MB across / iter"]  # fmt: skip


def statements(m: Matrix, kernel: str) -> list[str]:
    """What the numbers say: the targets, each path against direct over the delays, the
    mixed runs, the verification."""
    said = []
    for mpi in m.single:
        for k, goal in SPEEDUP_TARGETS.get(kernel, {}).items():
            value = m.speedup(mpi, TARGET_DELAY_S, k)
            if value is not None:
                verdict = "met" if value >= goal else "NOT met"
                said.append(
                    f"{kernel}, {mpi}: {path_name(k)} {value:.2f}x 1 trunk at "
                    f"{delay_name(TARGET_DELAY_S)} (target >= {goal:g}x: {verdict})."
                )
        for k in m.trunks:
            ratios = [(d, r) for d in m.delays if (r := m.vs_direct(mpi, d, k)) is not None]
            if ratios:
                each = ", ".join(f"{r:.2f} at {delay_name(d)}" for d, r in ratios)
                said.append(f"{kernel}, {mpi}: {path_name(k)} against direct (speed): {each}.")
    for run in m.all:
        if "=" in run.mpi:
            said.append(
                f"{kernel}, {run.mpi} ({path_name(run.trunks)}, {delay_name(run.delay_s)}): "
                f"{'verified' if run.verified else 'NOT verified'}, {_seconds(run.total_s)} s."
            )
    failed = [r.label for r in m.all if not r.verified]
    said.append(
        f"{kernel}: all {len(m.all)} runs verified."
        if not failed
        else f"{kernel}: {len(failed)} of {len(m.all)} runs NOT verified: {', '.join(failed)}."
    )
    return said


# --- the figure -----------------------------------------------------------------------------


def plot_kernel(m: Matrix, kernel: str, path: Path) -> bool:
    """(a) time against the WAN delay per path and MPI; (b) speed relative to direct; (c)
    speedup over 1 trunk."""
    if not m.runs or not m.delays:
        return False
    fig = Figure(figsize=(17, 5), dpi=DPI, layout="constrained")
    left, middle, right = fig.subplots(1, 3)
    xs = delay_axis(left, m.delays)
    for ax in (middle, right):
        delay_axis(ax, m.delays)
    times: list[float] = []
    for mpi in m.mpis:
        for k in (DIRECT, *m.trunks):
            style = line_style(m.mpis, m.trunks, mpi, k)
            name = f"{mpi} {path_name(k)}"
            points = [(x, t) for x, d in zip(xs, m.delays) if (t := m.time(mpi, d, k))]
            if points:
                left.plot(*zip(*points), label=name, **style)
                times += [t for _, t in points]
            if k == DIRECT:
                continue
            ratios = [(x, r) for x, d in zip(xs, m.delays) if (r := m.vs_direct(mpi, d, k))]
            if ratios:
                middle.plot(*zip(*ratios), label=name, **style)
            if k > 1:
                ups = [(x, u) for x, d in zip(xs, m.delays) if (u := m.speedup(mpi, d, k))]
                if ups:
                    right.plot(*zip(*ups), label=name, **style)
    y_scale(left, times)
    left.set_ylabel(f"{TOTAL} [s], one run (max over ranks)")
    left.set_title(f"(a) {kernel}: time against the WAN delay")
    middle.axhline(1.0, color="black", linewidth=1, linestyle=":")
    middle.set_ylim(bottom=0)
    middle.set_ylabel("direct's time / time (1: as fast as direct)")
    middle.set_title("(b) relayed against direct")
    right.axhline(1.0, color="grey", linewidth=0.8)
    if TARGET_DELAY_S in m.delays:  # the targets, where they apply
        x0 = xs[m.delays.index(TARGET_DELAY_S)]
        for k, goal in SPEEDUP_TARGETS.get(kernel, {}).items():
            if k in m.trunks:
                colour = line_style(m.mpis, m.trunks, m.mpis[0], k)["color"]
                label = f"target {path_name(k)} >= {goal:g}x"
                right.plot([x0], [goal], marker="_", markersize=18, color=colour,
                           linestyle="none", label=label)  # fmt: skip
    right.set_ylim(bottom=0)
    right.set_ylabel("1 trunk's time / K trunks' time")
    right.set_title("(c) speedup over 1 trunk")
    for ax in (left, middle, right):
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="x-small", ncol=2)
    fig.savefig(path, format="png")
    return True


# --- the section ----------------------------------------------------------------------------


def section(
    runs: Sequence[Any],
    checks: Sequence[dict[str, Any]],
    out_dir: Path,
    table: Any,
) -> Section:
    """One kernel's section: its figure into out_dir, tables made with `table(header, rows,
    right)`; `checks` (the test bed's) are not used."""
    del checks
    kernel = str(runs[0].doc["benchmark"]) if runs else "nas"
    found, notes = nas_runs(runs)
    md = ["", f"### {kernel}: direct against relayed (seed 004)", ""]
    if not found:
        return Section([*md, f"No {kernel} run says its MPI."], [], [], notes)
    m = Matrix(found)
    figures = ((f"{kernel}.png", lambda f, p: plot_kernel(f, kernel, p),
                "time, relayed against direct, speedup over 1 trunk"),)  # fmt: skip
    images, figure_md = draw_figures(kernel, m, out_dir, figures)  # type: ignore[arg-type]
    md += figure_md
    times = time_rows(m)
    time_table = table(time_header(m), times, right=2) if times else []
    ups = speedup_rows(m, kernel)
    up_table = table(speedup_header(m), ups, right=2) if ups else []
    mixed = mixed_rows(m)
    mixed_table = table(MIXED_HEADER, mixed, right=3) if mixed else []
    checked = table(VERIFIED_HEADER, verified_rows(m), right=5)
    said = statements(m, kernel)
    if time_table:
        md += [
            f"Time = `{TOTAL}` (one run, max over ranks) and rate = `{m.rate_name}` "
            f"[{m.rate_unit}] per MPI, WAN one-way delay and path (verified runs only):",
            "",
            *time_table,
            "",
        ]
    if up_table:
        targets = SPEEDUP_TARGETS.get(kernel, {})
        goal = ", ".join(f"{path_name(k)} >= {v:g}x" for k, v in targets.items())
        md += [
            "K trunks / 1 trunk = 1 trunk's time / K trunks' time; vs direct = direct's time / "
            "the path's time (1.00: as fast as direct)"
            + (f"; target at {delay_name(TARGET_DELAY_S)}: {goal}." if goal else "."),
            "",
            *up_table,
            "",
        ]
    if mixed_table:
        md += ["One MPI per site (the first site's MPI alone: the same path and delay):", ""]
        md += [*mixed_table, ""]
    md += ["Every run's verification (a run NOT verified is left out above):", "", *checked, ""]
    md += [*(f"- {line}" for line in said)]
    text = ["", f"{kernel}: time", *time_table] if time_table else []
    text += ["", f"{kernel}: speedup and against direct", *up_table] if up_table else []
    text += ["", f"{kernel}: one MPI per site", *mixed_table] if mixed_table else []
    text += ["", *said]
    return Section(md, images, text, notes)
