"""The GPU programs (bench/gpu, docs/GPU.md) under both pinned MPIs: built wherever the CUDA
toolkit is, and well-behaved with or without a GPU.

Skipped with the reason when there is no CUDA toolkit (then nothing GPU is built) or no build
folder.  With the toolkit: `mln-gpu-transfer` is in build/<mpi>/bin and mln-matmul needs
cuBLAS; --help works; the cuda-aware test named on an MPI that is not CUDA-aware is refused
(exit 2, one line) on any machine.  Without a GPU a run on 2 ranks prints the skip line once
and exits 77; with one (`nvidia-smi -L` works) it runs at small sizes and passes, its result
records the devices and CUDA-awareness, and a flipped byte fails it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO_ROOT, clean_env, run_group
from multilane.launchers import launcher_for
from multilane.mpi import probe

pytestmark = [pytest.mark.mpi]

MPIS = ("openmpi", "mpich")
PROGRAM = "mln-gpu-transfer"
SKIP_EXIT = 77
SMALL = ["--sizes", "0,1,4K,64K,1M", "--chunk", "256K", "--reps", "2", "--max-iters", "5"]
REFUSAL = re.compile(
    r"^mln-gpu-transfer: error: cuda-aware: this MPI \(.+\) is not CUDA-aware "
    r"\((MPIX_Query_cuda_support\(\)|MPIX_GPU_query_support\(MPIX_GPU_SUPPORT_CUDA\)) = 0\); "
    r"choose tests host, staged, pipelined$",
    re.MULTILINE,
)


def _toolkit() -> str | None:
    """Where the CUDA toolkit is (the places CMake's FindCUDAToolkit looks), or None."""
    if Path("/usr/local/cuda/bin/nvcc").exists():
        return "/usr/local/cuda"
    nvcc = shutil.which("nvcc")
    return str(Path(nvcc).resolve().parent.parent) if nvcc else None


def _gpu() -> bool:
    """Whether this machine has a GPU the driver sees (no framework needed)."""
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        proc = subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return proc.returncode == 0 and "GPU " in proc.stdout


@pytest.fixture(scope="module", autouse=True)
def _need_toolkit() -> None:
    if _toolkit() is None:
        pytest.skip("no CUDA toolkit (/usr/local/cuda, nvcc on PATH): no GPU program is built")


def _build(mpi: str) -> Path:
    """build/<mpi>/bin; the test skips when the build folder is missing."""
    bindir = REPO_ROOT / "build" / mpi / "bin"
    if not bindir.is_dir():
        pytest.skip(f"build/{mpi} is missing: run make build")
    return bindir


def _program(mpi: str) -> Path:
    path = _build(mpi) / PROGRAM
    log = REPO_ROOT / "build" / f"{mpi}.configure.log"
    assert path.exists(), (
        f"the CUDA toolkit is at {_toolkit()} but build/{mpi}/bin/{PROGRAM} is not built "
        f"(see the 'multilane: ... CUDA' line of {log})"
    )
    return path


def _launch(mpi: str, args: list[str], np: int = 2, timeout: float = 180) -> tuple[int, str]:
    """`mln-gpu-transfer ARGS` on `np` local ranks over shared memory: (exit status, output)."""
    cmd = launcher_for(mpi, REPO_ROOT / ".deps" / mpi).command(
        [str(_program(mpi)), *args], np, "shm", ncpus=os.cpu_count() or 1, euid=os.geteuid()
    )
    return run_group(cmd.argv, {**clean_env(), **cmd.env}, timeout)


@pytest.mark.parametrize("mpi", MPIS)
def test_built(mpi: str) -> None:
    _program(mpi)
    matmul = _build(mpi) / "mln-matmul"
    if not matmul.exists() or shutil.which("readelf") is None:
        return  # mln-matmul is checked where it is built (and readelf can tell)
    dynamic = subprocess.run(
        ["readelf", "-d", str(matmul)], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    assert "libcublas" in dynamic, f"mln-matmul is not linked to cuBLAS:\n{dynamic}"


@pytest.mark.parametrize("mpi", MPIS)
def test_help(mpi: str) -> None:
    status, out = _launch(mpi, ["--help"], np=1)
    assert status == 0, out[-3000:]
    assert out.startswith("usage: mln-gpu-transfer [options]"), out[:500]
    for test in ("host", "cuda-aware", "staged", "pipelined"):
        assert re.search(rf"^  {test} +{test.replace('-', '_')}_MBps \[MB/s\]", out, re.M), test
    assert "--chunk SIZE" in out and "--slots N" in out


@pytest.mark.parametrize("mpi", MPIS)
def test_cuda_aware_refused(mpi: str) -> None:
    """Named in --tests on an MPI that is not CUDA-aware: a usage error, GPU or not (it is
    checked before the GPUs are looked for)."""
    _program(mpi)
    aware = probe(mpi, REPO_ROOT / ".deps" / mpi).cuda_aware
    if aware != "no":
        pytest.skip(f"`multilane mpi list` says CUDA-aware '{aware}' for {mpi}, not 'no'")
    status, out = _launch(mpi, ["--tests", "cuda-aware,staged", "--sizes", "1K"])
    assert status == 2, out[-3000:]
    assert len(REFUSAL.findall(out)) == 1, out[-3000:]


@pytest.mark.parametrize("mpi", MPIS)
def test_no_gpu_skips(mpi: str) -> None:
    _program(mpi)
    if _gpu():
        pytest.skip("a GPU is present: test_gpu_run runs the program instead")
    status, out = _launch(mpi, SMALL)
    assert status == SKIP_EXIT, out[-3000:]
    skips = re.findall(r"^mln-gpu-transfer: skipped: no GPU \(.+\)$", out, re.MULTILINE)
    assert len(skips) == 1, out[-3000:]  # rank 0 says it, once; no rank hangs or fails
    assert "mln-gpu-transfer: error" not in out, out[-3000:]


@pytest.mark.parametrize("mpi", MPIS)
def test_gpu_run(mpi: str, tmp_path: Path) -> None:
    _program(mpi)
    if not _gpu():
        pytest.skip("no GPU (nvidia-smi -L fails): test_no_gpu_skips covers this machine")
    result = tmp_path / "gpu.json"
    status, out = _launch(mpi, [*SMALL, "--json", str(result)])
    assert status == 0, out[-3000:]
    assert "# verdict: PASS" in out, out[-3000:]
    doc: dict[str, Any] = json.loads(result.read_text())
    assert doc["benchmark"] == "gpu-transfer" and doc["status"] == "pass"
    params = doc["provenance"]["params"]
    assert params["cuda_aware"] in ("yes", "no", "unknown")
    assert params["devices"].startswith("rank 0: GPU "), params["devices"]
    assert (params["chunk"], params["slots"]) == (256 * 1024, 2)
    measured = ["host_MBps", "staged_MBps", "pipelined_MBps"]
    if params["cuda_aware"] == "yes":
        measured.insert(1, "cuda_aware_MBps")
    else:
        assert "mln-gpu-transfer: cuda-aware: " in out and "test cuda-aware skipped" in out
    assert [r["bytes"] for r in doc["rows"]] == [0, 1, 4096, 65536, 1 << 20]
    for row in doc["rows"]:
        assert [k for k in row if k.endswith("_MBps")] == measured, row
        assert row["errors"] == 0
    # the check sees what crossed: one flipped byte on each device path fails the run
    status, out = _launch(
        mpi, ["--tests", "staged,pipelined", "--sizes", "64K", "--chunk", "16K",
              "--reps", "2", "--inject-error", "64K"],
    )  # fmt: skip
    assert status == 1, out[-3000:]
    assert "# verdict: FAIL" in out
    for test in ("staged", "pipelined"):
        assert f"wrong bytes received at 65536 bytes in test {test}" in out, out[-3000:]
