"""The cluster suite in a report (seed 003): matmul's tables, Figs. 1-4 and computed
statements; gpu-transfer's Fig. 5 and the pipelined-against-staged statement; the GPU
product's Fig. 6; failed, skipped and incomplete runs.  Result files are made here the way
mln-matmul and mln-gpu-transfer write them (python/multilane/schemas/result-v1.json), and
the CLI's skip record the way `execute` stores it; then the CLI on a fake mln-matmul that
exits 77 (no GPU), a dry run without the test bed, and runs placed on one site (`site =`)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO_ROOT, clean_env, multilane, recorded_bed, table_cells
from multilane.bench import BenchRequest, prepare
from multilane.context import Context
from multilane.errors import UsageError
from multilane.gpu_report import path_of
from multilane.matmul_report import where_of
from multilane.report import make_report
from multilane.scenario import load_scenario
from multilane.testbed.launch import placement

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
M = 2**20
PHASES = ("total_s", "bcast_s", "scatter_s", "dgemm_s", "gather_s")
GPU_PHASES = ("h2d_s", "kernel_s", "d2h_s")
# Communication time of each phase relative to shared memory (bcast, scatter, gather), and
# how the broadcast grows from 2 to 4 ranks.
TRANSPORT = {
    "shm": (1.0, 1.0, 1.0, 1.1),
    "tcp": (3.1, 2.5, 2.0, 1.3),
    "eth": (10.0, 8.0, 8.0, 1.0),
    "fast": (2.0, 4.0, 1.5, 1.0),
}
META = {
    "shm": {"transport": "shm"},
    "tcp": {"transport": "tcp"},
    "eth": {"transport": "tcp", "testbed": "seed003-cluster", "hosts": "eth1,eth2",
            "nic_rate": "1gbit", "site": "eth"},
    "fast": {"transport": "tcp", "testbed": "seed003-cluster", "hosts": "fast1,fast2",
             "nic_rate": "unlimited", "site": "fast"},
    "node": {"transport": "tcp", "testbed": "seed003-cluster", "hosts": "eth1",
             "nic_rate": "1gbit", "site": "eth"},
}  # fmt: skip


def phases(mpi: str, where: str, ranks: int, n: int) -> dict[str, float]:
    """The fixture's times: communication grows with N^2 (x1.25 for MPICH; scatter and
    gather x1.5 at 4 ranks: 3/4 of A and C move instead of 1/2; the broadcast by the
    transport's growth), DGEMM with N^3 / ranks."""
    s, c = (n / 1000) ** 2, (n / 1000) ** 3
    mult = 1.25 if mpi == "mpich" else 1.0
    tb, ts, tg, growth = TRANSPORT[where]
    share = 1.5 if ranks == 4 else 1.0
    out = {
        "bcast_s": 0.01 * s * tb * mult * (growth if ranks == 4 else 1.0),
        "scatter_s": 0.004 * s * ts * mult * share,
        "dgemm_s": 0.2 * c / ranks,
        "gather_s": 0.004 * s * tg * mult * share,
    }
    out["total_s"] = sum(out.values())
    return out


