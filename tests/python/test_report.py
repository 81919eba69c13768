"""Reports from result files: PNG plots and report.md."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from multilane import stripe_report
from multilane.errors import MultilaneError
from multilane.report import Run, collect, make_report
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


def test_report_names_runs_with_high_steal(results_dir: Path) -> None:
    """The runs' table shows the machine's steal over each run (provenance.host); the notes
    name the runs above 5%, not the others, and a result without the record shows '-'."""
    for name, steal in (("result-openmpi-shm.json", 12.5), ("result-mpich-tcp.json", 0.3)):
        path = results_dir / name
        doc = json.loads(path.read_text())
        doc["provenance"]["host"] = {"steal_pct": steal, "scope": "test"}
        path.write_text(json.dumps(doc))
    report = make_report(results_dir)
    flat = re.sub(r" +", " ", report.markdown.read_text())
    assert "| steal |" in flat and "| 12.5% |" in flat and "| 0.3% |" in flat
    (note,) = [n for n in report.notes if "steal" in n]
    assert "openmpi-shm (12.5%)" in note and "mpich-tcp" not in note
    for name in ("result-openmpi-shm.json", "result-mpich-tcp.json"):
        path = results_dir / name
        doc = json.loads(path.read_text())
        del doc["provenance"]["host"]
        path.write_text(json.dumps(doc))
    report = make_report(results_dir)
    assert not [n for n in report.notes if "steal" in n]
    assert re.search(r"\| 2026-11-22T13:00:00\+0000 +\| - +\|", report.markdown.read_text())


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


# ---- striped point-to-point: Fig. 2, bandwidth against lanes, the ratio table --------------

# (mpi, lanes, stream Mbit/s at 10M, ping-pong us at 1M, factor on ping-pong time <= 256K)
STRIPE_RUNS = [
    ("openmpi", "stock", 125.0, 79000.0, 1.0),
    ("openmpi", "tcp:1", 128.0, 70000.0, 1.01),
    ("openmpi", "tcp:8", 940.0, 15000.0, 1.02),
    ("openmpi", "tcp:16", 960.0, 14000.0, 0.99),
    ("openmpi", "helper:2", 500.0, 30000.0, 1.04),
    ("mpich", "stock", 126.0, 69000.0, 1.0),
    ("mpich", "tcp:8", 900.0, 16000.0, 1.01),
]


def _stripe_dir(
    fixtures: Path, folder: Path, runs: list[tuple[str, str, float, float, float]]
) -> Path:
    """Result files made from the stripe fixture, one per (mpi, lanes), as `multilane run`
    names them, plus the test bed's check (iperf3: 132.8 and 979.3 Mbit/s)."""
    folder.mkdir(parents=True, exist_ok=True)
    base = json.loads((fixtures / "result-stripe-openmpi-tcp8.json").read_text())
    for n, (mpi, lanes, bw10, pp1m, small) in enumerate(runs):
        doc = json.loads(json.dumps(base))
        prov = doc["provenance"]
        prov["meta"].update(mpi=mpi, lanes=lanes, label=f"{mpi}-{lanes}")
        prov["params"]["lanes"] = lanes
        prov["date"] = f"2026-11-22T16:{n:02d}:00Z"
        for row in doc["rows"]:
            t, b = row["time_us"], row["bw_Mbps"]
            t = pp1m if row["bytes"] == 2**20 else t * small if row["bytes"] <= 256 * 1024 else t
            b = bw10 if row["bytes"] == 10 * 2**20 else b
            row.update(time_us=t, time_us_min=t, time_us_max=t * 1.1)
            row.update(bw_Mbps=b, bw_Mbps_min=b * 0.9, bw_Mbps_max=b)
        (folder / f"{mpi}-{lanes.replace(':', '_')}.json").write_text(json.dumps(doc))
    shutil.copy(fixtures / "testbed-check.json", folder / "testbed-check.json")
    return folder


