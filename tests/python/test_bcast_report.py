"""The broadcast part of a report: time against size, speed-up against L, ratio tables and
statements, all from result files (fixtures made from real mln-bcast results)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from conftest import clean_env, multilane, table_cells
from multilane.bcast_report import stock_variant
from multilane.report import make_report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
K, M = 2**10, 2**20
TUNED_PIPELINE = "OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_bcast_algorithm=3"

# (mpi, algo, --leaders, mpi_env, {bytes: (time_us, leaders that ran)})
BCAST_RUNS: list[tuple[str, str, int, str, dict[int, tuple[float, int]]]] = [
    ("openmpi", "stock", 0, "", {1 * K: (140.0, 0), 8 * K: (300.0, 0), 4 * M: (738720.0, 0),
                                 16 * M: (2966158.0, 0)}),
    ("openmpi", "stock", 0, TUNED_PIPELINE, {1 * K: (150.0, 0), 4 * M: (500000.0, 0),
                                             16 * M: (1500000.0, 0)}),
    ("openmpi", "stock", 0, "OMPI_MCA_coll_han_priority=100", {4 * M: (700000.0, 0)}),
    ("openmpi", "hier", 0, "", {1 * K: (141.0, 0), 8 * K: (301.0, 0), 4 * M: (281764.0, 1),
                                16 * M: (1133615.0, 1)}),
    ("openmpi", "sme", 2, "", {4 * M: (154196.0, 2), 16 * M: (634656.0, 2)}),
    ("openmpi", "sme", 4, "", {1 * K: (142.0, 0), 8 * K: (303.0, 0), 4 * M: (88714.0, 4),
                               16 * M: (327634.0, 4)}),
    ("mpich", "stock", 0, "", {1 * K: (30000.0, 0), 8 * K: (31000.0, 0), 4 * M: (531459.0, 0),
                               16 * M: (1756165.0, 0)}),
    ("mpich", "stock", 0, "MPIR_CVAR_BCAST_INTRA_ALGORITHM=binomial", {4 * M: (520000.0, 0),
                                                                      16 * M: (1900000.0, 0)}),
    ("mpich", "sme", 4, "", {1 * K: (30960.0, 0), 8 * K: (31000.0, 0), 4 * M: (214064.0, 4),
                             16 * M: (555337.0, 4)}),
]  # fmt: skip


def _bcast_dir(
    fixtures: Path, folder: Path, runs: list[tuple[str, str, int, str, dict[int, Any]]]
) -> Path:
    """Result files made from the mln-bcast fixtures (stock and sme), one per run, plus the
    test bed's check (iperf3: 132.8 Mbit/s with 1 stream, 979.3 with 8)."""
    folder.mkdir(parents=True, exist_ok=True)
    for n, (mpi, algo, leaders, env, rows) in enumerate(runs):
        base = "stock" if algo == "stock" else "sme4"
        doc = json.loads((fixtures / f"result-bcast-openmpi-{base}.json").read_text())
        prov = doc["provenance"]
        name = f"{mpi}-{algo}{leaders or ''}-{n}"
        prov["meta"].update(mpi=mpi, label=name)
        prov["params"].update(algo=algo, leaders=leaders, mpi_env=env)
        if algo != "stock":
            prov["params"]["bcast_leaders"] = str(leaders or 4)
        prov["date"] = f"2026-11-22T20:{n:02d}:00Z"
        doc["rows"] = [
            {"bytes": size, "iters": 5, "errors": 0, "leaders": cell[1], "time_us": cell[0],
             "time_us_min": cell[0] * 0.99, "time_us_max": cell[0] * 1.01,
             **({"paired_ratio": cell[2]} if len(cell) > 2 else {})}
            for size, cell in sorted(rows.items())
        ]  # fmt: skip
        (folder / f"{name}.json").write_text(json.dumps(doc))
    shutil.copy(fixtures / "testbed-check.json", folder / "testbed-check.json")
    return folder


