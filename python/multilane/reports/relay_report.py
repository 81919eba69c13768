"""The relay part of a report (benchmark `relay`, seed 004, docs/RELAY.md): direct (one stock
MPI job over the routable sites) against relayed (one MPI job per private site, joined by 1, 2,
4 or 8 trunks of gateways: `launch = "grid"`), per MPI and WAN one-way delay.

Figures: (a) small-message one-way latency, direct and relayed, against the WAN delay, and the
relay's added one-way latency (relayed latency_us minus direct latency_us: latency_us is
already half the round trip); (b) stream bandwidth against the number of trunks, with the
lines k x the front-end NIC rate (125 Mbit/s), the WAN rate, iperf3 over the same k front-end
paths (the test bed's check: one stream per front-end pair, summed over the first k) and the
direct run, a panel per WAN delay; (c) all-to-all (aggregate both ways) relayed against direct.

Tables: bandwidth with k trunks / (k x 125 Mbit/s), / iperf3 over the same k paths, and with
the most trunks / the WAN, each marked against the target (>= 0.9); the added latency at 0 ms
against its target (<= 50 us); the bytes each trunk carried (the gateways' summaries in
provenance.grid); every metric per MPI x delay x path.

A run's place in the matrix comes from its meta as the CLI writes it: `mpi` (or `site_mpi`),
`wan_delay`, `launch` ("grid") and `trunks`, `network`; `frontend_nic_rate` and `wan_rate`.
Everything is computed from the result files and the check files (testbed-check*.json): no
number or statement here is written by hand."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from ..figures import draw_figures, log_y
from ..sizes import format_size
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

LATENCY, STREAM, ALLTOALL = "latency_us", "stream_Mbps", "alltoall_Mbps"
METRICS = (LATENCY, STREAM, ALLTOALL)
SMALL_SIZE = 8  # bytes: the small message of figure (a) and of the added-latency verdict
LATENCY_TARGET_US = 50.0  # the relay adds at most this one way at 0 ms (seed: ~25 us)
RATIO_TARGET = 0.9  # bandwidth over k x NIC, over iperf3 on the same paths, over the WAN
MB = 1e6


@dataclass(frozen=True)
class RelayRun:
    """One relay result: its rows by message size and its place (seed004.Place: MPI, WAN
    delay, trunks or DIRECT, rates, the payload bytes of each trunk's gateways)."""

    label: str
    rows: dict[int, dict[str, Any]]
    place: Place

    @property
    def mpi(self) -> str:
        return self.place.mpi

    @property
    def delay_s(self) -> float | None:
        return self.place.delay_s

    @property
    def trunks(self) -> int:
        return self.place.trunks

    @property
    def frontend_bps(self) -> float | None:
        return self.place.frontend_bps

    @property
    def wan_bps(self) -> float | None:
        return self.place.wan_bps

    @property
    def trunk_bytes(self) -> Mapping[str, Mapping[int, int]] | None:
        return self.place.trunk_bytes

    @property
    def path(self) -> str:
        return path_name(self.trunks)

    def value(self, metric: str, size: int) -> float | None:
        value = self.rows.get(size, {}).get(metric)
        return float(value) if isinstance(value, (int, float)) and value >= 0 else None

    def sizes(self, metric: str) -> list[int]:
        return sorted(s for s in self.rows if self.value(metric, s) is not None)

    def peak(self, metric: str) -> tuple[float, int] | None:
        """The highest median of a bandwidth over the sizes, and its size."""
        found = [(v, s) for s in self.sizes(metric) if (v := self.value(metric, s)) is not None]
        found = [f for f in found if f[0] > 0]
        return max(found) if found else None


def relay_runs(runs: Sequence[Any]) -> tuple[list[RelayRun], list[str]]:
    """The passing relay runs that say their MPI and path (meta), in MPI, delay and path
    order; notes on the others."""
    found: list[RelayRun] = []
    notes: list[str] = []
    for run in runs:
        if run.doc.get("status") != "pass":
            notes.append(f"{run.label}: status {run.doc.get('status')}: left out of the relay part")
            continue
        place = place_of(run.label, run.doc)
        if isinstance(place, str):
            notes.append(f"{place}: left out of the relay part")
            continue
        rows = {int(r["bytes"]): r for r in run.doc["rows"]}
        found.append(RelayRun(run.label, rows, place))
    mpis = mpi_order(r.mpi for r in found)
    found.sort(key=lambda r: (mpis.index(r.mpi), r.delay_s or 0.0, r.trunks))
    return found, notes


class Matrix:
    """The runs by (MPI, WAN delay, trunks); a metric of a cell is the first run's that
    measured it (a cell is usually a run per test)."""

    def __init__(self, runs: Sequence[RelayRun]) -> None:
        self.runs = list(runs)
        self.cells: dict[tuple[str, float | None, int], list[RelayRun]] = {}
        for run in self.runs:
            self.cells.setdefault((run.mpi, run.delay_s, run.trunks), []).append(run)
        self.mpis = list(dict.fromkeys(r.mpi for r in self.runs))
        self.delays = delay_order(r.delay_s for r in self.runs)
        self.trunks = sorted({r.trunks for r in self.runs if r.trunks != DIRECT})

    def run(self, mpi: str, delay: float | None, trunks: int, metric: str) -> RelayRun | None:
        return next((r for r in self.cells.get((mpi, delay, trunks), []) if r.sizes(metric)), None)

    def value(
        self, mpi: str, delay: float | None, trunks: int, metric: str, size: int
    ) -> float | None:
        run = self.run(mpi, delay, trunks, metric)
        return None if run is None else run.value(metric, size)

    def peak(
        self, mpi: str, delay: float | None, trunks: int, metric: str
    ) -> tuple[float, int] | None:
        run = self.run(mpi, delay, trunks, metric)
        return None if run is None else run.peak(metric)

    def added(self, mpi: str, delay: float | None, trunks: int, size: int) -> float | None:
        """The relay's added one-way latency: relayed latency_us - direct latency_us (both
        one-way already); the mixed grid is compared with the direct run of site a's MPI."""
        relayed = self.value(mpi, delay, trunks, LATENCY, size)
        direct = self.value(self.direct_mpi(mpi), delay, DIRECT, LATENCY, size)
        return None if relayed is None or direct is None else relayed - direct

    def direct_mpi(self, mpi: str) -> str:
        return direct_mpi(mpi)

    def frontend_bps(self) -> float | None:
        return next((r.frontend_bps for r in self.runs if r.frontend_bps), None)

    def wan_bps(self) -> float | None:
        return next((r.wan_bps for r in self.runs if r.wan_bps), None)

    def small_size(self) -> int | None:
        """SMALL_SIZE if a latency run has it, else the smallest positive size measured."""
        sizes = sorted({s for r in self.runs for s in r.sizes(LATENCY)})
        if SMALL_SIZE in sizes:
            return SMALL_SIZE
        positive = [s for s in sizes if s > 0]
        return positive[0] if positive else (sizes[0] if sizes else None)


# --- the test bed's check -----------------------------------------------------------------


@dataclass(frozen=True)
class Iperf:
    """iperf3 from the check files: Mbit/s of each front-end pair's WAN NICs (one stream,
    in front-end order), all pairs at once, and the WAN between the direct network's hosts
    (the most streams measured)."""

    frontends: tuple[float, ...] = ()
    all_pairs: float | None = None
    wan: float | None = None
    wan_streams: int = 0

    def first(self, k: int) -> float | None:
        """The sum over the first k front-end pairs (None when fewer were measured)."""
        return sum(self.frontends[:k]) if 0 < k <= len(self.frontends) else None


def iperf_of(checks: Sequence[dict[str, Any]]) -> Iperf:
    frontends: list[float] = []
    all_pairs = wan = None
    wan_streams = 0
    for doc in checks:
        rows = [r.get("values", {}) for r in doc.get("rows", [])]
        fronts = [
            v["bps"] / MB
            for v in rows
            if v.get("frontend") and isinstance(v.get("bps"), (int, float)) and v["bps"] > 0
        ]
        if fronts and not frontends:
            frontends = fronts
        for v in rows:
            bps, streams = v.get("bps"), v.get("streams")
            if not isinstance(bps, (int, float)) or bps <= 0 or not isinstance(streams, int):
                continue
            if "pairs" in v and all_pairs is None:
                all_pairs = bps / MB
            elif "frontend" not in v and "pairs" not in v and streams > wan_streams:
                wan, wan_streams = bps / MB, streams
    return Iperf(tuple(frontends), all_pairs, wan, wan_streams)


# --- tables ---------------------------------------------------------------------------------


def _mark(value: float | None, ok: Callable[[float], bool]) -> str:
    if value is None:
        return "-"
    return f"{value:.2f} {'pass' if ok(value) else 'FAIL'}"


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def trunks_used(run: RelayRun | None) -> tuple[int, int] | None:
    """(trunks whose gateways sent payload across the WAN, trunks) of a relayed run."""
    if run is None or not run.trunk_bytes:
        return None
    per_trunk: dict[int, int] = {}
    for trunks in run.trunk_bytes.values():
        for t, sent in trunks.items():
            per_trunk[t] = per_trunk.get(t, 0) + sent
    return sum(1 for sent in per_trunk.values() if sent > 0), run.trunks


def fills_wan(k: int, nic: float | None, wan: float | None, most: int) -> bool:
    """Whether k trunks are meant to fill the WAN (k x NIC reaches its rate; without a NIC
    rate: the most trunks), so that bandwidth / WAN has a target."""
    if not wan:
        return False
    return k * nic >= wan * 0.999 if nic else k == most


def bandwidth_rows(m: Matrix, iperf: Iperf) -> list[list[str]]:
    """Per MPI, delay and trunks: the stream bandwidth (peak over its sizes) and its ratios."""
    nic, wan = m.frontend_bps(), m.wan_bps()
    most = max(m.trunks, default=0)
    rows = []
    for mpi in m.mpis:
        for delay in m.delays:
            direct = m.peak(m.direct_mpi(mpi), delay, DIRECT, STREAM)
            for k in m.trunks:
                peak = m.peak(mpi, delay, k, STREAM)
                if peak is None:
                    continue
                bw, size = peak
                line = k * nic / MB if nic else None
                paths = iperf.first(k)
                over_wan = bw / (wan / MB) if fills_wan(k, nic, wan, most) else None
                used = trunks_used(m.run(mpi, delay, k, STREAM))
                rows.append(
                    [
                        mpi,
                        delay_name(delay),
                        str(k),
                        format_number(bw),
                        format_size(size),
                        _mark(bw / line if line else None, lambda r: r >= RATIO_TARGET),
                        format_number(paths),
                        _mark(bw / paths if paths else None, lambda r: r >= RATIO_TARGET),
                        _mark(over_wan, lambda r: r >= RATIO_TARGET),
                        "-" if used is None else
                        f"{used[0]}/{used[1]} {'pass' if used[0] == used[1] else 'FAIL'}",
                        format_number(direct[0] if direct else None),
                    ]
                )  # fmt: skip
    return rows


BANDWIDTH_HEADER = [
    "MPI",
    "WAN delay",
    "trunks",
    "stream Mbit/s",
    "at",
    "/ (k x NIC)",
    "iperf3 k paths",
    "/ iperf3",
    "/ WAN",
    "trunks used",
    "direct Mbit/s",
]


def latency_rows(m: Matrix, size: int) -> list[list[str]]:
    """Per MPI and trunks: direct and relayed one-way latency at 0 ms, the added latency at
    every delay, and the verdict at 0 ms (the first delay when 0 ms was not run)."""
    rows = []
    first = m.delays[0] if m.delays else None
    for mpi in m.mpis:
        for k in m.trunks:
            added = [m.added(mpi, d, k, size) for d in m.delays]
            if all(a is None for a in added):
                continue
            rows.append(
                [
                    mpi,
                    str(k),
                    _us(m.value(m.direct_mpi(mpi), first, DIRECT, LATENCY, size)),
                    _us(m.value(mpi, first, k, LATENCY, size)),
                    *(_us(a) for a in added),
                    "-"
                    if added[0] is None
                    else f"{added[0]:.1f} {'pass' if added[0] <= LATENCY_TARGET_US else 'FAIL'}",
                ]
            )
    return rows


def latency_header(m: Matrix) -> list[str]:
    first = delay_name(m.delays[0]) if m.delays else "-"
    return [
        "MPI",
        "trunks",
        f"direct {first} [us]",
        f"relayed {first} [us]",
        *(f"added {delay_name(d)} [us]" for d in m.delays),
        f"<= {LATENCY_TARGET_US:g} us at {first}",
    ]


def trunk_rows(m: Matrix) -> list[list[str]]:
    """Per relayed stream run: MB each trunk's gateways sent across the WAN (both sites)."""
    most = max(m.trunks, default=0)
    rows = []
    for mpi in m.mpis:
        for delay in m.delays:
            for k in m.trunks:
                run = m.run(mpi, delay, k, STREAM)
                if run is None or not run.trunk_bytes:
                    continue
                sent = [sum(site.get(t, 0) for site in run.trunk_bytes.values()) for t in range(k)]
                cells = [f"{s / MB:.1f}" for s in sent] + ["-"] * (most - k)
                rows.append([mpi, delay_name(delay), str(k), *cells])
    return rows


def metric_rows(m: Matrix, metric: str) -> tuple[list[str], list[list[str]]]:
    """Every run's medians of a metric: rows MPI x delay x path, columns its sizes."""
    sizes = sorted({s for r in m.runs for s in r.sizes(metric)})
    rows = []
    for mpi in m.mpis:
        for delay in m.delays:
            for k in (DIRECT, *m.trunks):
                run = m.run(mpi, delay, k, metric)
                if run is None:
                    continue
                values = [run.value(metric, s) for s in sizes]
                rows.append([mpi, delay_name(delay), path_name(k), *map(format_number, values)])
    return ["MPI", "WAN delay", "path", *map(format_size, sizes)], rows


def statements(m: Matrix, iperf: Iperf, size: int | None) -> list[str]:
    """What the numbers say, each against its target."""
    said = []
    nic, wan = m.frontend_bps(), m.wan_bps()
    most = max(m.trunks, default=0)
    if size is not None and m.delays:
        first = m.delays[0]
        for mpi in m.mpis:
            added = [(k, a) for k in m.trunks if (a := m.added(mpi, first, k, size)) is not None]
            if added:
                worst = max(a for _, a in added)
                verdict = "met" if worst <= LATENCY_TARGET_US else "NOT met"
                each = ", ".join(f"{_us(a)} us ({path_name(k)})" for k, a in added)
                said.append(
                    f"{mpi}: the relay adds {each} one way at {format_size(size)} B and WAN delay "
                    f"{delay_name(first)} (relayed - direct latency_us): target <= "
                    f"{LATENCY_TARGET_US:g} us {verdict}."
                )
    for mpi in m.mpis:
        for delay in m.delays:
            peak = m.peak(mpi, delay, most, STREAM) if most else None
            if peak is None:
                continue
            parts = [f"{format_number(peak[0])} Mbit/s"]
            if nic:
                parts.append(f"{peak[0] / (most * nic / MB):.2f} of {most} x {nic / MB:g}")
            paths = iperf.first(most)
            if paths:
                parts.append(f"{peak[0] / paths:.2f} of iperf3 over the same paths")
            if wan and fills_wan(most, nic, wan, most):
                parts.append(f"{peak[0] / (wan / MB):.2f} of the WAN")
            said.append(
                f"{mpi}, WAN delay {delay_name(delay)}: stream with {most} trunks "
                + ", ".join(parts)
                + "."
            )
    idle = []
    for run in m.runs:
        used = trunks_used(run) if run.sizes(STREAM) else None
        if used is not None and used[0] < used[1]:
            idle.append(f"{run.label} ({used[0]}/{used[1]})")
    streamed = [r for r in m.runs if r.sizes(STREAM) and r.trunk_bytes]
    if streamed:
        said.append(
            "Every trunk carried stream data in every relayed stream run."
            if not idle
            else f"Trunks without stream data: {', '.join(idle)}."
        )
    if iperf.frontends:
        said.append(
            "iperf3 over the front-end paths comes from the test bed's check when the private "
            "network came up (at the scenario's own WAN delay), one stream per pair: "
            + ", ".join(f"{v:.0f}" for v in iperf.frontends)
            + " Mbit/s"
            + (f"; all pairs at once {iperf.all_pairs:.0f} Mbit/s" if iperf.all_pairs else "")
            + "."
        )
    return said


# --- figures --------------------------------------------------------------------------------


def _trunk_axis(ax: Any, trunks: Sequence[int]) -> None:
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(list(trunks)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _p: f"{x:g}"))
    ax.set_xlabel("trunks (gateways per site)")
    if len(trunks) > 1:
        ax.set_xlim(min(trunks) / 1.3, max(trunks) * 1.3)


