"""mpi4py's own test suite across two private sites, under `multilane grid run --local`, beside
the same suite as one plain job on one site (issue 19): the same outcomes, or each difference
named with its exception.

    python -m multilane.mpi4py_suite --grid [--mpi openmpi,mpich,a=openmpi,b=mpich] [--np 2,4]
        [--trunks K] [--subset full|grid-ci] [-i REGEX] [-e REGEX] [-x PATTERN]
        [--test-timeout S] [--modes plain,grid]

Per MPI (or pair of MPIs: a=openmpi,b=mpich) and rank count, two kinds of run of mpi4py_rank.py:

- the reference, per MPI the grid uses: one plain job on one site, `multilane exec --no-layer`
  with the options and environment of `mpi4py_suite`'s plain run;
- the grid run: `multilane grid run --local --np N --trunks K --mpi M --label`, two sites of N/2
  ranks joined by gateways on loopback, every rank under its site's layer and with its own MPI's
  mpi4py (main.py's `--path .deps/mpi4py-{mpi}`: the grid fills in {mpi} per site).

Rank r of a grid run is compared with rank r of the reference of its site's MPI.

A run goes on past a test that ends a rank (crash) or in which no rank writes a line for
--test-timeout seconds (hang): the run is stopped, that test is the "crash" or "hang" of every
rank that had not finished it, and a next part runs the tests not yet done (mpi4py_rank.py
--mln-skip, exact ids).  Each part is a folder: command, log, rank files.

Output in results/<time>-mpi4py-grid/: summary.json (counts, every differing test with its
exception's first line and the mpi4py call it raised in, the layer's refusals per MPI call from
its "not supported yet" lines) and summary.txt, the same for reading.  Exit 1 when a test
differs or a run did not finish."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from . import grid as gridmod
from . import mpi4py_suite as suite
from . import paths
from .errors import UsageError
from .external import parse_stats_line, preload_path

DEFAULT_TRUNKS = 2
DEFAULT_TEST_TIMEOUT_S = 180.0
MAX_PARTS = 60  # a run that needs more has stopped making sense
MIN_PART_S = 30.0  # less time left than this: no next part
POLL_S = 1.0
STOP_GRACE_S = 30.0  # multilane grid run stops its gateways and jobs on SIGTERM
GRID_ENV = {"MLN_PRELOAD_STATS": "1"}  # the layer's counters: the relayed messages and bytes
OPENMPI_ENV = {"OMPI_MCA_mpi_yield_when_idle": "1"}  # 2 cores, shared (as mpi4py_suite's)
REFUSAL = re.compile(
    r"multilane grid: (MPI_\w+) (?:on a communicator that spans sites|under `multilane grid "
    r"run`) is not supported yet"
)
SITE_TAG = re.compile(r"^\[([a-z][a-z0-9]*)\] ")  # --label
MPI4PY_FRAME = re.compile(r", in mpi4py\.MPI\.([\w.]+)\s*$")
TEST_FRAME = re.compile(r'^  File ".*/test/test_\w+\.py", line \d+, in ')
CALL = re.compile(r"([A-Za-z_][\w.]*)\(")
GRID_FAILURE = re.compile(r"multilane grid: (site \w+: .*|timed out.*|stopped: .*)$")
REPORT_SHOWN = 400  # differing tests listed in summary.txt (summary.json has them all)

Say = Callable[[str], None]


# --- what a grid run is --------------------------------------------------------------------


@dataclass(frozen=True)
class GridSpec:
    """One grid run: the MPI of every site ("openmpi") or of each ("a=openmpi,b=mpich"), the
    ranks (split evenly over the sites), trunks, test/main.py options and extra --env."""

    mpi: str
    np: int
    trunks: int = DEFAULT_TRUNKS
    options: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)

    def site_mpis(self) -> dict[str, str]:
        """Site -> MPI, in rank order (sites a, b for one MPI)."""
        named = gridmod.parse_assignments(self.mpi, "--mpi")
        sites = tuple(named) if named is not None else ("a", "b")
        return {s: str(m) for s, m in gridmod.site_mpis(self.mpi, sites).items()}

    def rank_sites(self) -> list[str]:
        """The site of each global rank (ranks 0.. on the first site, and so on)."""
        mpis = self.site_mpis()
        counts = gridmod.split_ranks(str(self.np), tuple(mpis), {})
        return [s for s in mpis for _ in range(counts[s])]

    def rank_mpis(self) -> list[str]:
        mpis = self.site_mpis()
        return [mpis[s] for s in self.rank_sites()]

    @property
    def tag(self) -> str:
        """For folder names: openmpi, a-openmpi-b-mpich."""
        return re.sub(r"[=,]", "-", self.mpi)


def grid_env(spec: GridSpec) -> dict[str, str]:
    """The ranks' environment (--env of the grid run): the layer's counters, Open MPI's yield."""
    env = dict(GRID_ENV)
    if "openmpi" in spec.site_mpis().values():
        env.update(OPENMPI_ENV)
    env.update(spec.env)
    return env


