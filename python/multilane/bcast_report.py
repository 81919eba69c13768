"""The broadcast part of a report (benchmark `bcast`): time per broadcast against message size
(mln_bcast's sme and hier against the MPI's own MPI_Bcast, default and forced algorithms),
the speed-up against the leaders per node L, ratio tables per MPI, and the premise of the
scenario from the test bed's iperf3 check (one TCP stream cannot fill the WAN, several can).

Everything is computed from the result files and testbed-check.json: no number or statement
here is written by hand."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from .figures import draw_figures, size_axis
from .sizes import format_size
from .stripe_report import (
    DPI,
    Section,
    format_number,
    format_times,
    iperf_rates,
    threshold_of,
)

METRIC = "time_us"  # time of one broadcast, max over ranks; lower is better
STOCK_METRIC = "stock_time_us"  # mln-bcast's stock test: MPI_Bcast in the same run
PAIRED_METRIC = "paired_ratio"  # mln-bcast's paired test: its time / MPI_Bcast's, call by call
LARGE = 4 * 2**20  # "4 MB and above": where sme is compared with the best stock broadcast
TARGET = 1.5  # sme at LARGE and above: at least this times as fast as the best stock
DEFAULT_THRESHOLD = 16 * 2**10  # MLN_BCAST_THRESHOLD's default: MPI_Bcast below it
WITHIN = 0.05  # below the threshold, mln_bcast within 5% of stock MPI_Bcast
ALGO_ORDER = ("stock", "hier", "sme", "auto", "mpi")  # --algo values, in legends and tables
MAX_TICKS = 12

# Open MPI 5's coll_tuned_bcast_algorithm numbers (0: the tuned module's own decision).
TUNED_BCAST = {
    "1": "basic_linear",
    "2": "chain",
    "3": "pipeline",
    "4": "split_binary_tree",
    "5": "binary_tree",
    "6": "binomial",
    "7": "knomial",
    "8": "scatter_allgather",
    "9": "scatter_allgather_ring",
}
TUNED_ALGORITHM = "OMPI_MCA_coll_tuned_bcast_algorithm"
TUNED_DYNAMIC = "OMPI_MCA_coll_tuned_use_dynamic_rules"
HAN = "OMPI_MCA_coll_han_"
COLL = "OMPI_MCA_coll"  # "^han": coll/han left out
MPICH_ALGORITHM = "MPIR_CVAR_BCAST_INTRA_ALGORITHM"
ENV_PREFIXES = ("OMPI_MCA_", "MPIR_CVAR_")
TRUE = ("1", "true", "yes", "t", "y")

# figure styles: sme bold in distinct colours, hier and stock default distinct, the rest thin
SME_COLOURS = ("tab:blue", "tab:red", "tab:green", "tab:purple", "tab:orange", "tab:cyan")
THIN_STYLES = (":", "-.")
LEGEND_ROW = 0.2  # inches per legend row under a panel
FIXED_STYLES = {
    "hier": {"color": "black", "linewidth": 2.2, "marker": "s"},
    "stock (default)": {"color": "tab:brown", "linewidth": 2.2, "linestyle": "--", "marker": "^"},
    "auto": {"color": "darkgoldenrod", "linewidth": 1.4, "linestyle": "-.", "marker": "x"},
    "mpi": {"color": "dimgray", "linewidth": 1.4, "linestyle": "-.", "marker": "+"},
}


def stock_variant(mpi_env: str) -> tuple[str, str | None]:
    """The MPI broadcast that the variables of "NAME=VALUE NAME=VALUE" force: "tuned:NAME"
    (Open MPI's coll/tuned), "tuned" (coll/tuned's own choice: coll = ^han), "han"
    (coll/han), MPICH's algorithm name, other settings as NAME=VALUE, joined by spaces;
    "default" when nothing is forced. Also a note on a setting that forces nothing (a tuned
    algorithm without dynamic rules), else None."""
    env = dict(item.partition("=")[::2] for item in mpi_env.split())
    parts, note = [], None
    han = [k for k in env if k.startswith(HAN)]
    priority = env.get(HAN + "priority", "1")
    if han and not (priority.lstrip("-").isdigit() and int(priority) <= 0):
        parts.append("han")
    no_han = env.get(COLL) == "^han"  # coll/tuned decides (with several ranks per node the
    tuned = env.get(TUNED_ALGORITHM, "0")  # default is coll/han, which hides tuned's choice)
    if tuned not in ("0", "ignore"):
        if env.get(TUNED_DYNAMIC, "0").lower() in TRUE:
            parts.append("tuned:" + TUNED_BCAST.get(tuned, tuned))
        else:
            note = f"{TUNED_ALGORITHM}={tuned} without {TUNED_DYNAMIC}=1: Open MPI ignores it"
    if no_han and not any(p.startswith("tuned") for p in parts):
        parts.append("tuned")
    mpich = env.get(MPICH_ALGORITHM, "auto")
    if mpich != "auto":
        parts.append(mpich)
    known = {*han, TUNED_ALGORITHM, TUNED_DYNAMIC, MPICH_ALGORITHM, *([COLL] if no_han else [])}
    for name, value in env.items():
        if name not in known:
            short = next((name[len(p) :] for p in ENV_PREFIXES if name.startswith(p)), name)
            parts.append(f"{short}={value}")
    return " ".join(parts) or "default", note


@dataclass(frozen=True)
class BcastRun:
    """One bcast result: its MPI, --algo, the MPI broadcast its variables force, the leaders
    per node that ran (sme), and its rows by message size."""

    label: str
    mpi: str
    algo: str
    variant: str
    leaders: int | None
    rows: dict[int, dict[str, Any]]
    params: dict[str, Any]

    @property
    def series(self) -> str:
        """The name of its line: "stock (default)", "stock tuned:binomial", "hier", "sme L=2"."""
        if self.algo == "stock":
            return "stock (default)" if self.variant == "default" else f"stock {self.variant}"
        name = f"sme L={self.leaders}" if self.algo == "sme" and self.leaders else self.algo
        return name if self.variant == "default" else f"{name} (MPI {self.variant})"

    def _metric(self, size: int, name: str) -> float | None:
        """A metric's median at a size, None when the row lacks it or it is not positive."""
        value = self.rows.get(size, {}).get(name)
        return float(value) if isinstance(value, (int, float)) and value > 0 else None

    def time(self, size: int) -> float | None:
        """The median time of one broadcast at a size, None when the run has none there."""
        return self._metric(size, METRIC)

    def stock_time(self, size: int) -> float | None:
        """MPI_Bcast measured beside it in the same run (the stock test), None if not."""
        return self._metric(size, STOCK_METRIC)

    def paired(self, size: int) -> float | None:
        """Its time over MPI_Bcast's, the two called in turn (the paired test), None if not."""
        return self._metric(size, PAIRED_METRIC)

    def ran(self, size: int) -> int | None:
        """What ran at a size (the row's "leaders"): 0 MPI_Bcast, 1 hier, L sme."""
        value = self.rows.get(size, {}).get("leaders")
        return int(value) if isinstance(value, (int, float)) else None

    def sizes(self) -> list[int]:
        return sorted(s for s in self.rows if s > 0 and self.time(s) is not None)


