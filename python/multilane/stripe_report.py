"""The striped point-to-point part of a report (benchmark `stripe`): the seed's Fig. 2
(streaming bandwidth against message size, one line per MPI x lanes x link-security mode,
iperf3 with 1 and 8 streams and the best stream count as horizontal lines), bandwidth against
the number of lanes, a table of ratios, tcp:auto (the lane count the library finds per peer)
against the fixed counts and iperf3, and the link-security modes of one lanes spec side by
side.

Everything is computed from the result files and the test bed's check file
(testbed-check.json, written by `multilane run` when the scenario sets testbed_check): no
number or statement here is written by hand."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from .benchmarks import DEFAULT_SECURITY, SECURITY_MODES, Lanes, parse_lanes
from .sizes import SizeSpecError, format_size, parse_size

STREAM = "bw_Mbps"  # Mbit/s, higher is better
# mln-stripe's column: CPU seconds of all ranks per GB streamed at a size (timed loop only)
STREAM_CPU = "stream_cpu_s_per_GB"
PINGPONG = "time_us"  # one-way time, lower is better
BANDWIDTH_SIZE = 10 * 2**20  # the "10 MB" of the ratios: the size nearest 10 MiB
PINGPONG_SIZE = 2**20  # the "1 MB" ping-pong: the size nearest 1 MiB
# tcp:auto against the fixed counts: (metric, the size it is compared at, lower is better)
AUTO_POINTS = ((PINGPONG, 2**20, True), (STREAM, 10 * 2**20, False), (STREAM, 64 * 2**20, False))
LANES_USED = "lanes_used"  # mln-stripe's column: the lanes the sender used at the end of a size
# issue 20's targets for tcp:auto: streaming >= 0.9x the best fixed count and >= 0.85x iperf3's
# best stream count; a 1 MiB ping-pong at most 10% slower than the best fixed count
AUTO_MIN_FIXED = 0.9
AUTO_MIN_IPERF = 0.85
AUTO_MAX_PINGPONG = 1.10
DEFAULT_THRESHOLD = 256 * 2**10  # MLN_STRIPE_THRESHOLD's default: plain MPI at or below
WITHIN = 0.05  # "within 5% of stock" below the threshold
NEAREST_FACTOR = 2.0  # a size stands in for a target only within this factor
PANELS = ((100_000, 2**20, "100 KB - 1 MB"), (2**20, None, "1 MB and up"))
KIND_ORDER = ("stock", "mpi", "tcp", "helper")
MPI_STYLES = ("-", "--", ":", "-.")
KIND_MARKS = (("tcp", "o", "C0"), ("helper", "s", "C1"), ("mpi", "^", "C2"), ("stock", "*", "C3"))
AUTO_COLOUR = "C4"  # tcp:auto in the bandwidth-against-lanes figure
DPI = 110
SECURITY_BASE = "none"  # the security ratios' reference: the same lanes without protection


@dataclass(frozen=True)
class StripeRun:
    """One stripe result with its MPI, lanes and link-security mode (meta.link_security; ''
    for a run that did not record one), its rows by message size, and the CPU seconds per GB
    the CLI measured (provenance.cpu; None without)."""

    label: str
    mpi: str
    lanes: Lanes
    rows: dict[int, dict[str, Any]]
    params: dict[str, Any]
    security: str = ""
    cpu_s_per_gb: float | None = None

    @property
    def name(self) -> str:
        """'openmpi tcp:8 aead': the mode is named for tcp lanes (the ones it protects), for
        other lanes only when it is not the library's default."""
        shown = self.lanes.kind == "tcp" or self.security != DEFAULT_SECURITY
        return f"{self.mpi} {self.lanes}" + (f" {self.security}" if self.security and shown else "")

    @property
    def key(self) -> tuple[str, str, str]:
        return self.mpi, str(self.lanes), self.security

    def value(self, metric: str, size: int | None) -> float | None:
        """The metric at a size, None when the run has no (positive) value there."""
        if size is None:
            return None
        value = self.rows.get(size, {}).get(metric)
        return float(value) if isinstance(value, (int, float)) and value > 0 else None

    def sizes(self, metric: str) -> list[int]:
        return sorted(s for s in self.rows if s > 0 and self.value(metric, s) is not None)

    def lanes_used(self, size: int | None) -> float | None:
        """The lanes the sender used at the end of a size (mln-stripe's `lanes_used` column:
        tcp:auto's choice), None where the row has none."""
        return self.value(LANES_USED, size)


def _lanes_key(lanes: Lanes) -> tuple[int, bool, int]:
    """Order of lanes specs: by kind (KIND_ORDER), then the fixed counts up, then auto."""
    kind = KIND_ORDER.index(lanes.kind) if lanes.kind in KIND_ORDER else len(KIND_ORDER)
    return kind, lanes.auto, lanes.count


def _security_key(mode: str) -> int:
    """Order of the modes: none, auth, auth+mac, aead; one not recorded ('') first."""
    return SECURITY_MODES.index(mode) + 1 if mode in SECURITY_MODES else 0


def _cpu_per_gb(prov: Mapping[str, Any]) -> float | None:
    cpu = prov.get("cpu")
    value = cpu.get("cpu_s_per_gb") if isinstance(cpu, dict) else None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
    return float(value) if ok else None