def _style(m: Matrix, mpi: str, k: int) -> dict[str, Any]:
    return line_style(m.mpis, m.trunks, mpi, k)


def plot_latency(m: Matrix, path: Path) -> bool:
    """(a) One-way latency at the small size against the WAN delay, direct and relayed; the
    relay's added one-way latency with the target."""
    size = m.small_size()
    if size is None or not m.delays:
        return False
    fig = Figure(figsize=(13, 5), dpi=DPI, layout="constrained")
    left, right = fig.subplots(1, 2)
    xs = delay_axis(left, m.delays)
    delay_axis(right, m.delays)
    drawn = False
    for mpi in m.mpis:
        for k in (DIRECT, *m.trunks):
            points = [
                (x, v) for x, d in zip(xs, m.delays) if (v := m.value(mpi, d, k, LATENCY, size))
            ]
            if points:
                left.plot(*zip(*points), label=f"{mpi} {path_name(k)}", **_style(m, mpi, k))
                drawn = True
            if k == DIRECT:
                continue
            added = [
                (x, a) for x, d in zip(xs, m.delays) if (a := m.added(mpi, d, k, size)) is not None
            ]
            if added:
                right.plot(*zip(*added), label=f"{mpi} {path_name(k)}", **_style(m, mpi, k))
    if not drawn:
        return False
    log_y(left)
    left.set_ylabel(f"latency_us at {format_size(size)} B [us], median (one way)")
    left.set_title("(a) small-message latency: direct and relayed")
    right.axhline(LATENCY_TARGET_US, color="tab:red", linestyle=":", linewidth=1.2,
                  label=f"target {LATENCY_TARGET_US:g} us")  # fmt: skip
    right.axhline(0, color="grey", linewidth=0.8)
    right.set_ylabel("added one-way latency [us] (relayed - direct)")
    right.set_title(f"the relay's added one-way latency at {format_size(size)} B")
    for ax in (left, right):
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="x-small", ncol=2)
    fig.savefig(path, format="png")
    return True