Timed = tuple[BcastRun, float]  # a run and its time at one size


def _order(run: BcastRun) -> tuple[int, int, str]:
    algo = ALGO_ORDER.index(run.algo)
    return algo, run.leaders or 0, "" if run.variant == "default" else run.variant


def _leaders_of(rows: dict[int, dict[str, Any]], params: dict[str, Any]) -> int | None:
    """The L an sme run ran: the "leaders" column at its largest size where mln_bcast ran
    (>= 1), else the L it asked for (param bcast_leaders)."""
    ran = [int(r["leaders"]) for _, r in sorted(rows.items()) if r.get("leaders", 0) >= 1]
    if ran:
        return ran[-1]
    asked = str(params.get("bcast_leaders", ""))
    return int(asked) if asked.isdigit() and int(asked) > 0 else None


def bcast_runs(runs: Sequence[Any]) -> tuple[list[BcastRun], list[str]]:
    """The passing bcast runs that say their MPI (meta) and --algo (params), ordered by MPI as
    they first appear, then stock, hier, sme by L, auto, mpi; notes on the others and on
    repeats (first kept)."""
    found: list[BcastRun] = []
    notes: list[str] = []
    seen: set[tuple[str, str]] = set()
    for run in runs:
        doc = run.doc
        prov = doc["provenance"]
        meta, params = prov.get("meta", {}), prov.get("params", {})
        mpi, algo = meta.get("mpi") or "", params.get("algo")
        out = "left out of the bcast section"
        if doc["status"] != "pass":
            notes.append(f"{run.label}: failed ({doc['errors']} wrong bytes): {out}")
            continue
        if algo not in ALGO_ORDER:
            notes.append(f"{run.label}: no known algo in its params ({algo}): {out}")
            continue
        if not mpi:
            notes.append(f"{run.label}: no MPI name in its meta: {out}")
            continue
        variant, why = stock_variant(str(params.get("mpi_env", "")))
        if why:
            notes.append(f"{run.label}: {why} (named {variant})")
        rows = {int(row["bytes"]): row for row in doc["rows"]}
        leaders = _leaders_of(rows, params) if algo == "sme" else None
        bcast = BcastRun(run.label, mpi, algo, variant, leaders, rows, params)
        if (mpi, bcast.series) in seen:
            notes.append(f"{run.label}: {mpi} {bcast.series} again: only the first run is used")
            continue
        seen.add((mpi, bcast.series))
        found.append(bcast)
    mpis = list(dict.fromkeys(r.mpi for r in found))
    found.sort(key=lambda r: (mpis.index(r.mpi), _order(r)))
    return found, notes


