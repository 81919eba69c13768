"""The matmul part of a report (seed 003, ALGORITHMS.md section 5; the GPU transfer paths of
`gpu-transfer`, the seed's Fig. 5, are in gpu_report.py).

matmul: the seed's Figs. 1-4 - total time, broadcast of B, send of A (Scatterv of its row
blocks) and send of C (Gatherv) against N, a panel per process count, a line per MPI and
transport or placement; a table per MPI x transport x process count; and statements computed
from the data only: each transport against shared memory, Open MPI against MPICH, how the
communication share changes with the process count, and whether verification passed. With
`--gpu` results, Fig. 6: the GPU product's total, send of A and B, send of C against N.

A run's transport or placement is read from its meta, as the CLI writes it: `transport`
(shm: shared memory, tcp: TCP loopback) for a run on this machine; `testbed`, `hosts` and
`nic_rate` for a run across test-bed hosts (1 Gbit/s Ethernet, an unthrottled link).  Skipped
runs (no GPU) come from the skip records the CLI stores beside the results."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from .figures import draw_figures, y_scale
from .mpi import KNOWN
from .stripe_report import DPI, Section
from .testbed.topology import parse_rate

TOTAL, BCAST, SCATTER, DGEMM, GATHER = "total_s", "bcast_s", "scatter_s", "dgemm_s", "gather_s"
GFLOPS, SHARE = "gflops", "comm_share"
H2D, KERNEL, D2H = "h2d_s", "kernel_s", "d2h_s"
SEND_AB = "send_ab_s"  # derived for GPU runs: bcast_s + scatter_s, the seed's Fig. 6 middle
CPU_METRICS = (TOTAL, BCAST, SCATTER, DGEMM, GATHER, GFLOPS, SHARE)
GPU_METRICS = (*CPU_METRICS, H2D, KERNEL, D2H)
COMM = (BCAST, SCATTER, GATHER)  # the phases that communicate
PHASE = {
    TOTAL: "total",
    BCAST: "broadcast of B",
    SCATTER: "send of A",
    DGEMM: "DGEMM",
    GATHER: "send of C",
    GFLOPS: "GFLOP/s",
    SHARE: "communication share",
    H2D: "copy to the GPU",
    KERNEL: "GPU DGEMM",
    D2H: "copy from the GPU",
    SEND_AB: "send of A and B",
}
SHM = "shared memory"
MPI_LINES = ("-", "--", ":", "-.")
PLACE_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")
MARKERS = ("o", "s", "^", "D", "v", "x")

Stat = tuple[float, float, float]  # median, min, max


@dataclass(frozen=True, order=True)
class Where:
    """A transport or placement: its place in tables and legends (shared memory, TCP
    loopback, one test-bed host, rate-limited links slowest first, unthrottled, others) and
    its name."""

    rank: int
    rate_bps: int
    text: str

    def __str__(self) -> str:
        return self.text


def _rate_text(bps: int) -> str:
    for unit, scale in (("Gbit/s", 10**9), ("Mbit/s", 10**6), ("kbit/s", 10**3)):
        if bps >= scale:
            return f"{bps / scale:g} {unit}"
    return f"{bps} bit/s"


def where_of(meta: dict[str, str], nhosts: int) -> Where | None:
    """The transport or placement of a run from its meta; None when it says neither."""
    testbed = meta.get("testbed")
    if testbed:
        hosts = len([h for h in meta.get("hosts", "").split(",") if h]) or nhosts
        if hosts == 1:
            return Where(2, 0, "one test-bed host")
        rate = meta.get("nic_rate", "")
        if rate == "unlimited":
            return Where(4, 0, f"unthrottled link ({hosts} hosts)")
        bps = parse_rate(rate) if rate and "," not in rate else None
        if bps:
            return Where(3, bps, f"{_rate_text(bps)} Ethernet ({hosts} hosts)")
        return Where(5, 0, f"test bed {testbed} ({hosts} hosts)")
    transport = meta.get("transport")
    if transport == "shm":
        return Where(0, 0, SHM)
    if transport == "tcp":
        return Where(1, 0, "TCP loopback")
    return Where(5, 0, transport) if transport else None


def _matrix_n(row: dict[str, Any]) -> int | None:
    """N of a row: its `n` column, else from bytes = 8 N^2."""
    n = row.get("n")
    if isinstance(n, (int, float)) and n >= 1 and float(n).is_integer():
        return int(n)
    root = math.isqrt(int(row["bytes"]) // 8)
    return root if root and 8 * root * root == row["bytes"] else None


def _yes(value: object) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes")


# ---- matmul runs, merged per configuration ---------------------------------------------------


@dataclass
class Config:
    """The rows of every passing run of one MPI x placement x process count x GPU x layout,
    by N (runs that split the N of one configuration between them are merged)."""

    mpi: str
    where: Where
    ranks: int
    gpu: bool
    layout: str
    labels: list[str] = field(default_factory=list)
    rows: dict[int, dict[str, Stat]] = field(default_factory=dict)

    def value(self, n: int, metric: str) -> float | None:
        stat = self.rows.get(n, {}).get(metric)
        return stat[0] if stat is not None else None

    def sizes(self, *metrics: str) -> list[int]:
        """The N with every one of `metrics` (any N when none is given)."""
        return sorted(n for n, m in self.rows.items() if all(k in m for k in metrics))

    @property
    def name(self) -> str:
        layout = f", layout {self.layout}" if self.layout != "rows" or self.gpu else ""
        return f"{self.mpi}, {self.where}, {self.ranks} ranks{layout}"


@dataclass
class Verdicts:
    """Verification over every matmul result, passing or not."""

    runs: int = 0
    rows: int = 0
    failed: list[str] = field(default_factory=list)  # "label (3 errors at N=2000)"


def _shares(stat: Stat, unit: str) -> Stat:
    """comm_share as a fraction, whatever its unit says (%, or a fraction)."""
    scale = 0.01 if "%" in unit or "percent" in unit.lower() else 1.0
    return (stat[0] * scale, stat[1] * scale, stat[2] * scale)


def _send_ab(cells: dict[str, Stat]) -> Stat:
    """The time to get A and B to the ranks: broadcast (if any) plus scatter; the band adds
    their minima and maxima (a bound on the sum's spread)."""
    bcast = cells.get(BCAST, (0.0, 0.0, 0.0))
    scatter = cells[SCATTER]
    return (bcast[0] + scatter[0], bcast[1] + scatter[1], bcast[2] + scatter[2])


def matmul_configs(runs: Sequence[Any]) -> tuple[list[Config], Verdicts, list[str]]:
    """The passing runs merged per configuration (ordered by MPI: openmpi, mpich, user, then
    others as they appear; then placement, ranks, CPU before GPU, layout); the verification of
    all; notes."""
    notes: list[str] = []
    verdicts = Verdicts()
    configs: dict[tuple[str, Where, int, bool, str], Config] = {}
    out = "left out of the matmul tables, figures and statements"
    for run in runs:
        doc = run.doc
        prov = doc["provenance"]
        verdicts.runs += 1
        verdicts.rows += len(doc["rows"])
        if doc["status"] != "pass":
            bad = [f"N={_matrix_n(r) or r['bytes']}" for r in doc["rows"] if r["errors"]]
            at = f" at {', '.join(bad)}" if bad else ""
            verdicts.failed.append(f"{run.label} ({doc['errors']} errors{at})")
            notes.append(f"{run.label}: failed verification ({doc['errors']} errors): {out}")
            continue
        meta, params = prov.get("meta", {}), prov.get("params", {})
        mpi = meta.get("mpi", "")
        where = where_of(meta, int(prov["nhosts"]))
        if not mpi or where is None:
            notes.append(f"{run.label}: no {'MPI' if not mpi else 'transport'} in its meta: {out}")
            continue
        gpu = _yes(params.get("gpu", 0))
        layout = str(params.get("layout", "rows")) or "rows"
        units = {m["name"]: m["unit"] for m in doc["metrics"]}
        wanted = GPU_METRICS if gpu else CPU_METRICS
        if layout == "blocks2x2":  # no broadcast: A's and B's blocks go in the scatter
            wanted = tuple(m for m in wanted if m != BCAST)
        missing = [m for m in wanted if m not in units]
        if missing:
            names = ", ".join(f"{m} ({PHASE[m]})" for m in missing)
            notes.append(f"{run.label}: no {names} in its result: '-' in its table, left out of "
                         "the statements and figures that need it")  # fmt: skip
        key = (mpi, where, int(prov["nranks"]), gpu, layout)
        config = configs.setdefault(key, Config(*key))
        config.labels.append(run.label)
        for row in doc["rows"]:
            n = _matrix_n(row)
            if n is None:
                notes.append(f"{run.label}: a row of {row['bytes']} B has no N: left out")
                continue
            if n in config.rows:
                notes.append(f"{run.label}: N={n} again for {config.name}: the table keeps the "
                             f"first ({config.labels[0]})")  # fmt: skip
                continue
            cells: dict[str, Stat] = {}
            for name, unit in units.items():
                value = row.get(name)
                if isinstance(value, (int, float)):
                    low, high = row.get(f"{name}_min", value), row.get(f"{name}_max", value)
                    stat = (float(value), float(low), float(high))
                    cells[name] = _shares(stat, unit) if name == SHARE else stat
            if gpu and SCATTER in cells:  # rows: B broadcast, blocks2x2: blocks of both
                cells[SEND_AB] = _send_ab(cells)
            config.rows[n] = cells
    seen = list(dict.fromkeys(k[0] for k in configs))  # Open MPI, MPICH, then others as found
    mpis = [m for m in KNOWN if m in seen] + [m for m in seen if m not in KNOWN]
    order = sorted(configs, key=lambda k: (mpis.index(k[0]), k[1], k[2], k[3], k[4] != "rows"))
    return [configs[k] for k in order], verdicts, notes


# ---- tables and statements ----------------------------------------------------------------


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def config_table(config: Config) -> tuple[list[str], list[list[str]]]:
    """Header and rows of one configuration: a row per N."""
    if config.gpu:
        metrics = (TOTAL, BCAST, SCATTER, H2D, KERNEL, D2H, GATHER)
        heads = ["total [s]", "bcast [s]", "scatter [s]", "h2d [s]", "kernel [s]", "d2h [s]",
                 "gather [s]"]  # fmt: skip
    else:
        metrics = (TOTAL, BCAST, SCATTER, DGEMM, GATHER)
        heads = ["total [s]", "bcast [s]", "scatter [s]", "dgemm [s]", "gather [s]"]
    rows = []
    for n in config.sizes():
        cells = [str(n), *(seconds(config.value(n, m)) for m in metrics)]
        gflops = config.value(n, GFLOPS)
        cells += ["-" if gflops is None else f"{gflops:.3g}", _percent(config.value(n, SHARE))]
        rows.append(cells)
    return ["N", *heads, "GFLOP/s", "comm share"], rows


def _versus(ratio: float) -> str:
    """'3.10x slower than', '1.25x faster than' or 'as fast as' (ratio = time / other's)."""
    if f"{ratio:.2f}" == "1.00":
        return "as fast as"
    return f"{ratio:.2f}x slower than" if ratio > 1 else f"{1 / ratio:.2f}x faster than"


def _short(ratio: float) -> str:
    return _versus(ratio).removesuffix(" than").removesuffix(" as")


def compare(mine: Config, other: Config, phases: Sequence[str]) -> tuple[int, str, str] | None:
    """At the largest N both measured: (N, "broadcast of B is 3.10x slower than", the other
    phases in parentheses) over `phases` both have there, the first one leading; None without
    a shared N."""
    shared = sorted(set(mine.sizes()) & set(other.sizes()))
    if not shared:
        return None
    n = shared[-1]
    said = []
    for metric in phases:
        a, b = mine.value(n, metric), other.value(n, metric)
        if a is not None and b:
            said.append((PHASE[metric], a / b))
    if not said:
        return None
    (name, ratio), rest = said[0], said[1:]
    more = f" ({', '.join(f'{p}: {_short(r)}' for p, r in rest)})" if rest else ""
    return n, f"{name} is {_versus(ratio)}", more


def transport_statements(configs: Sequence[Config]) -> list[str]:
    """Each transport against shared memory: same MPI, process count, layout, N."""
    said = []
    for mine in configs:
        if mine.gpu or mine.where.text == SHM:
            continue
        base = next(
            (c for c in configs if not c.gpu and c.where.text == SHM and
             (c.mpi, c.ranks, c.layout) == (mine.mpi, mine.ranks, mine.layout)), None,
        )  # fmt: skip
        if base is None:
            said.append(f"{mine.mpi}: {mine.where}, {mine.ranks} ranks: no shared-memory run "
                        "with the same ranks to compare with.")  # fmt: skip
            continue
        found = compare(mine, base, (BCAST, SCATTER, GATHER, TOTAL))
        if found is None:
            said.append(f"{mine.mpi}: {mine.where} and {SHM}, {mine.ranks} ranks: no N "
                        "measured by both.")  # fmt: skip
            continue
        n, head, more = found
        said.append(f"{mine.mpi}: {mine.where} {head} {SHM} at N={n}, {mine.ranks} "
                    f"ranks{more}.")  # fmt: skip
    return said


def mpi_statements(configs: Sequence[Config]) -> list[str]:
    """The first MPI against each other one, per transport, process count and layout."""
    said = []
    mpis = list(dict.fromkeys(c.mpi for c in configs))
    for first in configs:
        if first.gpu or first.mpi != mpis[0]:
            continue
        for other in configs:
            if other.gpu or other.mpi == first.mpi:
                continue
            if (other.where, other.ranks, other.layout) != (first.where, first.ranks, first.layout):
                continue
            found = compare(first, other, (TOTAL, BCAST, SCATTER, GATHER, DGEMM))
            if found is None:
                continue
            n, head, more = found
            said.append(f"{first.where}, {first.ranks} ranks, N={n}: {first.mpi} {head} "
                        f"{other.mpi}{more}.")  # fmt: skip
    return said


def _largest_phase(config: Config, n: int) -> str | None:
    timed = [(config.value(n, m), m) for m in COMM if config.value(n, m) is not None]
    return PHASE[max(timed)[1]] if timed else None  # type: ignore[type-var]


def scaling_statements(configs: Sequence[Config]) -> list[str]:
    """Per MPI x placement x layout measured at two or more process counts, at the largest N
    measured at all of them: the communication share at each, the broadcast of B against
    DGEMM from the fewest to the most ranks, and which phase communicates longest; then how
    often the seed's observation (the broadcast dominates and stays with P) holds."""
    said = []
    dominant: list[bool] = []
    bcast_x: list[float] = []
    dgemm_x: list[float] = []
    keys = list(dict.fromkeys((c.mpi, c.where, c.layout) for c in configs if not c.gpu))
    for mpi, where, layout in keys:
        mine = [
            c for c in configs if not c.gpu and (c.mpi, c.where, c.layout) == (mpi, where, layout)
        ]
        if len(mine) < 2:
            continue
        shared = set.intersection(*(set(c.sizes(BCAST, DGEMM)) for c in mine))
        head = f"{mpi}, {where}" + (f", layout {layout}" if layout != "rows" else "")
        if not shared:
            said.append(f"{head}: no N measured at every process count "
                        f"({', '.join(str(c.ranks) for c in mine)} ranks).")  # fmt: skip
            continue
        n = max(shared)
        low, high = mine[0], mine[-1]
        shares = ", ".join(f"{_percent(c.value(n, SHARE))} at {c.ranks} ranks" for c in mine)
        b = [c.value(n, BCAST) or 0.0 for c in (low, high)]  # measured: n is in `shared`
        d = [c.value(n, DGEMM) or 0.0 for c in (low, high)]
        rb, rd = _div(b[1], b[0]), _div(d[1], d[0])
        largest = [_largest_phase(c, n) for c in mine]
        if all(p == PHASE[BCAST] for p in largest):
            where_big = "at every process count"
        else:
            where_big = "not at every process count (" + ", ".join(
                f"{p} at {c.ranks} ranks" for c, p in zip(mine, largest)) + ")"  # fmt: skip
        dominant.append(all(p == PHASE[BCAST] for p in largest))
        bcast_x += [rb] if rb else []
        dgemm_x += [rd] if rd else []
        said.append(
            f"{head}, N={n}: communication share {shares}; from {low.ranks} to {high.ranks} "
            f"ranks the broadcast of B took {_ratio(rb)} as long ({seconds(b[0])} s -> "
            f"{seconds(b[1])} s) and DGEMM {_ratio(rd)} ({seconds(d[0])} s -> {seconds(d[1])} s); "
            f"the broadcast of B is the longest communication phase {where_big}."
        )
    if dominant:
        said.append(
            f"The seed's observation (the broadcast of B dominates the communication and "
            f"stays as P grows, while the computation shrinks): the broadcast of B is the "
            f"longest communication phase at every process count in {sum(dominant)} of "
            f"{len(dominant)} MPI x transport configurations; from the fewest to the most "
            f"ranks it took {span(bcast_x)} as long, DGEMM {span(dgemm_x)}."
        )
    return said


def _div(num: float, den: float) -> float | None:
    return num / den if den else None


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def span(values: Sequence[float]) -> str:
    """The range of ratios: "1.00 to 1.30x", or "1.10x" when both ends round alike."""
    if not values:
        return "-"
    low, high = f"{min(values):.2f}", f"{max(values):.2f}"
    return f"{low}x" if low == high else f"{low} to {high}x"


def verification_statement(verdicts: Verdicts, skipped: Sequence[dict[str, Any]]) -> str:
    """Whether every matmul run verified its product (Freivalds' check or exact), counted."""
    runs, rows = verdicts.runs, verdicts.rows
    skip = f" {len(skipped)} run(s) skipped (nothing measured or verified)." if skipped else ""
    if not verdicts.failed:
        return (f"Verification passed in every run: {runs} runs, {rows} rows (one per N), 0 "
                f"errors.{skip}")  # fmt: skip
    return (f"Verification failed in {len(verdicts.failed)} of {runs} runs: "
            f"{'; '.join(verdicts.failed)}.{skip}")  # fmt: skip


def _asked_gpu(record: dict[str, Any]) -> bool:
    """Whether a skip record is of a GPU run: option gpu, or --gpu after `--`."""
    return _yes(record.get("options", {}).get("gpu", 0)) or "--gpu" in record.get("args", [])


def skipped_statement(what: str, skipped: Sequence[dict[str, Any]]) -> str | None:
    if not skipped:
        return None
    listed = "; ".join(f"{s.get('label', '?')}: {s.get('reason', '?')}" for s in skipped)
    return f"{what}: {len(skipped)} run(s) skipped: {listed}."


def gpu_statements(configs: Sequence[Config]) -> list[str]:
    """The GPU product per MPI and layout: each placement against the first one."""
    said = []
    gpus = [c for c in configs if c.gpu]
    for mine in gpus:
        base = next(c for c in gpus if (c.mpi, c.layout, c.ranks) == (mine.mpi, mine.layout,
                                                                     mine.ranks))  # fmt: skip
        if base is mine:
            continue
        found = compare(mine, base, (SEND_AB, GATHER, TOTAL))
        if found is not None:
            n, head, more = found
            said.append(f"{mine.mpi}, GPU, layout {mine.layout}: {mine.where} {head} "
                        f"{base.where} at N={n}, {mine.ranks} ranks{more}.")  # fmt: skip
    return said


# ---- figures --------------------------------------------------------------------------------


def _styles(configs: Sequence[Config]) -> dict[tuple[str, Where, str], dict[str, Any]]:
    """Colour and marker per placement, line style per MPI, the same in every figure."""
    mpis = list(dict.fromkeys(c.mpi for c in configs))
    places = sorted({c.where for c in configs})
    styles = {}
    for c in configs:
        p = places.index(c.where)
        styles[(c.mpi, c.where, c.layout)] = {
            "color": PLACE_COLOURS[p % len(PLACE_COLOURS)],
            "marker": MARKERS[p % len(MARKERS)],
            "linestyle": MPI_LINES[mpis.index(c.mpi) % len(MPI_LINES)],
            "linewidth": 1.6,
            "markersize": 4,
        }
    return styles


def _legend(fig: Any, axes: Sequence[Any]) -> None:
    """One legend under the panels: every line's label once, in the order first drawn."""
    seen: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    if seen:
        fig.legend(list(seen.values()), list(seen), loc="outside lower center", ncol=4,
                   fontsize="small")  # fmt: skip


def _n_axis(ax: Any, sizes: Sequence[int]) -> None:
    ax.xaxis.set_major_locator(FixedLocator(sorted(set(sizes)) or [1]))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: f"{x:g}"))
    ax.set_xlabel("N (matrices N x N)")