def _cells(md: str, first: str) -> list[str]:
    """The cells of the last Markdown table row that starts with `first`."""
    for line in reversed(md.splitlines()):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == first:
            return cells[1:]
    raise AssertionError(f"no row {first!r}")


def test_stripe_report(fixtures: Path, tmp_path: Path) -> None:
    folder = _stripe_dir(fixtures, tmp_path / "r", STRIPE_RUNS)
    report = make_report(folder)
    names = sorted(p.name for p in report.images)
    assert names == [
        "stripe-bandwidth.png", "stripe-bw_Mbps.png", "stripe-lanes.png", "stripe-summary.png",
        "stripe-time_us.png",
    ]  # fmt: skip
    for image in report.images:
        assert image.read_bytes().startswith(PNG_MAGIC), image
    assert report.notes == ()  # testbed-check.json is read, not skipped
    md = report.markdown.read_text()
    assert "![stripe: stream bandwidth against message size](stripe-bandwidth.png)" in md
    # columns: MPIs in the order their runs were made
    assert _cells(md, "quantity") == ["openmpi", "mpich"]
    assert _cells(md, "stream size used") == ["10M", "10M"]
    assert _cells(md, "stock [Mbit/s]") == ["125", "126"]
    assert _cells(md, "best tcp:N [Mbit/s]") == ["960 (tcp:16)", "900 (tcp:8)"]
    assert _cells(md, "best tcp:N / iperf3 8 streams") == ["0.98x", "0.92x"]  # 960 / 979.3
    assert _cells(md, "best tcp:N / stock") == ["7.68x", "7.14x"]
    assert _cells(md, "tcp:8 / iperf3 8 streams") == ["0.96x", "0.92x"]
    assert _cells(md, "tcp:8 / stock") == ["7.52x", "7.14x"]
    assert _cells(md, "best helper:K / stock") == ["4.00x", "-"]  # no helper run for mpich
    assert _cells(md, "ping-pong best tcp:N [us]") == ["14,000 (tcp:16)", "16,000 (tcp:8)"]
    assert _cells(md, "ping-pong best tcp:N / stock") == ["0.18x", "0.23x"]
    # at or below the 256K threshold the run recorded: the ratio furthest from 1 per MPI
    assert "threshold (256K, as the runs recorded)" in md
    for size in ("1K", "64K", "100K", "200K"):
        assert _cells(md, size) == ["1.040 (helper:2)", "1.010 (tcp:8)"]
    assert "iperf3 on the same test bed: 1 stream 133 Mbit/s, 8 streams 979 Mbit/s." in md
    assert (
        "openmpi: tcp:16 streams 960 Mbit/s at 10M, 0.98x iperf3 with 8 streams, "
        "7.68x stock (125 Mbit/s)." in md
    )
    assert "openmpi: helper:2 streams 500 Mbit/s at 10M, 4.00x stock." in md
    assert "striped ping-pong times are within 5% of stock: the furthest is 1.040x" in md
    assert "## Test bed check" in md and "979.3 Mbit/s (0 retransmits)" in md
    assert "stripe: ratios" in report.text


def test_stripe_report_says_when_small_messages_slow_down(fixtures: Path, tmp_path: Path) -> None:
    runs = [*STRIPE_RUNS[:2], ("openmpi", "tcp:4", 500.0, 20000.0, 1.08)]
    md = make_report(_stripe_dir(fixtures, tmp_path / "r", runs)).markdown.read_text()
    assert "are NOT within 5% of stock: the furthest is 1.080x (openmpi tcp:4 at 1K" in md


def test_stripe_report_without_iperf3(fixtures: Path, tmp_path: Path) -> None:
    folder = _stripe_dir(fixtures, tmp_path / "r", STRIPE_RUNS[:3])
    (folder / "testbed-check.json").unlink()
    report = make_report(folder)
    assert "no testbed-check.json with iperf3 rows: no iperf3 lines or ratios" in report.notes
    md = report.markdown.read_text()
    assert _cells(md, "best tcp:N / iperf3 8 streams") == ["-"]
    assert _cells(md, "best tcp:N / stock") == ["7.52x"]
    assert "## Test bed check" not in md and "iperf3 on the same test bed" not in md