def _doc(
    mpi: str,
    where: str,
    ranks: int,
    sizes: list[int],
    label: str,
    *,
    gpu: bool = False,
    layout: str = "rows",
    share_unit: str = "%",
) -> dict[str, Any]:
    """A passing mln-matmul result: a row per N with every metric's median, min and max."""
    names = [*PHASES, "gflops", "comm_share", *(GPU_PHASES if gpu else ())]
    units = {"gflops": "GFLOP/s", "comm_share": share_unit}
    rows = []
    for n in sizes:
        times = phases(mpi, where, ranks, n)
        if gpu:  # the product on the GPU: copies and kernel instead of the host DGEMM
            times.update(h2d_s=times["dgemm_s"] / 4, kernel_s=times["dgemm_s"] / 8,
                         d2h_s=times["dgemm_s"] / 8)  # fmt: skip
        if layout == "blocks2x2":  # no broadcast: the scatter sends blocks of A and B
            times.update(scatter_s=times["scatter_s"] + times["bcast_s"], bcast_s=0.0)
        comm = times["bcast_s"] + times["scatter_s"] + times["gather_s"]
        share = comm / times["total_s"] * (100 if share_unit == "%" else 1)
        values = {**times, "gflops": 2 * n**3 / times["total_s"] / 1e9, "comm_share": share}
        row: dict[str, Any] = {"bytes": 8 * n * n, "iters": 3, "errors": 0, "n": n}
        for name, value in values.items():
            row.update({name: value, f"{name}_min": value * 0.97, f"{name}_max": value * 1.03})
        rows.append(row)
    hosts = META[where].get("hosts", "h").split(",")
    return {
        "schema": "multilane-result", "data_version": 1, "benchmark": "matmul",
        "status": "pass", "errors": 0,
        "provenance": {
            "multilane_version": "0.1.0", "mpi_library": f"{mpi} 9.9", "mpi_standard": "3.1",
            "nranks": ranks, "nhosts": len(hosts), "hosts": hosts,
            "date": "2026-11-23T05:00:00Z", "command": "mln-matmul",
            "params": {"n": ",".join(map(str, sizes)), "reps": 3, "layout": layout,
                       "gpu": int(gpu), "blas": "openblas", "blas_threads": 1,
                       "exact_max_n": 1000},
            "meta": {"mpi": mpi, **META[where], "np": str(ranks), "label": label},
        },
        "metrics": [
            {"name": name, "unit": units.get(name, "s"), "statistic": "median",
             "description": f"fixture {name}"}
            for name in names
        ],
        "rows": rows,
    }  # fmt: skip


def _write(folder: Path, doc: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{doc['provenance']['meta']['label']}.json"
    path.write_text(json.dumps(doc))
    return path


def _skip_record(folder: Path, label: str, benchmark: str, options: dict[str, str]) -> None:
    """What the CLI stores when the program exits 77."""
    record = {
        "schema": "multilane-skipped", "data_version": 1, "benchmark": benchmark,
        "label": label, "reason": "no GPU (cudaGetDeviceCount: no CUDA-capable device)",
        "date": "2026-11-23T05:30:00Z", "mpi": "openmpi", "transport": "shm", "np": 4,
        "options": options, "launch": {"argv": ["mpirun"], "env": {}}, "log": f"{label}.log",
    }  # fmt: skip
    (folder / f"{label}.skipped.json").write_text(json.dumps(record))


def _cluster_dir(folder: Path) -> Path:
    """The seed's grid in small: {openmpi, mpich} x {shm, tcp, eth, fast} x {2, 4} ranks x
    N 1000, 2000, 4000; N=8000 for Open MPI's shared memory at 4 ranks in a run of its own;
    a failed repeat, a run without gather_s, a skipped GPU run."""
    for mpi in ("openmpi", "mpich"):
        for where in TRANSPORT:
            for ranks in (2, 4):
                label = f"{mpi}-{where}-np{ranks}"
                _write(folder, _doc(mpi, where, ranks, [1000, 2000, 4000], label))
    big = _doc("openmpi", "shm", 4, [8000], "openmpi-shm-np4-n8000")
    big["provenance"]["date"] = "2026-11-23T06:00:00Z"  # run after the others
    _write(folder, big)
    bad = _doc("openmpi", "tcp", 2, [1000, 2000], "openmpi-tcp-np2-again")
    bad["status"], bad["errors"], bad["rows"][1]["errors"] = "fail", 3, 3
    _write(folder, bad)
    path = folder / "mpich-fast-np4.json"
    doc = json.loads(path.read_text())
    doc["metrics"] = [m for m in doc["metrics"] if m["name"] != "gather_s"]
    for row in doc["rows"]:
        for key in ("gather_s", "gather_s_min", "gather_s_max"):
            del row[key]
    path.write_text(json.dumps(doc))
    _skip_record(folder, "openmpi-shm-gpu", "matmul", {"n": "1000,2000", "gpu": "1"})
    return folder


def _said(md: str) -> list[str]:
    """The statements: list items other than the commands of the runs ("- `label`: ...")."""
    return [line[2:] for line in md.splitlines() if line.startswith("- ") and line[2] != "`"]


@pytest.mark.parametrize(
    ("meta", "text"),
    [
        ({"transport": "shm"}, "shared memory"),
        ({"transport": "tcp"}, "TCP loopback"),
        (META["eth"], "1 Gbit/s Ethernet (2 hosts)"),
        ({**META["eth"], "nic_rate": "100mbit"}, "100 Mbit/s Ethernet (2 hosts)"),
        (META["fast"], "unthrottled link (2 hosts)"),
        (META["node"], "one test-bed host"),
        ({**META["eth"], "nic_rate": ""}, "test bed seed003-cluster (2 hosts)"),
        ({}, None),
    ],
)
def test_where_of(meta: dict[str, str], text: str | None) -> None:
    where = where_of(meta, 1)
    assert (where.text if where else None) == text


def test_where_order() -> None:
    order = [META["fast"], {"transport": "tcp"}, META["eth"], {"transport": "shm"}]
    names = [str(w) for w in sorted(w for m in order for w in (where_of(m, 2),) if w)]
    assert names == [
        "shared memory", "TCP loopback", "1 Gbit/s Ethernet (2 hosts)",
        "unthrottled link (2 hosts)",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("host_MBps", "host"),
        ("cuda_aware_MBps", "cuda-aware"),
        ("bw_staged_MBps", "staged"),
        ("pipelined_bw_GBps", "pipelined"),
        ("pipelined_us", "pipelined"),
        ("latency_us", None),
        ("bw_MBps", None),
    ],
)
def test_path_of(name: str, path: str | None) -> None:
    assert path_of(name) == path


