"""The halo part of a report: the table at 160 doubles per MPI x placement, the ratio to p2p,
the gain of double buffering, the verdict on the seed's 1.3x, auto against the fastest mode,
which modes each MPI measured, and the three figures (result files made from the fixture
result-halo-openmpi.json, whose layout is mln-halo's)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from conftest import clean_env, multilane, table_cells
from multilane.halo_report import disabled_modes, mode_codes, mode_of_metric
from multilane.report import make_report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MODES = ("p2p", "neighbor", "rma-fence", "rma-pscw", "rma-passive", "rma-single", "auto")
CODE = {m: i for i, m in enumerate(MODES[:-1], 1)}
K, M = 2**10, 2**20
SEED = 1280

# (mpi, hosts, ranks, dims, grid, {bytes: ({mode: time_us}, the mode auto chose)}, disabled)
Spec = tuple[str, int, int, int, str, dict[int, tuple[dict[str, float], str]], str]


def _times(*values: float) -> dict[str, float]:
    """Times in MODES order; 0 leaves the mode out of the row (not measured)."""
    return {m: v for m, v in zip(MODES, values) if v}


HALO_RUNS: list[Spec] = [
    ("openmpi", 1, 8, 1, "8", {SEED: (_times(10, 14, 12.5, 8, 9, 20, 8.2), "rma-pscw")}, ""),
    ("openmpi", 1, 8, 2, "4x2", {SEED: (_times(13.5, 15, 10, 11, 12, 21, 10.5), "rma-fence")}, ""),
    ("openmpi", 1, 8, 3, "2x2x2", {SEED: (_times(18, 16, 12, 13, 14, 25, 13.2), "rma-pscw")}, ""),
    # auto's pick 1.5% slower, the ranges (+-2%) overlap: a tie
    ("openmpi", 4, 8, 1, "8", {SEED: (_times(100, 101.5, 120, 110, 105, 240, 101), "neighbor")},
     ""),
    ("openmpi", 4, 8, 2, "4x2", {SEED: (_times(130, 160, 125, 140, 200, 250, 126), "rma-fence")},
     ""),
    ("openmpi", 4, 8, 3, "2x2x2", {SEED: (_times(160, 170, 130, 150, 210, 260, 131),
                                          "rma-fence")}, ""),
    ("openmpi", 1, 8, 2, "4x2", {
        8: (_times(9, 12, 9.5, 10, 8.5, 19, 8.6), "rma-passive"),
        SEED: (_times(14, 15.5, 10.5, 11.5, 12, 22, 10.8), "rma-fence"),
        M: (_times(2400, 2600, 3100, 2500, 2450, 5200, 2420), "p2p"),
    }, ""),
    ("mpich", 1, 8, 1, "8", {SEED: (_times(700, 3000, 26000, 0, 4900, 58000, 720), "p2p")},
     "rma-pscw"),
    ("mpich", 1, 8, 2, "4x2", {SEED: (_times(3200, 4300, 27500, 0, 4400, 55600, 3300), "p2p")},
     "rma-pscw"),
    ("mpich", 4, 8, 1, "8", {SEED: (_times(1800, 2500, 31500, 0, 5000, 37600, 1850),
                                    "neighbor")}, "rma-pscw"),
]  # fmt: skip


def _halo_dir(fixtures: Path, folder: Path, runs: list[Spec]) -> Path:
    """One result file per spec, made from the mln-halo fixture (all modes selected)."""
    folder.mkdir(parents=True, exist_ok=True)
    base = json.loads((fixtures / "result-halo-openmpi.json").read_text())
    for n, (mpi, hosts, ranks, dims, grid, rows, disabled) in enumerate(runs):
        doc = json.loads(json.dumps(base))
        prov = doc["provenance"]
        name = f"{mpi}-{hosts}h-{dims}d-{n}"
        prov["meta"].update(mpi=mpi, label=name)
        prov["params"].update(dims=dims, neighbors=2 * dims, grid=grid, disabled=disabled)
        prov["params"]["sizes"] = ",".join(str(s) for s in sorted(rows))
        prov.update(nranks=ranks, nhosts=hosts, hosts=[f"a{i + 1}" for i in range(hosts)])
        prov["date"] = f"2026-11-23T03:{n:02d}:00Z"
        doc["rows"] = []
        for size, (times, pick) in sorted(rows.items()):
            row: dict[str, Any] = {"bytes": size, "iters": 1000, "errors": 0,
                                   "auto_mode": CODE[pick]}  # fmt: skip
            for mode, value in times.items():
                key = mode.replace("-", "_") + "_us"
                row.update({key: value, f"{key}_min": value * 0.98, f"{key}_max": value * 1.02})
            doc["rows"].append(row)
        (folder / f"{name}.json").write_text(json.dumps(doc))
    return folder


def _said(md: str) -> list[str]:
    return [line[2:] for line in md.splitlines() if line.startswith("- ")]


@pytest.mark.parametrize(
    ("name", "tests", "mode"),
    [
        ("p2p_us", (), "p2p"),
        ("rma_fence_us", (), "rma-fence"),
        ("rma_single_iter_us", (), "rma-single"),
        ("iter_us_rma_pscw", (), "rma-pscw"),
        ("neighbour_time_us", (), "neighbor"),
        ("auto_us", (), "auto"),
        ("iter_us", ("rma-passive",), "rma-passive"),
        ("iter_us", ("p2p", "auto"), None),
        ("bw_MBps", (), None),
    ],
)
def test_mode_of_metric(name: str, tests: tuple[str, ...], mode: str | None) -> None:
    assert mode_of_metric(name, tests) == mode


def test_disabled_modes_and_codes() -> None:
    params = {"halo_disable": "builtin", "disabled": "rma-pscw,rma-passive", "dims": 2}
    assert disabled_modes(params) == {
        "rma-pscw": "params.disabled = 'rma-pscw,rma-passive'",
        "rma-passive": "params.disabled = 'rma-pscw,rma-passive'",
    }
    assert disabled_modes({"halo_disable": "rma_single", "disabled": ""}) == {
        "rma-single": "params.halo_disable = 'rma_single'"
    }
    assert disabled_modes({"disabled_modes": {"rma-pscw": "wrong data"}}) == {
        "rma-pscw": "params.disabled_modes: wrong data"
    }
    assert disabled_modes({"disabled": "none"}) == {}
    assert mode_codes({})[3] == "rma-fence"
    assert mode_codes({"mode_ids": "1=p2p,7=rma-fence,x=y"})[7] == "rma-fence"


def test_halo_report(fixtures: Path, tmp_path: Path) -> None:
    report = make_report(_halo_dir(fixtures, tmp_path / "r", HALO_RUNS))
    names = sorted(
        p.name for p in report.images if p.name.startswith("halo-") and "_" not in p.name
    )
    assert names == ["halo-neighbors.png", "halo-ratio.png", "halo-sizes.png", "halo-summary.png"]
    for image in report.images:
        assert image.read_bytes().startswith(PNG_MAGIC), image
    assert report.notes == ()
    md = report.markdown.read_text()
    lines = re.sub(r" +", " ", md).splitlines()
    assert "![halo: time per iteration against neighbours, 1280 B](halo-neighbors.png)" in md
    assert "![halo: p2p time / mode time against neighbours](halo-ratio.png)" in md
    assert "![halo: time per iteration against message size](halo-sizes.png)" in md
    one = "**openmpi**, 1 host x 8 ranks, 1280 B:"
    assert table_cells(lines, "nbrs", one) == [
        "grid", "p2p [us]", "neighbor [us]", "rma-fence [us]", "rma-pscw [us]",
        "rma-passive [us]", "rma-single [us]", "auto [us]", "p2p / best RMA",
        "single / best RMA", "single / fence",
    ]  # fmt: skip
    assert table_cells(lines, "2", one) == [
        "8", "10", "14", "12.5", "8", "9", "20", "8.2 (rma-pscw)",
        "1.25x (rma-pscw)", "2.50x", "1.60x",
    ]  # fmt: skip
    # 4 neighbours: the dedicated 1280 B run, not the sweep that also has 1280 B
    assert table_cells(lines, "4", one)[1:3] == ["13.5", "15"]
    assert table_cells(lines, "4", one)[-3:] == ["1.35x (rma-fence)", "2.10x", "2.10x"]
    assert table_cells(lines, "6", one)[-3:] == ["1.50x (rma-fence)", "2.08x", "2.08x"]
    across = "**openmpi**, 4 hosts x 2 ranks, 1280 B:"
    assert table_cells(lines, "2", across)[-3:] == ["0.95x (rma-passive)", "2.29x", "2.00x"]
    # a mode disabled on the MPI: "-" in its column, the ratios from the other RMA modes
    mpich = "**mpich**, 1 host x 8 ranks, 1280 B:"
    assert table_cells(lines, "2", mpich) == [
        "8", "700", "3,000", "26,000", "-", "4,900", "58,000", "720 (p2p)",
        "0.14x (rma-passive)", "11.84x", "2.23x",
    ]  # fmt: skip
    assert "6" not in [row.split("|")[1].strip() for row in lines if row.startswith("| ")][-3:]
    said = _said(md)
    assert (
        "openmpi: best double-buffered RMA mode vs p2p at 1280 B: 0.95x to 1.50x (target 1.3x): "
        "met in 2 of 6 configurations (4 and 6 nbrs on 1 host x 8 ranks)." in said
    )
    assert (
        "mpich: best double-buffered RMA mode vs p2p at 1280 B: 0.14x to 0.73x (target 1.3x): "
        "not met in any of 3 configurations." in said
    )
    assert (
        "openmpi: double buffering at 1280 B: rma-single takes 2.00x to 2.50x the time of the "
        "best double-buffered RMA mode, and 1.60x to 2.10x that of rma-fence (the same fence, "
        "two per iteration) (6 configurations; > 1: double buffering is faster)." in said
    )
    assert (
        "mpich: double buffering at 1280 B: rma-single takes 7.52x to 12.64x the time of the "
        "best double-buffered RMA mode, and 1.19x to 2.23x that of rma-fence (the same fence, "
        "two per iteration) (3 configurations; > 1: double buffering is faster)." in said
    )
    assert (
        "openmpi: auto picked the fastest measured mode in 7 of 9 configurations, and in 1 "
        "more a mode tied with it (1.5% or less apart; the two modes' min .. max over the "
        "repetitions overlap, so the benchmark does not tell them apart); where neither, "
        "its pick was within 8.3% of the fastest (furthest: rma-pscw against rma-fence, "
        "openmpi, 1 host x 8 ranks, 6 nbrs (2x2x2), 1280); auto's own time was 1.01x to 1.10x "
        "the fastest mode's." in said
    )
    assert (
        "mpich: auto picked the fastest measured mode in 2 of 3 configurations; where not, its "
        "pick was within 38.9% of the fastest (furthest: neighbor against p2p, mpich, "
        "4 hosts x 2 ranks, 2 nbrs (8), 1280); auto's own time was 1.03x the fastest "
        "mode's." in said
    )
    assert (
        "openmpi: measured with verified data in every run: p2p, neighbor, rma-fence, "
        "rma-pscw, rma-passive, rma-single, auto." in said
    )
    assert (
        "mpich: measured with verified data in every run: p2p, neighbor, rma-fence, "
        "rma-passive, rma-single, auto; rma-pscw: no data, disabled "
        "(params.disabled = 'rma-pscw')." in said
    )
    # auto's table: every run x size, the sweep's three sizes included
    auto = "auto against the fastest measured mode"
    assert table_cells(lines, "openmpi-1h-2d-1", auto) == [
        "openmpi, 1 host x 8 ranks, 4 nbrs (4x2)", "1280", "rma-fence", "rma-fence (10 us)",
        "1.00x", "fastest", "10.5", "1.05x",
    ]  # fmt: skip
    assert table_cells(lines, "openmpi-4h-1d-3", auto) == [
        "openmpi, 4 hosts x 2 ranks, 2 nbrs (8)", "1280", "neighbor", "p2p (100 us)", "1.01x",
        "tied (ranges overlap)", "101", "1.01x",
    ]  # fmt: skip
    assert table_cells(lines, "mpich-4h-1d-9", auto) == [
        "mpich, 4 hosts x 2 ranks, 2 nbrs (8)", "1280", "neighbor", "p2p (1,800 us)", "1.39x",
        "slower", "1,850", "1.03x",
    ]  # fmt: skip
    start = next(i for i, line in enumerate(lines) if auto in line) + 4  # blank, header, rule
    table = lines[start : lines.index("", start)]
    assert len([line for line in table if line.startswith("| openmpi-")]) == 9
    assert "halo: openmpi, 1 host x 8 ranks, 1280 B" in report.text
    assert "not met in any of 3 configurations" in report.text


def test_halo_report_missing_modes(fixtures: Path, tmp_path: Path) -> None:
    """A mode selected but without data in one run, a mode not selected, a failed run, a run
    without its MPI, a repeated configuration, MLN_HALO_MODE forcing auto, no auto column."""
    runs: list[Spec] = [
        HALO_RUNS[0],
        ("openmpi", 1, 8, 2, "4x2", {SEED: (_times(13.5, 15, 10, 11, 0, 21, 10.5), "p2p")}, ""),
        HALO_RUNS[1],
        HALO_RUNS[2],
        HALO_RUNS[3],
        ("mpich", 1, 8, 1, "8", {SEED: (_times(700, 3000, 0, 0, 0, 0, 720), "p2p")}, ""),
    ]
    folder = _halo_dir(fixtures, tmp_path / "r", runs)
    doc = json.loads((folder / "openmpi-1h-2d-1.json").read_text())
    del doc["metrics"][4]  # rma_passive_us: not measured in this run
    (folder / "openmpi-1h-2d-1.json").write_text(json.dumps(doc))
    doc = json.loads((folder / "openmpi-1h-2d-2.json").read_text())
    doc["provenance"]["params"]["halo_mode"] = "rma-fence"
    (folder / "openmpi-1h-2d-2.json").write_text(json.dumps(doc))
    doc = json.loads((folder / "openmpi-1h-3d-3.json").read_text())
    doc["status"], doc["errors"], doc["rows"][0]["errors"] = "fail", 5, 5
    (folder / "openmpi-1h-3d-3.json").write_text(json.dumps(doc))
    doc = json.loads((folder / "openmpi-4h-1d-4.json").read_text())
    del doc["provenance"]["meta"]["mpi"]
    (folder / "openmpi-4h-1d-4.json").write_text(json.dumps(doc))
    doc = json.loads((folder / "mpich-1h-1d-5.json").read_text())
    doc["provenance"]["params"]["tests"] = "p2p,neighbor,auto"
    doc["metrics"] = [
        m for m in doc["metrics"] if m["name"] in ("p2p_us", "neighbor_us", "auto_us")
    ]
    del doc["rows"][0]["auto_mode"]
    (folder / "mpich-1h-1d-5.json").write_text(json.dumps(doc))
    report = make_report(folder)
    assert report.notes == (
        "openmpi-1h-2d-2: MLN_HALO_MODE=rma-fence decided auto's mode (params.halo_mode): left "
        "out of the auto statement",
        "openmpi-1h-3d-3: failed (5 wrong bytes, modes unknown): left out of the halo section",
        "openmpi-4h-1d-4: no MPI name in its meta: left out of the halo section",
        "openmpi-1h-2d-2: openmpi, 1 host x 8 ranks, 4 nbrs (4x2) again at 1280 B: the table "
        "uses openmpi-1h-2d-1",
    )
    md = report.markdown.read_text()
    lines = re.sub(r" +", " ", md).splitlines()
    one = "**openmpi**, 1 host x 8 ranks, 1280 B:"
    assert table_cells(lines, "4", one)[2:8] == ["15", "10", "11", "-", "21", "10.5 (p2p)"]
    said = _said(md)
    assert (
        "openmpi: measured with verified data in every run: p2p, neighbor, rma-fence, rma-pscw, "
        "rma-single, auto; rma-passive: in 2 of 3 runs, selected but no data (failed or "
        "skipped: see the log)." in said
    )
    assert (
        "mpich: measured with verified data in every run: p2p, neighbor, auto; rma-fence: no "
        "data, not selected (params.tests); rma-pscw: no data, not selected (params.tests); "
        "rma-passive: no data, not selected (params.tests); rma-single: no data, not selected "
        "(params.tests)." in said
    )
    assert (
        "mpich: best double-buffered RMA mode vs p2p at 1280 B: no configuration with both "
        "measured (target 1.3x): not assessed." in said
    )
    assert (
        "mpich: double buffering at 1280 B: not assessed (rma-single and a double-buffered RMA "
        "mode are not both measured in any configuration)." in said
    )
    assert "mpich: no run recorded auto's choice (auto_mode)." in said
    assert (
        "openmpi: auto picked the fastest measured mode in 1 of 2 configurations; where not, "
        "its pick was within 35.0% of the fastest (furthest: p2p against rma-fence, openmpi, "
        "1 host x 8 ranks, 4 nbrs (4x2), 1280); auto's own time was 1.02x to 1.05x the fastest "
        "mode's." in said
    )
    assert not (folder / "halo-sizes.png").exists()  # no run with a sweep


def test_report_command_on_a_halo_folder(fixtures: Path, tmp_path: Path) -> None:
    folder = _halo_dir(fixtures, tmp_path / "r", HALO_RUNS[:3])
    proc = multilane(["report", str(folder)], clean_env())
    assert proc.returncode == 0, proc.stderr
    assert "halo: openmpi, 1 host x 8 ranks, 1280 B" in proc.stdout
    assert "met in 2 of 3 configurations (4 and 6 nbrs on 1 host x 8 ranks)" in proc.stdout
    for name in ("halo-neighbors.png", "halo-ratio.png"):
        assert (folder / name).read_bytes().startswith(PNG_MAGIC)
    assert "### halo: double-buffered RMA against p2p" in (folder / "report.md").read_text()