def _fastest(runs: Sequence[BcastRun], size: int) -> Timed | None:
    """The run with the lowest time at a size, and that time."""
    timed = [(r, t) for r in runs for t in (r.time(size),) if t is not None]
    return min(timed, key=lambda rt: rt[1], default=None)


@dataclass(frozen=True)
class Large:
    """One size at or above LARGE of one MPI: the fastest stock, hier and sme runs there."""

    size: int
    stock: Timed | None
    hier: Timed | None
    sme: Timed | None


def _speedup(of: Timed | None, base: Timed | None) -> float | None:
    """base's time / of's time: how many times as fast as `base` `of` is."""
    return base[1] / of[1] if base is not None and of is not None else None


def large_sizes(mine: Sequence[BcastRun]) -> list[Large]:
    """Per size >= LARGE that any run of one MPI has: the fastest of each kind."""
    sizes = sorted({s for r in mine for s in r.sizes() if s >= LARGE})

    def kind(algo: str) -> list[BcastRun]:
        return [r for r in mine if r.algo == algo]

    return [
        Large(s, _fastest(kind("stock"), s), _fastest(kind("hier"), s), _fastest(kind("sme"), s))
        for s in sizes
    ]


def _ms(pick: Timed | None, what: str = "") -> str:
    """A time in ms, and in brackets what it is (the stock variant, the L that ran)."""
    if pick is None:
        return "-"
    return f"{format_number(pick[1] / 1e3)}" + (f" ({what})" if what else "")


def _ran(large: Large) -> str:
    if large.sme is None:
        return ""
    run, _ = large.sme
    return f"L={run.ran(large.size) or run.leaders}"


def large_table(rows: Sequence[Large]) -> list[list[str]]:
    """Rows of the ratio table of one MPI: size, best stock, hier, best sme, speed-ups."""
    return [
        [
            format_size(x.size),
            _ms(x.stock, x.stock[0].variant if x.stock else ""),
            _ms(x.hier),
            _ms(x.sme, _ran(x)),
            format_times(_speedup(x.hier, x.stock)),
            format_times(_speedup(x.sme, x.stock)),
            format_times(_speedup(x.sme, x.hier)),
        ]
        for x in rows
    ]


def small_ratios(mine: Sequence[BcastRun], threshold: int) -> list[tuple[BcastRun, int, float]]:
    """(run, size, its time / stock time) below the threshold, best measurement first: the
    paired test (its broadcast and MPI_Bcast called in turn, call by call); else MPI_Bcast
    timed in its own loop right after (the stock test); else the stock run with the same MPI
    settings (another launch, with that launch's noise).  A stock run's paired ratio is
    MPI_Bcast against itself: the control (see controls)."""
    out = []
    for run in mine:
        other = next((r for r in mine if r.algo == "stock" and r.variant == run.variant), None)
        for size in sorted(s for s in run.rows if 0 < s < threshold):
            value = run.paired(size)
            if value is None and run.algo != "stock":
                base = run.stock_time(size) or (other.time(size) if other is not None else None)
                mln = run.time(size)
                value = mln / base if base is not None and mln is not None else None
            if value is not None:
                out.append((run, size, value))
    return out


def controls(
    cells: Sequence[tuple[BcastRun, int, float]],
) -> tuple[list[tuple[BcastRun, int, float]], list[tuple[BcastRun, int, float]]]:
    """The cells of mln_bcast runs, and those of stock runs (MPI_Bcast against itself)."""
    return [c for c in cells if c[0].algo != "stock"], [c for c in cells if c[0].algo == "stock"]