def test_matmul_report(tmp_path: Path) -> None:
    report = make_report(_cluster_dir(tmp_path / "r"))
    names = sorted(p.name for p in report.images)
    assert names == [
        "matmul-bcast.png", "matmul-gather.png", "matmul-scatter.png", "matmul-total.png",
    ]  # fmt: skip
    for image in report.images:
        data = image.read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 10_000, image
    assert report.notes == (  # in the order of the runs: by date, then file name
        "mpich-fast-np4: no gather_s (send of C) in its result: '-' in its table, left out "
        "of the statements and figures that need it",
        "openmpi-tcp-np2-again: failed verification (3 errors): left out of the matmul "
        "tables, figures and statements",
    )
    md = report.markdown.read_text()
    lines = re.sub(r" +", " ", md).splitlines()
    for name, alt in (
        ("matmul-total.png", "total time against N (seed Fig. 1)"),
        ("matmul-bcast.png", "broadcast of B against N (seed Fig. 2)"),
        ("matmul-scatter.png", "send of A against N (seed Fig. 3)"),
        ("matmul-gather.png", "send of C against N (seed Fig. 4)"),
    ):
        assert f"![matmul: {alt}]({name})" in md
    # a table per MPI x transport x ranks; the N=8000 run merged into its configuration
    shm4 = "**openmpi, shared memory, 4 ranks (openmpi-shm-np4, openmpi-shm-np4-n8000)**:"
    assert table_cells(lines, "N", shm4) == [
        "total [s]", "bcast [s]", "scatter [s]", "dgemm [s]", "gather [s]", "GFLOP/s",
        "comm share",
    ]  # fmt: skip
    # N=4000, 4 ranks: bcast 0.176, scatter 0.096, dgemm 3.2, gather 0.096: total 3.568
    assert table_cells(lines, "4000", shm4) == [
        "3.57", "0.176", "0.096", "3.2", "0.096", "35.9", "10.3%",
    ]  # fmt: skip
    assert table_cells(lines, "8000", shm4)[:2] == ["27.1", "0.704"]
    tcp2 = "**openmpi, TCP loopback, 2 ranks (openmpi-tcp-np2)**:"
    assert table_cells(lines, "1000", tcp2) == [
        "0.149", "0.031", "0.01", "0.1", "0.008", "13.4", "32.9%",
    ]  # fmt: skip
    eth = "**mpich, 1 Gbit/s Ethernet (2 hosts), 2 ranks (mpich-eth-np2)**:"
    assert table_cells(lines, "2000", eth)[:2] == ["1.62", "0.5"]
    missing = "**mpich, unthrottled link (2 hosts), 4 ranks (mpich-fast-np4)**:"
    assert table_cells(lines, "2000", missing)[4] == "-"
    said = _said(md)
    # every transport against shared memory at the largest N both have (8000 is shm only)
    assert (
        "openmpi: TCP loopback broadcast of B is 3.10x slower than shared memory at N=4000, "
        "2 ranks (send of A: 2.50x slower, send of C: 2.00x slower, total: 1.07x slower)." in said
    )
    assert (
        "openmpi: 1 Gbit/s Ethernet (2 hosts) broadcast of B is 9.09x slower than shared "
        "memory at N=4000, 4 ranks (send of A: 8.00x slower, send of C: 8.00x slower, total: "
        "1.78x slower)." in said
    )
    assert (
        "mpich: unthrottled link (2 hosts) broadcast of B is 1.82x slower than shared memory "
        "at N=4000, 4 ranks (send of A: 4.00x slower, total: 1.16x slower)." in said
    )  # no send of C: its run has no gather_s
    assert len([s for s in said if "than shared memory at N=4000" in s]) == 12
    # Open MPI against MPICH per transport
    assert (
        "shared memory, 2 ranks, N=4000: openmpi total is 1.01x faster than mpich (broadcast "
        "of B: 1.25x faster, send of A: 1.25x faster, send of C: 1.25x faster, DGEMM: as "
        "fast)." in said
    )
    assert (
        "1 Gbit/s Ethernet (2 hosts), 4 ranks, N=4000: openmpi total is 1.12x faster than "
        "mpich (broadcast of B: 1.25x faster, send of A: 1.25x faster, send of C: 1.25x "
        "faster, DGEMM: as fast)." in said
    )
    assert len([s for s in said if "openmpi total is" in s]) == 8
    # the communication share against the process count, at the largest N of both counts
    assert (
        "openmpi, shared memory, N=4000: communication share 4.3% at 2 ranks, 10.3% at 4 "
        "ranks; from 2 to 4 ranks the broadcast of B took 1.10x as long (0.16 s -> 0.176 s) "
        "and DGEMM 0.50x (6.4 s -> 3.2 s); the broadcast of B is the longest communication "
        "phase at every process count." in said
    )
    assert (
        "mpich, unthrottled link (2 hosts), N=4000: communication share 11.6% at 2 ranks, "
        "24.9% at 4 ranks; from 2 to 4 ranks the broadcast of B took 1.00x as long (0.4 s -> "
        "0.4 s) and DGEMM 0.50x (6.4 s -> 3.2 s); the broadcast of B is the longest "
        "communication phase not at every process count (broadcast of B at 2 ranks, send of "
        "A at 4 ranks)." in said
    )
    assert (
        "The seed's observation (the broadcast of B dominates the communication and stays as "
        "P grows, while the computation shrinks): the broadcast of B is the longest "
        "communication phase at every process count in 6 of 8 MPI x transport "
        "configurations; from the fewest to the most ranks it took 1.00 to 1.30x as long, "
        "DGEMM 0.50x." in said
    )
    assert "GPU matmul: 1 run(s) skipped: openmpi-shm-gpu: no GPU (cudaGetDeviceCount: no " \
        "CUDA-capable device)." in said  # fmt: skip
    assert (
        "Verification failed in 1 of 18 runs: openmpi-tcp-np2-again (3 errors at N=2000). "
        "1 run(s) skipped (nothing measured or verified)." in said
    )
    # the skipped run has its own table; the terminal text has the tables and statements
    assert table_cells(lines, "openmpi-shm-gpu", "### matmul: skipped runs")[:2] == [
        "no GPU (cudaGetDeviceCount: no CUDA-capable device)", "openmpi",
    ]  # fmt: skip
    assert "matmul: openmpi, TCP loopback, 2 ranks (openmpi-tcp-np2)" in report.text
    assert "Verification failed in 1 of 18 runs" in report.text
    assert "matmul-summary.png" not in md  # the section's tables replace the generic ones


