"""The halo-exchange part of a report (benchmark `halo`, docs/HALO.md): time per iteration of
every mode against the number of neighbours at the seed's 160 doubles (1280 B), per MPI and
placement (one host, across test-bed hosts); the ratio of each mode to p2p (the seed's
Fig. 6.2); the gain of double buffering (rma-single against the double-buffered modes); the
verdict on the seed's 1.3x; what `auto` chose against the fastest measured mode; and which
modes each MPI measured.

Everything is computed from the result files: no number or statement here is written by
hand.  A mode's metric is found by its name with `iter`, `us` and `time` left out
(`p2p_iter_us`, `iter_us_rma_fence`, `rma_pscw_us` all work; `-` and `_` are the same)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from .figures import draw_figures, log_y, size_axis, y_scale
from .sizes import format_size
from .stripe_report import DPI, Section, format_number, format_times

MODES = ("p2p", "neighbor", "rma-fence", "rma-pscw", "rma-passive", "rma-single", "auto")
CHOICES = MODES[:-1]  # what auto chooses among: the "measured modes" it is compared with
DOUBLE = ("rma-fence", "rma-pscw", "rma-passive")  # the double-buffered RMA modes
P2P, FENCE, SINGLE, AUTO = "p2p", "rma-fence", "rma-single", "auto"
AUTO_COLUMN = "auto_mode"  # row column: the mln_halo_mode_t auto chose at that size
AUTO_CODES = dict(enumerate(CHOICES, 1))  # 1 p2p, 2 neighbor, 3 rma-fence, ..., 6 rma-single
SEED_SIZE = 160 * 8  # the seed's 160 doubles per neighbour
TARGET = 1.3  # the seed: double-buffered RMA up to 30% faster than Isend/Irecv
METRIC_WORDS = ("iter", "us", "time")  # left out of a metric's name to find its mode
SWEEP_SIZES = 3  # a run with at least this many sizes is drawn in halo-sizes.png
LOG_SPREAD = 10.0  # a panel whose values span more than this factor gets a log y axis

STYLES: dict[str, dict[str, Any]] = {
    "p2p": {"color": "black", "marker": "o", "linewidth": 2.2},
    "neighbor": {"color": "tab:gray", "marker": "s", "linestyle": "--", "linewidth": 1.4},
    "rma-fence": {"color": "tab:blue", "marker": "^", "linewidth": 2.0},
    "rma-pscw": {"color": "tab:green", "marker": "v", "linewidth": 2.0},
    "rma-passive": {"color": "tab:red", "marker": "D", "linewidth": 2.0, "markersize": 4},
    "rma-single": {"color": "tab:orange", "marker": "x", "linestyle": ":", "linewidth": 1.8},
    "auto": {"color": "tab:purple", "marker": "+", "linestyle": "-.", "linewidth": 1.4},
}
_MODE_RE = re.compile(r"(?<![\w-])(" + "|".join(re.escape(m) for m in MODES) + r")(?![\w-])")

Stat = tuple[float, float, float]  # median, min, max


def mode_of_metric(name: str, tests: Sequence[str]) -> str | None:
    """The mode a metric measures: its name without `iter`, `us`, `time` ("rma_fence_iter_us":
    rma-fence); a bare "iter_us" is the run's one selected test; None otherwise."""
    words = [w for w in name.lower().split("_") if w and w not in METRIC_WORDS]
    text = "-".join(words).replace("neighbour", "neighbor")
    if text in MODES:
        return text
    if not text and len(tests) == 1 and tests[0] in MODES:
        return tests[0]
    return None


