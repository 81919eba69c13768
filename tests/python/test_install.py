"""`make install` output: header, libraries, CMake package and pkg-config file work downstream.

Installs each MPI's build folder into a temporary prefix, then builds a small program three
ways (find_package shared, find_package static, mpicc + pkg-config) and runs it.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONSUMER = Path(__file__).resolve().parent / "consumer"
MPIS = [m for m in ("openmpi", "mpich") if (ROOT / "build" / m / "CMakeCache.txt").exists()]

pytestmark = pytest.mark.slow


def _run(argv: list[str], env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, f"{argv} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.mark.skipif(not MPIS, reason="no build folder: run `make build` first")
@pytest.mark.parametrize("mpi", MPIS or ["none"])
def test_install_and_consume(mpi: str, tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    mpicc = str(ROOT / ".deps" / mpi / "bin" / "mpicc")
    _run(["cmake", "--install", str(ROOT / "build" / mpi), "--prefix", str(prefix)])
    lib = prefix / "lib"
    for rel in (
        "include/multilane.h",
        "lib/libmultilane.so",
        "lib/libmultilane.a",
        "lib/cmake/multilane/multilaneConfig.cmake",
        "lib/pkgconfig/multilane.pc",
        "bin/mln-config",
        "bin/mln-pt2pt",
    ):
        assert (prefix / rel).exists(), rel

    # find_package(multilane), shared and static.
    build = tmp_path / "build"
    _run(
        [
            "cmake",
            "-S",
            str(CONSUMER),
            "-B",
            str(build),
            f"-DCMAKE_PREFIX_PATH={prefix}",
            f"-DMPI_C_COMPILER={mpicc}",
        ]
    )
    _run(["cmake", "--build", str(build)])
    for exe in ("app_shared", "app_static"):
        assert "init: success" in _run([str(build / exe)])

    # mpicc + pkg-config (the .pc file is relocatable).
    env = dict(os.environ, PKG_CONFIG_PATH=str(lib / "pkgconfig"))
    flags = _run(["pkg-config", "--cflags", "--libs", "multilane"], env=env).split()
    app = tmp_path / "app_pc"
    _run([mpicc, str(CONSUMER / "app.c"), "-o", str(app), *flags])
    assert "init: success" in _run([str(app)])

    # Installed programs find their library through their relative RPATH.
    assert _run([str(prefix / "bin" / "mln-config"), "--version"]).startswith("multilane ")
    shutil.rmtree(prefix)