def grid_command(root: Path, spec: GridSpec, outdir: Path, skip: Path, limit_s: float) -> list[str]:
    """`multilane grid run --local` of mpi4py_rank.py, its own MPI's mpi4py on each site."""
    argv = [sys.executable, "-m", "multilane", "grid", "run", "--local", "--label"]
    argv += ["--np", str(spec.np), "--trunks", str(spec.trunks), "--mpi", spec.mpi]
    argv += ["--timeout", f"{max(1.0, limit_s):.0f}"]
    argv += [w for k, v in grid_env(spec).items() for w in ("--env", f"{k}={v}")]
    testdir = suite.suite_dir(root) / "test"
    rank = [str(suite.tool_python(root)), str(suite.RANK_SCRIPT), str(testdir), str(outdir)]
    mpi4py = suite.install_dir(root, "{mpi}")  # the grid fills in each site's MPI
    tail = ["--path", str(mpi4py), "--mln-skip", str(skip)]
    return [*argv, "--", *rank, *spec.options, *tail]


@dataclass(frozen=True)
class ReferenceSpec:
    """One reference run: an MPI, ranks, test/main.py options, --env VAR=VALUE words."""

    mpi: str
    np: int
    options: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()


def reference_command(
    root: Path, ref: ReferenceSpec, outdir: Path, skip: Path, limit_s: float
) -> list[str]:
    """The plain run of mpi4py_suite (`multilane exec --no-layer`), skipping what `skip` names."""
    env = suite.rank_env(root, ref.mpi, None, ref.extra)
    spec = suite.RunSpec(ref.mpi, ref.np, False, ref.options, env, timeout_s=max(1.0, limit_s))
    return [*suite.exec_command(root, spec, outdir), "--mln-skip", str(skip)]


@dataclass(frozen=True)
class Limits:
    """Seconds: a whole run (all its parts), and a test without a line from any rank."""

    timeout_s: float = suite.DEFAULT_TIMEOUT_S
    test_timeout_s: float = DEFAULT_TEST_TIMEOUT_S


# --- a run in parts ------------------------------------------------------------------------


@dataclass
class Part:
    """One launch of a run: where, how it ended, how long."""

    outdir: Path
    returncode: int | None  # None: stopped
    stopped: str  # why: "stalled" (no rank wrote for --test-timeout s), "time", or ''
    seconds: float
    culprit: str = ""  # the test it stopped in ('' none)

    def to_json(self) -> dict[str, object]:
        return {
            "outdir": str(self.outdir), "returncode": self.returncode, "stopped": self.stopped,
            "seconds": round(self.seconds, 1), "culprit": self.culprit,
        }  # fmt: skip


