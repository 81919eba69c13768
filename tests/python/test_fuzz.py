"""The fuzz targets (fuzz/, docs/FUZZING.md): `make fuzz` builds them with clang's libFuzzer
and runs each for a short bounded time on a copy of its seed corpus; none may crash, and each
must have executed inputs.  The tcp lanes' target comes in when build/openmpi has the library
it links (make build).

Skipped with the reason when clang cannot build a libFuzzer program or the headers the targets
need (libsodium's, the pinned Open MPI's: make deps) are missing."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO_ROOT, clean_env, run_group

pytestmark = [pytest.mark.slow]

FUZZ_TIME = 5
LINE = re.compile(
    r"^fuzz: (?P<target>\S+): (?P<secs>\d+) s, (?P<execs>\d+|\?) executions, "
    r"(?P<crashes>\d+) crashes, corpus (?P<corpus>\d+) files",
    re.MULTILINE,
)


def _missing(tmp_path: Path) -> str | None:
    """Why the targets cannot be built here, or None."""
    clang = shutil.which("clang")
    if clang is None:
        return "no clang"
    if not (REPO_ROOT / ".deps/openmpi/include/mpi.h").exists():
        return "no .deps/openmpi/include/mpi.h (make deps)"
    probe = tmp_path / "probe.c"
    probe.write_text(
        "#include <sodium.h>\n"
        "int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n);\n"
        "int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n)\n"
        "{ (void)d; (void)n; return 0; }\n"
    )
    proc = subprocess.run(
        [clang, "-fsanitize=fuzzer,address,undefined", str(probe), "-o", str(tmp_path / "probe")],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        return f"clang cannot build a libFuzzer program with libsodium: {proc.stderr.strip()[:300]}"
    return None


def test_fuzz_targets_run_without_crash(tmp_path: Path) -> None:
    reason = _missing(tmp_path)
    if reason:
        pytest.skip(reason)
    corpus = sorted(p.relative_to(REPO_ROOT) for p in (REPO_ROOT / "fuzz/corpus").rglob("*"))
    status, out = run_group(
        [
            "make",
            "-s",
            "-C",
            str(REPO_ROOT),
            "fuzz",
            f"FUZZ_TIME={FUZZ_TIME}",
            f"FUZZ_DIR={tmp_path / 'fuzz'}",
        ],
        env=clean_env(),
        timeout=900,
    )
    runs = {m["target"]: m for m in LINE.finditer(out)}
    want = {"fuzz_hello", "fuzz_frames", "fuzz_relay_frame"}
    if (REPO_ROOT / "build/openmpi/lib/libmultilane.a").exists():
        want.add("fuzz_tcp_frame")
    assert want <= set(runs), f"no result line for {sorted(want - set(runs))}\n{out[-4000:]}"
    for target, m in runs.items():
        assert m["crashes"] == "0", f"{target} crashed\n{out[-4000:]}"
        assert m["execs"] != "?" and int(m["execs"]) > 0, f"{target} ran nothing\n{out[-4000:]}"
        assert int(m["secs"]) >= FUZZ_TIME - 1, f"{target} stopped early\n{out[-4000:]}"
    assert status == 0, out[-4000:]
    # the runs worked on copies: the committed seeds are as they were
    assert (
        sorted(p.relative_to(REPO_ROOT) for p in (REPO_ROOT / "fuzz/corpus").rglob("*")) == corpus
    )
