"""hostload: the machine's steal between two /proc/stat samples."""

from __future__ import annotations

from pathlib import Path

from multilane import hostload

STAT = "cpu  100 5 50 800 10 0 15 20 0 0\ncpu0 50 2 25 400 5 0 7 10 0 0\nintr 1 2 3\n"


def test_parse_stat_takes_the_cpu_line() -> None:
    sample = hostload.parse_stat(STAT)
    assert sample == hostload.CpuSample(steal=20, total=1000)


def test_parse_stat_refuses_what_is_not_a_cpu_line() -> None:
    assert hostload.parse_stat("") is None
    assert hostload.parse_stat("cpu0 1 2 3 4 5 6 7 8\n") is None  # a single CPU only
    assert hostload.parse_stat("cpu  1 2 3\n") is None  # too few fields
    assert hostload.parse_stat("cpu  1 2 3 x 5 6 7 8\n") is None


def test_steal_between_samples() -> None:
    before = hostload.CpuSample(steal=20, total=1000)
    after = hostload.CpuSample(steal=45, total=1200)
    assert hostload.steal_pct(before, after) == 12.5
    record = hostload.host_record(before, after)
    assert record is not None and record["steal_pct"] == 12.5 and "steal" in record["scope"]
    assert hostload.steal_pct(after, after) is None  # no time passed
    assert hostload.steal_pct(None, after) is None and hostload.host_record(before, None) is None


def test_sample_of_a_file(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text(STAT)
    assert hostload.sample(stat) == hostload.CpuSample(steal=20, total=1000)
    assert hostload.sample(tmp_path / "missing") is None
    live = hostload.sample()  # this machine's (Linux)
    assert live is not None and live.total > 0 and 0 <= live.steal <= live.total