def disabled_modes(params: dict[str, Any]) -> dict[str, str]:
    """Modes the run's params say are disabled on its MPI (`disabled`: "rma-pscw,rma-passive",
    then any other key with "disable" in its name, e.g. `halo_disable`; a value may also be a
    list or a table {"rma-pscw": "why"}), each with what the params say."""
    out: dict[str, str] = {}
    keys = sorted((k for k in params if "disable" in k.lower()), key=lambda k: k != "disabled")
    for key in keys:  # mln-halo's "disabled" (what it skipped) first, then the tunable's value
        value = params[key]
        if isinstance(value, dict):
            for mode, why in value.items():
                name = str(mode).replace("_", "-")
                if name in MODES:
                    out.setdefault(name, f"params.{key}: {why}")
            continue
        text = " ".join(map(str, value)) if isinstance(value, list) else str(value)
        for match in _MODE_RE.finditer(text.replace("_", "-")):
            out.setdefault(match.group(1), f"params.{key} = {text!r}")
    return out


def mode_codes(params: dict[str, Any]) -> dict[int, str]:
    """What the numbers of the auto_mode column mean: params.mode_ids ("1=p2p,2=neighbor,...",
    as mln-halo records them), else mln_halo_mode_t's order (AUTO_CODES)."""
    codes = dict(AUTO_CODES)
    for item in str(params.get("mode_ids", "")).split(","):
        number, _, name = item.partition("=")
        if number.strip().isdigit() and name.strip() in CHOICES:
            codes[int(number)] = name.strip()
    return codes


@dataclass(frozen=True, order=True)
class Placement:
    """Where a run's ranks were: hosts (distinct processor names) and ranks."""

    hosts: int
    ranks: int

    def __str__(self) -> str:
        host = f"{self.hosts} host{'s' if self.hosts != 1 else ''}"
        if self.ranks % self.hosts == 0:
            return f"{host} x {self.ranks // self.hosts} ranks"
        return f"{host}, {self.ranks} ranks"


@dataclass(frozen=True)
class HaloRun:
    """One passing halo result: MPI, placement, stencil, times by size and mode, auto's pick."""

    label: str
    mpi: str
    placement: Placement
    neighbors: int | None
    grid: str
    times: dict[int, dict[str, Stat]]
    picks: dict[int, str]  # size -> the mode auto chose there
    selected: tuple[str, ...]  # params.tests
    disabled: dict[str, str]

    def time(self, size: int, mode: str) -> float | None:
        stat = self.times.get(size, {}).get(mode)
        return stat[0] if stat is not None else None

    def sizes(self) -> list[int]:
        return sorted(s for s, modes in self.times.items() if s > 0 and modes)

    @property
    def name(self) -> str:
        nbrs = f"{self.neighbors} nbrs" if self.neighbors is not None else "? nbrs"
        return f"{self.mpi}, {self.placement}, {nbrs}" + (f" ({self.grid})" if self.grid else "")


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    return int(value) if isinstance(value, str) and value.strip().isdigit() else None


def _neighbors(params: dict[str, Any]) -> int | None:
    """params.neighbors, else 2 x dims x radius (radius 1 when not given)."""
    given = _int(params.get("neighbors"))
    if given is not None:
        return given
    dims, radius = _int(params.get("dims")), _int(params.get("radius", 1))
    return 2 * dims * radius if dims is not None and radius is not None else None


