"""The processes of one `multilane grid run` (grid.py plans them): start every gateway and
wait for its ready line, start each site's MPI job, watch them all, stop them all.

Every child runs in its own process group and is stopped by that group's id: SIGTERM, then
SIGKILL after a grace period (STYLE 18).  The run's secret goes into the children's
environment only.  Gateways' output is read through pipes (the ready line; the last lines of
stderr say why one failed); the jobs' output is the user's: passed straight through, or with
--label read line by line and prefixed with the site's name."""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import BinaryIO

from .external import exit_status

# The contract with the ranks (src/relay/relay.h) and the gateways (mln-gateway).
SITES_VAR, SITE_VAR = "MLN_GRID_SITES", "MLN_GRID_SITE"
GATEWAYS_VAR, SECRET_VAR = "MLN_GRID_GATEWAYS", "MLN_GRID_SECRET"
GRID_VARS = (SITES_VAR, SITE_VAR, GATEWAYS_VAR, SECRET_VAR)
READY = re.compile(r"ready site=(\S+) trunk=([0-9]+) listen=(\S+) wan=(\S+)\Z")
SUMMARY_MARK = " info: summary: "  # a gateway's line at exit with --log info (docs/RELAY.md)
ERROR_WORDS = re.compile(r"\b(error|fatal|failed|cannot)\b", re.IGNORECASE)

START_TIMEOUT_S = 20.0
STOP_GRACE_S = 3.0
LEADER_GRACE_S = 1.0  # a launcher's own stop of its ranks, before its group is signalled
FAIL_SETTLE_S = 0.5  # after a gateway failure: time for the site job that caused it to end
END_GRACE_S = 2.0  # after a failure: the other sites' jobs end on their own (their lines)
DRAIN_S = 2.0
TAIL_LINES = 20
WATCHDOG_S = 0.5
EXIT_TIMEOUT = 124  # as timeout(1)
EXIT_TERMINATED = 143  # 128 + SIGTERM


class GridFailure(Exception):
    """Something the run started failed: `line` names the site and the cause; `status` is
    what the run returns."""

    def __init__(self, line: str, status: int = 1) -> None:
        super().__init__(line)
        self.line, self.status = line, status


@dataclass(frozen=True)
class GatewayStart:
    """One gateway to start: site `site`'s end of trunk `trunk`."""

    site: str
    trunk: int
    argv: tuple[str, ...]


@dataclass(frozen=True)
class JobStart:
    """One site's MPI job: its launcher's argument list and environment, to which the run
    adds MLN_GRID_GATEWAYS (from the ready lines) and the secret."""

    site: str
    argv: tuple[str, ...]
    env: Mapping[str, str]
    program: str  # the program's name, for the failure line
    launcher: str  # the launcher's name (mpirun), for the failure line


@dataclass(frozen=True)
class RunOptions:
    """How the run treats its children."""

    label: bool = False  # prefix each line of a job's output with [SITE]
    timeout_s: float | None = None  # the whole run
    start_timeout_s: float = START_TIMEOUT_S  # every gateway's ready line
    echo_gateways: bool = False  # copy the gateways' lines to stderr
    grace_s: float = STOP_GRACE_S
    # Instead of stdout/stderr: every line of the jobs (and of the gateways, besides their
    # ready lines) as on_line(role, site, text), role "job" or "gateway" (multilane run: the
    # log file and the progress echo).
    on_line: Callable[[str, str, str], None] | None = None
    # Asked about every WATCHDOG_S seconds while the jobs run: a non-empty answer (why) stops
    # the run, e.g. the test bed's delay line died.
    watchdog: Callable[[], str] | None = None


@dataclass(eq=False)
class Child:
    """A process the run started, leader of its own process group."""

    role: str  # "gateway" or "job"
    site: str
    trunk: int  # -1 for a job
    proc: subprocess.Popen[bytes]
    started_s: float  # since the run's start
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=TAIL_LINES))
    ready_s: float | None = None
    listen: str = ""
    ended_s: float | None = None
    open_pipes: int = 0
    summary: str = ""  # a gateway's summary line at exit (--log info), as it printed it

    @property
    def last_line(self) -> str:
        """Why it ended, as it said: its last line that says error (a summary may follow
        one), else its last non-empty line, or ''."""
        lines = [line.strip() for line in self.tail if line.strip()]
        errors = [line for line in lines if ERROR_WORDS.search(line)]
        return (errors or lines or [""])[-1]

    @property
    def exit_code(self) -> int | None:
        """As a shell says it (128 + S when killed by signal S); None while it runs."""
        code = self.proc.returncode
        return None if code is None else exit_status(code)