@pytest.mark.parametrize(
    ("env", "name"),
    [
        ("", "default"),
        (TUNED_PIPELINE, "tuned:pipeline"),
        ("OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_bcast_algorithm=6",
         "tuned:binomial"),
        ("OMPI_MCA_coll_tuned_use_dynamic_rules=true OMPI_MCA_coll_tuned_bcast_algorithm=knomial",
         "tuned:knomial"),
        ("OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_bcast_algorithm=0",
         "default"),
        ("OMPI_MCA_coll_han_priority=100", "han"),
        ("OMPI_MCA_coll_han_bcast_segsize=65536", "han"),
        ("OMPI_MCA_coll_han_priority=0", "default"),
        ("OMPI_MCA_coll=^han", "tuned"),
        ("OMPI_MCA_coll=^han " + TUNED_PIPELINE, "tuned:pipeline"),
        ("OMPI_MCA_coll=^sm", "coll=^sm"),
        ("MPIR_CVAR_BCAST_INTRA_ALGORITHM=scatter_ring_allgather", "scatter_ring_allgather"),
        ("MPIR_CVAR_BCAST_INTRA_ALGORITHM=auto", "default"),
        ("MPIR_CVAR_BCAST_INTRA_ALGORITHM=smp MPIR_CVAR_ENABLE_SMP_BCAST=1",
         "smp ENABLE_SMP_BCAST=1"),
    ],
)  # fmt: skip
def test_stock_variant(env: str, name: str) -> None:
    assert stock_variant(env) == (name, None)


def test_stock_variant_without_dynamic_rules() -> None:
    name, note = stock_variant("OMPI_MCA_coll_tuned_bcast_algorithm=6")
    assert name == "default"
    assert note == (
        "OMPI_MCA_coll_tuned_bcast_algorithm=6 without "
        "OMPI_MCA_coll_tuned_use_dynamic_rules=1: Open MPI ignores it"
    )


def test_bcast_report(fixtures: Path, tmp_path: Path) -> None:
    report = make_report(_bcast_dir(fixtures, tmp_path / "r", BCAST_RUNS))
    names = sorted(p.name for p in report.images)
    assert names == ["bcast-leaders.png", "bcast-summary.png", "bcast-time.png",
                     "bcast-time_us.png"]  # fmt: skip
    for image in report.images:
        assert image.read_bytes().startswith(PNG_MAGIC), image
    assert report.notes == ()
    md = report.markdown.read_text()
    lines = re.sub(r" +", " ", md).splitlines()
    assert "![bcast: time per broadcast against message size](bcast-time.png)" in md
    assert "![bcast: speed-up against leaders per node](bcast-leaders.png)" in md
    # 4M and above: best stock, hier, best sme (the L that ran), speed-ups
    assert table_cells(lines, "size", "**openmpi**, 4M") == [
        "best stock [ms]", "hier [ms]", "best sme [ms]", "hier speed-up", "sme speed-up",
        "sme / hier",
    ]  # fmt: skip
    assert table_cells(lines, "4M", "**openmpi**, 4M") == [
        "500 (tuned:pipeline)", "282", "88.7 (L=4)", "1.77x", "5.64x", "3.18x",
    ]  # fmt: skip
    assert table_cells(lines, "16M", "**openmpi**, 4M") == [
        "1,500 (tuned:pipeline)", "1,134", "328 (L=4)", "1.32x", "4.58x", "3.46x",
    ]  # fmt: skip
    assert table_cells(lines, "4M", "**mpich**, 4M") == [
        "520 (binomial)", "-", "214 (L=4)", "-", "2.43x", "-",
    ]  # fmt: skip
    assert table_cells(lines, "16M", "**mpich**, 4M")[0] == "1,756 (default)"
    # below the threshold (16K, from the runs): time / stock time with the same settings
    assert "**openmpi**, below the threshold (16K, as the runs recorded)" in md
    assert table_cells(lines, "size", "**openmpi**, below") == ["hier / stock", "sme L=4 / stock"]
    assert table_cells(lines, "1K", "**openmpi**, below") == ["1.007", "1.014"]
    assert table_cells(lines, "8K", "**openmpi**, below") == ["1.003", "1.010"]
    assert table_cells(lines, "furthest", "**openmpi**, below") == ["1.007 (1K)", "1.014 (1K)"]
    assert table_cells(lines, "furthest", "**mpich**, below") == ["1.032 (1K)"]
    said = [line[2:] for line in md.splitlines() if line.startswith("- ")]
    assert "iperf3 on the test bed: 1 stream 133 Mbit/s, 8 streams 979 (7.37x)." in said
    assert (
        "openmpi: at 4M and above, sme (L=4) is 4.58x to 5.64x as fast as the best stock "
        "broadcast (tuned:pipeline at 4M and 16M); target 1.5x met at every size." in said
    )
    assert (
        "openmpi: hier (one leader per node) is 1.32x to 1.77x as fast as the best stock "
        "broadcast; sme is 3.18x to 3.46x as fast as hier." in said
    )
    assert (
        "mpich: at 4M and above, sme (L=4) is 2.43x to 3.16x as fast as the best stock "
        "broadcast (binomial at 4M, default at 16M); target 1.5x met at every size." in said
    )
    assert (
        "At sizes below the threshold (16K), mln_bcast times, against MPI_Bcast timed "
        "separately (not the paired test), are within 3.2% of stock MPI_Bcast (target 5%; "
        "furthest: mpich sme L=4 at 1K, 1.032x, of 6 run x size cells)." in said
    )
    assert "bcast: openmpi, 4M and above" in report.text
    assert "are within 3.2% of stock MPI_Bcast" in report.text


