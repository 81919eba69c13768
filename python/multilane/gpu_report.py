"""The gpu-transfer part of a report (seed 003, ALGORITHMS.md M2): the seed's Fig. 5, bandwidth
against message size with a line per path (host, cuda-aware, staged, pipelined), and per run
pipelined staging against naive staging at 4 MiB and up, and CUDA-aware MPI against naive
staging where the MPI is CUDA-aware.  Computed from the result files only; a path is found
from its metric's name (`pipelined_MBps`), a bandwidth in MB/s, GB/s, Mbit/s or Gbit/s, or a
time in us (bandwidth = bytes / time).  Placement names and skipped runs: matmul_report.py."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from .figures import draw_figures, log_y, size_axis
from .matmul_report import Stat, Where, skipped_statement, span, where_of
from .sizes import format_size
from .stripe_report import DPI, Section

PATHS = ("host", "cuda-aware", "staged", "pipelined")  # mln-gpu-transfer's tests
PATH_WORDS = ("bw", "bandwidth", "mbps", "gbps", "mbitps", "us", "time")  # not part of a path
LARGE = 4 * 2**20  # "at 4 MiB and up": where pipelined staging is compared with naive staging
TO_MBPS = {"MB/s": 1.0, "GB/s": 1000.0, "Mbit/s": 0.125, "Gbit/s": 125.0}
PATH_STYLES: dict[str, dict[str, Any]] = {
    "host": {"color": "black", "marker": "o"},
    "cuda-aware": {"color": "tab:green", "marker": "^"},
    "staged": {"color": "tab:red", "marker": "s", "linestyle": "--"},
    "pipelined": {"color": "tab:blue", "marker": "D", "markersize": 4},
}


def path_of(name: str) -> str | None:
    """The transfer path a metric measures: its name without units and `bw`
    ("pipelined_MBps": pipelined, "cuda_aware_bw_MBps": cuda-aware)."""
    words = [w for w in name.lower().split("_") if w and w not in PATH_WORDS]
    text = "-".join(words).replace("cudaaware", "cuda-aware")
    return text if text in PATHS else None


@dataclass(frozen=True)
class TransferRun:
    """One passing gpu-transfer result: bandwidth in MB/s by path and size."""

    label: str
    mpi: str
    where: Where
    bandwidth: dict[str, dict[int, Stat]]
    params: dict[str, Any]

    @property
    def name(self) -> str:
        return f"{self.mpi}, {self.where}"


def _to_mbps(value: float, unit: str, size: int) -> float | None:
    if unit in TO_MBPS:
        return value * TO_MBPS[unit]
    if unit == "us" and value > 0:
        return size / value  # bytes per microsecond = MB/s
    return None


def transfer_runs(runs: Sequence[Any]) -> tuple[list[TransferRun], list[str]]:
    notes: list[str] = []
    found = []
    for run in runs:
        doc = run.doc
        prov = doc["provenance"]
        meta = prov.get("meta", {})
        where = where_of(meta, int(prov["nhosts"]))
        if doc["status"] != "pass":
            notes.append(f"{run.label}: failed verification ({doc['errors']} errors): left "
                         "out of the GPU transfer figure and statements")  # fmt: skip
            continue
        if not meta.get("mpi") or where is None:
            notes.append(f"{run.label}: no MPI or transport in its meta: left out of Fig. 5")
            continue
        bandwidth: dict[str, dict[int, Stat]] = {}
        for metric in doc["metrics"]:
            path, unit = path_of(metric["name"]), metric["unit"]
            if path is None or (unit not in TO_MBPS and unit != "us"):
                notes.append(f"{run.label}: metric {metric['name']} [{unit}] names no transfer "
                             "path with a bandwidth or time: left out")  # fmt: skip
                continue
            points = bandwidth.setdefault(path, {})
            for row in doc["rows"]:
                size, name = int(row["bytes"]), metric["name"]
                if name not in row or size <= 0:
                    continue
                mid, one, two = (
                    _to_mbps(row[k], unit, size) for k in (name, f"{name}_min", f"{name}_max")
                )
                if mid is not None and one is not None and two is not None:
                    points[size] = (mid, min(one, two), max(one, two))  # a time's max: min MB/s
        found.append(TransferRun(run.label, meta["mpi"], where, bandwidth, prov.get("params", {})))
    return found, notes


def plot_transfer(found: Sequence[TransferRun], path: Path) -> bool:
    """The seed's Fig. 5: bandwidth against message size, a line per path, a panel per run."""
    drawn = [r for r in found if any(r.bandwidth.values())]
    if not drawn:
        return False
    ncols = min(2, len(drawn))
    nrows = -(-len(drawn) // ncols)
    fig = Figure(figsize=(6.4 * ncols + 0.6, 4.6 * nrows + 0.6), dpi=DPI, layout="constrained")
    axes = [ax for row in fig.subplots(nrows, ncols, squeeze=False) for ax in row]
    for ax in axes[len(drawn) :]:
        ax.set_axis_off()
    for ax, run in zip(axes, drawn):
        sizes: list[int] = []
        for name in PATHS:
            points = run.bandwidth.get(name, {})
            xs = sorted(points)
            if not xs:
                continue
            sizes += xs
            stats = [points[x] for x in xs]
            (line,) = ax.plot(xs, [s[0] for s in stats], label=name, linewidth=1.6,
                              **{"markersize": 3, **PATH_STYLES[name]})  # fmt: skip
            ax.fill_between(xs, [s[1] for s in stats], [s[2] for s in stats],
                            color=line.get_color(), alpha=0.12, linewidth=0)  # fmt: skip
        size_axis(ax, sizes, 12)
        log_y(ax)
        ax.set_ylabel("bandwidth [MB/s], median")
        ax.set_title(f"{run.name} ({run.label})", fontsize="medium")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle("GPU buffers between two ranks: bandwidth per path (seed Fig. 5)")
    fig.savefig(path, format="png")
    return True


def _large_ratios(run: TransferRun, top: str, bottom: str) -> list[float]:
    a, b = run.bandwidth.get(top, {}), run.bandwidth.get(bottom, {})
    return [a[s][0] / b[s][0] for s in sorted(set(a) & set(b)) if s >= LARGE and b[s][0]]


TRANSFER_FIGURES = (
    ("gpu-transfer.png", plot_transfer, "bandwidth per path against message size (seed Fig. 5)"),
)


def transfer_statements(found: Sequence[TransferRun]) -> list[str]:
    """Per run: pipelined staging against naive staging at 4 MiB and up, and CUDA-aware MPI
    against naive staging there, or why it has no data."""
    said = []
    for run in found:
        ratios = _large_ratios(run, "pipelined", "staged")
        head = f"{run.name}: pipelined staging vs naive staging at {format_size(LARGE)} and up"
        if ratios:
            count = f"{len(ratios)} size{'s' if len(ratios) != 1 else ''}"
            said.append(f"{head}: {span(ratios)} ({count}; > 1: pipelined faster).")
        else:
            said.append(f"{head}: not measured by both at these sizes.")
        aware = _large_ratios(run, "cuda-aware", "staged")
        if aware:
            said.append(f"{run.name}: CUDA-aware MPI vs naive staging at {format_size(LARGE)} and "
                        f"up: {span(aware)}.")  # fmt: skip
        elif not run.bandwidth.get("cuda-aware"):
            flag = run.params.get("cuda_aware")
            why = f" (params.cuda_aware = {flag})" if flag is not None else ""
            said.append(f"{run.name}: cuda-aware: no data{why}.")
    return said


def section(
    runs: Sequence[Any],
    checks: Sequence[dict[str, Any]],
    out_dir: Path,
    table: Any,
    skipped: Sequence[dict[str, Any]] = (),
) -> Section:
    """Fig. 5 and the pipelined-against-staged statement (the generic tables show the rest)."""
    del checks, table
    found, notes = transfer_runs(runs)
    md = ["", "### gpu-transfer: GPU buffers between ranks (seed 003, Fig. 5)", ""]
    images, figure_md = draw_figures("gpu-transfer", found, out_dir, TRANSFER_FIGURES)
    md += figure_md
    said = transfer_statements(found)
    line = skipped_statement("gpu-transfer", skipped)
    said += [line] if line else []
    if not found and not skipped:
        said.append("No passing gpu-transfer run says its MPI and transport.")
    md += [*(f"- {s}" for s in said)]
    return Section(md, images, ["", *said], notes)