def stripe_runs(runs: Sequence[Any]) -> tuple[list[StripeRun], list[str]]:
    """The stripe runs that say their MPI and lanes (meta, else params), ordered by MPI as
    they first appear, then by lanes and link-security mode; notes on the others and on
    repeats (first kept)."""
    found: list[StripeRun] = []
    notes: list[str] = []
    seen: set[tuple[str, str, str]] = set()
    for run in runs:
        prov = run.doc["provenance"]
        meta, params = prov.get("meta", {}), prov.get("params", {})
        mpi = meta.get("mpi") or ""
        spec = meta.get("lanes") or params.get("lanes")
        try:
            lanes = parse_lanes(spec)
        except ValueError:
            notes.append(f"{run.label}: no valid lanes in its meta or params: left out of figures")
            continue
        if not mpi:
            notes.append(f"{run.label}: no MPI name in its meta: left out of the figures")
            continue
        security = meta.get("link_security", "")
        if security not in ("", *SECURITY_MODES):
            notes.append(f"{run.label}: unknown link security {security!r}: taken as not recorded")
            security = ""
        rows = {int(row["bytes"]): row for row in run.doc["rows"]}
        found_run = StripeRun(run.label, mpi, lanes, rows, params, security, _cpu_per_gb(prov))
        if found_run.key in seen:
            notes.append(f"{run.label}: {found_run.name} again: only the first run is drawn")
            continue
        seen.add(found_run.key)
        found.append(found_run)
    mpis = list(dict.fromkeys(r.mpi for r in found))
    found.sort(key=lambda r: (mpis.index(r.mpi), _lanes_key(r.lanes), _security_key(r.security)))
    return found, notes


def sweep_runs(runs: Sequence[StripeRun]) -> list[StripeRun]:
    """One run per MPI and lanes spec, for the comparisons across lanes: the one in the
    library's default link security (or that recorded none), else the first.  Runs in other
    modes are compared with it in the link-security table."""
    chosen: dict[tuple[str, str], StripeRun] = {}
    for run in runs:
        key = (run.mpi, str(run.lanes))
        default = run.security in ("", DEFAULT_SECURITY)
        if key not in chosen or (default and chosen[key].security not in ("", DEFAULT_SECURITY)):
            chosen[key] = run
    return [r for r in runs if chosen[(r.mpi, str(r.lanes))] is r]


def fixed_tcp(runs: Iterable[StripeRun]) -> list[StripeRun]:
    """The tcp:N runs: fixed lane counts, tcp:auto left out."""
    return [r for r in runs if r.lanes.kind == "tcp" and not r.lanes.auto]


def iperf_rates(checks: Sequence[dict[str, Any]]) -> dict[int, float]:
    """iperf3 TCP throughput in Mbit/s by stream count, from testbed-check.json rows (the
    first check and link that has each count)."""
    rates: dict[int, float] = {}
    for doc in checks:
        for row in doc.get("rows", []):
            values = row.get("values", {})
            streams, bps = values.get("streams"), values.get("bps")
            if isinstance(streams, int) and isinstance(bps, (int, float)) and bps > 0:
                rates.setdefault(streams, bps / 1e6)
    return rates


def iperf_best(iperf: Mapping[int, float]) -> tuple[int, float] | None:
    """iperf3's best stream count and its rate [Mbit/s] over every count the check measured
    (the fewer streams on a tie); None without iperf3 rows."""
    return max(sorted(iperf.items()), key=lambda cr: cr[1], default=None)


def _streams(count: int) -> str:
    return f"{count} stream{'s' if count > 1 else ''}"


def nearest_size(sizes: Sequence[int], target: int) -> int | None:
    """The size closest to `target` on a log scale, if within NEAREST_FACTOR of it."""
    best = min((s for s in sizes if s > 0), key=lambda s: abs(math.log(s / target)), default=None)
    if best is None or abs(math.log(best / target)) > math.log(NEAREST_FACTOR):
        return None
    return best


def threshold_of(
    params: Iterable[Mapping[str, Any]],
    keys: Sequence[str] = ("stripe_threshold", "threshold"),
    default: int = DEFAULT_THRESHOLD,
) -> tuple[int, str]:
    """The threshold the first run that recorded one has (the first of `keys` in its params:
    bytes, or a size like "256K"), else the library's `default`."""
    for param in params:
        value = next((param[k] for k in keys if k in param), None)
        try:
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value, "as the runs recorded"
            if isinstance(value, str):
                return parse_size(value), "as the runs recorded"
        except SizeSpecError:
            continue
    return default, "the library's default; the runs did not record one"


def format_number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def format_times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


@dataclass(frozen=True)
class MpiSummary:
    """The numbers of one MPI the ratio table and the statements are made of."""

    mpi: str
    size: int | None  # the "10 MB" stream size used
    stock: float | None
    tcp_best: StripeRun | None
    tcp8: float | None
    helper_best: StripeRun | None
    pp_size: int | None
    pp_stock: float | None
    pp_best: StripeRun | None

    def bw(self, run: StripeRun | None) -> float | None:
        return run.value(STREAM, self.size) if run is not None else None

    def pp(self, run: StripeRun | None) -> float | None:
        return run.value(PINGPONG, self.pp_size) if run is not None else None


def _best(runs: list[StripeRun], metric: str, size: int | None, low: bool) -> StripeRun | None:
    scored = [(r.value(metric, size), r) for r in runs]
    valid = [(v, r) for v, r in scored if v is not None]
    if not valid:
        return None
    pick = min if low else max
    return pick(valid, key=lambda vr: vr[0])[1]


