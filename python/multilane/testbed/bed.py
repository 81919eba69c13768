"""A live test bed as launchers and `check` see it: hosts, sites, the agent, and the delay
lines' counters (read with SIGUSR1).

For launchers (e.g. `multilane grid run`): `Testbed.load(ctx)`, then

    bed.variant                  "private" (a site is private) or "direct"
    bed.sites                    SiteInfo per site, in file order
    bed.site("a")                SiteInfo: name, private, subnet,
                                   compute    (HostInfo: name, namespace, address, interface)
                                   frontends  (HostInfo: name, namespace, address = inside,
                                               interface = "eth0", wan_address,
                                               wan_interface = "eth1")
    bed.exec_argv("afe1", argv)  argv run inside a host (by name or either address)
    bed.set_delay(0.005)         every WAN link's one-way delay, both ways (None: the file's)
"""

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
from ..errors import UsageError
from .state import State, load_state, state_dir
from .system import Commander, TestbedError, is_ours, namespace_pids, stop_processes

STATS_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class HostInfo:
    """One host of a live test bed.  A front-end of a private site (role "frontend") has two
    interfaces: `interface`/`address` inside its site, `wan_interface`/`wan_address` on the
    WAN side; a compute host has only the first (the wan_ fields are None)."""

    name: str
    site: str
    namespace: str
    address: str
    interface: str  # the emulated interface inside the host (e.g. for btl_tcp_if_include)
    role: str = "compute"  # or "frontend"
    wan_address: str | None = None
    wan_interface: str | None = None


@dataclass(frozen=True)
class SiteInfo:
    """One site of a live test bed: its compute hosts (where a site's MPI ranks go) and, for
    a private site, its front-ends (where gateways go)."""

    name: str
    private: bool
    subnet: str  # the site's own /24 when private; the shared /16 otherwise
    compute: tuple[HostInfo, ...]
    frontends: tuple[HostInfo, ...]


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
        """Every host (compute hosts and front-ends), site by site."""
        return tuple(
            HostInfo(
                h["name"],
                h["site"],
                h["namespace"],
                h["address"],
                h["interface"],
                h.get("role", "compute"),
                h.get("wan_address"),
                h.get("wan_interface"),
            )
            for h in self.state.hosts
        )

    @property
    def variant(self) -> str:
        """ "private" when a site is private (no route between sites), else "direct"."""
        return self.state.variant

    @property
    def sites(self) -> tuple[SiteInfo, ...]:
        """Every site, in the scenario's order."""
        hosts = self.hosts
        records = self.state.sites or [
            {"name": n, "private": False, "subnet": ""}
            for n in dict.fromkeys(h.site for h in hosts)
        ]
        return tuple(
            SiteInfo(
                r["name"],
                r["private"],
                r["subnet"],
                tuple(h for h in hosts if h.site == r["name"] and h.role == "compute"),
                tuple(h for h in hosts if h.site == r["name"] and h.role == "frontend"),
            )
            for r in records
        )

    def site(self, name: str) -> SiteInfo:
        """The site called `name` (UsageError when there is none)."""
        for site in self.sites:
            if site.name == name:
                return site
        known = ", ".join(s.name for s in self.sites)
        raise UsageError(f"no site '{name}' in the test bed (sites: {known})")

    def set_delay(self, delay_s: float | None, link: str | None = None) -> list[str]:
        """Set the one-way delay of every WAN link (or of `link`), both ways, on the live test
        bed (None: the scenario's delays again) by restarting its delay line; a line per
        link.  Needs root."""
        from .build import set_delay  # noqa: PLC0415 - build imports more than a reader needs

        return set_delay(self.state, delay_s, link)

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
            "variant": self.state.variant,
            "sites": self.state.sites,
            "mtu": self.state.mtu,
            "hosts": [h.__dict__ for h in self.hosts],
            "wan": self.state.wan,
            "processes": [
                {**p, "alive": is_ours(p["pid"], p["start_time"])} for p in self.state.processes
            ],
            "namespaces": [n["name"] for n in self.state.namespaces],
        }
