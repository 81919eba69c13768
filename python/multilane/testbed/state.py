"""The state file of a live test bed: every object is recorded *before* it is created, so
that `down` (or the automatic teardown of a failed `up`) removes exactly what exists."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .system import TestbedError

DIR_ENV = "MULTILANE_TESTBED_DIR"
DEFAULT_DIR = Path("/run/multilane/testbed")
STATE_FILE = "state.json"
SCHEMA = "multilane-testbed"
VERSION = 1


def state_dir(env: Mapping[str, str]) -> Path:
    """Where the state file, agent, logs and delay-line stats live."""
    return Path(env.get(DIR_ENV) or DEFAULT_DIR)


def new_prefix(taken: list[str]) -> str:
    """A fresh `mln<4 hex>-` prefix that no existing namespace starts with."""
    for _ in range(100):
        prefix = f"mln{secrets.token_hex(2)}-"
        if not any(name.startswith(prefix) for name in taken):
            return prefix
    raise TestbedError("cannot find a free namespace prefix")  # pragma: no cover


@dataclass
class State:
    """The record of one test bed; `save()` after every change (atomic rename)."""

    directory: Path
    prefix: str
    scenario: str
    wan_mode: str = "delayline"  # or "bridge" (stand-in without delay, rate or loss)
    complete: bool = False
    mtu: int = 1500
    variant: str = "direct"  # "private" when a site is private (topology.Network.variant)
    sites: list[dict[str, Any]] = field(default_factory=list)  # name, private, subnet
    namespaces: list[dict[str, Any]] = field(default_factory=list)
    links: list[dict[str, Any]] = field(default_factory=list)
    hosts: list[dict[str, Any]] = field(default_factory=list)
    wan: list[dict[str, Any]] = field(default_factory=list)
    processes: list[dict[str, Any]] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    host_sysctls: list[dict[str, str]] = field(default_factory=list)  # root-namespace changes

    @property
    def path(self) -> Path:
        """The state file."""
        return self.directory / STATE_FILE

    @property
    def agent(self) -> Path:
        """The launcher agent: `agent HOST CMD...` runs CMD inside HOST."""
        return self.directory / "agent"

    def to_json(self) -> dict[str, Any]:
        """The state file's content."""
        doc = {k: v for k, v in self.__dict__.items() if k != "directory"}
        return {"schema": SCHEMA, "version": VERSION, **doc}

    def save(self) -> None:
        """Write the state file atomically."""
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=1) + "\n")
        os.replace(tmp, self.path)

    def file(self, name: str) -> Path:
        """A file under the state folder, recorded so that `down` removes it."""
        path = self.directory / name
        if str(path) not in self.files:
            self.files.append(str(path))
            self.save()
        return path

    def host(self, name: str) -> dict[str, Any]:
        """The record of host `name`, or with that address (a front-end's WAN-side one too);
        UsageError when there is none."""
        for host in self.hosts:
            if name in (host["name"], host["address"], host.get("wan_address")):
                return host
        known = ", ".join(h["name"] for h in self.hosts)
        raise UsageError(f"no host '{name}' in the test bed (hosts: {known})")

    def remove_files(self) -> None:
        """Delete the recorded files and the state file, then the folder if it is empty."""
        for name in [*self.files, str(self.path)]:
            with contextlib.suppress(FileNotFoundError):
                Path(name).unlink()
        with contextlib.suppress(OSError):
            self.directory.rmdir()


def load_state(directory: Path) -> State | None:
    """The live test bed's state, or None when no test bed is up."""
    path = directory / STATE_FILE
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise TestbedError(f"{path}: unreadable state file ({exc}); remove it by hand") from None
    if doc.get("schema") != SCHEMA or doc.get("version") != VERSION:
        raise TestbedError(f"{path}: not a multilane test-bed state file")
    fields = {k: v for k, v in doc.items() if k not in ("schema", "version")}
    return State(directory=directory, **fields)