def summarize(runs: list[StripeRun]) -> list[MpiSummary]:
    """Per MPI: stock, the best tcp:N, tcp:8 and the best helper:K at ~10 MiB streaming,
    and the best tcp:N against stock at ~1 MiB ping-pong (tcp:N: fixed counts, no tcp:auto)."""
    out = []
    for mpi in dict.fromkeys(r.mpi for r in runs):
        mine = [r for r in runs if r.mpi == mpi]
        all_sizes = sorted({s for r in mine for s in r.sizes(STREAM)})
        pp_sizes = sorted({s for r in mine for s in r.sizes(PINGPONG)})
        size = nearest_size(all_sizes, BANDWIDTH_SIZE)
        pp_size = nearest_size(pp_sizes, PINGPONG_SIZE)
        stock = next((r for r in mine if r.lanes.kind == "stock"), None)
        tcp = fixed_tcp(mine)
        helper = [r for r in mine if r.lanes.kind == "helper"]
        tcp8 = next((r for r in tcp if r.lanes.count == 8), None)
        out.append(
            MpiSummary(
                mpi=mpi,
                size=size,
                stock=stock.value(STREAM, size) if stock else None,
                tcp_best=_best(tcp, STREAM, size, low=False),
                tcp8=tcp8.value(STREAM, size) if tcp8 else None,
                helper_best=_best(helper, STREAM, size, low=False),
                pp_size=pp_size,
                pp_stock=stock.value(PINGPONG, pp_size) if stock else None,
                pp_best=_best(tcp, PINGPONG, pp_size, low=True),
            )
        )
    return out


def _named(run: StripeRun | None, value: float | None, fmt: Any = format_number) -> str:
    return "-" if run is None or value is None else f"{fmt(value)} ({run.lanes})"


def ratio_table(summaries: list[MpiSummary], iperf: dict[int, float]) -> list[list[str]]:
    """Rows of (quantity, one column per MPI)."""
    i8 = iperf.get(8)
    best = iperf_best(iperf)
    i_best = best[1] if best else None
    best_text = f"{format_number(best[1])} ({_streams(best[0])})" if best else "-"
    rows: list[tuple[str, Any]] = [
        ("stream size used", lambda s: format_size(s.size) if s.size else "-"),
        ("stock [Mbit/s]", lambda s: format_number(s.stock)),
        ("best tcp:N [Mbit/s]", lambda s: _named(s.tcp_best, s.bw(s.tcp_best))),
        ("best tcp:N / iperf3 8 streams", lambda s: format_times(_ratio(s.bw(s.tcp_best), i8))),
        ("iperf3 best [Mbit/s]", lambda s: best_text),
        (
            "best tcp:N / iperf3 best",
            lambda s: format_times(_ratio(s.bw(s.tcp_best), i_best)),
        ),
        ("best tcp:N / stock", lambda s: format_times(_ratio(s.bw(s.tcp_best), s.stock))),
        ("tcp:8 [Mbit/s]", lambda s: format_number(s.tcp8)),
        ("tcp:8 / iperf3 8 streams", lambda s: format_times(_ratio(s.tcp8, i8))),
        ("tcp:8 / stock", lambda s: format_times(_ratio(s.tcp8, s.stock))),
        ("best helper:K [Mbit/s]", lambda s: _named(s.helper_best, s.bw(s.helper_best))),
        ("best helper:K / stock", lambda s: format_times(_ratio(s.bw(s.helper_best), s.stock))),
        ("ping-pong size used", lambda s: format_size(s.pp_size) if s.pp_size else "-"),
        ("ping-pong stock [us]", lambda s: format_number(s.pp_stock)),
        ("ping-pong best tcp:N [us]", lambda s: _named(s.pp_best, s.pp(s.pp_best))),
        (
            "ping-pong best tcp:N / stock",
            lambda s: format_times(_ratio(s.pp(s.pp_best), s.pp_stock)),
        ),
    ]
    return [[name, *(cell(s) for s in summaries)] for name, cell in rows]


def small_sizes(runs: list[StripeRun], threshold: int) -> list[list[str]]:
    """Rows per size at or below the threshold: per MPI the striped/stock ping-pong time
    ratio furthest from 1 (and which lanes), with the run count it was taken over."""
    rows = []
    mpis = list(dict.fromkeys(r.mpi for r in runs))
    sizes = sorted({s for r in runs for s in r.sizes(PINGPONG) if s <= threshold})
    for size in sizes:
        cells = [format_size(size)]
        for mpi in mpis:
            worst = _worst_small(runs, mpi, size)
            cells.append("-" if worst is None else f"{worst[0]:.3f} ({worst[1].lanes})")
        rows.append(cells)
    return rows


def _worst_small(runs: list[StripeRun], mpi: str, size: int) -> tuple[float, StripeRun] | None:
    stock = next((r for r in runs if r.mpi == mpi and r.lanes.kind == "stock"), None)
    base = stock.value(PINGPONG, size) if stock else None
    ratios = [
        (v / base, r)
        for r in runs
        if r.mpi == mpi and r.lanes.kind != "stock"
        for v in (r.value(PINGPONG, size),)
        if v is not None and base
    ]
    return max(ratios, key=lambda vr: abs(vr[0] - 1.0), default=None)