@dataclass
class GridSuiteRun(suite.SuiteRun):
    """A run of the suite in parts, with what the layer said (grid runs)."""

    kind: str = "plain"  # "plain" (the reference) or "grid"
    spec: GridSpec | None = None
    parts: list[Part] = field(default_factory=list)
    refusals: dict[str, dict[str, int]] = field(default_factory=dict)  # call -> site -> lines
    libraries: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)  # not run at all (one_mpi_skips)

    @property
    def mode(self) -> str:
        return self.kind

    @property
    def label(self) -> str:
        if self.spec is None:
            return f"{self.mpi} np={self.np} plain"
        return f"{self.spec.mpi} np={self.np} grid trunks={self.spec.trunks}"

    def summary(self) -> str:
        c = self.counts()
        text = f"{self.label}: {c['tests']} tests: " + " ".join(
            f"{k} {c[k]}" for k in suite.OUTCOMES if c[k] or k in ("pass", "fail", "error", "skip")
        )
        stopped = sum(1 for p in self.parts if p.returncode is None)
        text += f"; {self.seconds:.1f} s in {len(self.parts)} part(s)"
        text += f" ({stopped} stopped)" if stopped else ""
        if self.returncode:
            text += f", last exit {self.returncode}"
        if self.left_out:
            text += f"; {len(self.left_out)} tests left out (one MPI skips them)"
        if self.spec is not None:
            s = self.stats
            text += (
                f"; layer ({self.stats_ranks} stats lines): relayed {s.get('relayed_send_msgs', 0)}"
                f" sends {s.get('relayed_send_bytes', 0)} B; refused calls: "
                + (", ".join(f"{k} x{sum(v.values())}" for k, v in self.refusals.items()) or "none")
            )
        for rank, test in sorted(self.unfinished.items()):
            text += f"\n  rank {rank} did not finish" + (f": it was in {test}" if test else "")
        return text

    def to_json(self) -> dict[str, object]:
        doc = super().to_json()
        doc.update(
            kind=self.kind,
            mpi=self.spec.mpi if self.spec else self.mpi,
            trunks=self.spec.trunks if self.spec else None,
            rank_mpis=self.spec.rank_mpis() if self.spec else [self.mpi] * self.np,
            parts=[p.to_json() for p in self.parts],
            refusals=self.refusals,
            libraries=self.libraries,
            left_out=self.left_out,
        )
        return doc


def rank_file_order(outdir: Path) -> list[str]:
    """The tests in the order the longest rank file started them."""
    best: list[str] = []
    for path in sorted(outdir.glob("rank-*.jsonl")):
        order = []
        for line in path.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if record.get("event") == "start":
                    order.append(record["id"])
        if len(order) > len(best):
            best = order
    return best


def faulted_ranks(outdir: Path) -> list[int]:
    """The ranks that died of a fatal signal: their rank-R.fault holds a traceback."""
    return sorted(
        int(p.stem.split("-", 1)[1]) for p in outdir.glob("rank-*.fault") if p.stat().st_size > 0
    )


def culprit_of(part: suite.SuiteRun) -> str:
    """The test a stopped part stopped in: that of the first rank that died of a signal, else
    the first test (in run order) that an unfinished rank was in (the others may have run
    ahead through tests of their own, or wait in the next test for the one that died)."""
    for rank in faulted_ranks(part.outdir):
        if part.unfinished.get(rank):
            return part.unfinished[rank]
    current = {t for t in part.unfinished.values() if t}
    order = rank_file_order(part.outdir)
    return next((t for t in order if t in current), "")


def fault_line(outdir: Path) -> str:
    """'rank R: Fatal Python error: Segmentation fault; in test_x.py line N' of the first rank
    that died of a signal, or ''."""
    for rank in faulted_ranks(outdir):
        text = (outdir / f"rank-{rank}.fault").read_text(errors="replace").splitlines()
        where = [x.strip() for x in text if x.strip().startswith("File ") and "/test/" in x]
        head = text[0].strip() if text else ""
        return f"rank {rank}: {head}" + (f"; {where[0]}" if where else "")
    return ""


def stall_lines(outdir: Path) -> list[str]:
    """'rank R waits at test_x.py line N in f' for every rank whose rank-R.stall holds a
    traceback (mpi4py_rank.py dumps one when a test runs past MLN_MPI4PY_STALL_S): the innermost
    frame of the suite's own code in the last dump."""
    found = []
    for path in sorted(outdir.glob("rank-*.stall"), key=lambda p: int(p.stem.split("-", 1)[1])):
        text = path.read_text(errors="replace")
        dump = text[text.rfind("Timeout (") :] if "Timeout (" in text else text
        where = re.search(r'File ".*/test/(test_\w+\.py)", line (\d+) in (\w+)', dump)
        if where:
            rank = path.stem.split("-", 1)[1]
            found.append(f"rank {rank} waits at {where[1]} line {where[2]} in {where[3]}")
    return found


def part_failure(log: Path) -> str:
    """What the launcher said when the part ended: the grid's failure line, else the last line
    that names a signal or a bad termination, else ''."""
    found = ""
    for raw in log.read_text(errors="replace").splitlines():
        line = SITE_TAG.sub("", raw).strip()
        if GRID_FAILURE.search(line) or re.search(r"signal \d+|BAD TERMINATION|Signal:", line):
            found = line
    return found