def test_matmul_report_all_verified(tmp_path: Path) -> None:
    """Every run passed: the statement counts runs and rows; comm_share as a fraction in one
    run, in % in the other; no shared-memory run to compare with; no GPU run."""
    folder = tmp_path / "r"
    _write(folder, _doc("openmpi", "shm", 2, [1000, 2000], "a", share_unit="fraction"))
    _write(folder, _doc("openmpi", "shm", 4, [1000], "c"))
    _write(folder, _doc("openmpi", "tcp", 8, [1000], "b"))
    report = make_report(folder)
    said = _said(report.markdown.read_text())
    assert said == [
        "openmpi: TCP loopback, 8 ranks: no shared-memory run with the same ranks to compare with.",
        "openmpi, shared memory, N=1000: communication share 15.3% at 2 ranks, 31.5% at 4 "
        "ranks; from 2 to 4 ranks the broadcast of B took 1.10x as long (0.01 s -> 0.011 s) "
        "and DGEMM 0.50x (0.1 s -> 0.05 s); the broadcast of B is the longest communication "
        "phase at every process count.",
        "The seed's observation (the broadcast of B dominates the communication and stays as "
        "P grows, while the computation shrinks): the broadcast of B is the longest "
        "communication phase at every process count in 1 of 1 MPI x transport "
        "configurations; from the fewest to the most ranks it took 1.10x as long, DGEMM "
        "0.50x.",
        "GPU matmul: no result (Fig. 6 not drawn).",
        "Verification passed in every run: 3 runs, 4 rows (one per N), 0 errors.",
    ]
    assert report.notes == ()