def statements(
    summaries: list[MpiSummary], runs: list[StripeRun], iperf: dict[int, float], threshold: int
) -> list[str]:
    """What the data says, one sentence per finding (from the numbers above only)."""
    lines = []
    i8 = iperf.get(8)
    best = iperf_best(iperf)
    if best is not None:
        rates = ", ".join(
            f"{_streams(n)} {format_number(v)} Mbit/s" for n, v in sorted(iperf.items())
        )
        said = f" (best: {_streams(best[0])})" if set(iperf) - {1, 8} else ""
        lines.append(f"iperf3 on the same test bed: {rates}{said}.")
    for s in summaries:
        at = format_size(s.size) if s.size else "?"
        best = s.bw(s.tcp_best)
        if s.tcp_best is not None and best is not None:
            parts = [f"{s.mpi}: {s.tcp_best.lanes} streams {format_number(best)} Mbit/s at {at}"]
            if i8:
                parts.append(f"{best / i8:.2f}x iperf3 with 8 streams")
            if s.stock:
                parts.append(f"{best / s.stock:.2f}x stock ({format_number(s.stock)} Mbit/s)")
            lines.append(", ".join(parts) + ".")
        helper = s.bw(s.helper_best)
        if s.helper_best is not None and helper is not None and s.stock:
            lines.append(
                f"{s.mpi}: {s.helper_best.lanes} streams {format_number(helper)} Mbit/s at {at}, "
                f"{helper / s.stock:.2f}x stock."
            )
        pp = s.pp(s.pp_best)
        if s.pp_best is not None and pp is not None and s.pp_stock:
            lines.append(
                f"{s.mpi}: a {format_size(s.pp_size or 0)} ping-pong takes "
                f"{format_number(pp)} us one way with {s.pp_best.lanes} against "
                f"{format_number(s.pp_stock)} us stock "
                f"({pp / s.pp_stock:.2f}x)."
            )
    worst = [
        (w[0], mpi, size, w[1])
        for mpi in dict.fromkeys(r.mpi for r in runs)
        for size in sorted({x for r in runs for x in r.sizes(PINGPONG) if x <= threshold})
        for w in (_worst_small(runs, mpi, size),)
        if w is not None
    ]
    if worst:
        ratio, mpi, size, run = max(worst, key=lambda w: abs(w[0] - 1.0))
        verdict = "within" if abs(ratio - 1.0) <= WITHIN else "NOT within"
        lines.append(
            f"At or below the threshold ({format_size(threshold)}), striped ping-pong times are "
            f"{verdict} {WITHIN:.0%} of stock: the furthest is {ratio:.3f}x "
            f"({mpi} {run.lanes} at {format_size(size)}, {len(worst)} MPI x size cells)."
        )
    return lines


# ---- tcp:auto: the lane count found per peer, against the fixed counts and iperf3 ---------


@dataclass(frozen=True)
class AutoPoint:
    """tcp:auto of one MPI at one test and size (AUTO_POINTS): its value, the lanes it used
    there, the best fixed tcp:N of the same MPI at that size, and for streaming iperf3's best
    stream count."""

    run: StripeRun
    metric: str
    size: int
    value: float
    lanes_used: float | None
    best: StripeRun | None
    best_value: float | None
    iperf: tuple[int, float] | None

    @property
    def pingpong(self) -> bool:
        return self.metric == PINGPONG

    @property
    def vs_best(self) -> float | None:
        """auto / best fixed in the metric's own unit: for ping-pong a ratio of times (above 1:
        auto is slower), for streaming of rates (below 1: auto is slower)."""
        return _ratio(self.value, self.best_value)

    @property
    def vs_iperf(self) -> float | None:
        """auto's stream rate / iperf3's best; None for ping-pong."""
        return None if self.pingpong or self.iperf is None else self.value / self.iperf[1]

    @property
    def what(self) -> str:
        """'ping-pong 1M [us]', 'stream 64M [Mbit/s]'."""
        test, unit = ("ping-pong", "us") if self.pingpong else ("stream", "Mbit/s")
        return f"{test} {format_size(self.size)} [{unit}]"


def auto_points(runs: Sequence[StripeRun], iperf: Mapping[int, float]) -> list[AutoPoint]:
    """Per tcp:auto run (one per MPI: pass sweep_runs), each of AUTO_POINTS at the size of its
    run nearest the target (NEAREST_FACTOR; none near: left out): the comparisons."""
    points = []
    for run in (r for r in runs if r.lanes.auto):
        fixed = fixed_tcp(r for r in runs if r.mpi == run.mpi)
        done: set[tuple[str, int]] = set()
        for metric, target, low in AUTO_POINTS:
            size = nearest_size(run.sizes(metric), target)
            value = run.value(metric, size)
            if size is None or value is None or (metric, size) in done:
                continue
            done.add((metric, size))
            best = _best(fixed, metric, size, low)
            points.append(
                AutoPoint(
                    run=run,
                    metric=metric,
                    size=size,
                    value=value,
                    lanes_used=run.lanes_used(size),
                    best=best,
                    best_value=best.value(metric, size) if best else None,
                    iperf=None if metric == PINGPONG else iperf_best(iperf),
                )
            )
    return points