def _panels(m: Matrix, title: str) -> tuple[Figure, list[Any]]:
    n = max(1, len(m.delays))
    fig = Figure(figsize=(4.6 * n + 1, 4.8), dpi=DPI, layout="constrained")
    axes = list(fig.subplots(1, n, squeeze=False)[0])
    fig.suptitle(title)
    return fig, axes


def _relayed_and_direct(ax: Any, m: Matrix, delay: float | None, test: str, color: str) -> float:
    """Per MPI on one panel: the test's peak against the trunks (relayed) and the direct run as a
    horizontal line (not for a mixed grid); the highest value drawn."""
    top = 0.0
    for mpi in m.mpis:
        points = [(k, p[0]) for k in m.trunks if (p := m.peak(mpi, delay, k, test))]
        if points:
            ax.plot(*zip(*points), label=f"{mpi} relayed",
                    **{**_style(m, mpi, m.trunks[0]), "color": color})  # fmt: skip
            top = max(top, *(v for _, v in points))
        direct = m.peak(mpi, delay, DIRECT, test)
        if direct and "=" not in mpi:
            ax.axhline(direct[0], color="black", linewidth=1.2,
                       linestyle=_style(m, mpi, DIRECT)["linestyle"],
                       label=f"{mpi} direct")  # fmt: skip
            top = max(top, direct[0])
    return top