# ---- tcp:auto against the fixed lane counts and iperf3's best stream count ---------------

# (mpi, lanes, ping-pong us at 1M, stream Mbit/s at 10M and at 64M, lanes_used at 1M, 10M and
# 64M or None for a row without the column); iperf3 of the check: 1 stream 132.8, 8 streams
# 979.3 and 32 streams 985 Mbit/s
AUTO_RUNS = [
    ("openmpi", "stock", 79000.0, 125.0, 126.0, None),
    ("openmpi", "tcp:16", 14000.0, 960.0, 955.0, (16, 16, 16)),
    ("openmpi", "tcp:auto", 15050.0, 980.0, 970.0, (8, 12, 16)),
    ("openmpi", "tcp:4", 20000.0, 500.0, 520.0, (4, 4, 4)),
    ("openmpi", "tcp:8", 15000.0, 940.0, 950.0, (8, 8, 8)),
    ("mpich", "tcp:8", 16000.0, 900.0, 910.0, (8, 8, 8)),
    ("mpich", "tcp:auto", 15000.0, 800.0, 905.0, (4, 8, None)),
]
AUTO_SIZES = (2**20, 10 * 2**20, 64 * 2**20)


def _auto_dir(fixtures: Path, folder: Path, runs: list[Any], streams32: bool = True) -> Path:
    """Result files with rows at 1M, 10M and 64M (and the lanes_used column mln-stripe writes
    for striped runs), one per (mpi, lanes), and the check with iperf3 at 32 streams too."""
    folder.mkdir(parents=True, exist_ok=True)
    base = json.loads((fixtures / "result-stripe-openmpi-tcp8.json").read_text())
    template = base["rows"][-1]
    for n, (mpi, lanes, pp, bw10, bw64, used) in enumerate(runs):
        doc = json.loads(json.dumps(base))
        prov = doc["provenance"]
        prov["meta"].update(mpi=mpi, lanes=lanes, label=f"{mpi}-{lanes}", link_security="auth")
        prov["params"].update(lanes=lanes, sizes="1M,10M,64M")
        prov["date"] = f"2026-11-22T18:{n:02d}:00Z"
        doc["rows"] = []
        for i, size in enumerate(AUTO_SIZES):
            bw = {2**20: 700.0, 10 * 2**20: bw10, 64 * 2**20: bw64}[size]
            t = pp if size == 2**20 else template["time_us"] * size / 2**20
            row = {**template, "bytes": size, "time_us": t, "time_us_min": t}
            row.update(time_us_max=t * 1.1, bw_Mbps=bw, bw_Mbps_min=bw * 0.9, bw_Mbps_max=bw)
            if used is not None and used[i] is not None:
                row["lanes_used"] = used[i]
            doc["rows"].append(row)
        (folder / f"{mpi}-{lanes.replace(':', '_')}.json").write_text(json.dumps(doc))
    check = json.loads((fixtures / "testbed-check.json").read_text())
    if streams32:
        row = json.loads(json.dumps(check["rows"][2]))
        row["item"], row["measured"] = "TCP 32 streams a1 -> b1", "985.0 Mbit/s (12 retransmits)"
        row["values"].update(streams=32, bps=985e6, retransmits=12)
        check["rows"].insert(3, row)
    (folder / "testbed-check.json").write_text(json.dumps(check))
    return folder


def _auto_rows(md: str) -> dict[tuple[str, str], list[str]]:
    """The rows of the tcp:auto table by (MPI, test [unit])."""
    rows = {}
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 8 and re.fullmatch(r"(ping-pong|stream) \S+ \[(us|Mbit/s)\]", cells[1]):
            rows[(cells[0], cells[1])] = cells[2:]
    return rows


