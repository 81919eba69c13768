"""The relay part of a report (seed 004) on synthetic result files: direct against relayed
(1, 2, 8 trunks) at WAN delays 0 and 5 ms, with the test bed's check files (iperf3 over each
front-end pair and over the direct WAN): the three figures, the bandwidth ratios and their
pass/fail marks, the added latency (relayed - direct latency_us), the bytes per trunk from the
gateways' summaries, and the notes on runs that cannot be placed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import table_cells
from multilane.report import make_report
from multilane.reports.relay_report import Matrix, iperf_of, relay_runs
from multilane.results import problems

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
K, M = 2**10, 2**20
FRONTENDS = [118.0, 117.0, 116.0, 119.0, 117.5, 118.5, 116.5, 117.5]  # Mbit/s, afe1 .. afe8
METRIC = {
    "latency_us": ("us", False),
    "stream_Mbps": ("Mbit/s", True),
    "alltoall_Mbps": ("Mbit/s", True),
}

# (delay, trunks (0: direct)) -> latency at 8 B (us), stream at 1M and 16M, alltoall at 1M, 4M
CASES: dict[tuple[str, int], tuple[float, tuple[float, float], tuple[float, float]]] = {
    ("0ms", 0): (60.0, (700.0, 900.0), (1500.0, 1700.0)),
    ("0ms", 1): (90.0, (110.0, 120.0), (230.0, 240.0)),  # +30 us; 0.96 of 125
    ("0ms", 2): (95.0, (200.0, 230.0), (450.0, 470.0)),  # +35 us; 0.92 of 250
    ("0ms", 8): (130.0, (700.0, 850.0), (900.0, 950.0)),  # +70 us FAIL; 0.85 of 1000 FAIL
    ("5ms", 0): (5060.0, (650.0, 880.0), (1400.0, 1600.0)),
    ("5ms", 1): (5100.0, (115.0, 121.0), (230.0, 238.0)),
    ("5ms", 2): (5105.0, (210.0, 240.0), (450.0, 460.0)),
    ("5ms", 8): (5140.0, (800.0, 930.0), (950.0, 990.0)),  # 0.93 of 1000, 0.99 of iperf3
}


def _doc(label: str, test: str, rows: list[dict[str, Any]], meta: dict[str, str]) -> dict:
    metric = {"pingpong": "latency_us", "stream": "stream_Mbps", "alltoall": "alltoall_Mbps"}
    name = metric[test]
    unit, higher = METRIC[name]
    return {
        "schema": "multilane-result",
        "data_version": 1,
        "benchmark": "relay",
        "status": "pass",
        "errors": 0,
        "provenance": {
            "multilane_version": "0.1.0",
            "mpi_library": "Open MPI v5.0.11",
            "mpi_standard": "3.1",
            "nranks": 4,
            "nhosts": 4,
            "hosts": ["a1", "a2", "b1", "b2"],
            "date": "2026-11-27T12:00:00Z",
            "command": f"mln-relay --tests {test}",
            "params": {"tests": test, "reps": 2, "split": 2, "cross_msgs": 8},
            "meta": {"label": label, **meta},
        },
        "metrics": [
            {
                "name": name,
                "unit": unit,
                "statistic": "median",
                "description": "synthetic",
                "higher_is_better": higher,
            }
        ],
        "rows": rows,
    }


def _row(size: int, name: str, value: float) -> dict[str, Any]:
    return {"bytes": size, "iters": 5, "errors": 0, "window": 8, "cross_msgs": 8, name: value,
            f"{name}_min": value * 0.95, f"{name}_max": value * 1.05}  # fmt: skip


def _grid(trunks: int, idle: tuple[int, ...] = ()) -> dict[str, Any]:
    """provenance.grid with each gateway's summary: site a's trunk t sent 10 + t MB."""

    def gateways(site: str, peer: str, scale: int) -> list[dict[str, Any]]:
        return [
            {"trunk": t, "host": f"{site}fe{t + 1}", "exit_code": 0,
             "summary": {"peers": {peer: {"frames_in": 3, "bytes_in": 0, "frames_out": 9,
                                          "bytes_out": 0 if t in idle else (10 + t) * scale}},
                         "ranks": {}, "dropped": 0}}
            for t in range(trunks)
        ]  # fmt: skip

    return {
        "trunks": trunks,
        "status": 0,
        "sites": [
            {"name": "a", "ranks": 2, "mpi": "openmpi", "gateways": gateways("a", "b", 10**6)},
            {"name": "b", "ranks": 2, "mpi": "openmpi", "gateways": gateways("b", "a", 0)},
        ],
    }


def _write_results(folder: Path, idle: tuple[int, ...] = ()) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for (delay, trunks), (latency, stream, alltoall) in CASES.items():
        path = "direct" if trunks == 0 else f"trunks{trunks}"
        meta = {"mpi": "openmpi", "wan_delay": delay, "wan_rate": "1gbit", "testbed": "seed004"}
        if trunks:
            meta.update(network="private", launch="grid", trunks=str(trunks),
                        frontend_nic_rate="125mbit")  # fmt: skip
        else:
            meta.update(network="direct", launch="mpi")
        tests = {
            "pingpong": [_row(0, "latency_us", latency - 1), _row(8, "latency_us", latency),
                         _row(K, "latency_us", latency + 5)],
            "stream": [_row(M, "stream_Mbps", stream[0]), _row(16 * M, "stream_Mbps", stream[1])],
            "alltoall": [_row(M, "alltoall_Mbps", alltoall[0]),
                         _row(4 * M, "alltoall_Mbps", alltoall[1])],
        }  # fmt: skip
        for test, rows in tests.items():
            label = f"openmpi-delay{delay}-{path}-{test}"
            doc = _doc(label, test, rows, meta)
            if trunks:
                doc["provenance"]["grid"] = _grid(trunks, idle if test == "stream" else ())
            assert problems(doc) == [], problems(doc)
            (folder / f"{label}.json").write_text(json.dumps(doc))
    private = {
        "schema": "multilane-testbed-check",
        "data_version": 1,
        "scenario": "seed004-relay.toml",
        "rows": [
            {"item": "isolated", "configured": "", "measured": "yes", "values": {}},
            *(
                {"item": f"TCP 1 stream afe{i} -> bfe{i}", "configured": "<= 125", "measured": "",
                 "values": {"streams": 1, "bps": v * 1e6, "frontend": f"afe{i}",
                            "peer": f"bfe{i}"}}
                for i, v in enumerate(FRONTENDS, 1)
            ),
            {"item": "TCP 8 front-end pairs at once", "configured": "", "measured": "",
             "values": {"streams": 8, "bps": 930e6, "pairs": []}},
        ],
    }  # fmt: skip
    direct = {
        "schema": "multilane-testbed-check",
        "data_version": 1,
        "scenario": "seed004-relay.toml",
        "rows": [
            {"item": "TCP 1 stream a1 -> b1", "configured": "", "measured": "",
             "values": {"streams": 1, "bps": 850e6}},
            {"item": "TCP 8 streams a1 -> b1", "configured": "", "measured": "",
             "values": {"streams": 8, "bps": 960e6}},
        ],
    }  # fmt: skip
    (folder / "testbed-check-private.json").write_text(json.dumps(private))
    (folder / "testbed-check-direct.json").write_text(json.dumps(direct))


@pytest.fixture
def report_lines(tmp_path: Path) -> tuple[Path, list[str]]:
    folder = tmp_path / "results"
    _write_results(folder, idle=(5,))  # the 8-trunk stream runs: trunk 5 carried nothing
    report = make_report(folder)
    return folder, report.markdown.read_text().splitlines()


def test_figures(report_lines: tuple[Path, list[str]]) -> None:
    folder, lines = report_lines
    for name in ("relay-latency.png", "relay-stream.png", "relay-alltoall.png"):
        assert (folder / name).read_bytes()[:8] == PNG_MAGIC
        assert any(f"]({name})" in line for line in lines), name
    # relay has its own tables: no generic plot with a line per run
    assert not (folder / "relay-summary.png").exists()


def test_bandwidth_ratios(report_lines: tuple[Path, list[str]]) -> None:
    _, lines = report_lines
    after = "Stream bandwidth = "

    def row(delay: str, trunks: str) -> list[str]:
        for line in lines[next(i for i, x in enumerate(lines) if after in x) :]:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if line.startswith("|") and cells[:3] == ["openmpi", delay, trunks]:
                return cells[3:]
        raise AssertionError((delay, trunks))

    # stream, at, / (k x NIC), iperf3 k paths, / iperf3, / WAN, trunks used, direct
    assert row("0ms", "1") == ["120", "16M", "0.96 pass", "118", "1.02 pass", "-", "1/1 pass",
                               "900"]  # fmt: skip
    assert row("0ms", "2") == ["230", "16M", "0.92 pass", "235", "0.98 pass", "-", "2/2 pass",
                               "900"]  # fmt: skip
    paths8 = sum(FRONTENDS)
    ratio = f"{850 / paths8:.2f} pass"
    assert row("0ms", "8") == ["850", "16M", "0.85 FAIL", f"{paths8:.0f}", ratio, "0.85 FAIL",
                               "7/8 FAIL", "900"]  # fmt: skip
    assert row("5ms", "8")[:6] == ["930", "16M", "0.93 pass", f"{paths8:.0f}",
                                   f"{930 / paths8:.2f} pass", "0.93 pass"]  # fmt: skip


def test_added_latency(report_lines: tuple[Path, list[str]]) -> None:
    _, lines = report_lines
    after = "One-way latency at 8 B"
    # direct 0 ms, relayed 0 ms, added at 0 ms and 5 ms, verdict at 0 ms
    assert table_cells(lines, "openmpi", after)[:6] == ["1", "60.0", "90.0", "30.0", "40.0",
                                                        "30.0 pass"]  # fmt: skip
    rows = [
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in lines
        if line.startswith("| openmpi")
    ]
    eight = next(r for r in rows if r[:2] == ["openmpi", "8"] and len(r) == 7)
    assert eight[2:] == ["60.0", "130.0", "70.0", "80.0", "70.0 FAIL"]
    text = "\n".join(lines)
    assert "the relay adds 30.0 us (1 trunk), 35.0 us (2 trunks), 70.0 us (8 trunks)" in text
    assert "target <= 50 us NOT met" in text


def test_bridged_wan_said(tmp_path: Path) -> None:
    """Runs whose WAN was the bridge stand-in (seed004-latency.toml) say so beside the latency
    table; runs through the delay line do not."""
    folder = tmp_path / "results"
    _write_results(folder)
    said = "The WAN of these runs is a kernel bridge"
    assert said not in make_report(folder).markdown.read_text()
    for path in folder.glob("*-pingpong.json"):
        doc = json.loads(path.read_text())
        doc["provenance"]["testbed"] = {"wan_mode": "bridge"}
        if doc["provenance"]["meta"]["wan_delay"] == "0ms":  # as seed004-latency: no per-run delay
            del doc["provenance"]["meta"]["wan_delay"]
        path.write_text(json.dumps(doc))
    text = make_report(folder).markdown.read_text()
    assert said in text
    assert "as built" not in text  # a bridge has no delay: its runs count as 0 ms
    assert "direct 0ms [us]" in text


def test_trunk_bytes(report_lines: tuple[Path, list[str]]) -> None:
    _, lines = report_lines
    after = "Payload each trunk"
    cells = table_cells(lines, "openmpi", after)
    assert cells[:4] == ["0ms", "1", "10.0", "-"]
    text = "\n".join(lines)
    assert "Trunks without stream data: openmpi-delay0ms-trunks8-stream (7/8)" in text
    assert "iperf3 over the front-end paths comes from the test bed's check" in text


def test_every_trunk_used(tmp_path: Path) -> None:
    _write_results(tmp_path / "r")
    text = make_report(tmp_path / "r").markdown.read_text()
    assert "Every trunk carried stream data in every relayed stream run." in text
    assert "8/8 pass" in text


def test_matrix_and_iperf(tmp_path: Path) -> None:
    """The pieces: runs placed by their meta; the added latency; iperf3 from both checks."""
    _write_results(tmp_path / "r")
    from multilane.report import collect, load_checks  # noqa: PLC0415

    groups, _ = collect(tmp_path / "r")
    found, notes = relay_runs(groups["relay"])
    assert notes == [] and len(found) == len(CASES) * 3
    m = Matrix(found)
    assert m.mpis == ["openmpi"] and m.delays == [0.0, 0.005] and m.trunks == [1, 2, 8]
    assert m.added("openmpi", 0.005, 2, 8) == pytest.approx(45.0)
    assert m.peak("openmpi", 0.0, 0, "stream_Mbps") == (900.0, 16 * M)
    iperf = iperf_of(load_checks(tmp_path / "r"))
    assert iperf.first(2) == pytest.approx(235.0) and iperf.first(9) is None
    assert iperf.all_pairs == pytest.approx(930.0) and iperf.wan == pytest.approx(960.0)
    assert iperf.wan_streams == 8


def test_runs_left_out(tmp_path: Path) -> None:
    """A failed run and one without its MPI are notes, the others still report."""
    folder = tmp_path / "r"
    _write_results(folder)
    bad = json.loads((folder / "openmpi-delay0ms-trunks1-stream.json").read_text())
    bad["status"], bad["errors"], bad["rows"][0]["errors"] = "fail", 1, 1
    (folder / "openmpi-delay0ms-trunks1-stream.json").write_text(json.dumps(bad))
    anon = json.loads((folder / "openmpi-delay5ms-direct-alltoall.json").read_text())
    del anon["provenance"]["meta"]["mpi"]
    (folder / "openmpi-delay5ms-direct-alltoall.json").write_text(json.dumps(anon))
    report = make_report(folder)
    assert any("status fail: left out of the relay part" in n for n in report.notes)
    assert any("no MPI in its meta" in n for n in report.notes)
    assert (folder / "relay-stream.png").exists()