def plot_stream(m: Matrix, iperf: Iperf, path: Path) -> bool:
    """(b) Stream bandwidth (peak over its sizes) against the trunks, a panel per delay."""
    if not m.trunks or not any(r.sizes(STREAM) for r in m.runs):
        return False
    nic, wan = m.frontend_bps(), m.wan_bps()
    fig, axes = _panels(m, "(b) stream bandwidth, rank 0 -> rank of site b (peak over sizes)")
    top = 0.0
    for ax, delay in zip(axes, m.delays):
        top = max(top, _relayed_and_direct(ax, m, delay, STREAM, "tab:blue"))
        if nic:
            line = [k * nic / MB for k in m.trunks]
            ax.plot(m.trunks, line, color="grey", linestyle="--", linewidth=1,
                    label=f"k x {nic / MB:g} Mbit/s")  # fmt: skip
            top = max(top, *line)
        paths = [(k, v) for k in m.trunks if (v := iperf.first(k))]
        if paths:
            ax.plot(*zip(*paths), color="tab:green", marker="x", linestyle="-.", linewidth=1,
                    label="iperf3, the same k paths")  # fmt: skip
        if wan:
            ax.axhline(wan / MB, color="tab:red", linestyle=":", linewidth=1.2,
                       label=f"WAN {wan / MB:g} Mbit/s")  # fmt: skip
            top = max(top, wan / MB)
        _trunk_axis(ax, m.trunks)
        ax.set_title(f"WAN delay {delay_name(delay)}")
        ax.set_ylabel("stream_Mbps [Mbit/s], median")
        ax.grid(True, alpha=0.3)
    for ax in axes:
        ax.set_ylim(0, top * 1.12 if top else 1)
    if axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(fontsize="x-small")
    fig.savefig(path, format="png")
    return True