def _lanes_count(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def auto_table(points: Sequence[AutoPoint]) -> list[list[str]]:
    """Rows of (MPI, test at size, tcp:auto, lanes_used, best fixed tcp:N, auto / best fixed,
    iperf3 best, auto / iperf3 best)."""
    rows = []
    for p in points:
        iperf = "-" if p.iperf is None else f"{format_number(p.iperf[1])} ({_streams(p.iperf[0])})"
        rows.append(
            [
                p.run.mpi,
                p.what,
                format_number(p.value),
                _lanes_count(p.lanes_used),
                _named(p.best, p.best_value),
                format_ratio(p.vs_best),
                iperf,
                format_ratio(p.vs_iperf),
            ]
        )
    return rows


AUTO_HEADER = [
    "MPI",
    "test [unit]",
    "tcp:auto",
    "lanes_used",
    "best fixed tcp:N",
    "auto / best fixed",
    "iperf3 best [Mbit/s]",
    "auto / iperf3 best",
]


def _verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def auto_statements(points: Sequence[AutoPoint]) -> list[str]:
    """One sentence per point: auto's value and lanes against the best fixed count and
    iperf3's best, with issue 20's targets (AUTO_MIN_FIXED, AUTO_MIN_IPERF,
    AUTO_MAX_PINGPONG)."""
    lines = []
    for p in points:
        at = format_size(p.size)
        over = (
            f"over {_lanes_count(p.lanes_used)} lanes"
            if p.lanes_used
            else "lanes_used not recorded"
        )
        best, vs_best = p.best, p.vs_best
        if p.pingpong:
            head = (
                f"{p.run.mpi} tcp:auto: a {at} ping-pong takes {format_number(p.value)} us one "
                f"way ({over})"
            )
            if best is None or vs_best is None:
                lines.append(f"{head}; no fixed tcp:N measured it.")
                continue
            lines.append(
                f"{head}, {vs_best:.3f}x the time of the best fixed count ({best.lanes}, "
                f"{format_number(p.best_value)} us; above 1: auto is slower; target <= "
                f"{AUTO_MAX_PINGPONG:.2f}x: {_verdict(vs_best <= AUTO_MAX_PINGPONG)})."
            )
            continue
        parts = [f"{p.run.mpi} tcp:auto streams {format_number(p.value)} Mbit/s at {at} ({over})"]
        if best is not None and vs_best is not None:
            parts.append(
                f"{vs_best:.3f}x the best fixed count ({best.lanes}, "
                f"{format_number(p.best_value)} Mbit/s; target >= {AUTO_MIN_FIXED:.2f}x: "
                f"{_verdict(vs_best >= AUTO_MIN_FIXED)})"
            )
        if p.iperf is not None and p.vs_iperf is not None:
            parts.append(
                f"{p.vs_iperf:.3f}x iperf3's best ({_streams(p.iperf[0])}, "
                f"{format_number(p.iperf[1])} Mbit/s; target >= {AUTO_MIN_IPERF:.2f}x: "
                f"{_verdict(p.vs_iperf >= AUTO_MIN_IPERF)})"
            )
        lines.append(", ".join(parts) + ".")
    return lines


# ---- link security: the modes of one lanes spec side by side -----------------------------


@dataclass(frozen=True)
class SecurityGroup:
    """The runs of one MPI and lanes spec in two or more link-security modes (in the order
    of SECURITY_MODES), its MPI's stock run, and the stream sizes compared: the one nearest
    10 MiB and the largest that every mode measured."""

    mpi: str
    lanes: Lanes
    modes: dict[str, StripeRun]
    stock: StripeRun | None
    size: int | None
    largest: int | None

    @property
    def name(self) -> str:
        return f"{self.mpi} {self.lanes}"

    def bw(self, mode: str, size: int | None) -> float | None:
        run = self.modes.get(mode)
        return run.value(STREAM, size) if run is not None else None

    def stock_bw(self, size: int | None) -> float | None:
        return self.stock.value(STREAM, size) if self.stock is not None else None

    def cpu(self, mode: str, size: int | None) -> float | None:
        """CPU s/GB of a mode's stream at a size (the STREAM_CPU column; None without)."""
        run = self.modes.get(mode)
        return run.value(STREAM_CPU, size) if run is not None else None

    def stock_cpu(self, size: int | None) -> float | None:
        return self.stock.value(STREAM_CPU, size) if self.stock is not None else None

    def has_stream_cpu(self) -> bool:
        """Whether a run of the group measured its stream's CPU at the sizes compared."""
        runs = [r for r in (self.stock, *self.modes.values()) if r is not None]
        return any(
            r.value(STREAM_CPU, s) is not None for r in runs for s in (self.size, self.largest)
        )


def security_groups(runs: Sequence[StripeRun]) -> list[SecurityGroup]:
    """Every MPI x lanes spec that ran in two or more recorded modes, with its MPI's stock run
    (the one sweep_runs keeps)."""
    groups = []
    for mpi in dict.fromkeys(r.mpi for r in runs):
        mine = [r for r in runs if r.mpi == mpi]
        stock = next((r for r in sweep_runs(mine) if r.lanes.kind == "stock"), None)
        for lanes in dict.fromkeys(r.lanes for r in mine if r.lanes.kind != "stock"):
            modes = {r.security: r for r in mine if r.lanes == lanes and r.security}
            if len(modes) < 2:
                continue
            modes = dict(sorted(modes.items(), key=lambda m: _security_key(m[0])))
            common = set.intersection(*(set(r.sizes(STREAM)) for r in modes.values()))
            size = nearest_size(sorted(common), BANDWIDTH_SIZE)
            groups.append(SecurityGroup(mpi, lanes, modes, stock, size, max(common, default=None)))
    return groups


def format_ratio(value: float | None) -> str:
    """A ratio to 3 decimals (0.970x: enough to tell a 3% target)."""
    return "-" if value is None else f"{value:.3f}x"


def format_cpu(value: float | None) -> str:
    """CPU seconds per GB to 3 significant digits."""
    return "-" if value is None else f"{value:.3g}"


def _cpu_rows(modes: list[str], at: Any, prefix: str) -> list[tuple[str, Any]]:
    """Rows (name, cell of a group) of the stream's CPU s/GB at `at(group)` (STREAM_CPU)."""
    rows: list[tuple[str, Any]] = [
        (f"{prefix}stock stream CPU [s/GB]", lambda g: format_cpu(g.stock_cpu(at(g)))),
    ]
    for mode in modes:
        rows.append(
            (f"{prefix}{mode} stream CPU [s/GB]", lambda g, m=mode: format_cpu(g.cpu(m, at(g))))
        )
    return rows


def _bandwidth_rows(modes: list[str], at: Any, prefix: str) -> list[tuple[str, Any]]:
    """Rows (name, cell of a group) of the bandwidths at `at(group)` and their ratios (over
    none where a mode is none)."""
    rows: list[tuple[str, Any]] = [
        (f"{prefix}stock [Mbit/s]", lambda g: format_number(g.stock_bw(at(g)))),
    ]
    for mode in modes:
        rows.append((f"{prefix}{mode} [Mbit/s]", lambda g, m=mode: format_number(g.bw(m, at(g)))))
    for mode in (m for m in modes if m != SECURITY_BASE and SECURITY_BASE in modes):
        rows.append(
            (
                f"{prefix}{mode} / {SECURITY_BASE}",
                lambda g, m=mode: format_ratio(_ratio(g.bw(m, at(g)), g.bw(SECURITY_BASE, at(g)))),
            )
        )
    for mode in modes:
        rows.append(
            (
                f"{prefix}{mode} / stock",
                lambda g, m=mode: format_times(_ratio(g.bw(m, at(g)), g.stock_bw(at(g)))),
            )
        )
    return rows


def security_table(groups: list[SecurityGroup]) -> list[list[str]]:
    """Rows of (quantity, one column per MPI x lanes spec): stream bandwidth of stock and of
    each mode at the size nearest 10 MiB (no such size in any group: the largest), each mode
    over none and over stock, and the stream's CPU seconds per GB at that size (STREAM_CPU);
    the same at the largest size where it differs.  Results without that column (older ones):
    the CPU seconds per GB of each whole run instead, where the CLI recorded them."""
    modes = sorted({m for g in groups for m in g.modes}, key=_security_key)
    near_10m = any(g.size is not None for g in groups)  # else only the largest size
    stream_cpu = any(g.has_stream_cpu() for g in groups)

    def first(g: SecurityGroup) -> int | None:
        return g.size if near_10m else g.largest

    rows: list[tuple[str, Any]] = [
        ("stream size used", lambda g: format_size(first(g) or 0) if first(g) else "-"),
        *_bandwidth_rows(modes, first, ""),
        *(_cpu_rows(modes, first, "") if stream_cpu else []),
    ]
    if any(g.largest != first(g) for g in groups):
        rows.append(("largest size", lambda g: format_size(g.largest) if g.largest else "-"))
        rows += _bandwidth_rows(modes, lambda g: g.largest, "largest: ")
        rows += _cpu_rows(modes, lambda g: g.largest, "largest: ") if stream_cpu else []
    runs = [r for g in groups for r in (g.stock, *g.modes.values()) if r is not None]
    if not stream_cpu and any(r.cpu_s_per_gb is not None for r in runs):

        def cpu(run: StripeRun | None) -> str:
            return format_cpu(run.cpu_s_per_gb if run is not None else None)

        rows.append(("stock CPU [s/GB]", lambda g: cpu(g.stock)))
        rows += [(f"{m} CPU [s/GB]", lambda g, m=m: cpu(g.modes.get(m))) for m in modes]
    return [[name, *(cell(g) for g in groups)] for name, cell in rows]


def security_statements(groups: list[SecurityGroup]) -> list[str]:
    """Per group, one sentence: each mode's bandwidth against none and stock, and its CPU."""
    lines = []
    for g in groups:
        at = format_size(g.size or g.largest or 0)
        size = g.size or g.largest
        base, stock = g.bw(SECURITY_BASE, size), g.stock_bw(size)
        parts = []
        for mode in g.modes:
            bw = g.bw(mode, size)
            if bw is None:
                continue
            ratios = [] if mode == SECURITY_BASE or not base else [f"{bw / base:.3f}x none"]
            ratios += [f"{bw / stock:.2f}x stock"] if stock else []
            parts.append(
                f"{mode} {format_number(bw)}" + (f" ({', '.join(ratios)})" if ratios else "")
            )
        if parts:
            lines.append(f"{g.name} streams at {at} [Mbit/s]: {'; '.join(parts)}.")
        lines += _cpu_statements(g)
    return lines


def _cpu_statements(g: SecurityGroup) -> list[str]:
    """The group's CPU per GB: the stream's at the sizes compared where measured (STREAM_CPU),
    else the whole run's (provenance.cpu)."""
    if g.has_stream_cpu():
        lines = []
        for size in dict.fromkeys(s for s in (g.size, g.largest) if s is not None):
            cpu = [(m, g.cpu(m, size)) for m in g.modes]
            said = ", ".join(f"{m} {v:.3g} s" for m, v in cpu if v is not None)
            if said:
                lines.append(
                    f"{g.name}: CPU time per GB streamed at {format_size(size)} "
                    f"(timed loop, all ranks): {said}."
                )
        return lines
    cpu_run = [(m, r.cpu_s_per_gb) for m, r in g.modes.items() if r.cpu_s_per_gb is not None]
    if not cpu_run:
        return []
    said = ", ".join(f"{m} {v:.3g} s" for m, v in cpu_run)
    return [f"{g.name}: CPU time per GB moved (whole run, all processes): {said}."]


# ---- figures ----------------------------------------------------------------------------


def _styles(runs: list[StripeRun]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """A colour per lanes spec and link-security mode, a line style per MPI, the same in
    every figure."""
    from matplotlib import colormaps  # noqa: PLC0415

    kinds = sorted(
        {(r.lanes, r.security) for r in runs},
        key=lambda ls: (_lanes_key(ls[0]), _security_key(ls[1])),
    )
    cmap = colormaps["tab10" if len(kinds) <= 10 else "tab20"]
    colours = {(str(lane), mode): cmap(i % cmap.N) for i, (lane, mode) in enumerate(kinds)}
    mpis = list(dict.fromkeys(r.mpi for r in runs))
    return {
        r.key: {
            "color": colours[(str(r.lanes), r.security)],
            "linestyle": MPI_STYLES[mpis.index(r.mpi) % len(MPI_STYLES)],
        }
        for r in runs
    }


def _iperf_lines(ax: Any, iperf: dict[int, float]) -> None:
    """iperf3 with 1 and 8 streams, and its best stream count where that is another."""
    best = iperf_best(iperf)
    for streams, style in ((1, ":"), (8, "-.")):
        if streams in iperf:
            rate = format_number(iperf[streams])
            label = f"iperf3 {_streams(streams)} ({rate})"
            ax.axhline(iperf[streams], color="black", linestyle=style, linewidth=1.2, label=label)
    if best is not None and best[0] not in (1, 8):
        label = f"iperf3 {_streams(best[0])}, its best ({format_number(best[1])})"
        ax.axhline(best[1], color="dimgray", linestyle="--", linewidth=1.2, label=label)


def _size_ticks(ax: Any, sizes: list[int]) -> None:
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator(sizes))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: format_size(round(x))))
    ax.set_xlabel("message size [bytes, K = 1024]")


