"""The CLI's table of benchmark options matches what the built programs accept.

`python/multilane/benchmarks.py` validates scenario and command-line options before anything
is launched, so it must name exactly the options and tests of each C program: this test reads
the program's own `--help` and fails when the two drift apart.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from multilane.benchmarks import BENCHMARKS

ROOT = Path(__file__).resolve().parents[2]
BUILT = [m for m in ("openmpi", "mpich") if (ROOT / "build" / m / "bin").is_dir()]
# Options every harness program has that the CLI sets itself or never passes on.
HARNESS_ONLY = {"--json", "--meta", "--quiet", "--inject-error", "--version", "--help"}


def _help_sections(text: str) -> dict[str, list[str]]:
    """First words of the indented lines under each 'name:' heading of a --help text."""
    sections: dict[str, list[str]] = {}
    current = ""
    for line in text.splitlines():
        heading = re.match(r"^([a-z0-9 ]+):$", line)
        if heading:
            current = heading.group(1)
            sections[current] = []
        elif current and re.match(r"^  \S", line):
            sections[current].append(line.split()[0])
    return sections


@pytest.mark.skipif(not BUILT, reason="no build folder: run `make build` first")
@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_options_match_program_help(name: str) -> None:
    bench = BENCHMARKS[name]
    exe = ROOT / "build" / BUILT[0] / "bin" / bench.program
    proc = subprocess.run([str(exe), "--help"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    sections = _help_sections(proc.stdout)
    program_flags = {
        flag for key, flags in sections.items() if key.endswith("options") for flag in flags
    }
    cli_flags = {option.flag for option in bench.options.values()}
    assert cli_flags == program_flags - HARNESS_ONLY
    tests = sections.get("tests", [])
    check = bench.options["tests"].check
    assert check(",".join(tests)) == ",".join(tests)  # every program test is accepted
    with pytest.raises(ValueError):
        check("no_such_test")
