"""Reports from result files: PNG plots and report.md."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from multilane.errors import MultilaneError
from multilane.report import collect, make_report
from multilane.results import ResultError

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def results_dir(fixtures: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "results"
    folder.mkdir()
    for name in ("result-openmpi-shm.json", "result-mpich-tcp.json"):
        shutil.copy(fixtures / name, folder / name)
    return folder


def test_report_from_fixtures(results_dir: Path) -> None:
    (results_dir / "notes.json").write_text('{"not": "a result"}')
    (results_dir / "broken.json").write_text("{")
    report = make_report(results_dir)
    names = sorted(p.name for p in report.images)
    assert names == [
        "pt2pt-bibw_MBps.png",
        "pt2pt-bw_MBps.png",
        "pt2pt-latency_us.png",
        "pt2pt-summary.png",
    ]
    for image in report.images:
        data = image.read_bytes()
        assert data.startswith(PNG_MAGIC), image
        assert len(data) > 10_000, image
    assert sorted(report.notes) == [
        "skipped broken.json: not valid JSON",
        "skipped notes.json: not a multilane result",
    ]
    md = report.markdown.read_text()
    assert report.markdown == results_dir / "report.md"
    flat = re.sub(r" +", " ", md)
    assert "| bytes | mpich-tcp | openmpi-shm |" in flat  # same date: by file name
    assert "| 1M | 431.4 | 116.8 |" in flat
    assert "### latency_us [us]" in md
    assert "![pt2pt: latency_us [us], median](pt2pt-latency_us.png)" in md
    # zero-byte rows are in the tables even though the log axes skip them
    assert any(line.startswith("|     0 |") for line in md.splitlines())
    assert "Open MPI v5.0.11" in md and "MPICH Version: 5.0.2" in md
    assert "2026-11-22T13:00:00+0000" in md
    assert "`FI_PROVIDER=tcp mpiexec -n 2 mln-pt2pt`" in md
    assert "openmpi-shm" in report.text and "bw_MBps" in report.text


def test_report_out_folder(results_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "elsewhere"
    report = make_report(results_dir, out)
    assert report.markdown.parent == out
    assert all(p.parent == out for p in report.images)
    assert not (results_dir / "report.md").exists()


def test_failed_run_and_duplicate_labels(results_dir: Path) -> None:
    doc = json.loads((results_dir / "result-mpich-tcp.json").read_text())
    doc["status"], doc["errors"] = "fail", 2
    doc["rows"][3]["errors"] = 2
    doc["provenance"]["meta"]["label"] = "openmpi-shm"
    (results_dir / "result-mpich-tcp.json").write_text(json.dumps(doc))
    groups, _ = collect(results_dir)
    labels = sorted(r.label for r in groups["pt2pt"])
    assert labels == ["openmpi-shm (result-mpich-tcp)", "openmpi-shm (result-openmpi-shm)"]
    md = make_report(results_dir).markdown.read_text()
    assert "fail (2 errors)" in md


def test_no_results_fails(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text("[]")
    with pytest.raises(MultilaneError, match="no multilane result files"):
        make_report(tmp_path)
    with pytest.raises(MultilaneError, match="not a folder"):
        make_report(tmp_path / "missing")


def test_invalid_result_stops_the_report(results_dir: Path, fixtures: Path) -> None:
    shutil.copy(fixtures / "bad-missing-metric.json", results_dir / "bad.json")
    with pytest.raises(ResultError, match=r"bad\.json: invalid result"):
        make_report(results_dir)


def test_only_zero_byte_rows(fixtures: Path, tmp_path: Path) -> None:
    doc = json.loads((fixtures / "minimal-good.json").read_text())
    doc["rows"] = [dict(doc["rows"][0], bytes=0)]
    (tmp_path / "zero.json").write_text(json.dumps(doc))
    report = make_report(tmp_path)
    assert all(p.read_bytes().startswith(PNG_MAGIC) for p in report.images)
