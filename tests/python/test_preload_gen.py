"""The interposition layer's generated parts and what libmultilane-preload.so exports.

wrappers_gen.[ch] come from src/preload/wrappers.txt and the MPI Forum's API data
(pympistandard): they must be what the generator makes now.  The built library must export
only MPI_X / PMPI_X (and the MPIX_ extensions it guards, ULFM's), and never call through its
own exported names (a call to PMPI_Send from
inside the layer would come back into the layer): no relocation against a symbol it defines.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from conftest import BUILT_MPIS, REPO_ROOT

GEN = REPO_ROOT / "src" / "preload" / "gen_wrappers.py"


def test_generated_files_are_fresh() -> None:
    pytest.importorskip("pympistandard")
    if shutil.which("clang-format") is None:
        pytest.skip("clang-format is not installed (make setup installs it)")
    proc = subprocess.run(
        [sys.executable, str(GEN), "--check"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr


def test_spec_names_unknown_function_fails(tmp_path) -> None:
    pytest.importorskip("pympistandard")
    (tmp_path / "wrappers.txt").write_text("impl Send\nimpl Sendd\n")
    proc = subprocess.run(
        [sys.executable, str(GEN), str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert proc.returncode != 0
    assert "MPI_Sendd is not in the MPI standard" in proc.stderr


def _symbols(lib, *flags: str) -> list[str]:
    out = subprocess.run(["nm", "-D", *flags, str(lib)], capture_output=True, text=True, check=True)
    return [line.split()[-1] for line in out.stdout.splitlines() if line.strip()]


@pytest.mark.parametrize("mpi", BUILT_MPIS or ["openmpi"])
def test_exports_and_no_self_calls(mpi: str) -> None:
    lib = REPO_ROOT / "build" / mpi / "src" / "preload" / "libmultilane-preload.so"
    if not lib.exists():
        pytest.skip(f"{lib.relative_to(REPO_ROOT)} is not built: run make build")
    defined = set(_symbols(lib, "--defined-only"))
    wrapped = {s for s in defined if s.startswith(("MPI_", "PMPI_", "MPIX_Comm_", "PMPIX_Comm_"))}
    assert {"MPI_Send", "PMPI_Send", "MPI_Waitall", "PMPI_Waitall", "MPI_Bcast"} <= wrapped
    assert defined - wrapped <= {"_init", "_fini"}, sorted(defined - wrapped)
    relocs = subprocess.run(
        ["readelf", "-rW", str(lib)], capture_output=True, text=True, check=True
    ).stdout
    called = {
        line.split()[4]
        for line in relocs.splitlines()
        if ("JUMP_SLOT" in line or "GLOB_DAT" in line) and len(line.split()) > 4
    }
    assert not (called & wrapped), sorted(called & wrapped)
