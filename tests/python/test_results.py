"""The result schema and the checks beyond it."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from multilane import results
from multilane.results import ResultError, load_result, problems


def _doc(fixtures: Path, name: str = "minimal-good.json") -> dict[str, Any]:
    return json.loads((fixtures / name).read_text())


@pytest.mark.parametrize(
    "name", ["minimal-good.json", "result-openmpi-shm.json", "result-mpich-tcp.json"]
)
def test_good_fixtures_pass(fixtures: Path, name: str) -> None:
    doc = load_result(fixtures / name)
    assert doc["schema"] == "multilane-result"
    assert problems(doc) == []


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("bad-missing-key.json", "'status' is a required property"),
        ("bad-wrong-type.json", "provenance/nranks: '2' is not of type 'integer'"),
        ("bad-nan-string.json", "rows/1/latency_us: 'NaN' is not of type 'number'"),
        ("bad-missing-metric.json", "missing metric column(s) latency_us_max"),
        ("bad-unsorted.json", "not sorted by bytes"),
    ],
)
def test_bad_fixtures_fail(fixtures: Path, name: str, fragment: str) -> None:
    with pytest.raises(ResultError) as info:
        load_result(fixtures / name)
    message = str(info.value)
    assert fragment in message
    assert message.startswith(str(fixtures / name))
    assert "\n" not in message


def test_schema_is_shipped_in_the_package() -> None:
    schema = results.load_schema()
    assert schema["$id"] == "multilane-result-v1"
    assert schema["properties"]["data_version"]["const"] == results.DATA_VERSION


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_nan_literals_are_rejected(fixtures: Path, tmp_path: Path, literal: str) -> None:
    text = (fixtures / "minimal-good.json").read_text().replace('"latency_us": 0.5', literal, 1)
    text = text.replace(literal, f'"latency_us": {literal}', 1)
    path = tmp_path / "nan.json"
    path.write_text(text)
    with pytest.raises(ResultError, match="not valid JSON"):
        load_result(path)


def test_overflowing_number_is_not_finite(fixtures: Path, tmp_path: Path) -> None:
    text = (fixtures / "minimal-good.json").read_text()
    path = tmp_path / "inf.json"
    path.write_text(text.replace('"latency_us_max": 0.7', '"latency_us_max": 1e999'))
    with pytest.raises(ResultError, match="latency_us_max is not finite"):
        load_result(path)


def _mutate(fixtures: Path, change: Any) -> list[str]:
    doc = copy.deepcopy(_doc(fixtures))
    change(doc)
    return problems(doc)


def test_semantic_checks(fixtures: Path) -> None:
    def pass_with_errors(d: dict[str, Any]) -> None:
        d["rows"][0]["errors"] = 3

    def median_outside(d: dict[str, Any]) -> None:
        d["rows"][0]["latency_us"] = 9.0

    def repeated_size(d: dict[str, Any]) -> None:
        d["rows"][1]["bytes"] = 1

    def repeated_metric(d: dict[str, Any]) -> None:
        d["metrics"].append(dict(d["metrics"][0]))

    def extra_column(d: dict[str, Any]) -> None:
        for row in d["rows"]:
            row["window"] = 64

    assert any("status is 'pass'" in p for p in _mutate(fixtures, pass_with_errors))
    assert any("not within" in p for p in _mutate(fixtures, median_outside))
    assert any("not sorted" in p for p in _mutate(fixtures, repeated_size))
    assert any("names repeat" in p for p in _mutate(fixtures, repeated_metric))
    assert _mutate(fixtures, extra_column) == []  # extra numeric columns are allowed


def test_schema_rejects_unknown_top_level_key(fixtures: Path) -> None:
    doc = _doc(fixtures)
    doc["extra"] = 1
    assert any("Additional properties" in p for p in problems(doc))


def test_write_result_round_trip(fixtures: Path, tmp_path: Path) -> None:
    doc = _doc(fixtures)
    out = tmp_path / "copy.json"
    results.write_result(out, doc)
    assert load_result(out) == doc
    assert not list(tmp_path.glob("*.tmp"))


def test_run_label(fixtures: Path) -> None:
    doc = _doc(fixtures)
    assert results.run_label(doc, "file") == "file"
    doc["provenance"]["meta"] = {"mpi": "mpich", "transport": "tcp"}
    assert results.run_label(doc, "file") == "mpich/tcp"
    doc["provenance"]["meta"]["label"] = "mine"
    assert results.run_label(doc, "file") == "mine"


def test_a_metric_may_be_left_out_of_a_row(fixtures: Path) -> None:
    """A test that does not run at a size (mln-bcast's stock test above the threshold) leaves
    its metric out of that row; the row keeps the others, and one left there is whole."""
    doc = _doc(fixtures, "result-openmpi-shm.json")
    names = [m["name"] for m in doc["metrics"]]
    assert len(names) > 1
    row = doc["rows"][-1]
    for key in (names[0], f"{names[0]}_min", f"{names[0]}_max"):
        del row[key]
    assert problems(doc) == []
    half = copy.deepcopy(doc)
    del half["rows"][-1][f"{names[1]}_max"]
    assert any(f"missing metric column(s) {names[1]}_max" in p for p in problems(half))
    for name in names[1:]:
        for key in (name, f"{name}_min", f"{name}_max"):
            del row[key]
    assert any("no metric column" in p for p in problems(doc))