def _transfer_doc(mpi: str, where: str, label: str, cuda_aware: bool) -> dict[str, Any]:
    """A mln-gpu-transfer result: bandwidth per path in MB/s, 1 KiB .. 64 MiB; pipelined
    staging 1.5x, 1.8x, 2x naive staging at 4, 16, 64 MiB; cuda-aware only when the MPI is."""
    sizes = [2**10, 2**16, 4 * M, 16 * M, 64 * M]
    gain = {4 * M: 1.5, 16 * M: 1.8, 64 * M: 2.0}
    paths = ["host", *(["cuda_aware"] if cuda_aware else []), "staged", "pipelined"]
    rows = []
    for size in sizes:
        staged = 100.0 + size / 2**20
        values = {"host": staged * 4, "cuda_aware": staged * 3, "staged": staged,
                  "pipelined": staged * gain.get(size, 0.9)}  # fmt: skip
        row: dict[str, Any] = {"bytes": size, "iters": 10, "errors": 0}
        for path in paths:
            v = values[path]
            row.update({f"{path}_MBps": v, f"{path}_MBps_min": v * 0.9, f"{path}_MBps_max": v})
        rows.append(row)
    hosts = META[where].get("hosts", "h").split(",")
    return {
        "schema": "multilane-result", "data_version": 1, "benchmark": "gpu-transfer",
        "status": "pass", "errors": 0,
        "provenance": {
            "multilane_version": "0.1.0", "mpi_library": f"{mpi} 9.9", "mpi_standard": "3.1",
            "nranks": 2, "nhosts": len(hosts), "hosts": hosts,
            "date": "2026-11-23T05:00:00Z", "command": "mln-gpu-transfer",
            "params": {"tests": ",".join(p.replace("_", "-") for p in paths),
                       "cuda_aware": "yes" if cuda_aware else "no", "chunk": "1M",
                       "slots": 2},
            "meta": {"mpi": mpi, **META[where], "np": "2", "label": label},
        },
        "metrics": [
            {"name": f"{p}_MBps", "unit": "MB/s", "statistic": "median",
             "description": f"fixture {p}", "higher_is_better": True}
            for p in paths
        ],
        "rows": rows,
    }  # fmt: skip