def _line(ax: Any, config: Config, metric: str, label: str, style: dict[str, Any]) -> list[float]:
    xs = config.sizes(metric)
    if not xs:
        return []
    stats = [config.rows[n][metric] for n in xs]
    (line,) = ax.plot(xs, [s[0] for s in stats], label=label, **style)
    ax.fill_between(xs, [s[1] for s in stats], [s[2] for s in stats],
                    color=line.get_color(), alpha=0.12, linewidth=0)  # fmt: skip
    return [v for s in stats for v in s]


def _phase_figure(configs: Sequence[Config], metric: str, title: str, path: Path) -> bool:
    """One of the seed's Figs. 1-4: `metric` against N, a panel per process count, a line per
    MPI x placement (x layout); False when no CPU run has it."""
    cpu = [c for c in configs if not c.gpu and c.sizes(metric)]
    if not cpu:
        return False
    counts = sorted({c.ranks for c in cpu})
    fig = Figure(figsize=(5.6 * len(counts) + 0.4, 4.8), dpi=DPI, layout="constrained")
    axes = fig.subplots(1, len(counts), squeeze=False)[0]
    styles = _styles(configs)
    for ax, ranks in zip(axes, counts):
        values: list[float] = []
        sizes: list[int] = []
        for c in (c for c in cpu if c.ranks == ranks):
            label = f"{c.mpi}, {c.where}" + (f", {c.layout}" if c.layout != "rows" else "")
            values += _line(ax, c, metric, label, styles[(c.mpi, c.where, c.layout)])
            sizes += c.sizes(metric)
        _n_axis(ax, sizes)
        y_scale(ax, values)
        ax.set_ylabel(f"{PHASE[metric]} [s], median")
        ax.set_title(f"{ranks} ranks")
        ax.grid(True, which="major", alpha=0.3)
    _legend(fig, axes)
    fig.suptitle(f"matmul: {title} (band: min-max of the repetitions)")
    fig.savefig(path, format="png")
    return True


