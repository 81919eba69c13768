"""A live test bed as launchers and `check` see it: hosts, the agent, and the delay lines'
counters (read with SIGUSR1)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..context import Context
from .state import State, load_state, state_dir
from .system import Commander, TestbedError, is_ours, namespace_pids, stop_processes

STATS_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class HostInfo:
    """One host of a live test bed."""

    name: str
    site: str
    namespace: str
    address: str
    interface: str  # the emulated interface inside the host (e.g. for btl_tcp_if_include)


class Testbed:
    """Read access to the live test bed recorded in the state folder."""

    __test__ = False  # not a pytest class

    def __init__(self, state: State) -> None:
        self.state = state

    @classmethod
    def load(cls, ctx: Context) -> Testbed | None:
        """The live test bed, or None when none is up."""
        state = load_state(state_dir(ctx.env))
        return None if state is None else cls(state)

    @property
    def agent(self) -> Path:
        """`agent HOST COMMAND...` runs COMMAND (joined, by /bin/sh) inside HOST, like ssh."""
        return self.state.agent

    @property
    def hosts(self) -> tuple[HostInfo, ...]:
        """Every host, site by site."""
        return tuple(
            HostInfo(h["name"], h["site"], h["namespace"], h["address"], h["interface"])
            for h in self.state.hosts
        )

    def host(self, name: str) -> HostInfo:
        """The host called `name` (or with that address)."""
        record = self.state.host(name)
        return next(h for h in self.hosts if h.name == record["name"])

    def exec_argv(self, host: str, argv: Sequence[str]) -> list[str]:
        """The argument list that runs `argv` (exactly these words) inside `host`."""
        self.state.host(host)
        return [str(self.agent), host, shlex.join(["exec", *argv])]

    def delaylines(self) -> list[dict[str, Any]]:
        """The recorded delay-line processes, each with `alive`."""
        return [
            {**p, "alive": is_ours(p["pid"], p["start_time"])}
            for p in self.state.processes
            if p["role"] == "delayline"
        ]

    def link_stats(self) -> dict[str, dict[str, Any]]:
        """The counters of every delay line, by WAN link name: {"ab": {...}, "ba": {...}}.

        Sends SIGUSR1 and waits for the stats file to be rewritten; TestbedError when a delay
        line is gone or does not answer (its bytes can then not be proven)."""
        stats = {}
        for proc in self.delaylines():
            link = proc["link"]
            path = Path(next(w["stats"] for w in self.state.wan if w["name"] == link))
            if not proc["alive"]:
                raise TestbedError(f"the delay line of link {link} (pid {proc['pid']}) is gone")
            before = path.stat().st_mtime_ns if path.exists() else 0
            sent = time.monotonic()
            os.kill(proc["pid"], signal.SIGUSR1)
            while True:
                if path.exists() and path.stat().st_mtime_ns != before:
                    try:
                        stats[link] = json.loads(path.read_text())
                        break
                    except ValueError:
                        pass  # the writer renames atomically; retry on a partial read anyway
                if time.monotonic() - sent > STATS_TIMEOUT_S:
                    raise TestbedError(f"the delay line of link {link} wrote no stats to {path}")
                time.sleep(0.02)
        return stats

    def stop_host_processes(self) -> list[int]:
        """Stop what still runs inside the hosts besides the recorded processes (after a
        failed run: an MPI daemon whose launcher is gone and whose link is cut would spin
        on forever); the PIDs stopped."""
        recorded = {p["pid"] for p in self.state.processes}
        cmd = Commander.from_env({})
        pids = [
            pid
            for host in self.hosts
            for pid in namespace_pids(host.namespace, cmd)
            if pid not in recorded
        ]
        return stop_processes(pids)

    def to_json(self) -> dict[str, Any]:
        """What `testbed status --json` prints."""
        return {
            "up": True,
            "complete": self.state.complete,
            "prefix": self.state.prefix,
            "scenario": self.state.scenario,
            "state_file": str(self.state.path),
            "agent": str(self.agent),
            "wan_mode": self.state.wan_mode,
            "mtu": self.state.mtu,
            "hosts": [h.__dict__ for h in self.hosts],
            "wan": self.state.wan,
            "processes": [
                {**p, "alive": is_ours(p["pid"], p["start_time"])} for p in self.state.processes
            ],
            "namespaces": [n["name"] for n in self.state.namespaces],
        }