def _one_run(run: Any, notes: list[str]) -> HaloRun | None:
    doc = run.doc
    prov = doc["provenance"]
    meta, params = prov.get("meta", {}), prov.get("params", {})
    mpi = meta.get("mpi") or ""
    out = "left out of the halo section"
    if doc["status"] != "pass":
        notes.append(f"{run.label}: failed ({doc['errors']} wrong bytes, modes unknown): {out}")
        return None
    if not mpi:
        notes.append(f"{run.label}: no MPI name in its meta: {out}")
        return None
    tests = tuple(t.strip() for t in str(params.get("tests", "")).split(",") if t.strip())
    modes: dict[str, str] = {}
    for metric in doc["metrics"]:
        mode = mode_of_metric(metric["name"], tests)
        if mode is None or mode in modes.values():
            notes.append(f"{run.label}: metric {metric['name']} names no mode (or a repeat)")
        else:
            modes[metric["name"]] = mode
    times: dict[int, dict[str, Stat]] = {}
    picks: dict[int, str] = {}
    codes = mode_codes(params)
    for row in doc["rows"]:
        size = int(row["bytes"])
        cells = times.setdefault(size, {})
        for name, mode in modes.items():
            value = row.get(name)
            if isinstance(value, (int, float)) and value > 0:
                low, high = row.get(f"{name}_min", value), row.get(f"{name}_max", value)
                cells[mode] = (float(value), float(low), float(high))
        code = row.get(AUTO_COLUMN)
        if isinstance(code, (int, float)) and code > 0:
            if int(code) in codes:
                picks[size] = codes[int(code)]
            else:
                notes.append(f"{run.label}: {AUTO_COLUMN} {code:g} at {format_size(size)}: unknown")
    neighbors = _neighbors(params)
    if neighbors is None:
        notes.append(f"{run.label}: no neighbors (or dims) in its params: not in the tables")
    placement = Placement(int(prov["nhosts"]), int(prov["nranks"]))
    grid = str(params.get("grid", ""))
    disabled = disabled_modes(params)
    forced = str(params.get("halo_mode", "auto"))
    if picks and forced not in ("", AUTO):
        notes.append(
            f"{run.label}: MLN_HALO_MODE={forced} decided auto's mode (params.halo_mode): "
            "left out of the auto statement"
        )
        picks = {}
    return HaloRun(run.label, mpi, placement, neighbors, grid, times, picks, tests, disabled)


def halo_runs(runs: Sequence[Any]) -> tuple[list[HaloRun], list[str]]:
    """The passing halo runs that say their MPI, ordered by MPI as they first appear, then
    placement (fewest hosts first) and neighbours; notes on the others."""
    notes: list[str] = []
    found = [h for run in runs for h in (_one_run(run, notes),) if h is not None]
    mpis = list(dict.fromkeys(r.mpi for r in found))
    found.sort(key=lambda r: (mpis.index(r.mpi), r.placement, r.neighbors or 0, len(r.sizes())))
    return found, notes


def groups(found: Sequence[HaloRun]) -> list[tuple[str, Placement, list[HaloRun]]]:
    """(MPI, placement, its runs) in the order of `found`."""
    keys = list(dict.fromkeys((r.mpi, r.placement) for r in found))
    return [(m, p, [r for r in found if (r.mpi, r.placement) == (m, p)]) for m, p in keys]


def seed_rows(mine: Sequence[HaloRun], notes: list[str]) -> dict[int, HaloRun]:
    """Per neighbour count, the run measured at SEED_SIZE: the one with the fewest sizes (the
    dedicated run rather than a sweep through it), the first of equals with a note."""
    rows: dict[int, HaloRun] = {}
    for run in sorted(mine, key=lambda r: len(r.sizes())):
        if run.neighbors is None or not run.times.get(SEED_SIZE):
            continue
        kept = rows.get(run.neighbors)
        if kept is None:
            rows[run.neighbors] = run
        elif len(kept.sizes()) == len(run.sizes()):
            notes.append(
                f"{run.label}: {run.name} again at {SEED_SIZE} B: the table uses {kept.label}"
            )
    return dict(sorted(rows.items()))


Timed = tuple[str, float]  # a mode and its time


def _lowest(run: HaloRun, size: int, modes: Sequence[str]) -> Timed | None:
    timed = [(m, t) for m in modes for t in (run.time(size, m),) if t is not None]
    return min(timed, key=lambda mt: mt[1], default=None)


def best_double(run: HaloRun, size: int) -> Timed | None:
    """The fastest double-buffered RMA mode at a size and its time."""
    return _lowest(run, size, DOUBLE)


def fastest(run: HaloRun, size: int) -> Timed | None:
    """The fastest mode auto could have chosen, as the benchmark measured them."""
    return _lowest(run, size, CHOICES)


