"""Running `ip`, `tc`, `sysctl` and `ethtool`: argument lists only, and a failure raises with
the command and its stderr.  Processes are identified by PID *and* start time, so that a PID
reused by the system is never signalled."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import MultilaneError, UsageError

FAULT_ENV = "MULTILANE_TESTBED_FAULT"  # test hook: the Nth system command gets a bad argument
COMMAND_TIMEOUT_S = 30.0
NETNS_DIR = Path("/run/netns")


class TestbedError(MultilaneError):
    """A test-bed operation failed (exit status 1)."""

    __test__ = False  # not a pytest class


@dataclass
class Commander:
    """Runs system commands; counts them for the fault-injection hook of the tests."""

    env: Mapping[str, str]
    count: int = 0

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Commander:
        """A commander with the caller's environment."""
        return cls(env=env)

    def run(self, argv: Sequence[str], timeout_s: float = COMMAND_TIMEOUT_S) -> str:
        """Run `argv`; its stdout, or TestbedError naming the command and its stderr."""
        self.count += 1
        argv = list(argv)
        fault = self.env.get(FAULT_ENV, "")
        if fault.isdigit() and int(fault) == self.count:
            argv.append("mln-injected-fault")
        try:
            proc = subprocess.run(  # noqa: S603 - argument list, no shell
                argv, capture_output=True, text=True, timeout=timeout_s, check=False
            )
        except FileNotFoundError:
            raise TestbedError(f"{argv[0]} not found: run make system") from None
        except subprocess.TimeoutExpired:
            raise TestbedError(f"`{shlex.join(argv)}` did not finish in {timeout_s:g} s") from None
        if proc.returncode != 0:
            detail = " ".join((proc.stderr or proc.stdout).split()) or f"status {proc.returncode}"
            raise TestbedError(f"`{shlex.join(argv)}` failed: {detail}")
        return proc.stdout


def netns_exists(name: str) -> bool:
    """Whether the named network namespace exists (/run/netns/NAME)."""
    return (NETNS_DIR / name).exists()


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()  # fields from 3 (state) on


def start_time(pid: int) -> int | None:
    """The start time of process `pid` in clock ticks since boot, None if it is gone."""
    fields = _stat_fields(pid)
    return None if fields is None else int(fields[19])


def is_ours(pid: int, started: int) -> bool:
    """Whether `pid` is still the live process that started at `started` (not a zombie)."""
    fields = _stat_fields(pid)
    return fields is not None and int(fields[19]) == started and fields[0] not in ("Z", "X")


def stop_process(pid: int, started: int, grace_s: float = 3.0) -> None:
    """SIGTERM the process if it is still ours, then SIGKILL after `grace_s`."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not is_ours(pid, started):
            break
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)  # reap it when it is our own child
            if not is_ours(pid, started):
                return
            time.sleep(0.05)


def spawn(argv: Sequence[str], log: Path) -> subprocess.Popen[bytes]:
    """Start a daemon in its own session, stdout and stderr into `log` (truncated)."""
    with log.open("wb") as out:
        try:
            return subprocess.Popen(  # noqa: S603 - argument list, no shell
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            raise TestbedError(f"cannot start {shlex.join(argv)}: {exc.strerror or exc}") from None


def stop_processes(pids: Sequence[int], grace_s: float = 3.0) -> list[int]:
    """SIGTERM every process of `pids` (each checked by its start time, so a reused PID is
    never hit), SIGKILL those left after `grace_s`; the PIDs that were stopped."""
    targets = [(pid, started) for pid in pids if (started := start_time(pid)) is not None]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = [(pid, st) for pid, st in targets if is_ours(pid, st)]
        for pid, _ in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while alive and time.monotonic() < deadline:
            time.sleep(0.05)
            alive = [(pid, st) for pid, st in alive if is_ours(pid, st)]
        if not alive:
            break
    return [pid for pid, _ in targets]


def namespace_pids(name: str, cmd: Commander) -> list[int]:
    """The processes inside our network namespace `name` (`ip netns pids`)."""
    if not netns_exists(name):
        return []
    return [int(p) for p in cmd.run(["ip", "netns", "pids", name]).split()]


def require_root(euid: int) -> None:
    """UsageError unless running as root."""
    if euid != 0:
        raise UsageError("the test bed needs root (network namespaces): run it with sudo")