def plot_total(configs: Sequence[Config], path: Path) -> bool:
    return _phase_figure(configs, TOTAL, "total time (seed Fig. 1)", path)


def plot_bcast(configs: Sequence[Config], path: Path) -> bool:
    return _phase_figure(configs, BCAST, "broadcast of B (seed Fig. 2)", path)


def plot_scatter(configs: Sequence[Config], path: Path) -> bool:
    return _phase_figure(configs, SCATTER, "send of A, Scatterv of row blocks (seed Fig. 3)", path)


def plot_gather(configs: Sequence[Config], path: Path) -> bool:
    return _phase_figure(configs, GATHER, "send of C, Gatherv (seed Fig. 4)", path)


def plot_gpu(configs: Sequence[Config], path: Path) -> bool:
    """The seed's Fig. 6: the GPU product's total, send of A and B, send of C against N, a
    line per MPI x placement x layout (x ranks)."""
    gpus = [c for c in configs if c.gpu]
    if not gpus:
        return False
    fig = Figure(figsize=(16.0, 4.8), dpi=DPI, layout="constrained")
    axes = fig.subplots(1, 3, squeeze=False)[0]
    styles = _styles(configs)
    many = len({c.ranks for c in gpus}) > 1
    for ax, metric, name in zip(
        axes, (TOTAL, SEND_AB, GATHER), (PHASE[TOTAL], PHASE[SEND_AB], PHASE[GATHER])
    ):
        values: list[float] = []
        sizes: list[int] = []
        for c in gpus:
            label = f"{c.mpi}, {c.where}, {c.layout}" + (f", {c.ranks} ranks" if many else "")
            style = {**styles[(c.mpi, c.where, c.layout)]}
            style["linestyle"] = "-" if c.layout == "rows" else "--"
            values += _line(ax, c, metric, label, style)
            sizes += c.sizes(metric)
        _n_axis(ax, sizes)
        y_scale(ax, values)
        ax.set_ylabel(f"{name} [s], median")
        ax.set_title(name)
        ax.grid(True, which="major", alpha=0.3)
    _legend(fig, axes)
    fig.suptitle("matmul --gpu: the product on the GPU (seed Fig. 6)")
    fig.savefig(path, format="png")
    return True