def test_stripe_report_auto_against_fixed_counts(fixtures: Path, tmp_path: Path) -> None:
    report = make_report(_auto_dir(fixtures, tmp_path / "r", AUTO_RUNS))
    assert report.notes == ()
    md = report.markdown.read_text()
    # columns: tcp:auto, lanes_used, best fixed tcp:N, auto / best fixed, iperf3 best, ratio
    assert _auto_rows(md) == {
        ("openmpi", "ping-pong 1M [us]"): [
            "15,050", "8", "14,000 (tcp:16)", "1.075x", "-", "-",
        ],
        ("openmpi", "stream 10M [Mbit/s]"): [
            "980", "12", "960 (tcp:16)", "1.021x", "985 (32 streams)", "0.995x",
        ],
        ("openmpi", "stream 64M [Mbit/s]"): [
            "970", "16", "955 (tcp:16)", "1.016x", "985 (32 streams)", "0.985x",
        ],
        ("mpich", "ping-pong 1M [us]"): ["15,000", "4", "16,000 (tcp:8)", "0.938x", "-", "-"],
        ("mpich", "stream 10M [Mbit/s]"): [
            "800", "8", "900 (tcp:8)", "0.889x", "985 (32 streams)", "0.812x",
        ],
        ("mpich", "stream 64M [Mbit/s]"): [
            "905", "-", "910 (tcp:8)", "0.995x", "985 (32 streams)", "0.919x",
        ],
    }  # fmt: skip
    assert "auto / best fixed is a ratio of times for ping-pong (above 1: auto is slower)" in md
    assert (
        "openmpi tcp:auto: a 1M ping-pong takes 15,050 us one way (over 8 lanes), 1.075x the "
        "time of the best fixed count (tcp:16, 14,000 us; above 1: auto is slower; target <= "
        "1.10x: met)." in md
    )
    assert (
        "mpich tcp:auto streams 800 Mbit/s at 10M (over 8 lanes), 0.889x the best fixed count "
        "(tcp:8, 900 Mbit/s; target >= 0.90x: NOT met), 0.812x iperf3's best (32 streams, "
        "985 Mbit/s; target >= 0.85x: NOT met)." in md
    )
    assert "mpich tcp:auto streams 905 Mbit/s at 64M (lanes_used not recorded), 0.995x" in md
    # the fixed-count summaries leave auto out, though it streams faster (980) at 10M and
    # ping-pongs faster (15,000 us) for mpich
    assert _cells(md, "best tcp:N [Mbit/s]") == ["960 (tcp:16)", "900 (tcp:8)"]
    assert _cells(md, "ping-pong best tcp:N [us]") == ["14,000 (tcp:16)", "16,000 (tcp:8)"]
    # iperf3's best of every stream count the check measured
    assert _cells(md, "iperf3 best [Mbit/s]") == ["985 (32 streams)", "985 (32 streams)"]
    assert _cells(md, "best tcp:N / iperf3 best") == ["0.97x", "0.91x"]
    assert _cells(md, "best tcp:N / iperf3 8 streams") == ["0.98x", "0.92x"]
    assert (
        "iperf3 on the same test bed: 1 stream 133 Mbit/s, 8 streams 979 Mbit/s, 32 streams "
        "985 Mbit/s (best: 32 streams)." in md
    )
    assert "stripe: tcp:auto against fixed lane counts" in report.text


def test_stripe_auto_sorts_after_the_fixed_counts(fixtures: Path, tmp_path: Path) -> None:
    folder = _auto_dir(fixtures, tmp_path / "r", AUTO_RUNS)
    found, notes = stripe_report.stripe_runs(collect(folder)[0]["stripe"])  # by date
    assert notes == []
    assert [r.name for r in found] == [
        "openmpi stock", "openmpi tcp:4 auth", "openmpi tcp:8 auth", "openmpi tcp:16 auth",
        "openmpi tcp:auto auth", "mpich tcp:8 auth", "mpich tcp:auto auth",
    ]  # fmt: skip
    assert [r.lanes.auto for r in stripe_report.fixed_tcp(found)] == [False] * 4


