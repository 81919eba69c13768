"""The NAS part of a report (seed 004's application kernels) on synthetic result files: the
integer sort direct and relayed (1, 2, 4, 8 trunks) at WAN delays 0 and 5 ms plus one mixed
grid (a=openmpi,b=mpich), and the LU-style kernel at 0 ms with one run that failed its
verification: the figure per kernel, the time table, the speedup over 1 trunk and the speed
against direct with the integer sort's targets at 0 ms, the mixed run against the first site's
MPI alone, every run's verification, and the failed run left out of every comparison."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import table_cells
from multilane.report import collect, make_report
from multilane.reports.nas_report import Matrix, nas_runs
from multilane.results import problems

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
RATE = {"nas-is": ("Mkeys_s", "Mkeys/s"), "nas-lu": ("Mpoints_s", "Mpoints/s")}
WORK = {"nas-is": 40.0, "nas-lu": 200.0}  # Mkeys, Mpoints per run: rate = WORK / time

# (kernel, mpi, delay, trunks (0: direct)) -> total_s
TIMES: dict[tuple[str, str, str, int], float] = {
    ("nas-is", "openmpi", "0ms", 0): 1.0,
    ("nas-is", "openmpi", "0ms", 1): 4.0,
    ("nas-is", "openmpi", "0ms", 2): 2.2,
    ("nas-is", "openmpi", "0ms", 4): 1.25,  # 3.20x 1 trunk: >= 2.5 pass
    ("nas-is", "openmpi", "0ms", 8): 1.25,  # 3.20x: < 3.4 FAIL
    ("nas-is", "openmpi", "5ms", 0): 1.5,
    ("nas-is", "openmpi", "5ms", 1): 4.5,
    ("nas-is", "openmpi", "5ms", 2): 2.5,
    ("nas-is", "openmpi", "5ms", 4): 1.8,
    ("nas-is", "openmpi", "5ms", 8): 1.5,
    ("nas-is", "a=openmpi,b=mpich", "5ms", 8): 1.6,
    ("nas-lu", "openmpi", "0ms", 0): 2.0,
    ("nas-lu", "openmpi", "0ms", 1): 2.05,
    ("nas-lu", "openmpi", "0ms", 8): 2.1,
}
FAILED = ("nas-lu", "openmpi", "0ms", 8)  # its verification failed


def _doc(key: tuple[str, str, str, int], total: float, ok: bool) -> dict:
    kernel, mpi, delay, trunks = key
    rate, unit = RATE[kernel]
    path = "direct" if trunks == 0 else f"trunks{trunks}"
    label = f"{'mixed' if '=' in mpi else mpi}-{kernel}-delay{delay}-{path}"
    meta = {"label": label, "mpi": mpi, "wan_delay": delay, "wan_rate": "1gbit"}
    if trunks:
        meta.update(network="private", launch="grid", trunks=str(trunks),
                    frontend_nic_rate="125mbit")  # fmt: skip
    else:
        meta.update(network="direct", launch="mpi")
    value = WORK[kernel] / total
    return {
        "schema": "multilane-result",
        "data_version": 1,
        "benchmark": kernel,
        "status": "pass" if ok else "fail",
        "errors": 0 if ok else 1,
        "provenance": {
            "multilane_version": "0.1.0",
            "mpi_library": "Open MPI v5.0.11",
            "mpi_standard": "3.1",
            "nranks": 4,
            "nhosts": 4,
            "hosts": ["a1", "a2", "b1", "b2"],
            "date": "2026-11-28T12:00:00Z",
            "command": f"mln-{kernel}",
            "params": {"split": 2, "reps": 1, "warmup": 0, "verified": ok},
            "meta": meta,
        },
        "metrics": [
            {
                "name": "total_s",
                "unit": "s",
                "statistic": "one run",
                "description": "synthetic",
                "higher_is_better": False,
            },
            {
                "name": rate,
                "unit": unit,
                "statistic": "one run",
                "description": "synthetic",
                "higher_is_better": True,
            },
        ],
        "rows": [
            {
                "bytes": 8_000_000,
                "iters": 10,
                "errors": 0 if ok else 1,
                "problem_bytes": 1,
                "total_s": total,
                "total_s_min": total,
                "total_s_max": total,
                rate: value,
                f"{rate}_min": value,
                f"{rate}_max": value,
            }
        ],
    }


def _write_results(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for key, total in TIMES.items():
        doc = _doc(key, total, key != FAILED)
        assert problems(doc) == [], problems(doc)
        (folder / f"{doc['provenance']['meta']['label']}.json").write_text(json.dumps(doc))


def _report(tmp_path: Path) -> tuple[Path, list[str], Any]:
    folder = tmp_path / "results"
    _write_results(folder)
    report = make_report(folder)
    return folder, report.markdown.read_text().splitlines(), report


def test_figures_and_sections(tmp_path: Path) -> None:
    folder, lines, report = _report(tmp_path)
    for kernel in ("nas-is", "nas-lu"):
        assert (folder / f"{kernel}.png").read_bytes()[:8] == PNG_MAGIC
        assert f"### {kernel}: direct against relayed (seed 004)" in lines
        assert not (folder / f"{kernel}-summary.png").exists()  # no generic plot per metric
    assert folder / "nas-is.png" in report.images


def test_time_table(tmp_path: Path) -> None:
    _, lines, _ = _report(tmp_path)
    after = "Time = `total_s`"
    # direct, 1, 2, 4, 8 trunks [s], then their rates (40 Mkeys / time)
    want = ["0ms", "1.000", "4.000", "2.200", "1.250", "1.250", "40", "10", "18.2", "32", "32"]
    assert table_cells(lines, "openmpi", after) == want


def test_speedups_and_targets(tmp_path: Path) -> None:
    _, lines, _ = _report(tmp_path)
    after = "K trunks / 1 trunk"
    # 2, 4, 8 trunks over 1 trunk (targets at 0 ms), then 1, 2, 4, 8 trunks against direct
    assert table_cells(lines, "openmpi", after) == [
        "0ms", "1.82x", "3.20x pass", "3.20x FAIL", "0.25x", "0.45x", "0.80x", "0.80x",
    ]  # fmt: skip
    text = "\n".join(lines)
    assert "nas-is, openmpi: 4 trunks 3.20x 1 trunk at 0ms (target >= 2.5x: met)." in text
    assert "nas-is, openmpi: 8 trunks 3.20x 1 trunk at 0ms (target >= 3.4x: NOT met)." in text
    assert "nas-is, openmpi: 8 trunks against direct (speed): 0.80 at 0ms, 1.00 at 5ms." in text
    five = [line for line in lines if line.startswith("| openmpi | 5ms ")]
    assert "pass" not in five[-1] and "FAIL" not in five[-1]  # no target at 5 ms


def test_mixed_run(tmp_path: Path) -> None:
    _, lines, _ = _report(tmp_path)
    # time, rate, verified, Open MPI alone at 8 trunks 5 ms, alone / mixed, direct / mixed
    assert table_cells(lines, "a=openmpi,b=mpich", "One MPI per site") == [
        "5ms", "8 trunks", "1.600", "25", "yes", "1.500", "0.94x", "0.94x",
    ]  # fmt: skip
    assert "nas-is, a=openmpi,b=mpich (8 trunks, 5ms): verified, 1.600 s." in "\n".join(lines)


def test_verification_and_failed_run(tmp_path: Path) -> None:
    """The failed LU run is listed as NOT verified, said in a note, and left out of the
    comparisons (no 8-trunk time, no 8-trunk ratio)."""
    _, lines, report = _report(tmp_path)
    text = "\n".join(lines)
    assert "nas-is: all 11 runs verified." in text
    assert "nas-lu: 1 of 3 runs NOT verified: openmpi-nas-lu-delay0ms-trunks8." in text
    row = table_cells(lines, "openmpi-nas-lu-delay0ms-trunks8", "Every run's verification")
    assert row == ["openmpi", "0ms", "8 trunks", "NO", "2.100", "95.2", "10", "8.00"]
    assert any("openmpi-nas-lu-delay0ms-trunks8: NOT verified" in n for n in report.notes)
    lu = lines[lines.index("### nas-lu: direct against relayed (seed 004)") :]
    assert table_cells(lu, "openmpi", "Time = `total_s`") == ["0ms", "2.000", "2.050", "-", "100",
                                                              "97.6", "-"]  # fmt: skip
    assert table_cells(lu, "openmpi", "K trunks / 1 trunk") == ["0ms", "-", "0.98x", "-"]


def test_matrix(tmp_path: Path) -> None:
    folder = tmp_path / "r"
    _write_results(folder)
    groups, _ = collect(folder)
    found, notes = nas_runs(groups["nas-is"])
    assert notes == [] and len(found) == 11
    m = Matrix(found)
    assert m.mpis == ["openmpi", "a=openmpi,b=mpich"] and m.single == ["openmpi"]
    assert m.delays == [0.0, 0.005] and m.trunks == [1, 2, 4, 8]
    assert m.speedup("openmpi", 0.005, 8) == 3.0
    assert m.vs_direct("a=openmpi,b=mpich", 0.005, 8) == 1.5 / 1.6
    assert (m.rate_name, m.rate_unit) == ("Mkeys_s", "Mkeys/s")