FIGURES = (
    ("matmul-total.png", plot_total, "total time against N (seed Fig. 1)"),
    ("matmul-bcast.png", plot_bcast, "broadcast of B against N (seed Fig. 2)"),
    ("matmul-scatter.png", plot_scatter, "send of A against N (seed Fig. 3)"),
    ("matmul-gather.png", plot_gather, "send of C against N (seed Fig. 4)"),
    ("matmul-gpu.png", plot_gpu, "the GPU product against N (seed Fig. 6)"),
)


# ---- the matmul section -------------------------------------------------------------------


def section(
    runs: Sequence[Any],
    checks: Sequence[dict[str, Any]],
    out_dir: Path,
    table: Any,
    skipped: Sequence[dict[str, Any]] = (),
) -> Section:
    """The matmul section: figures into out_dir, tables made with `table(header, rows, right)`."""
    del checks  # the link's rate is in each run's meta (nic_rate)
    configs, verdicts, notes = matmul_configs(runs)
    md = ["", "### matmul: the matrix product over MPI (seed 003, Figs. 1-4 and 6)", ""]
    images, figure_md = draw_figures("matmul", configs, out_dir, FIGURES)
    md += figure_md
    md.append(
        "Times in seconds (max over ranks, median of the repetitions): total, bcast = "
        "broadcast of B, scatter = send of A (row blocks; GPU blocks2x2: blocks of A and B), "
        "dgemm = the local product, gather = send of C; GFLOP/s = 2 N^3 / total; comm share = "
        "the share of the total spent communicating. Fig. 6's send of A and B = bcast + "
        "scatter; h2d, kernel, d2h: copies to the GPU, the cuBLAS product, copy back."
    )
    text: list[str] = []
    for config in configs:
        lines = table(*config_table(config), right=0)
        title = f"{config.name} ({', '.join(config.labels)})"
        md += ["", f"**{title}**:", "", *lines]
        text += ["", f"matmul: {title}", *lines]
    on_gpu = [s for s in skipped if _asked_gpu(s)]
    said = [
        *transport_statements(configs),
        *mpi_statements(configs),
        *scaling_statements(configs),
        *gpu_statements(configs),
    ]
    if not any(c.gpu for c in configs) and not on_gpu:
        said.append("GPU matmul: no result (Fig. 6 not drawn).")
    for what, some in (("GPU matmul", on_gpu), ("matmul", [s for s in skipped if s not in on_gpu])):
        line = skipped_statement(what, some)
        said += [line] if line else []
    said.append(verification_statement(verdicts, skipped))
    md += ["", *(f"- {s}" for s in said)]
    return Section(md, images, [*text, "", *said], notes)
