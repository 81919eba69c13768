"""Where things live: the source tree, build folders, results."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from .errors import UsageError

ROOT_ENV = "MULTILANE_ROOT"


def _is_root(path: Path) -> bool:
    return (path / "CMakeLists.txt").is_file() and (path / "scenarios").is_dir()


def find_root(env: Mapping[str, str] | None = None) -> Path:
    """The project root: $MULTILANE_ROOT, else the first parent of this package that holds
    CMakeLists.txt and scenarios/."""
    env = os.environ if env is None else env
    given = env.get(ROOT_ENV)
    if given:
        root = Path(given).resolve()
        if not _is_root(root):
            raise UsageError(f"{ROOT_ENV}={given} is not a Multilane source tree")
        return root
    for parent in Path(__file__).resolve().parents:
        if _is_root(parent):
            return parent
    raise UsageError(f"cannot find the Multilane source tree; set {ROOT_ENV}=/path/to/multilane")


def build_dir(root: Path, mpi: str) -> Path:
    """The CMake build folder for one MPI (build/openmpi, build/mpich, build/user)."""
    return root / "build" / mpi


def program_path(root: Path, mpi: str, program: str) -> Path:
    """A built executable of one MPI's build folder."""
    return build_dir(root, mpi) / "bin" / program


def deps_prefix(root: Path, mpi: str) -> Path:
    """The prefix `make deps` installs a pinned MPI into."""
    return root / ".deps" / mpi


def default_results_dir(root: Path) -> Path:
    """Where results go unless --results says otherwise."""
    return root / "results"


def display(path: Path, base: Path | None = None) -> str:
    """A path relative to `base` (default: the working directory) when it lies below it."""
    base = Path.cwd() if base is None else base
    try:
        return str(path.resolve().relative_to(base.resolve()))
    except ValueError:
        return str(path)