def test_stripe_auto_without_fixed_counts_or_iperf3(fixtures: Path, tmp_path: Path) -> None:
    """An auto run alone (no tcp:N, no check): its values and lanes, '-' where there is
    nothing to compare; a run without a size near 64 MiB has no 64M row."""
    runs = [("openmpi", "tcp:auto", 15000.0, 900.0, 950.0, (8, 8, 8))]
    folder = _auto_dir(fixtures, tmp_path / "r", runs)
    (folder / "testbed-check.json").unlink()
    doc = json.loads((folder / "openmpi-tcp_auto.json").read_text())
    doc["rows"] = doc["rows"][:2]
    (folder / "openmpi-tcp_auto.json").write_text(json.dumps(doc))
    md = make_report(folder).markdown.read_text()
    assert _auto_rows(md) == {
        ("openmpi", "ping-pong 1M [us]"): ["15,000", "8", "-", "-", "-", "-"],
        ("openmpi", "stream 10M [Mbit/s]"): ["900", "8", "-", "-", "-", "-"],
    }
    assert "iperf3 best needs testbed-check.json." in md
    assert "openmpi tcp:auto: a 1M ping-pong takes 15,000 us one way (over 8 lanes); no " in md
    assert "openmpi tcp:auto streams 900 Mbit/s at 10M (over 8 lanes)." in md


def test_stripe_report_without_auto_has_no_auto_table(fixtures: Path, tmp_path: Path) -> None:
    md = make_report(_stripe_dir(fixtures, tmp_path / "r", STRIPE_RUNS)).markdown.read_text()
    assert "tcp:auto" not in md
    assert _cells(md, "iperf3 best [Mbit/s]") == ["979 (8 streams)", "979 (8 streams)"]


def test_stripe_auto_in_the_figures() -> None:
    """Bandwidth against lanes: tcp:auto as a diamond at the lanes it used plus a dashed line
    at its level, or the line alone without lanes_used; iperf3's best count beside 1 and 8."""
    from matplotlib.figure import Figure  # noqa: PLC0415

    def run(mpi: str, used: float | None) -> stripe_report.StripeRun:
        row = {"bytes": 10 << 20, "bw_Mbps": 900.0, **({"lanes_used": used} if used else {})}
        lanes = stripe_report.parse_lanes("tcp:auto")
        return stripe_report.StripeRun(f"{mpi}-auto", mpi, lanes, {10 << 20: row}, {}, "auth")

    ax = Figure().subplots()
    assert stripe_report._auto_marks(ax, [run("openmpi", 12)], 10 << 20) == [12]
    assert stripe_report._auto_marks(ax, [run("mpich", None)], 10 << 20) == []
    stripe_report._iperf_lines(ax, {1: 130.0, 8: 979.0, 32: 985.0})
    labels = ax.get_legend_handles_labels()[1]
    assert labels == [
        "tcp:auto (12 lanes used)", "tcp:auto (lanes_used not recorded)",
        "iperf3 1 stream (130)", "iperf3 8 streams (979)", "iperf3 32 streams, its best (985)",
    ]  # fmt: skip


# ---- link security: the modes of tcp:8 side by side ---------------------------------------