def _div(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def p2p_ratio(run: HaloRun, size: int) -> float | None:
    """p2p time / the best double-buffered RMA mode's time (> 1: RMA faster)."""
    best = best_double(run, size)
    return _div(run.time(size, P2P), best[1] if best else None)


def seed_table(rows: dict[int, HaloRun]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of one MPI x placement at SEED_SIZE: a row per neighbour count, the time
    of each mode (auto: with its pick), then the ratios."""
    header = ["nbrs", "grid", *(f"{m} [us]" for m in MODES), "p2p / best RMA",
              "single / best RMA", "single / fence"]  # fmt: skip
    out = []
    for nbrs, run in rows.items():
        cells = [str(nbrs), run.grid or "-"]
        for mode in MODES:
            time = run.time(SEED_SIZE, mode)
            pick = run.picks.get(SEED_SIZE) if mode == AUTO else None
            cells.append(format_number(time) + (f" ({pick})" if pick and time else ""))
        best = best_double(run, SEED_SIZE)
        ratio = p2p_ratio(run, SEED_SIZE)
        single = run.time(SEED_SIZE, SINGLE)
        cells += [
            format_times(ratio) + (f" ({best[0]})" if best and ratio else ""),
            format_times(_div(single, best[1] if best else None)),
            format_times(_div(single, run.time(SEED_SIZE, FENCE))),
        ]
        out.append(cells)
    return header, out


def _range(values: Sequence[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:.2f}x" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}x to {high:.2f}x"


def _configs(count: int) -> str:
    return f"{count} configuration{'s' if count != 1 else ''}"


def _where(cells: Sequence[tuple[HaloRun, float]]) -> str:
    """ "4 and 6 nbrs on 1 host x 8 ranks; 2 nbrs on 4 hosts x 2 ranks"."""
    by_place: dict[Placement, list[int]] = {}
    for run, _ in cells:
        by_place.setdefault(run.placement, []).append(run.neighbors or 0)
    return "; ".join(
        f"{' and '.join(map(str, sorted(n)))} nbrs on {p}" for p, n in sorted(by_place.items())
    )


def verdict(mpi: str, rows: Sequence[HaloRun]) -> str:
    """The seed's claim on one MPI at SEED_SIZE: p2p time / best double-buffered RMA time over
    its configurations (neighbours x placement); met when one of them reaches TARGET (the
    seed: "up to 30% faster")."""
    cells = [(r, x) for r in rows for x in (p2p_ratio(r, SEED_SIZE),) if x is not None]
    head = f"{mpi}: best double-buffered RMA mode vs p2p at {SEED_SIZE} B"
    if not cells:
        return f"{head}: no configuration with both measured (target {TARGET}x): not assessed."
    reached = [(r, x) for r, x in cells if x >= TARGET]
    result = (
        f"met in {len(reached)} of {_configs(len(cells))} ({_where(reached)})"
        if reached
        else f"not met in any of {_configs(len(cells))}"
    )
    return f"{head}: {_range([x for _, x in cells])} (target {TARGET}x): {result}."


def double_buffering(mpi: str, rows: Sequence[HaloRun]) -> str:
    """The gain of double buffering at SEED_SIZE: rma-single's time over the best double-
    buffered mode's, and over rma-fence's (the same synchronisation, two per iteration)."""
    best = [
        x for r in rows for b in (best_double(r, SEED_SIZE),) if b
        for x in (_div(r.time(SEED_SIZE, SINGLE), b[1]),) if x is not None
    ]  # fmt: skip
    fence = [
        x for r in rows
        for x in (_div(r.time(SEED_SIZE, SINGLE), r.time(SEED_SIZE, FENCE)),) if x is not None
    ]  # fmt: skip
    if not best:
        return (
            f"{mpi}: double buffering at {SEED_SIZE} B: not assessed (rma-single and a "
            "double-buffered RMA mode are not both measured in any configuration)."
        )
    line = (
        f"{mpi}: double buffering at {SEED_SIZE} B: rma-single takes {_range(best)} the time "
        f"of the best double-buffered RMA mode"
    )
    if fence:
        line += f", and {_range(fence)} that of rma-fence (the same fence, two per iteration)"
    return line + f" ({_configs(len(best))}; > 1: double buffering is faster)."


@dataclass(frozen=True)
class AutoCell:
    """One configuration (run x size) where auto ran: its pick, the fastest measured mode."""

    run: HaloRun
    size: int
    pick: str
    pick_stat: Stat | None  # the benchmark's own time of the picked mode (median, min, max)
    best: Timed
    best_stat: Stat
    auto_time: float | None

    @property
    def pick_time(self) -> float | None:
        return self.pick_stat[0] if self.pick_stat is not None else None

    @property
    def hit(self) -> bool:
        return self.pick == self.best[0]

    @property
    def tie(self) -> bool:
        """Not the fastest, but not told apart from it by the benchmark: the picked mode's
        range over the repetitions (min .. max) overlaps the fastest mode's."""
        return (
            not self.hit and self.pick_stat is not None and self.pick_stat[1] <= self.best_stat[2]
        )

    @property
    def verdict(self) -> str:
        return "fastest" if self.hit else "tied (ranges overlap)" if self.tie else "slower"


def auto_cells(found: Sequence[HaloRun]) -> list[AutoCell]:
    """Every run x size with auto's pick and at least one measured mode."""
    cells = []
    for run in found:
        for size in run.sizes():
            pick, best = run.picks.get(size), fastest(run, size)
            if pick is not None and best is not None:
                row = run.times[size]
                cells.append(
                    AutoCell(run, size, pick, row.get(pick), best, row[best[0]],
                             run.time(size, AUTO))
                )  # fmt: skip
    return cells


def auto_table(cells: Sequence[AutoCell]) -> tuple[list[str], list[list[str]]]:
    header = ["run", "configuration", "size", "auto chose", "fastest measured",
              "chosen / fastest", "verdict", "auto [us]", "auto / fastest"]  # fmt: skip
    rows = [
        [
            c.run.label,
            c.run.name,
            format_size(c.size),
            c.pick,
            f"{c.best[0]} ({format_number(c.best[1])} us)",
            format_times(_div(c.pick_time, c.best[1])),
            c.verdict,
            format_number(c.auto_time),
            format_times(_div(c.auto_time, c.best[1])),
        ]
        for c in cells
    ]
    return header, rows


def auto_statement(mpi: str, cells: Sequence[AutoCell]) -> str | None:
    """How often auto chose the fastest measured mode on one MPI, how often a mode the
    benchmark could not tell apart from it, how far its other picks were, and its own time
    against the fastest."""
    if not cells:
        return None
    hits, ties = sum(c.hit for c in cells), sum(c.tie for c in cells)
    line = f"{mpi}: auto picked the fastest measured mode in {hits} of {_configs(len(cells))}"
    if ties:
        tied = [x for c in cells if c.tie for x in (_div(c.pick_time, c.best[1]),) if x]
        line += (
            f", and in {ties} more a mode tied with it ({max(tied) - 1:.1%} or less apart; the "
            "two modes' min .. max over the repetitions overlap, so the benchmark does not "
            "tell them apart)"
        )
    misses = [c for c in cells if not c.hit and not c.tie]
    timed = [(c, x) for c in misses for x in (_div(c.pick_time, c.best[1]),) if x is not None]
    if timed:
        worst, ratio = max(timed, key=lambda cx: cx[1])
        line += (
            f"; {'where neither' if ties else 'where not'}, its pick was within "
            f"{ratio - 1:.1%} of the fastest (furthest: "
            f"{worst.pick} against {worst.best[0]}, {worst.run.name}, {format_size(worst.size)})"
        )
    unmeasured = sorted({c.pick for c in misses if c.pick_time is None})
    if unmeasured:
        line += f"; its pick {', '.join(unmeasured)} was not measured by the benchmark there"
    own = [x for c in cells for x in (_div(c.auto_time, c.best[1]),) if x is not None]
    if own:
        line += f"; auto's own time was {_range(own)} the fastest mode's"
    return line + "."


def modes_statement(mpi: str, mine: Sequence[HaloRun]) -> str:
    """Which modes have data (verified: every run here passed) on one MPI, in how many runs,
    and why the others have none (disabled in the params, not selected, or no data)."""
    measured = {m: [r for r in mine if any(m in c for c in r.times.values())] for m in MODES}
    parts = []
    full = [m for m in MODES if len(measured[m]) == len(mine)]
    if full:
        parts.append(f"measured with verified data in every run: {', '.join(full)}")
    for mode in MODES:
        have = measured[mode]
        if mode in full:
            continue
        disabled = next((r.disabled[mode] for r in mine if mode in r.disabled), None)
        if disabled is not None:
            why = f"disabled ({disabled})"
        elif not any(mode in r.selected for r in mine) and all(r.selected for r in mine):
            why = "not selected (params.tests)"
        else:
            why = "selected but no data (failed or skipped: see the log)"
        where = f"in {len(have)} of {len(mine)} runs" if have else "no data"
        parts.append(f"{mode}: {where}, {why}")
    return f"{mpi}: " + "; ".join(parts) + "."


# ---- figures ----------------------------------------------------------------------------


def _nbr_axis(ax: Any, ticks: Sequence[int]) -> None:
    ax.xaxis.set_major_locator(FixedLocator(sorted(set(ticks)) or [2]))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: f"{x:g}"))
    ax.set_xlabel("neighbours per rank")