def plot_bandwidth(runs: list[StripeRun], iperf: dict[int, float], path: Path) -> bool:
    """The seed's Fig. 2: stream bandwidth against size in two panels; False if no data."""
    styles = _styles(runs)
    panels = []
    for low, high, title in PANELS:
        sizes = sorted(
            {s for r in runs for s in r.sizes(STREAM) if s >= low and (high is None or s <= high)}
        )
        if sizes:
            panels.append((sizes, title))
    if not panels:
        return False
    fig = Figure(figsize=(7 * len(panels) + 2, 5.5), dpi=DPI, layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False, sharey=True)[0]
    for ax, (sizes, title) in zip(axes, panels):
        for run in runs:
            xs = [s for s in run.sizes(STREAM) if s in sizes]
            ys = [run.value(STREAM, s) for s in xs]
            if xs:
                mark = {"marker": "D", "markersize": 5, "linewidth": 2.2} if run.lanes.auto else {}
                ax.plot(
                    xs,
                    ys,
                    **{"marker": "o", "markersize": 3, **mark},
                    label=run.name,
                    **styles[run.key],
                )
        _iperf_lines(ax, iperf)
        _size_ticks(ax, sizes)
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
    axes[0].set_ylim(bottom=0)  # once every panel is drawn: the shared top fits them all
    axes[0].set_ylabel("stream bandwidth [Mbit/s], median")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right upper", fontsize="small")
    fig.suptitle("stripe: streaming bandwidth by MPI x lanes")
    fig.savefig(path, format="png")
    return True