def plot_alltoall(m: Matrix, path: Path) -> bool:
    """(c) All-to-all aggregate bandwidth, relayed against the trunks and direct."""
    if not any(r.sizes(ALLTOALL) for r in m.runs):
        return False
    nic = m.frontend_bps()
    title = "(c) all-to-all across the sites, aggregate both ways (peak over sizes)"
    fig, axes = _panels(m, title)
    top = 0.0
    for ax, delay in zip(axes, m.delays):
        top = max(top, _relayed_and_direct(ax, m, delay, ALLTOALL, "tab:purple"))
        if nic and m.trunks:
            line = [2 * k * nic / MB for k in m.trunks]
            ax.plot(m.trunks, line, color="grey", linestyle="--", linewidth=1,
                    label=f"2 x k x {nic / MB:g} Mbit/s (both ways)")  # fmt: skip
        if m.trunks:
            _trunk_axis(ax, m.trunks)
        ax.set_title(f"WAN delay {delay_name(delay)}")
        ax.set_ylabel("alltoall_Mbps [Mbit/s], median")
        ax.grid(True, alpha=0.3)
    for ax in axes:
        ax.set_ylim(0, top * 1.15 if top else 1)
    if axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(fontsize="x-small")
    fig.savefig(path, format="png")
    return True