# (mpi, lanes, link security or None (not recorded), stream Mbit/s at 10M and at 64M,
# CPU s/GB or None): a seed-000-like folder with a sweep in the default mode (auth) and tcp:8
# in none, auth and aead, stock and tcp:8 in each MPI
SECURE_RUNS = [
    ("openmpi", "stock", "auth", 125.0, 126.0, 9.5),
    ("openmpi", "tcp:16", "auth", 960.0, 965.0, 2.0),
    ("openmpi", "tcp:8", "none", 950.0, 955.0, 1.25),
    ("openmpi", "tcp:8", "auth", 940.0, 950.0, 1.5),
    ("openmpi", "tcp:8", "aead", 880.0, 900.0, 2.75),
    ("mpich", "stock", "auth", 130.0, 131.0, None),
    ("mpich", "tcp:8", "none", 900.0, 905.0, None),
    ("mpich", "tcp:8", "auth", 895.0, 900.0, None),
    ("mpich", "tcp:8", "aead", 800.0, 810.0, None),
]


def _secure_dir(
    fixtures: Path, folder: Path, runs: list[tuple[str, str, str | None, float, float, object]]
) -> Path:
    """Result files from the stripe fixture with a 64M row added, meta.link_security and
    provenance.cpu (as the CLI writes them), one per (mpi, lanes, mode)."""
    folder.mkdir(parents=True, exist_ok=True)
    base = json.loads((fixtures / "result-stripe-openmpi-tcp8.json").read_text())
    big = {**base["rows"][-1], "bytes": 64 * 2**20}
    base["rows"].append(big)
    for n, (mpi, lanes, mode, bw10, bw64, cpu) in enumerate(runs):
        doc = json.loads(json.dumps(base))
        prov = doc["provenance"]
        label = f"{mpi}-{lanes}" + (f"-{mode}" if lanes == "tcp:8" else "")
        prov["meta"].update(mpi=mpi, lanes=lanes, label=label)
        if mode is not None:
            prov["meta"]["link_security"] = mode
        if cpu is not None:
            prov["cpu"] = {"cpu_s": 1.0, "payload_bytes": 10**9, "cpu_s_per_gb": cpu}
        prov["params"]["lanes"] = lanes
        prov["date"] = f"2026-11-22T17:{n:02d}:00Z"
        for row in doc["rows"]:
            b = {10 * 2**20: bw10, 64 * 2**20: bw64}.get(row["bytes"], row["bw_Mbps"])
            row.update(bw_Mbps=b, bw_Mbps_min=b * 0.9, bw_Mbps_max=b)
        (folder / f"{label.replace(':', '_')}.json").write_text(json.dumps(doc))
    return folder


def test_stripe_report_security_side_by_side(fixtures: Path, tmp_path: Path) -> None:
    report = make_report(_secure_dir(fixtures, tmp_path / "r", SECURE_RUNS))
    # three runs of openmpi tcp:8 are no repeats: their modes differ
    assert not any("again" in note for note in report.notes), report.notes
    md = report.markdown.read_text()
    assert _cells(md, "quantity") == ["openmpi tcp:8", "mpich tcp:8"]
    assert _cells(md, "stream size used") == ["10M", "10M"]
    assert _cells(md, "stock [Mbit/s]") == ["125", "130"]
    assert _cells(md, "none [Mbit/s]") == ["950", "900"]
    assert _cells(md, "auth [Mbit/s]") == ["940", "895"]
    assert _cells(md, "aead [Mbit/s]") == ["880", "800"]
    assert _cells(md, "auth / none") == ["0.989x", "0.994x"]  # 940 / 950, 895 / 900
    assert _cells(md, "aead / none") == ["0.926x", "0.889x"]
    assert _cells(md, "aead / stock") == ["7.04x", "6.15x"]
    assert _cells(md, "none / stock") == ["7.60x", "6.92x"]
    # the largest size every mode measured, where it is not the 10 MiB one
    assert _cells(md, "largest size") == ["64M", "64M"]
    assert _cells(md, "largest: aead / none") == ["0.942x", "0.895x"]  # 900 / 955, 810 / 905
    assert _cells(md, "largest: auth / stock") == ["7.54x", "6.87x"]
    # CPU per GB where the CLI recorded it
    assert _cells(md, "stock CPU [s/GB]") == ["9.5", "-"]
    assert _cells(md, "aead CPU [s/GB]") == ["2.75", "-"]
    assert (
        "openmpi tcp:8 streams at 10M [Mbit/s]: none 950 (7.60x stock); auth 940 (0.989x none, "
        "7.52x stock); aead 880 (0.926x none, 7.04x stock)." in md
    )
    assert "openmpi tcp:8: CPU time per GB moved (whole run, all processes): none 1.25 s, " in md
    assert "stripe: link security" in report.text
    # the comparisons across lanes take the default mode: tcp:8 auth, not none
    assert _cells(md, "tcp:8 [Mbit/s]") == ["940", "895"]
    assert _cells(md, "best tcp:N [Mbit/s]") == ["960 (tcp:16)", "895 (tcp:8)"]


