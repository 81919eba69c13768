"""Result files: the JSON contract with the C benchmarks (schemas/result-v1.json) plus the
checks a schema cannot express.  Reports and plots read only files that pass here."""

from __future__ import annotations

import json
import math
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from .errors import MultilaneError

SCHEMA_NAME = "multilane-result"
SKIP_SCHEMA = "multilane-skipped"  # the CLI's record of a run that could not measure (exit 77)
DATA_VERSION = 1
SCHEMA_FILE = "result-v1.json"
MAX_MESSAGES = 8  # problems listed per file
REL_TOL = 1e-9


class ResultError(MultilaneError):
    """A file that is not a valid result; the message names the file and the problems."""


def load_schema() -> dict[str, Any]:
    """The result schema shipped in the package."""
    text = (resources.files("multilane") / "schemas" / SCHEMA_FILE).read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number in JSON")


def parse_json(text: str) -> Any:
    """Strict JSON: NaN and Infinity are rejected."""
    return json.loads(text, parse_constant=_reject_constant)


def _where(path: Any) -> str:
    return "/".join(str(p) for p in path) or "(top level)"


def schema_problems(doc: Any, schema: dict[str, Any] | None = None) -> list[str]:
    """What the JSON schema finds wrong with `doc`, one line each."""
    validator = jsonschema.Draft202012Validator(schema or load_schema())
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))
    return [f"{_where(e.absolute_path)}: {e.message}" for e in errors]


def semantic_problems(doc: dict[str, Any]) -> list[str]:
    """Checks beyond the schema, for a document that already passed it.  Rows may carry
    extra numeric columns (e.g. a window size) besides the metrics, and may leave out a metric
    whose test does not run at that size."""
    problems: list[str] = []
    names = [m["name"] for m in doc["metrics"]]
    if len(set(names)) != len(names):
        problems.append(f"metrics: names repeat: {', '.join(names)}")
    previous = -1
    for i, row in enumerate(doc["rows"]):
        where = f"rows/{i} (bytes {row['bytes']})"
        if row["bytes"] <= previous:
            problems.append(f"{where}: rows are not sorted by bytes, strictly ascending")
        previous = row["bytes"]
        # a metric may be absent from a row (a test that does not run at that size), but not
        # every metric, and one that is there has its median, min and max
        there = [n for n in names if {n, f"{n}_min", f"{n}_max"} & row.keys()]
        missing = sorted(c for n in there for c in (n, f"{n}_min", f"{n}_max") if c not in row)
        if not there:
            problems.append(f"{where}: no metric column ({', '.join(names)})")
        elif missing:
            problems.append(f"{where}: missing metric column(s) {', '.join(missing)}")
        for key, value in row.items():
            if isinstance(value, float) and not math.isfinite(value):
                problems.append(f"{where}: {key} is not finite")
        for name in names:
            low, mid, high = (row.get(k) for k in (f"{name}_min", name, f"{name}_max"))
            if None in (low, mid, high):
                continue
            slack = REL_TOL * max(abs(low), abs(high), 1.0)
            if not (low - slack <= mid <= high + slack):
                problems.append(f"{where}: {name} is not within [{name}_min, {name}_max]")
    row_errors = sum(r["errors"] for r in doc["rows"])
    if doc["status"] == "pass" and (doc["errors"] or row_errors):
        problems.append("status is 'pass' but errors were counted")
    return problems


def problems(doc: Any) -> list[str]:
    """Every problem with a parsed document: schema first, semantics when the schema holds."""
    found = schema_problems(doc)
    if found:
        return found
    return semantic_problems(doc)


def is_result(doc: Any) -> bool:
    """Whether a parsed JSON document claims to be a Multilane result."""
    return isinstance(doc, dict) and doc.get("schema") == SCHEMA_NAME


def is_skip_record(doc: Any) -> bool:
    """Whether a parsed JSON document is the CLI's record of a skipped run (no GPU)."""
    return isinstance(doc, dict) and doc.get("schema") == SKIP_SCHEMA


def read_json(path: Path) -> Any:
    """Parse a JSON file strictly; ResultError naming the file when it cannot be read."""
    try:
        return parse_json(path.read_text())
    except OSError as exc:
        raise ResultError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ResultError(f"{path}: not valid JSON: {exc}") from None


def format_problems(path: Path, found: list[str]) -> str:
    """One line: the file and its first problems."""
    shown = "; ".join(found[:MAX_MESSAGES])
    more = f" (and {len(found) - MAX_MESSAGES} more)" if len(found) > MAX_MESSAGES else ""
    return f"{path}: invalid result: {shown}{more}"


def load_result(path: Path) -> dict[str, Any]:
    """A validated result document; ResultError naming the file and its problems."""
    doc = read_json(path)
    found = problems(doc)
    if found:
        raise ResultError(format_problems(path, found))
    result: dict[str, Any] = doc
    return result


def write_result(path: Path, doc: dict[str, Any]) -> None:
    """Write a result document (indented, strict JSON), replacing the file atomically."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, allow_nan=False) + "\n")
    tmp.replace(path)


def run_label(doc: dict[str, Any], fallback: str) -> str:
    """How a run is named in tables and legends: meta label, else mpi/transport, else fallback."""
    meta = doc["provenance"].get("meta", {})
    if meta.get("label"):
        return str(meta["label"])
    if meta.get("mpi") and meta.get("transport"):
        return f"{meta['mpi']}/{meta['transport']}"
    return fallback
