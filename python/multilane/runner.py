"""Run one child in its own process group, stream its output line by line into a log file and
a callback, and on timeout kill that process group by its id (STYLE 18, after ReFrame's
``osext.run_command``)."""

from __future__ import annotations

import contextlib
import os
import resource
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import RunError

KILL_GRACE_S = 5.0  # between SIGTERM and SIGKILL
DRAIN_S = 2.0  # how long to read on after the child exits (its group may still hold the pipe)
WATCHDOG_S = 0.5


@dataclass(frozen=True)
class RunResult:
    """How a child ended."""

    returncode: int | None  # None when it had to be killed after a timeout or an abort
    timed_out: bool
    duration_s: float
    log_path: Path
    aborted: str = ""  # why the watchdog stopped it ('' if it did not)
    # CPU seconds (user, system) of the child and of every process it and its descendants
    # waited for (getrusage RUSAGE_CHILDREN before and after): the launcher, its daemons and
    # the ranks, whole run; not what outlived it, such as a daemon left behind.
    cpu_user_s: float = 0.0
    cpu_sys_s: float = 0.0

    @property
    def cpu_s(self) -> float:
        return self.cpu_user_s + self.cpu_sys_s


def _kill_group(pgid: int, sig: int) -> bool:
    """Signal the process group `pgid`; False when it no longer exists."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True


def _stop_group(proc: subprocess.Popen[bytes], pgid: int) -> None:
    """SIGTERM the group, wait, then SIGKILL whatever is left of it."""
    if not _kill_group(pgid, signal.SIGTERM):
        proc.wait()
        return
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=KILL_GRACE_S)
    _kill_group(pgid, signal.SIGKILL)
    proc.wait()


class _LineSplitter:
    """Turns chunks of bytes into complete text lines."""

    def __init__(self, on_line: Callable[[str], None] | None) -> None:
        self._buffer = b""
        self._on_line = on_line

    def feed(self, chunk: bytes) -> None:
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            self._emit(line)

    def close(self) -> None:
        if self._buffer:
            self._emit(self._buffer)
            self._buffer = b""

    def _emit(self, raw: bytes) -> None:
        if self._on_line is not None:
            self._on_line(raw.decode(errors="replace").rstrip("\r"))


@dataclass(frozen=True)
class Pumped:
    """How reading a child's output ended (pump_output)."""

    timed_out: bool  # the deadline came
    aborted: str  # the watchdog's reason, or ""
    leftovers: bool  # the child exited, yet some process of its group kept the pipe open


def pump_output(
    proc: subprocess.Popen[bytes],
    fd: int,
    *,
    start: float,
    deadline: float | None,
    watchdog: Callable[[], str] | None,
    on_chunk: Callable[[bytes], None],
) -> Pumped:
    """Reads `fd` (a pipe of proc's) into `on_chunk` until its end, the deadline, a reason from
    `watchdog` (asked about every WATCHDOG_S seconds while proc runs), or DRAIN_S seconds after
    proc exited while another process of its group still holds the pipe."""
    exited_at: float | None = None
    next_watch = start + WATCHDOG_S
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return Pumped(True, "", False)
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if watchdog is not None and exited_at is None and now >= next_watch:
                next_watch = now + WATCHDOG_S
                aborted = watchdog()
                if aborted:
                    return Pumped(False, aborted, False)
            if exited_at is not None and now - exited_at >= DRAIN_S:
                return Pumped(False, "", True)
            wait = 0.2 if deadline is None else max(0.0, min(0.2, deadline - now))
            if not sel.select(wait):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return Pumped(False, "", False)
            on_chunk(chunk)


def end_group(proc: subprocess.Popen[bytes], pgid: int, pumped: Pumped) -> None:
    """After pump_output: a child stopped (timeout, watchdog) or still running has its group
    stopped; one that exited leaving processes behind has them killed, by group id."""
    if pumped.timed_out or pumped.aborted or proc.poll() is None:
        _stop_group(proc, pgid)
    elif pumped.leftovers:
        _kill_group(pgid, signal.SIGKILL)
    proc.wait()


def run_streaming(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    timeout_s: float | None,
    log_path: Path,
    on_line: Callable[[str], None] | None = None,
    cwd: Path | None = None,
    watchdog: Callable[[], str] | None = None,
) -> RunResult:
    """Run `argv` (stdout and stderr merged) with the complete environment `env`.

    Every line goes to `log_path` and to `on_line`.  After `timeout_s` seconds the child's
    process group is sent SIGTERM, then SIGKILL.  `watchdog` is called about every
    WATCHDOG_S seconds while the child runs; a non-empty answer (the reason) stops the group
    the same way, e.g. when a process the run depends on has died."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    deadline = None if timeout_s is None else start + timeout_s
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    splitter = _LineSplitter(on_line)
    try:
        proc = subprocess.Popen(  # noqa: S603 - argument list, no shell
            list(argv),
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        raise RunError(f"cannot start {argv[0]}: {exc.strerror or exc}") from None
    pgid = proc.pid  # start_new_session: the child leads its own group
    assert proc.stdout is not None
    with log_path.open("wb") as log:

        def on_chunk(chunk: bytes) -> None:
            log.write(chunk)
            log.flush()
            splitter.feed(chunk)

        try:
            pumped = pump_output(
                proc,
                proc.stdout.fileno(),
                start=start,
                deadline=deadline,
                watchdog=watchdog,
                on_chunk=on_chunk,
            )
        except BaseException:
            _stop_group(proc, pgid)
            raise
        finally:
            splitter.close()
            proc.stdout.close()
    end_group(proc, pgid, pumped)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    timed_out, aborted = pumped.timed_out, pumped.aborted
    returncode = None if timed_out or aborted else proc.returncode
    return RunResult(
        returncode,
        timed_out,
        time.monotonic() - start,
        log_path,
        aborted,
        max(0.0, after.ru_utime - before.ru_utime),
        max(0.0, after.ru_stime - before.ru_stime),
    )