def test_bcast_report_misses_targets(fixtures: Path, tmp_path: Path) -> None:
    """sme slower than 1.5x the best stock at 16M, and 6.7% off stock at 1K."""
    runs = [
        *BCAST_RUNS[6:8],
        ("mpich", "sme", 4, "", {1 * K: (32000.0, 0), 4 * M: (214064.0, 4),
                                 16 * M: (1400000.0, 4)}),
    ]  # fmt: skip
    md = make_report(_bcast_dir(fixtures, tmp_path / "r", runs)).markdown.read_text()
    assert (
        "mpich: at 4M and above, sme (L=4) is 1.25x to 2.43x as fast as the best stock "
        "broadcast (binomial at 4M, default at 16M); target 1.5x NOT met at 16M." in md
    )
    assert (
        "mln_bcast times, against MPI_Bcast timed separately (not the paired test), are NOT "
        "within 5% of stock MPI_Bcast (up to 6.7% off; furthest: mpich sme L=4 at 1K, 1.067x, "
        "of 1 run x size cells)." in md
    )


def test_bcast_report_paired(fixtures: Path, tmp_path: Path) -> None:
    """The paired test's ratios come first, and a stock run's paired ratio (MPI_Bcast against
    itself) is the control: shown in the table, kept out of the verdict."""
    runs = [
        ("openmpi", "stock", 0, "", {1 * K: (140.0, 0, 1.004), 4 * K: (200.0, 0, 0.99),
                                     4 * M: (738720.0, 0)}),
        ("openmpi", "sme", 4, "", {1 * K: (300.0, 0, 1.061), 4 * K: (210.0, 0, 1.02),
                                   4 * M: (88714.0, 4)}),
    ]  # fmt: skip
    md = make_report(_bcast_dir(fixtures, tmp_path / "r", runs)).markdown.read_text()
    lines = re.sub(r" +", " ", md).splitlines()
    assert table_cells(lines, "size", "**openmpi**, below") == [
        "stock (default) / stock", "sme L=4 / stock",
    ]  # fmt: skip
    assert table_cells(lines, "1K", "**openmpi**, below") == ["1.004", "1.061"]
    assert table_cells(lines, "4K", "**openmpi**, below") == ["0.990", "1.020"]
    assert (
        "At sizes below the threshold (16K), mln_bcast times, called in turn with MPI_Bcast, "
        "call by call (paired test), are NOT within 5% of stock MPI_Bcast (up to 6.1% off; "
        "furthest: openmpi sme L=4 at 1K, 1.061x, of 2 run x size cells). MPI_Bcast against "
        "itself the same way: up to 1.0% off (openmpi at 4K, 0.990x, of 2 cells)." in md
    )