def _auto_marks(ax: Any, runs: list[StripeRun], size: int | None) -> list[int]:
    """tcp:auto in the bandwidth-against-lanes panel: a dashed line at its bandwidth (to read
    against every fixed count) and a diamond at the lanes it used, where recorded; the x
    positions drawn."""
    xs = []
    for run in runs:
        value, used = run.value(STREAM, size), run.lanes_used(size)
        if value is None:
            continue
        colour = AUTO_COLOUR
        if used is None:
            label = f"{run.lanes} (lanes_used not recorded)"
            ax.axhline(value, color=colour, linestyle="--", linewidth=1.2, label=label)
            continue
        ax.axhline(value, color=colour, linestyle="--", linewidth=1.0, alpha=0.7)
        label = f"{run.lanes} ({_lanes_count(used)} lanes used)"
        ax.plot(
            [used], [value], marker="D", markersize=9, linestyle="none", color=colour, label=label
        )
        xs.append(round(used))
    return xs


def plot_lanes(runs: list[StripeRun], iperf: dict[int, float], path: Path) -> bool:
    """Bandwidth at ~10 MiB against the number of parallel paths, a panel per MPI (one run
    per lanes spec: sweep_runs)."""
    runs = sweep_runs(runs)
    summaries = [s for s in summarize(runs) if s.size is not None]
    if not summaries:
        return False
    fig = Figure(figsize=(6 * len(summaries) + 1, 4.8), dpi=DPI, layout="constrained")
    axes = fig.subplots(1, len(summaries), squeeze=False, sharey=True)[0]
    for ax, summary in zip(axes, summaries):
        mine = [r for r in runs if r.mpi == summary.mpi]
        ticks: set[int] = set()
        for kind, marker, colour in KIND_MARKS:
            points = [
                (r.lanes.paths, r.value(STREAM, summary.size))
                for r in mine
                if r.lanes.kind == kind and r.lanes.paths is not None
            ]
            points = sorted((x, y) for x, y in points if x is not None and y is not None)
            if not points:
                continue
            ticks.update(x for x, _ in points)
            label = {"helper": "helper:K (2K+1 paths)", "stock": "stock (1)"}.get(kind, f"{kind}:N")
            size = 12 if kind == "stock" else 5
            linestyle = "none" if kind == "stock" else "-"
            ax.plot(
                *zip(*points),
                marker=marker,
                markersize=size,
                linestyle=linestyle,
                color=colour,
                label=label,
            )
        ticks.update(_auto_marks(ax, [r for r in mine if r.lanes.auto], summary.size))
        _iperf_lines(ax, iperf)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator(sorted(ticks) or [1]))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: f"{x:g}"))
        ax.set_xlabel("parallel paths (tcp:N: N; tcp:auto: lanes_used; helper:K: 2K+1; stock: 1)")
        ax.set_title(f"{summary.mpi}, stream at {format_size(summary.size or 0)}")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    axes[0].set_ylim(bottom=0)  # once every panel is drawn: the shared top fits them all
    axes[0].set_ylabel("stream bandwidth [Mbit/s], median")
    fig.savefig(path, format="png")
    return True