# --- the section ----------------------------------------------------------------------------


def section(
    runs: Sequence[Any],
    checks: Sequence[dict[str, Any]],
    out_dir: Path,
    table: Any,
) -> Section:
    """The relay section: figures into out_dir, tables made with `table(header, rows, right)`."""
    found, notes = relay_runs(runs)
    md = ["", "### relay: direct against relayed (seed 004)", ""]
    if not found:
        return Section([*md, "No passing relay run says its MPI."], [], [], notes)
    m = Matrix(found)
    iperf = iperf_of(checks)
    if m.trunks and not iperf.frontends:
        notes.append("no check file with the front-ends' iperf3 rows: no iperf3 line or ratio")
    figures = (
        ("relay-latency.png", plot_latency, "(a) latency, direct and relayed"),
        ("relay-stream.png", lambda f, p: plot_stream(f, iperf, p), "(b) stream against trunks"),
        ("relay-alltoall.png", plot_alltoall, "(c) all-to-all against trunks"),
    )
    images, figure_md = draw_figures("relay", m, out_dir, figures)  # type: ignore[arg-type]
    md += figure_md
    size = m.small_size()
    bandwidth = bandwidth_rows(m, iperf)
    bw_table = table(BANDWIDTH_HEADER, bandwidth, right=3) if bandwidth else []
    lat = latency_rows(m, size) if size is not None else []
    lat_table = table(latency_header(m), lat, right=2) if lat else []
    trunk = trunk_rows(m)
    most = max(m.trunks, default=0)
    trunk_table = (
        table(["MPI", "WAN delay", "trunks", *(f"trunk {t} MB" for t in range(most))], trunk, 3)
        if trunk
        else []
    )
    said = statements(m, iperf, size)
    nic = m.frontend_bps()
    if bw_table:
        md += [
            "Stream bandwidth = the highest median over the run's sizes (`at`); k x NIC = k x "
            f"{(nic or 0) / MB:g} Mbit/s (each front-end's WAN NIC); iperf3 k paths = the sum "
            "over the first k front-end pairs (one stream each, from the check); / WAN where "
            f"k x NIC reaches the WAN rate; target >= {RATIO_TARGET:g}. trunks used = trunks "
            "whose gateways sent stream data across the WAN (their summaries at exit).",
            "",
            *bw_table,
            "",
        ]
    if lat_table:
        bridged = any(
            r.doc["provenance"].get("testbed", {}).get("wan_mode") == "bridge" for r in runs
        )
        md += [
            f"One-way latency at {format_size(size or 0)} B (latency_us is half the round trip): "
            "added = relayed - direct at the same WAN delay (the mixed grid against site a's "
            "MPI direct)."
            + (
                " The WAN of these runs is a kernel bridge (MULTILANE_DELAYLINE=bridge: no delay "
                "line, so no delay, rate or loss on it, and no userspace hop)."
                if bridged
                else ""
            ),
            "",
            *lat_table,
            "",
        ]
    if trunk_table:
        md += [
            "Payload each trunk's gateways sent across the WAN in the relayed stream runs "
            "(both sites, MB = 10^6 B):",
            "",
            *trunk_table,
            "",
        ]
    for metric in METRICS:
        header, rows = metric_rows(m, metric)
        if rows:
            md += [f"#### relay: {metric}, median, per MPI x WAN delay x path", ""]
            md += [*table(header, rows, right=3), ""]
    md += [*(f"- {line}" for line in said)]
    text = ["", "relay: bandwidth", *bw_table] if bw_table else []
    text += ["", "relay: added latency", *lat_table] if lat_table else []
    text += ["", "relay: bytes per trunk", *trunk_table] if trunk_table else []
    text += ["", *said]
    return Section(md, images, text, notes)
