"""What seed 004's report parts share (relay_report.py, nas_report.py): a run's place in the
matrix of MPI x WAN one-way delay x path (direct: one stock MPI job over the routable sites;
or K trunks: one MPI job per private site joined by K gateways per site, `launch = "grid"`),
read from the meta the CLI writes (`mpi`, `wan_delay`, `launch`, `trunks`, `frontend_nic_rate`,
`wan_rate`) and the provenance (`grid`: the gateways' summaries; `testbed.wan_mode`); the names
of paths and delays; the delay axis and the line style of each MPI and path in the figures."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from ..testbed.topology import format_time, parse_rate, parse_time

DIRECT = 0  # the "trunks" of a direct run
MPI_STYLES = ("-", "--", ":", "-.")
TRUNK_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")


@dataclass(frozen=True)
class Place:
    """A run's MPI (or one per site: "a=openmpi,b=mpich"), WAN delay (None: as built),
    trunks (DIRECT for a stock job over the direct network), the front-ends' and the WAN's
    rates (bit/s, None when not recorded) and, for a relayed run, the payload bytes each trunk's
    gateways sent across the WAN (site -> trunk -> bytes)."""

    mpi: str
    delay_s: float | None
    trunks: int
    frontend_bps: float | None = None
    wan_bps: float | None = None
    trunk_bytes: Mapping[str, Mapping[int, int]] | None = None


def path_name(trunks: int) -> str:
    return "direct" if trunks == DIRECT else f"{trunks} trunk{'s' if trunks != 1 else ''}"


def delay_name(delay_s: float | None) -> str:
    return "as built" if delay_s is None else format_time(delay_s)


def rate_bps(text: object) -> float | None:
    """A rate the CLI wrote in the meta ("125mbit"; several: the first) in bit/s."""
    if not isinstance(text, str) or not text or text == "unlimited":
        return None
    try:
        bps = parse_rate(text.split(",")[0])
    except ValueError:
        return None
    return float(bps) if bps else None


def trunk_bytes(grid: object) -> dict[str, dict[int, int]] | None:
    """provenance.grid: per site, per trunk, the payload bytes its gateway sent to the peer
    gateways (from the gateways' summary lines); None without any summary."""
    if not isinstance(grid, dict):
        return None
    out: dict[str, dict[int, int]] = {}
    for site in grid.get("sites", []):
        for gw in site.get("gateways", []):
            summary = gw.get("summary")
            if not isinstance(summary, dict):
                continue
            sent = sum(int(p.get("bytes_out", 0)) for p in summary.get("peers", {}).values())
            out.setdefault(str(site.get("name")), {})[int(gw.get("trunk", 0))] = sent
    return out or None


def place_of(label: str, doc: Mapping[str, Any]) -> Place | str:
    """The place of a result in the matrix, or why it has none (a note naming the run)."""
    prov = doc["provenance"]
    meta = prov.get("meta", {})
    mpi = meta.get("mpi", "")
    if not mpi:
        return f"{label}: no MPI in its meta"
    grid = meta.get("launch") == "grid" or "trunks" in meta
    try:
        trunks = int(meta.get("trunks", prov.get("grid", {}).get("trunks", 0))) if grid else 0
    except (TypeError, ValueError):
        return f"{label}: trunks {meta.get('trunks')!r}"
    if grid and trunks < 1:
        return f"{label}: a grid run without its trunks"
    delay = parse_time(meta["wan_delay"]) if "wan_delay" in meta else None
    if delay is None and prov.get("testbed", {}).get("wan_mode") == "bridge":
        delay = 0.0  # the bridge stand-in has no delay (seed004-latency.toml)
    return Place(
        mpi,
        delay,
        trunks,
        rate_bps(meta.get("frontend_nic_rate")),
        rate_bps(meta.get("wan_rate")),
        trunk_bytes(prov.get("grid")) if grid else None,
    )


def mpi_order(mpis: Iterable[str]) -> list[str]:
    """The MPIs in the order first seen, one MPI per site ("a=openmpi,b=mpich") last."""
    seen = list(dict.fromkeys(mpis))
    return sorted(seen, key=lambda m: ("=" in m, seen.index(m)))


def direct_mpi(mpi: str) -> str:
    """The MPI whose direct run a relayed one is compared with: its own, or site a's."""
    if "=" not in mpi:
        return mpi
    return mpi.split(",", maxsplit=1)[0].partition("=")[2]


def delay_order(delays: Iterable[float | None]) -> list[float | None]:
    """The distinct delays, "as built" (None) first, then ascending."""
    return sorted(dict.fromkeys(delays), key=lambda d: -1.0 if d is None else d)


def delay_axis(ax: Any, delays: Sequence[float | None]) -> list[float]:
    """Delays at even positions, labelled in ms; the positions."""
    xs = [float(i) for i in range(len(delays))]
    ax.xaxis.set_major_locator(FixedLocator(xs))
    ax.xaxis.set_minor_locator(NullLocator())
    names = [delay_name(d) for d in delays]
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _p: names[round(x)]))
    ax.set_xlabel("WAN one-way delay")
    ax.set_xlim(-0.3, len(delays) - 0.7)
    return xs


def line_style(mpis: Sequence[str], trunks: Sequence[int], mpi: str, k: int) -> dict[str, Any]:
    """An MPI's line style and a path's colour: direct black squares, each trunk count its own
    colour."""
    return {
        "linestyle": MPI_STYLES[mpis.index(mpi) % len(MPI_STYLES)],
        "color": "black" if k == DIRECT else TRUNK_COLOURS[trunks.index(k) % len(TRUNK_COLOURS)],
        "marker": "s" if k == DIRECT else "o",
        "markersize": 4,
        "linewidth": 1.6,
    }