def test_bcast_report_notes(fixtures: Path, tmp_path: Path) -> None:
    """No check file, a run without its MPI name, a repeat, a failed run, a tuned
    algorithm that Open MPI ignores, no stock run for an MPI."""
    runs = [
        *BCAST_RUNS[:2],
        BCAST_RUNS[5],
        BCAST_RUNS[5],
        ("openmpi", "stock", 0, "OMPI_MCA_coll_tuned_bcast_algorithm=6", {4 * M: (1.0, 0)}),
        ("mpich", "sme", 4, "", {4 * M: (214064.0, 4)}),
    ]
    folder = _bcast_dir(fixtures, tmp_path / "r", runs)
    (folder / "testbed-check.json").unlink()
    doc = json.loads((folder / "openmpi-sme4-2.json").read_text())
    del doc["provenance"]["meta"]["mpi"]
    (folder / "openmpi-sme4-2.json").write_text(json.dumps(doc))
    doc = json.loads((folder / "openmpi-stock-1.json").read_text())
    doc["status"], doc["errors"], doc["rows"][0]["errors"] = "fail", 3, 3
    (folder / "openmpi-stock-1.json").write_text(json.dumps(doc))
    report = make_report(folder)
    assert report.notes == (
        "openmpi-stock-1: failed (3 wrong bytes): left out of the bcast section",
        "openmpi-sme4-2: no MPI name in its meta: left out of the bcast section",
        "openmpi-stock-4: OMPI_MCA_coll_tuned_bcast_algorithm=6 without "
        "OMPI_MCA_coll_tuned_use_dynamic_rules=1: Open MPI ignores it (named default)",
        "openmpi-stock-4: openmpi stock (default) again: only the first run is used",
        "no testbed-check.json with iperf3 rows: no premise statement",
        "mpich: no stock bcast run: no speed-ups or small-size ratios",
    )
    md = report.markdown.read_text()
    assert "iperf3 on the test bed" not in md
    lines = re.sub(r" +", " ", md).splitlines()
    # the stock default run kept is the first (2966158 us at 16M), not the repeat
    assert table_cells(lines, "16M", "**openmpi**, 4M")[:3] == ["2,966 (default)", "-", "328 (L=4)"]
    assert table_cells(lines, "4M", "**mpich**, 4M") == ["-", "-", "214 (L=4)", "-", "-", "-"]
    assert "sme (L=4) is 4.58x" not in md and "9.05x as fast" in md


def test_report_command_on_a_bcast_folder(fixtures: Path, tmp_path: Path) -> None:
    folder = _bcast_dir(fixtures, tmp_path / "r", BCAST_RUNS[:6])
    proc = multilane(["report", str(folder)], clean_env())
    assert proc.returncode == 0, proc.stderr
    assert "bcast: openmpi, 4M and above" in proc.stdout
    assert "sme (L=4) is 4.58x to 5.64x as fast as the best stock broadcast" in proc.stdout
    assert (folder / "bcast-time.png").read_bytes().startswith(PNG_MAGIC)
    assert (folder / "bcast-leaders.png").read_bytes().startswith(PNG_MAGIC)
    assert (
        "### bcast: mln_bcast against the MPI's own broadcast" in (folder / "report.md").read_text()
    )