def test_stripe_series_name_their_mode(fixtures: Path, tmp_path: Path) -> None:
    """Series labels: the mode of tcp lanes always; of other lanes when not the default; none
    for a run that did not record one (an older result)."""
    runs = [
        *SECURE_RUNS[:3],
        ("openmpi", "helper:2", "aead", 500.0, 500.0, None),
        ("openmpi", "tcp:4", None, 700.0, 700.0, None),
    ]
    found, notes = stripe_report.stripe_runs(
        [
            Run(p.stem, p, json.loads(p.read_text()))
            for p in sorted(_secure_dir(fixtures, tmp_path / "r", runs).glob("*.json"))
        ]
    )
    assert notes == []
    assert [r.name for r in found] == [
        "openmpi stock", "openmpi tcp:4", "openmpi tcp:8 none", "openmpi tcp:16 auth",
        "openmpi helper:2 aead",
    ]  # fmt: skip
    assert stripe_report.security_groups(found) == []  # tcp:8 ran in one mode only here
    sweep = stripe_report.sweep_runs(found)
    assert [r.name for r in sweep] == [r.name for r in found]


def test_security_table_without_a_10_mib_size() -> None:
    """Sizes far from 10 MiB (a short `bench --security` run): the table compares the largest
    size, once, and a stock run's absence leaves its cells empty."""

    def run(mode: str, bw: float) -> stripe_report.StripeRun:
        rows = {4 << 20: {"bytes": 4 << 20, "bw_Mbps": bw}, 1 << 20: {"bytes": 1 << 20}}
        lanes = stripe_report.parse_lanes("tcp:2")
        return stripe_report.StripeRun(f"o-{mode}", "openmpi", lanes, rows, {}, mode, 2.5)

    groups = stripe_report.security_groups([run("none", 5000.0), run("aead", 2500.0)])
    assert [(g.name, g.size, g.largest, list(g.modes)) for g in groups] == [
        ("openmpi tcp:2", None, 4 << 20, ["none", "aead"])
    ]
    rows = {r[0]: r[1] for r in stripe_report.security_table(groups)}
    assert rows["stream size used"] == "4M" and "largest size" not in rows
    assert rows["aead / none"] == "0.500x" and rows["aead / stock"] == "-"
    assert rows["aead CPU [s/GB]"] == "2.5" and rows["stock CPU [s/GB]"] == "-"
    assert stripe_report.security_statements(groups)[0] == (
        "openmpi tcp:2 streams at 4M [Mbit/s]: none 5,000; aead 2,500 (0.500x none)."
    )


# stream CPU s/GB at 10M and at 64M (mln-stripe's column) per (mpi, lanes, mode) of SECURE_RUNS
STREAM_CPU = {
    ("openmpi", "stock", "auth"): (1.9, 1.8),
    ("openmpi", "tcp:8", "none"): (0.45, 0.4),
    ("openmpi", "tcp:8", "auth"): (0.47, 0.41),
    ("openmpi", "tcp:8", "aead"): (1.65, 1.6),
    ("mpich", "tcp:8", "aead"): (1.7, 1.62),
}