# ---- the report section -------------------------------------------------------------------


@dataclass(frozen=True)
class Section:
    """The Markdown lines, images, terminal text and notes of a report section."""

    markdown: list[str]
    images: list[Path]
    text: list[str]
    notes: list[str]


def section(
    runs: Sequence[Any],
    checks: Sequence[dict[str, Any]],
    out_dir: Path,
    table: Any,
) -> Section:
    """The stripe section: figures into out_dir, tables made with `table(header, rows, right)`."""
    stripe, notes = stripe_runs(runs)
    md = ["", "### stripe: lanes against stock MPI and iperf3", ""]
    if not stripe:
        return Section([*md, "No stripe run says its MPI and lanes."], [], [], notes)
    iperf = iperf_rates(checks)
    if not iperf:
        notes.append("no testbed-check.json with iperf3 rows: no iperf3 lines or ratios")
    threshold, why = threshold_of(r.params for r in stripe)
    images = []
    fig_a = out_dir / "stripe-bandwidth.png"
    if plot_bandwidth(stripe, iperf, fig_a):
        images.append(fig_a)
        md += ["![stripe: stream bandwidth against message size](stripe-bandwidth.png)", ""]
    fig_b = out_dir / "stripe-lanes.png"
    if plot_lanes(stripe, iperf, fig_b):
        images.append(fig_b)
        md += ["![stripe: stream bandwidth against the number of lanes](stripe-lanes.png)", ""]
    main = sweep_runs(stripe)  # one run per MPI x lanes: the default link security
    summaries = summarize(main)
    header = ["quantity", *(s.mpi for s in summaries)]
    ratios = table(header, ratio_table(summaries, iperf), right=1)
    small_header = ["size", *(f"{s.mpi} striped / stock" for s in summaries)]
    small_rows = small_sizes(main, threshold)
    small = table(small_header, small_rows, right=0) if small_rows else []
    said = statements(summaries, main, iperf, threshold)
    points = auto_points(main, iperf)
    auto = table(AUTO_HEADER, auto_table(points), right=2) if points else []
    said += auto_statements(points)
    groups = security_groups(stripe)
    security: list[str] = []
    if groups:
        security = table(["quantity", *(g.name for g in groups)], security_table(groups), right=1)
        said += security_statements(groups)
    md += [
        "Streaming at the size nearest 10 MiB and ping-pong at the size nearest 1 MiB; "
        "best = the lanes spec with the highest bandwidth (lowest time); x = ratio.",
        "",
        *ratios,
        "",
    ]
    if small:  # only when the runs have sizes at or below the threshold
        md += [
            f"Ping-pong time at or below the striping threshold ({format_size(threshold)}, "
            f"{why}): per MPI the striped / stock ratio furthest from 1, over every lanes spec.",
            "",
            *small,
            "",
        ]
    if auto:
        best = iperf_best(iperf)
        md += [
            "tcp:auto (MLN_STRIPE_LANES=auto: the tcp lane count found per peer) against the "
            "fixed lane counts, per MPI: ping-pong at the size nearest 1 MiB, streaming at the "
            "sizes nearest 10 MiB and 64 MiB; lanes_used = the lanes the sender used at the end "
            "of that size; best fixed = the tcp:N of the same MPI with the lowest time (highest "
            "bandwidth) there. auto / best fixed is a ratio of times for ping-pong (above 1: "
            "auto is slower) and of rates for streaming (below 1: auto is slower); iperf3 best "
            + (
                f"= the highest of iperf3's stream counts ({', '.join(map(str, sorted(iperf)))})."
                if best
                else "needs testbed-check.json."
            )
            + f" The sentences below mark issue 20's targets: streaming >= {AUTO_MIN_FIXED:.2f}x "
            f"the best fixed count and >= {AUTO_MIN_IPERF:.2f}x iperf3's best, ping-pong <= "
            f"{AUTO_MAX_PINGPONG:.2f}x.",
            "",
            *auto,
            "",
        ]
    if security:
        cpu_said = (
            "stream CPU [s/GB]: CPU time of all ranks over the GB the stream test moved at "
            f"that size, its timed loop only (column {STREAM_CPU}, docs/METRICS.md)"
            if any(g.has_stream_cpu() for g in groups)
            else "CPU [s/GB]: CPU time of all the run's processes over the bytes it moved, "
            "whole run (provenance.cpu, docs/METRICS.md)"
        )
        md += [
            "Link security of the lanes, side by side (MLN_LINK_SECURITY; auth+mac: "
            "MLN_LINK_PAYLOAD_MAC=1): streaming bandwidth of each mode, over none (the same "
            "lanes unprotected) and over stock MPI; the comparisons above take the library's "
            f"default ({DEFAULT_SECURITY}). {cpu_said}.",
            "",
            *security,
            "",
        ]
    md += [*(f"- {line}" for line in said)]
    text = ["", "stripe: ratios", *ratios, "", "stripe: small messages", *small]
    text += ["", "stripe: tcp:auto against fixed lane counts", *auto] if auto else []
    text += ["", "stripe: link security", *security] if security else []
    text += said
    return Section(md, images, text, notes)


def check_table(checks: Sequence[dict[str, Any]], table: Any) -> list[str]:
    """The test-bed check rows (configured | measured) of every check file."""
    rows = [
        [row.get("item", ""), row.get("configured", ""), row.get("measured", "")]
        for doc in checks
        for row in doc.get("rows", [])
    ]
    return table(["check", "configured", "measured"], rows, right=3) if rows else []