def _furthest(
    cells: Sequence[tuple[BcastRun, int, float]],
) -> tuple[BcastRun, int, float] | None:
    return max(cells, key=lambda c: abs(c[2] - 1.0), default=None)


def small_table(cells: Sequence[tuple[BcastRun, int, float]]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of one MPI's small-size table: a row per size, a column per mln run
    (time / stock time), and last the ratio furthest from 1 of each column."""
    series = list(dict.fromkeys(run.series for run, _, _ in cells))
    sizes = sorted({size for _, size, _ in cells})
    ratio = {(run.series, size): value for run, size, value in cells}
    rows = [[format_size(s), *(_three(ratio.get((n, s))) for n in series)] for s in sizes]
    worst = [_furthest([c for c in cells if c[0].series == n]) for n in series]
    rows.append(["furthest", *(f"{w[2]:.3f} ({format_size(w[1])})" if w else "-" for w in worst)])
    return ["size", *(f"{n} / stock" for n in series)], rows


def _three(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _sizes_text(sizes: Sequence[int]) -> str:
    return " and ".join(format_size(s) for s in sizes)


def _range(values: Sequence[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:.2f}x" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}x to {high:.2f}x"


def large_statements(mpi: str, rows: Sequence[Large]) -> list[str]:
    """sme and hier against the best stock broadcast at LARGE and above, with the target."""
    lines = []
    sme = [(x, s) for x in rows for s in (_speedup(x.sme, x.stock),) if s is not None and x.sme]
    if sme:
        ls = list(dict.fromkeys(_ran(x) for x, _ in sme))
        by_variant: dict[str, list[int]] = {}
        for x, _ in sme:
            if x.stock is not None:
                by_variant.setdefault(x.stock[0].variant, []).append(x.size)
        stock = ", ".join(f"{v} at {_sizes_text(s)}" for v, s in by_variant.items())
        short = [format_size(x.size) for x, s in sme if s < TARGET]
        verdict = (
            f"target {TARGET}x met at every size"
            if not short
            else f"target {TARGET}x NOT met at {', '.join(short)}"
        )
        lines.append(
            f"{mpi}: at {format_size(LARGE)} and above, sme ({' or '.join(ls)}) is "
            f"{_range([s for _, s in sme])} as fast as the best stock broadcast ({stock}); "
            f"{verdict}."
        )
    hier = [s for x in rows for s in (_speedup(x.hier, x.stock),) if s is not None]
    over = [s for x in rows for s in (_speedup(x.sme, x.hier),) if s is not None]
    if hier:
        tail = f"; sme is {_range(over)} as fast as hier" if over else ""
        lines.append(
            f"{mpi}: hier (one leader per node) is {_range(hier)} as fast as the best stock "
            f"broadcast{tail}."
        )
    return lines


def small_statement(cells: Sequence[tuple[BcastRun, int, float]], threshold: int) -> str | None:
    """Whether mln_bcast is within WITHIN of stock below the threshold, over all MPIs, with
    how it was measured and the spread of MPI_Bcast measured against itself the same way."""
    mine, control = controls(cells)
    worst = _furthest(mine)
    if worst is None:
        return None
    run, size, value = worst
    off = abs(value - 1.0)
    verdict = (
        f"within {off:.1%} of stock MPI_Bcast (target {WITHIN:.0%}"
        if off <= WITHIN
        else f"NOT within {WITHIN:.0%} of stock MPI_Bcast (up to {off:.1%} off"
    )
    paired = all(c[0].paired(c[1]) is not None for c in mine)
    how = (
        "called in turn with MPI_Bcast, call by call (paired test)"
        if paired
        else "against MPI_Bcast timed separately (not the paired test)"
    )
    line = (
        f"At sizes below the threshold ({format_size(threshold)}), mln_bcast times, {how}, "
        f"are {verdict}; furthest: {run.mpi} {run.series} at {format_size(size)}, "
        f"{value:.3f}x, of {len(mine)} run x size cells)."
    )
    far = _furthest(control)
    if far is not None:
        line += (
            f" MPI_Bcast against itself the same way: up to {abs(far[2] - 1.0):.1%} off "
            f"({far[0].mpi} at {format_size(far[1])}, {far[2]:.3f}x, of {len(control)} cells)."
        )
    return line


def premise(checks: Sequence[dict[str, Any]], notes: list[str]) -> list[str]:
    """The scenario's premise from the test bed's check: iperf3 rates by stream count, each
    against one stream; a note when there is no check."""
    iperf = iperf_rates(checks)
    if not iperf:
        notes.append("no testbed-check.json with iperf3 rows: no premise statement")
        return []
    one = iperf.get(1)
    parts = []
    for streams, rate in sorted(iperf.items()):
        name = f"{streams} stream{'s' if streams > 1 else ''} {format_number(rate)}"
        if streams == 1:
            name += " Mbit/s"
        elif one:
            name += f" ({rate / one:.2f}x)"
        parts.append(name)
    return [f"iperf3 on the test bed: {', '.join(parts)}."]


def bcast_threshold(runs: Sequence[BcastRun], notes: list[str]) -> tuple[int, str]:
    """MLN_BCAST_THRESHOLD as the mln runs recorded it (the first), else the default; a note
    when they recorded several."""
    params = [r.params for r in runs if r.algo != "stock"]
    recorded = {str(p["bcast_threshold"]) for p in params if "bcast_threshold" in p}
    value, why = threshold_of(params, ("bcast_threshold",), DEFAULT_THRESHOLD)
    if len(recorded) > 1:
        notes.append(
            f"bcast runs recorded thresholds {', '.join(sorted(recorded))}: "
            f"the small-size tables use {format_size(value)}"
        )
    return value, why


# ---- figures ----------------------------------------------------------------------------


def _styles(runs: Sequence[BcastRun], mpi: str) -> dict[str, dict[str, Any]]:
    """A style per series of one MPI: sme bold, a colour per L the same in every panel; hier
    and stock default fixed; the rest thin, a tab20 colour each."""
    from matplotlib import colormaps  # noqa: PLC0415

    others = colormaps["tab20"]
    sme = sorted({r.leaders or 0 for r in runs if r.algo == "sme"})
    mine = [r for r in runs if r.mpi == mpi]
    thin = [r.series for r in mine if r.series not in FIXED_STYLES and r.algo != "sme"]
    styles: dict[str, dict[str, Any]] = {}
    for run in mine:
        if run.series in FIXED_STYLES:
            styles[run.series] = dict(FIXED_STYLES[run.series])
        elif run.algo == "sme":
            colour = SME_COLOURS[sme.index(run.leaders or 0) % len(SME_COLOURS)]
            styles[run.series] = {"color": colour, "linewidth": 2.8, "marker": "o"}
        else:  # other stock variants, and mln runs with MPI settings
            i = thin.index(run.series)
            styles[run.series] = {
                "color": others(i % others.N),
                "linewidth": 1.0,
                "linestyle": THIN_STYLES[i % len(THIN_STYLES)],
                "marker": ".",
            }
    return styles


def plot_times(runs: Sequence[BcastRun], path: Path) -> bool:
    """Time per broadcast against size, log-log, a panel per MPI with its legend below it;
    False if no data."""
    panels = [
        [r for r in runs if r.mpi == mpi and r.sizes()]
        for mpi in dict.fromkeys(r.mpi for r in runs)
    ]
    panels = [p for p in panels if p]
    if not panels:
        return False
    height = 4.5 + LEGEND_ROW * -(-max(len(p) for p in panels) // 2)
    fig = Figure(figsize=(7 * len(panels), height), dpi=DPI, layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False, sharey=True)[0]
    for ax, mine in zip(axes, panels):
        styles = _styles(runs, mine[0].mpi)
        for run in mine:
            ys = [(run.time(s) or 0) / 1e3 for s in run.sizes()]
            ax.plot(run.sizes(), ys, markersize=4, label=run.series, **styles[run.series])
        size_axis(ax, [s for r in mine for s in r.sizes()], MAX_TICKS)
        ax.set_yscale("log")
        ax.set_title(mine[0].mpi)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize="small")
    axes[0].set_ylabel(f"time of one broadcast [ms], {METRIC} median")
    fig.suptitle("bcast: time per broadcast against message size")
    fig.savefig(path, format="png")
    return True


def leader_points(mine: Sequence[BcastRun], large: Large) -> list[tuple[int, float]]:
    """(L, best stock time / time) at one size from the hier and sme runs, L from the row's
    "leaders" column (what ran), the fastest run per L."""
    if large.stock is None:
        return []
    best: dict[int, float] = {}
    for run in mine:
        ran, time = run.ran(large.size), run.time(large.size)
        if run.algo in ("hier", "sme") and ran and ran >= 1 and time is not None:
            best[ran] = max(best.get(ran, 0.0), large.stock[1] / time)
    return sorted(best.items())


def plot_leaders(runs: Sequence[BcastRun], path: Path) -> bool:
    """Speed-up over the best stock broadcast against L (1 = hier), a line per size >= LARGE
    and a panel per MPI; False if no MPI has such points."""
    panels = []
    for mpi in dict.fromkeys(r.mpi for r in runs):
        mine = [r for r in runs if r.mpi == mpi]
        lines = [(x.size, p) for x in large_sizes(mine) for p in (leader_points(mine, x),) if p]
        if lines:
            panels.append((mpi, lines))
    if not panels:
        return False
    from matplotlib import colormaps  # noqa: PLC0415

    cmap = colormaps["viridis"]
    fig = Figure(figsize=(5 * len(panels) + 1, 5), dpi=DPI, layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False, sharey=True)[0]
    for ax, (mpi, lines) in zip(axes, panels):
        ticks: set[int] = set()
        for i, (size, points) in enumerate(lines):
            ticks.update(x for x, _ in points)
            colour = cmap(i / max(1, len(lines) - 1) * 0.85)
            ax.plot(*zip(*points), marker="o", color=colour, label=format_size(size))
        ax.axhline(1.0, color="tab:brown", linestyle="--", linewidth=1.5, label="best stock")
        ax.axhline(TARGET, color="gray", linestyle=":", linewidth=1.2, label=f"target {TARGET}x")
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator(sorted(ticks)))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: f"{x:g}"))
        ax.set_xlabel("leaders per node L (1 = hier)")
        ax.set_ylim(bottom=0)
        ax.set_title(mpi)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small", title="message size")
    axes[0].set_ylabel("speed-up: best stock time / time")
    fig.suptitle("bcast: speed-up against leaders per node")
    fig.savefig(path, format="png")
    return True


FIGURES = (
    ("bcast-time.png", plot_times, "time per broadcast against message size"),
    ("bcast-leaders.png", plot_leaders, "speed-up against leaders per node"),
)
LARGE_HEADER = ["size", "best stock [ms]", "hier [ms]", "best sme [ms]", "hier speed-up",
                "sme speed-up", "sme / hier"]  # fmt: skip


# ---- the report section -------------------------------------------------------------------


def section(
    runs: Sequence[Any],
    checks: Sequence[dict[str, Any]],
    out_dir: Path,
    table: Any,
) -> Section:
    """The bcast section: figures into out_dir, tables made with `table(header, rows, right)`."""
    found, notes = bcast_runs(runs)
    md = ["", "### bcast: mln_bcast against the MPI's own broadcast", ""]
    if not found:
        return Section([*md, "No bcast run says its MPI and algorithm."], [], [], notes)
    below, why = bcast_threshold(found, notes)
    said = premise(checks, notes)
    images, figure_md = draw_figures("bcast", found, out_dir, FIGURES)
    md += figure_md
    md.append(
        f"Sizes of {format_size(LARGE)} and above, times in ms (median); best stock = the "
        "fastest MPI_Bcast run of that MPI at that size (default or forced algorithm); "
        "hier and sme speed-up = best stock time / their time; sme / hier = hier time / sme time."
    )
    text: list[str] = []
    small_cells = []
    for mpi in dict.fromkeys(r.mpi for r in found):
        mine = [r for r in found if r.mpi == mpi]
        if not any(r.algo == "stock" for r in mine):
            notes.append(f"{mpi}: no stock bcast run: no speed-ups or small-size ratios")
        rows = large_sizes(mine)
        said += large_statements(mpi, rows)
        if rows:
            large = table(LARGE_HEADER, large_table(rows), right=1)
            md += ["", f"**{mpi}**, {format_size(LARGE)} and above:", "", *large]
            text += ["", f"bcast: {mpi}, {format_size(LARGE)} and above", *large]
        cells = small_ratios(mine, below)
        small_cells += cells
        if cells:
            small = table(*small_table(cells), right=1)
            md += ["", f"**{mpi}**, below the threshold ({format_size(below)}, {why}): "
                   "time / MPI_Bcast's time: the paired test (called in turn, call by call; "
                   "a stock run's column is MPI_Bcast against itself, the method's spread), "
                   "else MPI_Bcast timed right after (the stock test), else the stock run "
                   "with the same MPI settings:", "", *small]  # fmt: skip
            text += ["", f"bcast: {mpi}, below {format_size(below)}", *small]
    said += [line for line in (small_statement(small_cells, below),) if line]
    md += ["", *(f"- {line}" for line in said)]
    return Section(md, images, [*text, *said], notes)