def _panels(found: Sequence[HaloRun]) -> list[tuple[str, Placement, dict[int, HaloRun]]]:
    quiet: list[str] = []  # the section notes the repeats once
    panels = [(m, p, seed_rows(runs, quiet)) for m, p, runs in groups(found)]
    return [(m, p, rows) for m, p, rows in panels if rows]


def _figure(panels: Sequence[tuple[str, Placement, Any]]) -> tuple[Figure, list[Any]]:
    mpis = list(dict.fromkeys(m for m, _, _ in panels))
    places = sorted({p for _, p, _ in panels})
    nrows, ncols = len(mpis), len(places)
    fig = Figure(figsize=(5.4 * ncols + 0.4, 3.9 * nrows + 1.0), dpi=DPI, layout="constrained")
    grid = fig.subplots(nrows, ncols, squeeze=False)
    axes = []
    for mpi, place, _ in panels:
        axes.append(grid[mpis.index(mpi)][places.index(place)])
    for r, row in enumerate(grid):  # cells no panel uses: MPI x placement not measured
        for c, ax in enumerate(row):
            if all(a is not ax for a in axes):
                ax.set_axis_off()
                ax.set_title(f"{mpis[r]}, {places[c]}: no runs", fontsize="small")
    return fig, axes


def plot_neighbors(found: Sequence[HaloRun], path: Path) -> bool:
    """Time per iteration at SEED_SIZE against neighbours, a line per mode, a panel per MPI x
    placement; False if no data."""
    panels = _panels(found)
    if not panels:
        return False
    fig, axes = _figure(panels)
    for ax, (mpi, place, rows) in zip(axes, panels):
        values = []
        for mode in MODES:
            points = [(n, t) for n, r in rows.items() for t in (r.time(SEED_SIZE, mode),) if t]
            if points:
                values += [t for _, t in points]
                ax.plot(*zip(*points), label=mode, **STYLES[mode])
        _nbr_axis(ax, list(rows))
        y_scale(ax, values, LOG_SPREAD)
        ax.set_ylabel("time per iteration [us], median")
        ax.set_title(f"{mpi}, {place}")
        ax.grid(True, which="major", alpha=0.3)
    handles, labels = _legend(axes)
    fig.legend(handles, labels, loc="outside lower center", ncol=5, fontsize="small")
    fig.suptitle(f"halo: time per iteration at {SEED_SIZE} B (160 doubles) per neighbour")
    fig.savefig(path, format="png")
    return True