def signal_group(pgid: int, sig: int) -> None:
    """Send `sig` to the process group `pgid`, if it still exists."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


class GridRun:
    """Starts, watches and stops the gateways and jobs of one run (GridRun.run)."""

    def __init__(
        self,
        gateways: Sequence[GatewayStart],
        jobs: Sequence[JobStart],
        env: Mapping[str, str],
        options: RunOptions,
    ) -> None:
        self.gateway_starts, self.job_starts = tuple(gateways), tuple(jobs)
        self.env, self.options = env, options
        self.children: list[Child] = []
        self.selector = selectors.DefaultSelector()
        self.start = time.monotonic()
        limit = options.timeout_s
        self.deadline = None if limit is None else self.start + limit
        self.warnings: list[str] = []
        self.failure = ""

    # reading ---------------------------------------------------------------------------

    def _watch(self, child: Child, stream: BinaryIO | None, kind: str) -> None:
        if stream is None:
            return
        os.set_blocking(stream.fileno(), False)
        child.open_pipes += 1
        self.selector.register(stream, selectors.EVENT_READ, (child, kind, [b""]))

    def pump(self, wait_s: float) -> None:
        """Read what the children wrote within `wait_s` seconds, line by line."""
        if not self.selector.get_map():
            time.sleep(wait_s)
            return
        for key, _ in self.selector.select(wait_s):
            child, kind, pending = key.data
            try:
                chunk = os.read(key.fd, 65536)
            except BlockingIOError:
                continue
            if not chunk:
                self.selector.unregister(key.fileobj)
                key.fileobj.close()  # type: ignore[union-attr]
                child.open_pipes -= 1
                if pending[0]:
                    self._line(child, kind, pending[0])
                continue
            *lines, pending[0] = (pending[0] + chunk).split(b"\n")
            for line in lines:
                self._line(child, kind, line)

    def _line(self, child: Child, kind: str, raw: bytes) -> None:
        if child.role == "job" and self.options.on_line is not None:
            self.options.on_line("job", child.site, raw.decode(errors="replace").rstrip("\r"))
            return
        if child.role == "job":  # --label
            out = sys.stdout.buffer if kind == "stdout" else sys.stderr.buffer
            out.write(b"[" + child.site.encode() + b"] " + raw + b"\n")
            out.flush()
            return
        text = raw.decode(errors="replace").rstrip("\r")
        match = READY.match(text) if kind == "stdout" and child.ready_s is None else None
        if match and match.group(1) == child.site and int(match.group(2)) == child.trunk:
            child.ready_s = time.monotonic() - self.start
            child.listen = match.group(3)
            return
        child.tail.append(text)
        if SUMMARY_MARK in text:
            child.summary = text
        if self.options.on_line is not None:
            self.options.on_line("gateway", child.site, text)
        elif self.options.echo_gateways:
            print(text, file=sys.stderr, flush=True)  # mln-gateway[SITE/T] names itself

    def drain(self, child: Child, limit_s: float = DRAIN_S) -> None:
        """Read on until `child`'s pipes are closed, at most `limit_s` seconds."""
        self.drain_all([child], limit_s)

    def drain_all(self, children: Sequence[Child], limit_s: float = DRAIN_S) -> None:
        """Read on until every pipe of `children` is closed, at most `limit_s` seconds in all
        (a launcher that exited may have left its ranks' last lines in the pipe)."""
        until = time.monotonic() + limit_s
        while any(c.open_pipes for c in children) and time.monotonic() < until:
            self.pump(0.05)

    # starting --------------------------------------------------------------------------

    def spawn(
        self, role: str, site: str, trunk: int, argv: Sequence[str], env: Mapping[str, str]
    ) -> Child:
        """Start one child in its own process group (GridFailure when it cannot start)."""
        piped = role == "gateway" or self.options.label or self.options.on_line is not None
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            proc = subprocess.Popen(  # noqa: S603 - argument list, no shell
                list(argv),
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if piped else None,
                stderr=subprocess.PIPE if piped else None,
                start_new_session=True,
            )
        except OSError as exc:
            what = f"gateway {trunk} did not start" if role == "gateway" else "cannot start"
            raise GridFailure(f"site {site}: {what}: {argv[0]}: {exc.strerror or exc}") from None
        child = Child(role, site, trunk, proc, time.monotonic() - self.start)
        self.children.append(child)
        self._watch(child, proc.stdout, "stdout")  # type: ignore[arg-type]
        self._watch(child, proc.stderr, "stderr")  # type: ignore[arg-type]
        return child

    def _check_deadline(self) -> None:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise GridFailure(
                f"timed out after {self.options.timeout_s:g} s: every site's job and gateway "
                "stopped",
                EXIT_TIMEOUT,
            )

    def start_gateways(self, secret: str) -> list[Child]:
        """Every gateway, then every ready line; GridFailure for one that exits first or
        stays silent past the start timeout."""
        env = {**self.env, SECRET_VAR: secret}
        gateways = [
            self.spawn("gateway", g.site, g.trunk, g.argv, env) for g in self.gateway_starts
        ]
        until = time.monotonic() + self.options.start_timeout_s
        while True:
            waiting = [g for g in gateways if g.ready_s is None]
            if not waiting:
                return gateways
            for g in waiting:
                if g.proc.poll() is not None:
                    self.drain(g)  # its ready line may still be in the pipe
                    if g.ready_s is not None:
                        continue  # it started: watch() judges its exit
                    why = g.last_line or f"it exited with status {g.exit_code}"
                    raise GridFailure(f"site {g.site}: gateway {g.trunk} did not start: {why}")
            if time.monotonic() >= until:
                g = waiting[0]
                why = f": {g.last_line}" if g.last_line else ""
                raise GridFailure(
                    f"site {g.site}: gateway {g.trunk} did not start: no ready line within "
                    f"{self.options.start_timeout_s:g} s{why}"
                )
            self._check_deadline()
            self.pump(0.05)

    def start_jobs(self, gateways: Sequence[Child], secret: str) -> list[Child]:
        """Each site's MPI job, with its site's gateways' listen addresses (trunk order)."""
        jobs = []
        for job in self.job_starts:
            mine = sorted((g for g in gateways if g.site == job.site), key=lambda g: g.trunk)
            listens = ",".join(g.listen for g in mine)
            env = {**job.env, GATEWAYS_VAR: listens, SECRET_VAR: secret}
            jobs.append(self.spawn("job", job.site, -1, job.argv, env))
        return jobs

    # watching --------------------------------------------------------------------------

    def _job_failure(self, jobs: Sequence[Child]) -> GridFailure | None:
        for job in jobs:
            if job.proc.poll() not in (None, 0):
                start = next(j for j in self.job_starts if j.site == job.site)
                status = job.exit_code or 1
                return GridFailure(
                    f"site {job.site}: its job ({start.program} under {start.launcher}) "
                    f"exited with status {status}",
                    status,
                )
        return None

    def watch(self, gateways: Sequence[Child], jobs: Sequence[Child]) -> None:
        """Until every job has exited 0; GridFailure for the first job that fails, or a
        gateway that fails (non-zero) while its site's job runs, or a reason from the
        watchdog."""
        next_watch = time.monotonic() + WATCHDOG_S
        while True:
            self.pump(0.1)
            if self.options.watchdog is not None and time.monotonic() >= next_watch:
                next_watch = time.monotonic() + WATCHDOG_S
                why = self.options.watchdog()
                if why:
                    raise GridFailure(f"stopped: {why}")
            now = time.monotonic() - self.start
            for child in self.children:
                if child.ended_s is None and child.proc.poll() is not None:
                    child.ended_s = now
            failed = self._job_failure(jobs)
            if failed is not None:
                raise failed
            for g in gateways:
                if g.proc.returncode in (None, 0):
                    continue
                job = next(j for j in jobs if j.site == g.site)
                if job.proc.returncode is not None:  # after its site's job: a warning
                    continue
                settle = time.monotonic() + FAIL_SETTLE_S  # a job's failure as the cause?
                while time.monotonic() < settle:
                    self.pump(0.05)
                    failed = self._job_failure(jobs)
                    if failed is not None:
                        raise failed
                self.drain(g, 0.5)
                why = f": {g.last_line}" if g.last_line else ""
                raise GridFailure(
                    f"site {g.site}: gateway {g.trunk} exited with status {g.exit_code} while "
                    f"the site's job ran{why}"
                )
            if all(j.ended_s is not None for j in jobs):
                return
            self._check_deadline()

    # stopping --------------------------------------------------------------------------

    def stop(self, children: Sequence[Child]) -> None:
        """SIGTERM each child (a launcher stops its own ranks), then its whole process group
        if the leader is still there after LEADER_GRACE_S; SIGKILL the groups after the grace
        period (what an exited leader left behind goes too)."""
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                child.proc.send_signal(signal.SIGTERM)
        until = time.monotonic() + LEADER_GRACE_S
        while any(c.proc.poll() is None for c in children) and time.monotonic() < until:
            self.pump(0.05)
        for child in children:
            signal_group(child.proc.pid, signal.SIGTERM)
        until = time.monotonic() + self.options.grace_s
        while any(c.proc.poll() is None for c in children) and time.monotonic() < until:
            self.pump(0.05)
        for child in children:
            signal_group(child.proc.pid, signal.SIGKILL)
            child.proc.wait()

    def let_jobs_end(self, limit_s: float) -> None:
        """After a site's failure: the other sites' jobs get `limit_s` seconds to end on their
        own, the gateways still up, so that each of their ranks prints why (the gateways' FAIL
        or the ABORT reaches them within milliseconds) before anything is stopped."""
        jobs = [c for c in self.children if c.role == "job"]
        until = time.monotonic() + limit_s
        while any(j.proc.poll() is None for j in jobs) and time.monotonic() < until:
            self.pump(0.05)

    def close(self) -> None:
        """Stop whatever still runs, kill what exited leaders left, close every pipe."""
        self.stop([c for c in self.children if c.proc.poll() is None])
        for child in self.children:
            signal_group(child.proc.pid, signal.SIGKILL)
        for key in list(self.selector.get_map().values()):
            self.selector.unregister(key.fileobj)
            key.fileobj.close()  # type: ignore[union-attr]
        self.selector.close()

    def run(self, secret: str) -> int:
        """The run; its exit status: 0 when every site's job exited 0, else the failed
        job's status, or 1 (EXIT_TIMEOUT after the run's timeout).  `failure` says why."""
        try:
            gateways = self.start_gateways(secret)
            jobs = self.start_jobs(gateways, secret)
            self.watch(gateways, jobs)
            for job in jobs:
                self.drain(job)
            self.stop([g for g in gateways if g.proc.poll() is None])
            for g in gateways:  # their last lines (the summary) may still be in the pipes
                self.drain(g, LEADER_GRACE_S)
            for g in gateways:
                if g.exit_code:
                    why = f": {g.last_line}" if g.last_line else ""
                    self.warnings.append(
                        f"site {g.site}: gateway {g.trunk} exited with status {g.exit_code} "
                        f"after the site's job ended{why}"
                    )
            return 0
        except GridFailure as exc:
            self.failure = exc.line
            if exc.status != EXIT_TIMEOUT and not exc.line.startswith("stopped: "):
                self.let_jobs_end(END_GRACE_S)
            self.stop([c for c in self.children if c.proc.poll() is None])
            self.drain_all(self.children)  # what the ended children wrote last, then close
            return exc.status
        finally:
            self.close()


class Terminated(Exception):
    """SIGTERM reached multilane itself during a run."""


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """SIGTERM to multilane raises Terminated, so that the run stops what it started."""

    def handler(signum: int, frame: FrameType | None) -> None:
        del frame
        signal.signal(signum, signal.SIG_IGN)  # once: the stop that follows must finish
        raise Terminated

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