def test_gpu_report(tmp_path: Path) -> None:
    """As a GPU machine writes them: gpu-transfer on one host (CUDA-aware MPI) and across the
    test bed (not CUDA-aware), matmul --gpu in both layouts on one host and across hosts."""
    folder = tmp_path / "r"
    _write(folder, _transfer_doc("openmpi", "shm", "openmpi-gpu-shm", True))
    _write(folder, _transfer_doc("mpich", "eth", "mpich-gpu-eth", False))
    for where in ("shm", "eth"):
        for layout in ("rows", "blocks2x2"):
            label = f"openmpi-{where}-gpu-{layout}"
            _write(folder, _doc("openmpi", where, 4, [1000, 2000], label, gpu=True,
                                layout=layout))  # fmt: skip
    _skip_record(folder, "openmpi-fast-transfer", "gpu-transfer", {"tests": "host"})
    report = make_report(folder)
    names = {p.name for p in report.images}
    assert {"gpu-transfer.png", "matmul-gpu.png"} <= names
    assert not names & {"matmul-total.png", "matmul-bcast.png"}  # no CPU run
    for image in report.images:
        assert image.read_bytes().startswith(PNG_MAGIC), image
    md = report.markdown.read_text()
    assert "![gpu-transfer: bandwidth per path against message size (seed Fig. 5)]" in md
    assert "![matmul: the GPU product against N (seed Fig. 6)](matmul-gpu.png)" in md
    said = _said(md)
    assert (
        "openmpi, shared memory: pipelined staging vs naive staging at 4M and up: 1.50 to "
        "2.00x (3 sizes; > 1: pipelined faster)." in said
    )
    assert "openmpi, shared memory: CUDA-aware MPI vs naive staging at 4M and up: 3.00x." in said
    assert (
        "mpich, 1 Gbit/s Ethernet (2 hosts): pipelined staging vs naive staging at 4M and up: "
        "1.50 to 2.00x (3 sizes; > 1: pipelined faster)." in said
    )
    assert (
        "mpich, 1 Gbit/s Ethernet (2 hosts): cuda-aware: no data (params.cuda_aware = no)." in said
    )
    assert (
        "gpu-transfer: 1 run(s) skipped: openmpi-fast-transfer: no GPU (cudaGetDeviceCount: no "
        "CUDA-capable device)." in said
    )
    # Fig. 6's statement: the send of A and B across the 1 Gbit/s link against one host
    assert (
        "openmpi, GPU, layout blocks2x2: 1 Gbit/s Ethernet (2 hosts) send of A and B is 8.71x "
        "slower than shared memory at N=2000, 4 ranks (send of C: 8.00x slower, total: 2.41x "
        "slower)." in said
    )
    assert (
        "openmpi, GPU, layout rows: 1 Gbit/s Ethernet (2 hosts) send of A and B is 8.71x "
        "slower than shared memory at N=2000, 4 ranks (send of C: 8.00x slower, total: 2.41x "
        "slower)." in said
    )
    lines = re.sub(r" +", " ", md).splitlines()
    gpu = "**openmpi, shared memory, 4 ranks, layout blocks2x2 (openmpi-shm-gpu-blocks2x2)**:"
    assert table_cells(lines, "N", gpu) == [
        "total [s]", "bcast [s]", "scatter [s]", "h2d [s]", "kernel [s]", "d2h [s]",
        "gather [s]", "GFLOP/s", "comm share",
    ]  # fmt: skip
    assert table_cells(lines, "1000", gpu)[3:6] == ["0.0125", "0.00625", "0.00625"]
    assert "Verification passed in every run: 4 runs, 8 rows (one per N), 0 errors." in said


def test_transfer_report_tolerates_other_units(tmp_path: Path) -> None:
    """A path measured as a time (us) becomes a bandwidth; a metric of no path is noted."""
    folder = tmp_path / "r"
    doc = _transfer_doc("openmpi", "shm", "t", False)
    for row in doc["rows"]:
        v, low, high = (row.pop(f"staged_MBps{k}") for k in ("", "_min", "_max"))
        b = row["bytes"]  # us = B / (MB/s): the lowest bandwidth is the longest time
        row.update(staged_us=b / v, staged_us_min=b / high, staged_us_max=b / low)
        row.update(latency_us=1.0, latency_us_min=1.0, latency_us_max=1.0)
    doc["metrics"][1] = {"name": "staged_us", "unit": "us", "statistic": "median",
                         "description": "staged time"}  # fmt: skip
    doc["metrics"].append({"name": "latency_us", "unit": "us", "statistic": "median",
                           "description": "x"})  # fmt: skip
    _write(folder, doc)
    report = make_report(folder)
    assert (
        "openmpi, shared memory: pipelined staging vs naive staging at 4M and up: 1.50 to "
        "2.00x (3 sizes; > 1: pipelined faster)." in _said(report.markdown.read_text())
    )
    assert report.notes == (
        "t: metric latency_us [us] names no transfer path with a bandwidth or time: left out",
    )