def _legend(axes: Sequence[Any]) -> tuple[list[Any], list[str]]:
    """One legend for all panels: every label once, in mode order."""
    seen: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    order = [*MODES, "p2p (= 1)", f"target {TARGET}x"]
    labels = sorted(seen, key=lambda x: order.index(x) if x in order else len(order))
    return [seen[x] for x in labels], labels


def plot_ratio(found: Sequence[HaloRun], path: Path) -> bool:
    """p2p time / each mode's time at SEED_SIZE against neighbours (> 1: faster than p2p; the
    seed's Fig. 6.2 with its ratio turned over), a panel per MPI x placement."""
    panels = [
        (m, p, rows) for m, p, rows in _panels(found)
        if any(r.time(SEED_SIZE, P2P) for r in rows.values())
    ]  # fmt: skip
    if not panels:
        return False
    fig, axes = _figure(panels)
    for ax, (mpi, place, rows) in zip(axes, panels):
        values = [1.0, TARGET]
        for mode in MODES[1:]:
            points = [
                (n, x) for n, r in rows.items()
                for x in (_div(r.time(SEED_SIZE, P2P), r.time(SEED_SIZE, mode)),) if x
            ]  # fmt: skip
            if points:
                values += [x for _, x in points]
                ax.plot(*zip(*points), label=mode, **STYLES[mode])
        ax.axhline(1.0, color="black", linewidth=1.6, label="p2p (= 1)")
        ax.axhline(TARGET, color="gray", linestyle=":", linewidth=1.2, label=f"target {TARGET}x")
        _nbr_axis(ax, list(rows))
        y_scale(ax, values, LOG_SPREAD)
        ax.set_ylabel("p2p time / mode time (> 1: faster than p2p)")
        ax.set_title(f"{mpi}, {place}")
        ax.grid(True, which="major", alpha=0.3)
    handles, labels = _legend(axes)
    fig.legend(handles, labels, loc="outside lower center", ncol=5, fontsize="small")
    fig.suptitle(f"halo: speed against p2p (MPI_Isend/Irecv) at {SEED_SIZE} B per neighbour")
    fig.savefig(path, format="png")
    return True