def read_log(run: GridSuiteRun, log: Path, site_of_rank: Sequence[str]) -> None:
    """Add a part's stats lines and refusal lines (per call and site) to the run."""
    for line in log.read_text(errors="replace").splitlines():
        record = parse_stats_line(line)
        if record is not None:
            run.stats_ranks += 1
            for key, value in record.items():
                if key not in ("rank", "size"):
                    run.stats[key] = run.stats.get(key, 0) + value
            continue
        found = REFUSAL.search(line)
        if found:
            tag = SITE_TAG.match(line)
            site = tag.group(1) if tag else (site_of_rank[0] if site_of_rank else "?")
            per_site = run.refusals.setdefault(found.group(1), {})
            per_site[site] = per_site.get(site, 0) + 1


def stop_grid(child: subprocess.Popen[bytes]) -> None:
    """multilane grid run stops every gateway and job on SIGTERM; its group after a grace."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(child.pid, signal.SIGTERM)
    try:
        child.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()


def progress(outdir: Path) -> int:
    """Bytes the ranks have written to their files so far."""
    return sum(p.stat().st_size for p in outdir.glob("rank-*.jsonl"))


def launch(
    root: Path, argv: Sequence[str], outdir: Path, *, limit_s: float, test_timeout_s: float,
    stop: Callable[[subprocess.Popen[bytes]], None],
) -> tuple[int | None, str, float]:  # fmt: skip
    """Run one part to its end, or stop it when its rank files stay the same for
    test_timeout_s seconds ("stalled") or it runs past limit_s ("time"); (exit status or
    None when stopped, why it was stopped or '', seconds)."""
    start = time.monotonic()
    stopped, code = "", None
    with (outdir / "log").open("w") as log:
        child = subprocess.Popen(  # noqa: S603 - argument list
            list(argv), cwd=root, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, env={**os.environ, paths.ROOT_ENV: str(root)},
        )  # fmt: skip
        seen, since = -1, start
        try:
            while True:
                try:
                    code = child.wait(timeout=POLL_S)
                    break
                except subprocess.TimeoutExpired:
                    pass
                now = time.monotonic()
                written = progress(outdir)
                if written != seen:
                    seen, since = written, now
                if now - since > test_timeout_s:
                    stopped = "stalled"
                elif now - start > limit_s + suite.STOP_GRACE_S:
                    stopped = "time"
                if stopped:
                    stop(child)
                    code = None
                    break
        except BaseException:
            stop(child)
            raise
    if code == 124:  # the launcher's own --timeout
        code, stopped = None, "time"
    return code, stopped, time.monotonic() - start


# Open MPI 5.0.11's mpirun, now and then, before any rank starts (2 fresh-clone runs of make test
# in ctest, tests/mpiexec-retry.sh, and one in a grid run of this suite); the cause is not known
PMIX_FLAKE = "The PMIx server's listener thread failed to start"


def launcher_failed(log: Path) -> bool:
    """True when a part's log says Open MPI's launcher did not start (PMIX_FLAKE)."""
    try:
        return PMIX_FLAKE in log.read_text(errors="replace")
    except OSError:
        return False


def mark(run: suite.SuiteRun, part: suite.SuiteRun, test: str, outcome: str, why: str) -> None:
    """`test` is `outcome` (crash, hang) on every rank of the part that did not finish it."""
    for rank in range(run.np):
        if test not in part.outcomes.get(rank, {}):
            run.outcomes.setdefault(rank, {})[test] = outcome
            run.details.setdefault(rank, {})[test] = why


def run_in_parts(
    root: Path, run: GridSuiteRun, build: Callable[[Path, Path, float], list[str]], *,
    stop: Callable[[subprocess.Popen[bytes]], None], limits: Limits, say: Say,
) -> GridSuiteRun:  # fmt: skip
    """Run the suite in parts until one finishes, going past each test that crashes or hangs
    (build(outdir, skip_file, seconds left) is a part's command)."""
    run.outdir.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    skip: list[str] = list(run.left_out)
    sites = run.spec.rank_sites() if run.spec else [""] * run.np
    relaunched = False
    for index in range(MAX_PARTS):
        left = limits.timeout_s - (time.monotonic() - start)
        if left < MIN_PART_S:
            break
        outdir = run.outdir / f"part-{index}"
        outdir.mkdir(parents=True, exist_ok=True)
        (outdir / "skip").write_text("".join(f"{t}\n" for t in skip))
        argv = build(outdir, outdir / "skip", left)
        (outdir / "command").write_text(shlex.join(argv) + "\n")
        code, stopped, seconds = launch(
            root, argv, outdir, limit_s=left, test_timeout_s=limits.test_timeout_s, stop=stop
        )
        part = suite.SuiteRun(run.mpi, run.np, run.where, run.layer, outdir, returncode=code)
        suite.read_rank_files(part)
        if not relaunched and not any(part.outcomes.values()) and launcher_failed(outdir / "log"):
            relaunched = True  # once: a launcher that did not start ran no test
            say(
                f"mpi4py-grid: {run.label}: Open MPI's launcher did not start ({PMIX_FLAKE}); "
                "the part once more"
            )
            continue
        for rank in range(run.np):
            run.outcomes.setdefault(rank, {}).update(part.outcomes.get(rank, {}))
            run.details.setdefault(rank, {}).update(part.details.get(rank, {}))
        read_log(run, outdir / "log", sites)
        record = Part(outdir, code, stopped, seconds)
        run.parts.append(record)
        run.returncode, run.unfinished = code, dict(part.unfinished)
        if part.complete() or stopped == "time":
            break
        record.culprit = culprit_of(part)
        if not record.culprit or record.culprit in skip:
            break  # nothing to go past: the part ended before or between tests
        if stopped:
            outcome, why = "hang", f"hang: no rank wrote a line for {limits.test_timeout_s:g} s"
            why += "".join(f"; {line}" for line in stall_lines(outdir))
        else:
            failure = fault_line(outdir) or part_failure(outdir / "log") or f"exit {code}"
            outcome, why = "crash", f"crash: {failure}"
        mark(run, part, record.culprit, outcome, f"{why}\n{paths.display(outdir, root)}")
        say(f"mpi4py-grid: {run.label}: {outcome} in {record.culprit}; going on past it")
        done = set.intersection(*(set(part.outcomes.get(r, {})) for r in range(run.np)))
        skip += [*sorted(done - set(skip)), record.culprit]
    run.seconds = time.monotonic() - start
    if run.parts and not run.unfinished and run.parts[-1].returncode is None:
        run.unfinished = {0: ""}  # stopped after the last test, before the end
    if not run.parts:
        run.unfinished = dict.fromkeys(range(run.np), "")
    return run


def source_commit(root: Path) -> str:
    """The tree's commit, '+' when src/ has changes not committed ('' without git)."""
    try:
        head = subprocess.run(  # noqa: S603 - argument list
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        dirty = subprocess.run(  # noqa: S603 - argument list
            ["git", "-C", str(root), "status", "--porcelain", "--", "src"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return ""
    return head + ("+" if dirty else "")


def library_note(root: Path, mpi: str) -> str:
    library = preload_path(root, mpi)
    when = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(library.stat().st_mtime))
    return f"{library} sha256 {suite.sha256(library)[:16]} built {when}"


def one_mpi_skips(references: Sequence[suite.SuiteRun]) -> list[str]:
    """The tests that the references of different MPIs do not agree to run: skipped on some
    rank of one (mpi4py's skipMPI names an MPI library) and run on that rank of another.  In a
    grid of both MPIs the ranks of one site would skip such a test and those of the other run
    it, and its collectives would meet the next test's (MPI_ERR_TRUNCATE, hangs): those tests
    are left out of a grid of two MPIs on every rank."""
    found: set[str] = set()
    for one in references:
        for other in references:
            for rank, outcomes in one.outcomes.items():
                theirs = other.outcomes.get(rank, {})
                found |= {
                    t
                    for t, o in outcomes.items()
                    if o == "skip" and theirs.get(t, "skip") != "skip"
                }
    return sorted(found)


def run_grid(
    root: Path, spec: GridSpec, out: Path, limits: Limits, say: Say, *, left_out: Sequence[str] = ()
) -> GridSuiteRun:
    """A grid run in parts; the tests `left_out` are not run on any rank."""
    run = GridSuiteRun(spec.mpi, spec.np, "grid", True, out / f"{spec.tag}-np{spec.np}-grid",
                       kind="grid", spec=spec, left_out=list(left_out))  # fmt: skip

    def build(outdir: Path, skip: Path, left: float) -> list[str]:
        for mpi in spec.site_mpis().values():  # the layer as each part starts (rebuilt?)
            note = f"{library_note(root, mpi)} (tree {source_commit(root)})"
            if note not in run.libraries:
                run.libraries.append(note)
        return grid_command(root, spec, outdir, skip, left)

    return run_in_parts(root, run, build, stop=stop_grid, limits=limits, say=say)


def run_reference(
    root: Path, ref: ReferenceSpec, out: Path, limits: Limits, say: Say
) -> GridSuiteRun:
    outdir = out / f"{ref.mpi}-np{ref.np}-plain"
    run = GridSuiteRun(ref.mpi, ref.np, "local", False, outdir, kind="plain")

    def build(outdir: Path, skip: Path, left: float) -> list[str]:
        return reference_command(root, ref, outdir, skip, left)

    return run_in_parts(root, run, build, stop=suite.stop_exec, limits=limits, say=say)


# --- comparison ----------------------------------------------------------------------------


def exception_line(detail: str) -> str:
    """The first line of the exception a traceback ends with (a skip's reason, a crash's
    line as they are); '' for none."""
    lines = [x for x in detail.splitlines() if x.strip()]
    frames = [i for i, x in enumerate(lines) if x.startswith("  File ")]
    if not frames:
        return lines[0].strip() if lines else ""
    for x in lines[frames[-1] + 1 :]:
        if not x.startswith(" "):
            return x.strip()
    return lines[-1].strip()


def mpi4py_call(detail: str) -> str:
    """The call that raised: the first one on the line of the test's own code that the
    traceback's last test frame shows (MPI.Win.Create, COMM.Psend_init), else the method of
    its last mpi4py frame (Cython's frames may name a neighbour of the real method)."""
    lines = detail.splitlines()
    tests = [i for i, x in enumerate(lines) if TEST_FRAME.match(x)]
    if tests and tests[-1] + 1 < len(lines):
        found = CALL.search(lines[tests[-1] + 1])
        if found:
            return found.group(1).removeprefix("self.")
    found = [m.group(1) for x in lines if (m := MPI4PY_FRAME.search(x))]
    return found[-1] if found else ""


@dataclass(frozen=True)
class Difference:
    """A test whose outcome differs on some ranks, the same way on each of them."""

    test: str
    ranks: tuple[int, ...]
    reference: str  # outcome, or "missing"
    grid: str
    message: str  # first line of the exception (the grid run's, else the reference's)
    call: str  # the mpi4py method it raised in ('' none)

    def line(self) -> str:
        where = f" [{self.call}]" if self.call else ""
        ranks = ",".join(map(str, self.ranks))
        return (
            f"{self.test} (ranks {ranks}): reference {self.reference}, grid {self.grid}: "
            f"{self.message[:200]}{where}"
        )


def compare_grid(references: Mapping[str, suite.SuiteRun], run: GridSuiteRun) -> list[Difference]:
    """Every test whose outcome on some rank r of the grid run differs from rank r's of the
    reference of r's MPI (a test one of them never ran is 'missing' there); the tests the
    grid run left out on purpose (run.left_out) are not differences."""
    assert run.spec is not None
    per_test: dict[tuple[str, str, str, str, str], list[int]] = {}
    for rank, mpi in enumerate(run.spec.rank_mpis()):
        ref = references[mpi]
        a, b = ref.outcomes.get(rank, {}), run.outcomes.get(rank, {})
        for test in sorted((set(a) | set(b)) - set(run.left_out)):
            was, now = a.get(test, "missing"), b.get(test, "missing")
            if was == now:
                continue
            detail = run.details.get(rank, {}).get(test) or ref.details.get(rank, {}).get(test, "")
            key = (test, was, now, exception_line(detail), mpi4py_call(detail))
            per_test.setdefault(key, []).append(rank)
    return [Difference(k[0], tuple(r), *k[1:]) for k, r in sorted(per_test.items())]


def differing(diffs: Sequence[Difference]) -> str:
    """'N tests' (a test that differs in two ways, e.g. on the ranks of two MPIs, counts once)."""
    tests = len({d.test for d in diffs})
    return f"{tests} tests" + (f" ({len(diffs)} ways)" if len(diffs) != tests else "")


def by_cause(diffs: Sequence[Difference]) -> list[tuple[str, int]]:
    """How many differing tests each (outcomes, call, message) accounts for, most first."""
    causes: Counter[str] = Counter()
    for d in diffs:
        call = f" [{d.call}]" if d.call else ""
        message = re.sub(r"\bsite \w+: ", "", d.message)[:120]  # a crash: either site's job
        causes[f"{d.reference} -> {d.grid}{call}: {message}"] += 1
    return causes.most_common()


def by_module(diffs: Sequence[Difference]) -> dict[str, dict[str, int]]:
    """Per test module, how many of its tests differ, by the grid run's outcome (a test counted
    once, by its first way)."""
    found: dict[str, dict[str, int]] = {}
    seen: set[str] = set()
    for d in diffs:
        if d.test in seen:
            continue
        seen.add(d.test)
        module = re.sub(r"^setUpClass \(", "", d.test).split(".")[0]
        per = found.setdefault(module, {})
        per[d.grid] = per.get(d.grid, 0) + 1
    return dict(sorted(found.items()))


# --- report --------------------------------------------------------------------------------


def counts_rows(run: GridSuiteRun) -> list[tuple[int, dict[str, int]]]:
    """(rank, counts) of rank 0 and, in a grid of two MPIs, of the first rank of each other
    site."""
    ranks = [0]
    if run.spec is not None:
        sites, mpis = run.spec.rank_sites(), run.spec.rank_mpis()
        for r in range(1, run.np):
            if sites[r] != sites[r - 1] and mpis[r] != mpis[0]:
                ranks.append(r)
    return [(r, run.counts(r)) for r in ranks]


def report(
    out: Path, options: Sequence[str], runs: Sequence[GridSuiteRun],
    comparisons: Sequence[tuple[GridSuiteRun, list[Difference]]],
) -> tuple[list[str], dict[str, object]]:  # fmt: skip
    """summary.txt's lines and summary.json's document."""
    heads = ("tests", *suite.OUTCOMES)
    lines = [f"mpi4py {suite.MPI4PY_VERSION}, test/main.py {' '.join(options)}", ""]
    lines.append(f"{'run':<44} {'rank':>4} " + " ".join(f"{h:>6}" for h in heads) + "  seconds")
    for run in runs:
        for rank, c in counts_rows(run):
            row = " ".join(f"{c[h]:>6}" for h in heads)
            lines.append(f"{run.label:<44} {rank:>4} {row}  {run.seconds:7.1f}")
    libraries = sorted({x for r in runs for x in r.libraries})
    lines += ["", "layer: " + "; ".join(libraries)] if libraries else []
    for run, diffs in comparisons:
        verdict = "SAME" if not diffs and not run.unfinished else f"{differing(diffs)} DIFFER"
        lines += ["", f"== {run.label}: {verdict} (reference: plain, one site, same ranks)"]
        lines.append("  " + run.summary().replace("\n", "\n  "))
        if run.refusals:
            lines.append("  refused: the layer's 'not supported yet' lines per call and site")
            lines.append("  (once per process and call):")
            for call, per_site in sorted(run.refusals.items()):
                sites = ", ".join(f"{s} {n}" for s, n in sorted(per_site.items()))
                lines.append(f"    {call}: {sum(per_site.values())} ({sites})")
        if run.left_out:
            lines.append(
                f"  left out on every rank, one MPI's reference skips them: {len(run.left_out)}"
            )
            lines += [f"    {t}" for t in run.left_out]
        if diffs:
            lines.append("  differing tests by module (the grid run's outcome):")
            for module, per in by_module(diffs).items():
                outcomes = ", ".join(f"{k} {n}" for k, n in sorted(per.items()))
                lines.append(f"    {module:<24} {sum(per.values()):>4}  {outcomes}")
            lines.append("  differences by cause (tests):")
            lines += [f"    {n:>4}  {cause}" for cause, n in by_cause(diffs)]
            lines.append("  differing tests:")
            lines += [f"    {d.line()}" for d in diffs[:REPORT_SHOWN]]
            if len(diffs) > REPORT_SHOWN:
                lines.append(f"    ... {len(diffs) - REPORT_SHOWN} more in summary.json")
    doc = {
        "schema": "multilane-mpi4py-grid",
        "data_version": 1,
        "mpi4py": suite.MPI4PY_VERSION,
        "options": list(options),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "out": str(out),
        "runs": [r.to_json() for r in runs],
        "comparisons": [
            {
                "grid": run.label,
                "same": not diffs and not run.unfinished,
                "differing_tests": len({d.test for d in diffs}),
                "counts": {str(r): c for r, c in counts_rows(run)},
                "differences": [d.__dict__ | {"ranks": list(d.ranks)} for d in diffs],
                "causes": by_cause(diffs),
                "modules": by_module(diffs),
            }
            for run, diffs in comparisons
        ],
    }
    return lines, doc


# --- command line --------------------------------------------------------------------------


GRID_MODES = ("plain", "grid")


def grid_modes(modes: Sequence[str] | None) -> set[str]:
    """--modes with --grid: plain (the reference runs) and/or grid; both when not given."""
    chosen = set(modes or GRID_MODES)
    if not chosen or not chosen <= set(GRID_MODES):
        raise UsageError(f"--modes {','.join(modes or ())}: with --grid, plain and/or grid")
    return chosen


def main_grid(root: Path, args: argparse.Namespace, options: Sequence[str], say: Say) -> int:
    """`python -m multilane.mpi4py_suite --grid ...` (mpi4py_suite parsed the options and set
    everything up); the exit status."""
    modes = grid_modes(args.modes)
    extra: list[str] = list(args.env)
    env = {k: v for k, _, v in (item.partition("=") for item in extra)}
    env.setdefault("MLN_MPI4PY_STALL_S", f"{max(1.0, args.test_timeout / 2):g}")  # rank-R.stall
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = (args.out or paths.default_results_dir(root) / f"{stamp}-mpi4py-grid").resolve()
    out.mkdir(parents=True, exist_ok=True)  # absolute: the ranks and launchers start elsewhere
    limits = Limits(args.timeout, args.test_timeout)
    say(f"mpi4py-grid: mpi4py {suite.MPI4PY_VERSION}, test/main.py {' '.join(options)}; {out}")
    runs: list[GridSuiteRun] = []
    comparisons: list[tuple[GridSuiteRun, list[Difference]]] = []

    def write_summary() -> None:  # after every run: a batch stopped midway keeps what it did
        lines, doc = report(out, options, runs, comparisons)
        (out / "summary.txt").write_text("\n".join(lines) + "\n")
        (out / "summary.json").write_text(json.dumps(doc, indent=2) + "\n")

    for np in args.np:
        specs = [GridSpec(m, np, args.trunks, tuple(options), env) for m in args.mpi]
        references: dict[str, GridSuiteRun] = {}
        if "plain" in modes:
            for mpi in dict.fromkeys(m for s in specs for m in s.site_mpis().values()):
                refspec = ReferenceSpec(mpi, np, tuple(options), tuple(extra))
                ref = run_reference(root, refspec, out, limits, say)
                say("mpi4py-grid: " + ref.summary())
                references[mpi] = ref
                runs.append(ref)
                write_summary()
        if "grid" not in modes:
            continue
        for spec in specs:
            mpis = sorted(set(spec.rank_mpis()))
            left_out = []
            if len(mpis) > 1 and set(mpis) <= set(references):
                left_out = one_mpi_skips([references[m] for m in mpis])
                say(f"mpi4py-grid: {spec.mpi}: {len(left_out)} tests that one MPI skips, left out")
            run = run_grid(root, spec, out, limits, say, left_out=left_out)
            say("mpi4py-grid: " + run.summary())
            runs.append(run)
            if set(spec.rank_mpis()) <= set(references):
                diffs = compare_grid(references, run)
                comparisons.append((run, diffs))
                same = not diffs and not run.unfinished
                say(
                    f"mpi4py-grid: {run.label}: "
                    + ("SAME" if same else differing(diffs) + " differ")
                )
            write_summary()
    write_summary()
    say(f"mpi4py-grid: {out / 'summary.txt'}")
    unfinished = [r for r in runs if r.unfinished]
    differ = [run for run, diffs in comparisons if diffs]
    if unfinished or differ:
        say(f"mpi4py-grid: FAIL: {len(differ)} of {len(comparisons)} grid runs differ, "
            f"{len(unfinished)} runs did not finish")  # fmt: skip
        return 1
    if not comparisons:
        say("mpi4py-grid: nothing compared (no reference run: --modes grid)")
        return 0
    say(f"mpi4py-grid: PASS: {len(comparisons)} grid runs, the same outcomes as one site")
    return 0