# ---- the CLI on a program that exits 77 (no GPU) --------------------------------------------

FAKE_MATMUL = r"""
import sys
print("# multilane matmul (fake)")
if "--gpu" in sys.argv:
    print("mln-matmul: skipped: no GPU (cudaGetDeviceCount: no CUDA-capable device)", flush=True)
    sys.exit(77)
print("mln-matmul: error: this fake only skips")
sys.exit(3)
"""


def _fake_matmul(root: Path) -> None:
    path = root / "build" / "openmpi" / "bin" / "mln-matmul"
    path.write_text(f"#!{sys.executable}\n{FAKE_MATMUL}")
    path.chmod(0o755)


def test_bench_reports_a_skipped_run(fake_root: Path, tmp_path: Path) -> None:
    _fake_matmul(fake_root)
    out = tmp_path / "res"
    proc = multilane(
        ["bench", "matmul", "--n", "100,200", "--np", "1", "--results", str(out), "--", "--gpu"],
        clean_env(fake_root),
    )
    assert proc.returncode == 77, (proc.stdout, proc.stderr)
    assert (
        "multilane: openmpi-shm: skipped: no GPU (cudaGetDeviceCount: no CUDA-capable device)"
        in proc.stdout
    )
    (record,) = out.glob("*/openmpi-shm.skipped.json")
    doc = json.loads(record.read_text())
    assert (doc["schema"], doc["benchmark"], doc["np"]) == ("multilane-skipped", "matmul", 1)
    assert doc["options"] == {"n": "100,200"} and doc["args"] == ["--gpu"]
    assert not list(out.glob("*/openmpi-shm.json"))


def test_run_counts_skipped_runs_apart(fake_root: Path) -> None:
    """A skipped run is neither ok nor failed: the summary says so, the report lists it, the
    scenario exits 0 when nothing failed (and 1 with the failure named when a run did)."""
    _fake_matmul(fake_root)
    scenario = fake_root / "scenarios" / "gpu.toml"
    scenario.write_text(
        'name = "gpu"\n[defaults]\nbenchmark = "matmul"\nmpi = "openmpi"\nn = [100, 200]\n'
        'np = 4\n[[run]]\nlabel = "gpu-rows"\ngpu = true\n[[run]]\nlabel = "gpu-blocks"\n'
        'gpu = 1\nlayout = "blocks2x2"\n'
    )
    results = fake_root / "res"
    proc = multilane(["run", str(scenario), "--results", str(results)], clean_env(fake_root))
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert (
        "scenario gpu: 2 runs: 0 ok, 2 skipped (gpu-rows: skipped: no GPU (cudaGetDeviceCount: "
        "no CUDA-capable device); gpu-blocks: skipped: no GPU (cudaGetDeviceCount: no "
        "CUDA-capable device))" in proc.stdout.splitlines()
    ), proc.stdout
    assert "GPU matmul: 2 run(s) skipped: gpu-blocks: no GPU" in proc.stdout
    (folder,) = results.iterdir()
    md = (folder / "report.md").read_text()
    assert "### matmul: skipped runs" in md and "| gpu-rows " in md
    scenario.write_text(scenario.read_text() + '[[run]]\nlabel = "cpu"\n')
    proc = multilane(["run", str(scenario), "--results", str(results)], clean_env(fake_root))
    assert proc.returncode == 1
    assert "scenario gpu: 3 runs: 0 ok, 2 skipped (" in proc.stdout
    assert "), 1 failed (cpu)" in proc.stdout
    assert "1 of 3 runs failed: cpu: mln-matmul exited with status 3" in proc.stderr