def test_stripe_report_prefers_the_stream_cpu_column(fixtures: Path, tmp_path: Path) -> None:
    """Results with mln-stripe's stream_cpu_s_per_GB: the table and the sentences give the
    stream's CPU per GB at 10 MiB and at the largest size, not the whole run's."""
    folder = _secure_dir(fixtures, tmp_path / "r", SECURE_RUNS)
    for path in folder.glob("*.json"):
        doc = json.loads(path.read_text())
        meta = doc["provenance"]["meta"]
        cpu = STREAM_CPU.get((meta["mpi"], meta["lanes"], meta["link_security"]))
        for row in doc["rows"] if cpu else []:
            at = {10 * 2**20: cpu[0], 64 * 2**20: cpu[1]}
            row["stream_cpu_s_per_GB"] = at.get(row["bytes"], 2.0)
        if cpu and "cpu" in doc["provenance"]:
            doc["provenance"]["cpu"]["cpu_s_per_gb"] = 77.7  # the whole run's: not shown
        path.write_text(json.dumps(doc))
    report = make_report(folder)  # the results are validated against the schema on the way
    md = report.markdown.read_text()
    assert _cells(md, "quantity") == ["openmpi tcp:8", "mpich tcp:8"]
    assert _cells(md, "stock stream CPU [s/GB]") == ["1.9", "-"]
    assert _cells(md, "none stream CPU [s/GB]") == ["0.45", "-"]
    assert _cells(md, "auth stream CPU [s/GB]") == ["0.47", "-"]
    assert _cells(md, "aead stream CPU [s/GB]") == ["1.65", "1.7"]
    assert _cells(md, "largest: none stream CPU [s/GB]") == ["0.4", "-"]
    assert _cells(md, "largest: aead stream CPU [s/GB]") == ["1.6", "1.62"]
    assert "none CPU [s/GB]" not in md and "77.7" not in md  # no whole-run rows
    assert "stream CPU [s/GB]: CPU time of all ranks over the GB the stream test moved" in md
    assert (
        "openmpi tcp:8: CPU time per GB streamed at 10M (timed loop, all ranks): none 0.45 s, "
        "auth 0.47 s, aead 1.65 s." in md
    )
    assert (
        "openmpi tcp:8: CPU time per GB streamed at 64M (timed loop, all ranks): none 0.4 s" in md
    )
    assert "mpich tcp:8: CPU time per GB streamed at 10M (timed loop, all ranks): aead 1.7 s." in md
    assert "whole run, all processes" not in md


def test_stripe_report_without_security_modes(fixtures: Path, tmp_path: Path) -> None:
    """Results that do not record a mode (before the link layer): no security table."""
    md = make_report(_stripe_dir(fixtures, tmp_path / "r", STRIPE_RUNS)).markdown.read_text()
    assert "Link security of the lanes" not in md and "/ none" not in md


def test_stripe_next_to_pt2pt(fixtures: Path, results_dir: Path) -> None:
    """Folders with both benchmarks: each keeps its own section; runs that do not say their
    lanes are left out of the stripe figures with a note, not an error."""
    _stripe_dir(fixtures, results_dir, STRIPE_RUNS[:2])
    doc = json.loads((results_dir / "openmpi-tcp_1.json").read_text())
    del doc["provenance"]["meta"]["lanes"], doc["provenance"]["params"]["lanes"]
    (results_dir / "openmpi-tcp_1.json").write_text(json.dumps(doc))
    report = make_report(results_dir)
    names = {p.name for p in report.images}
    assert {"pt2pt-summary.png", "stripe-summary.png", "stripe-bandwidth.png"} <= names
    assert "openmpi-tcp:1: no valid lanes in its meta or params: left out of figures" in (
        report.notes
    )
    md = report.markdown.read_text()
    assert "## pt2pt" in md and "## stripe" in md
    assert _cells(md, "best tcp:N [Mbit/s]") == ["-"]
