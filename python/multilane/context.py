"""The explicit state every command works with (no module-level mutable state)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from . import paths
from .errors import UsageError


@dataclass(frozen=True)
class Context:
    """Project root, caller environment and facts about this machine."""

    root: Path
    env: Mapping[str, str]
    ncpus: int
    euid: int
    out: TextIO = field(default=sys.stdout)

    @classmethod
    def from_environment(cls, out: TextIO | None = None, need_root: bool = True) -> Context:
        """The context of the running process; without `need_root` a missing source tree is
        no error (root is then the working directory)."""
        env = dict(os.environ)
        try:
            root = paths.find_root(env)
        except UsageError:
            if need_root:
                raise
            root = Path.cwd()
        return cls(
            root=root,
            env=env,
            ncpus=os.cpu_count() or 1,
            euid=os.geteuid(),
            out=sys.stdout if out is None else out,
        )

    def say(self, text: str = "") -> None:
        """Print one line of progress, flushed."""
        print(text, file=self.out, flush=True)
