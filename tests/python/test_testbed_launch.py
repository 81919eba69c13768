"""Runs across test-bed hosts: the payload lower bound behind the link-crossing proof, and
the command-line rules of `bench --scenario` (no root needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import clean_env, multilane
from multilane.benchmarks import PT2PT
from multilane.testbed.launch import payload_bytes


def _doc(
    metrics: list[str], rows: list[dict[str, float]], reps: int = 3, pairs: int = 1
) -> dict[str, object]:
    return {
        "provenance": {"params": {"reps": reps, "pairs": pairs}},
        "metrics": [{"name": m} for m in metrics],
        "rows": rows,
    }


def test_payload_bytes_counts_each_test() -> None:
    row = {"bytes": 1000, "iters": 10, "window": 4}
    # latency: 2 messages per iteration; bw: window; bibw: 2 * window
    assert payload_bytes(_doc(["latency_us"], [row]), PT2PT.payload) == 1000 * 10 * 3 * 2
    assert payload_bytes(_doc(["bw_MBps"], [row]), PT2PT.payload) == 1000 * 10 * 3 * 4
    assert payload_bytes(_doc(["bibw_MBps"], [row]), PT2PT.payload) == 1000 * 10 * 3 * 8
    both = _doc(["latency_us", "bw_MBps", "bibw_MBps"], [row, {**row, "bytes": 0}], pairs=2)
    assert payload_bytes(both, PT2PT.payload) == 1000 * 10 * 3 * 2 * (2 + 4 + 8)


def test_payload_bytes_of_a_real_result(fixtures: Path) -> None:
    for path in sorted(fixtures.glob("*.json")):
        doc = json.loads(path.read_text())
        if doc.get("schema") == "multilane-result" and doc.get("rows"):
            assert payload_bytes(doc, PT2PT.payload) > 0
            return
    pytest.skip("no result fixture with rows")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ppn", "2"], "--ppn needs --scenario"),
        (["--scenario", "scenarios/wan-2site.toml", "--transport", "shm"], "leave out"),
        (["--scenario", "scenarios/wan-2site.toml", "--np", "4"], "leave out"),
    ],
)
def test_bench_scenario_usage_errors(args: list[str], message: str) -> None:
    proc = multilane(["bench", "pt2pt", *args], clean_env())
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