def plot_sizes(found: Sequence[HaloRun], path: Path) -> bool:
    """Time per iteration against message size (log-log), a line per mode with its min-max
    band, a panel per sweep run (at least SWEEP_SIZES sizes); False if none."""
    sweeps = [r for r in found if len(r.sizes()) >= SWEEP_SIZES]
    if not sweeps:
        return False
    ncols = min(2, len(sweeps))
    nrows = -(-len(sweeps) // ncols)
    fig = Figure(figsize=(6.4 * ncols + 0.6, 4.4 * nrows + 0.8), dpi=DPI, layout="constrained")
    grid = fig.subplots(nrows, ncols, squeeze=False)
    axes = [ax for row in grid for ax in row]
    for ax in axes[len(sweeps) :]:
        ax.set_axis_off()
    for ax, run in zip(axes, sweeps):
        for mode in MODES:
            xs = [s for s in run.sizes() if run.time(s, mode)]
            if not xs:
                continue
            stats = [run.times[s][mode] for s in xs]
            style = {"markersize": 4, **STYLES[mode]}
            (line,) = ax.plot(xs, [s[0] for s in stats], label=mode, **style)
            lows, highs = [s[1] for s in stats], [s[2] for s in stats]
            ax.fill_between(xs, lows, highs, color=line.get_color(), alpha=0.12, linewidth=0)
        size_axis(ax, run.sizes(), 12)
        ax.set_xlabel("message size per neighbour [bytes]")
        log_y(ax)
        ax.set_ylabel("time per iteration [us], median")
        ax.set_title(run.name, fontsize="medium")
        ax.grid(True, which="major", alpha=0.3)
    handles, labels = _legend(axes)
    fig.legend(handles, labels, loc="outside lower center", ncol=5, fontsize="small")
    fig.suptitle("halo: time per iteration against size (band: min-max of the reps)")
    fig.savefig(path, format="png")
    return True


FIGURES = (
    ("halo-neighbors.png", plot_neighbors, f"time per iteration against neighbours, {SEED_SIZE} B"),
    ("halo-ratio.png", plot_ratio, "p2p time / mode time against neighbours"),
    ("halo-sizes.png", plot_sizes, "time per iteration against message size"),
)


# ---- the report section -------------------------------------------------------------------


def section(
    runs: Sequence[Any],
    checks: Sequence[dict[str, Any]],
    out_dir: Path,
    table: Any,
) -> Section:
    """The halo section: figures into out_dir, tables made with `table(header, rows, right)`."""
    del checks  # no test-bed premise: the LAN's rate does not bound 160 doubles
    found, notes = halo_runs(runs)
    md = ["", "### halo: double-buffered RMA against p2p (seed 002)", ""]
    if not found:
        return Section([*md, "No halo run says its MPI."], [], [], notes)
    images, figure_md = draw_figures("halo", found, out_dir, FIGURES)
    md += figure_md
    md.append(
        f"Time per iteration in us (max over ranks, median of the repetitions) at {SEED_SIZE} B "
        "(160 doubles) per neighbour message; auto's cell names the mode it chose. "
        "p2p / best RMA = p2p time / the fastest double-buffered RMA mode's (rma-fence, "
        "rma-pscw, rma-passive; > 1: RMA faster); single / best RMA and single / fence = "
        "rma-single's time / theirs (> 1: double buffering faster); - = not measured."
    )
    text: list[str] = []
    said: list[str] = []
    for mpi in dict.fromkeys(r.mpi for r in found):
        mine = [r for r in found if r.mpi == mpi]
        seeds: list[HaloRun] = []
        for _, place, runs_here in groups(mine):
            rows = seed_rows(runs_here, notes)
            seeds += rows.values()
            if rows:
                lines = table(*seed_table(rows), right=2)
                md += ["", f"**{mpi}**, {place}, {SEED_SIZE} B:", "", *lines]
                text += ["", f"halo: {mpi}, {place}, {SEED_SIZE} B", *lines]
        if not seeds:
            notes.append(f"{mpi}: no halo run at {SEED_SIZE} B with its neighbours: no table")
        said.append(verdict(mpi, seeds))
        said.append(double_buffering(mpi, seeds))
    cells = auto_cells(found)
    if cells:
        lines = table(*auto_table(cells), right=5)
        md += ["", "auto against the fastest measured mode, every run and size where it ran "
               "(chosen / fastest: the benchmark's time of the mode auto chose / the fastest "
               "mode's; verdict: fastest, tied (the two modes' min .. max over the repetitions "
               "overlap) or slower; auto / fastest: auto's own time):", "", *lines]  # fmt: skip
        text += ["", "halo: auto", *lines]
    for mpi in dict.fromkeys(r.mpi for r in found):
        line = auto_statement(mpi, [c for c in cells if c.run.mpi == mpi])
        said += [line] if line else [f"{mpi}: no run recorded auto's choice ({AUTO_COLUMN})."]
    for mpi in dict.fromkeys(r.mpi for r in found):
        said.append(modes_statement(mpi, [r for r in found if r.mpi == mpi]))
    md += ["", *(f"- {line}" for line in said)]
    return Section(md, images, [*text, "", *said], notes)