def test_dry_run_without_the_test_bed(fake_root: Path, tmp_path: Path) -> None:
    """A [network] scenario's dry run checks every run and prints the commands of the runs on
    this machine; a test-bed run says where its ranks go (its command needs the live bed)."""
    _fake_matmul(fake_root)
    scenario = fake_root / "scenarios" / "mix.toml"
    scenario.write_text(
        'name = "mix"\n[defaults]\nbenchmark = "matmul"\nmpi = "openmpi"\nn = [100]\n'
        '[[run]]\nlabel = "here"\ntestbed = false\ntransport = "tcp"\nnp = 4\n'
        '[[run]]\nlabel = "there"\nsite = "eth"\nppn = 2\n'
        '[network]\n[[network.site]]\nname = "eth"\nhosts = 2\nnic_rate = "1gbit"\n'
    )
    env = clean_env(fake_root, MULTILANE_TESTBED_DIR=str(tmp_path / "state"))
    proc = multilane(["run", str(scenario), "--dry-run", "--results", str(tmp_path / "r")], env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("scenario mix: 2 runs")
    assert lines[1].startswith("(1/2) here: ") and "mln-matmul --n 100" in lines[1]
    assert "btl_tcp_if_include lo" in lines[1] and "--meta transport=tcp" in lines[1]
    assert lines[2] == (
        "(2/2) there: matmul on the test bed (site eth, ppn 2): its command needs the test bed "
        f"up (multilane testbed up {scenario})"
    )
    assert not (tmp_path / "r").exists()
    bad = scenario.read_text().replace("n = [100]", 'n = [100]\nlayout = "diagonal"')
    scenario.write_text(bad)
    proc = multilane(["run", str(scenario), "--dry-run"], env)
    assert proc.returncode == 2
    assert "defaults.layout" not in proc.stderr and "layout: expected one of rows" in proc.stderr


# ---- site = NAME: the ranks on one site's hosts (a recorded test bed; nothing is started) ---

SEED003 = REPO_ROOT / "scenarios" / "seed003-cluster.toml"


def test_placement_on_one_site(tmp_path: Path) -> None:
    ctx = recorded_bed(tmp_path / "state", SEED003)
    network = load_scenario(SEED003).network
    assert network is not None
    eth = placement(ctx, SEED003, network, 2, "matmul", site="eth")
    assert eth.placement.hosts == ("eth1", "eth2") and eth.placement.np == 4
    assert (eth.nic_rate, eth.sites, eth.to_json()["site"]) == ("1gbit", 1, "eth")
    fast = placement(ctx, SEED003, network, 1, "matmul", site="fast", hosts=1)
    assert fast.placement.hosts == ("fast1",) and fast.nic_rate == "unlimited"
    assert fast.to_json()["nic_rate"] == "unlimited" and fast.to_json()["host_limit"] == 1
    # without site: the first host of each site (no WAN joins them: a scenario says site)
    assert placement(ctx, SEED003, network, 1, "pt2pt").nic_rate == "1gbit,unlimited"
    with pytest.raises(UsageError, match=r"matmul: site 'lan': no such site \(known: eth, fast\)"):
        placement(ctx, SEED003, network, 1, "matmul", site="lan")
    with pytest.raises(UsageError, match=r"hosts 3: site eth has 2 hosts \(eth1, eth2\): expected"):
        placement(ctx, SEED003, network, 1, "matmul", site="eth", hosts=3)


def test_prepare_a_site_run(fake_root: Path, tmp_path: Path) -> None:
    """The launch of a run with site = eth: both eth hosts, and the meta the report names the
    transport by (hosts, site, nic_rate)."""
    _fake_matmul(fake_root)
    ctx = recorded_bed(tmp_path / "state", SEED003, fake_root)
    ctx = Context(root=fake_root, env={**ctx.env, "MULTILANE_ROOT": str(fake_root)}, ncpus=2,
                  euid=0)  # fmt: skip
    request = BenchRequest(
        "matmul", mpi="openmpi", options={"n": [100, 200]}, scenario=SEED003, ppn=2, site="eth"
    )
    run = prepare(request, ctx, tmp_path / "out")
    assert run.request.np == 4 and run.label == "openmpi-seed003-cluster"
    assert run.note == "4 ranks on 2 hosts (site = eth: all of its hosts)"
    argv = run.launch.argv[2]
    assert "--host eth1:2,eth2:2" in argv and "--n 100,200" in argv
    for meta in ("hosts=eth1,eth2", "nic_rate=1gbit", "site=eth", "testbed=seed003-cluster"):
        assert f"--meta {meta}" in argv
    where = where_of({"testbed": "seed003-cluster", "hosts": "eth1,eth2", "nic_rate": "1gbit"}, 2)
    assert str(where) == "1 Gbit/s Ethernet (2 hosts)"
