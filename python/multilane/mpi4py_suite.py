"""mpi4py's own test suite, without and with the Multilane layer (libmultilane-preload.so):
the layer must leave the same tests passing, failing and skipped (issue 16).

    python -m multilane.mpi4py_suite [--mpi openmpi,mpich] [--np 2,4] [--scenario FILE.toml]
        [--subset ci] [-i REGEX] [-e REGEX] [-x PATTERN] [--env VAR=VALUE] [--setup-only]
    python -m multilane.mpi4py_suite --grid [--mpi openmpi,mpich,a=openmpi,b=mpich]
        [--np 2,4] [--trunks K] [--subset grid-ci] [--test-timeout S]  (mpi4py_grid.py)

Set-up, each step skipped when done: a tool environment (.deps/mpi4py/venv: pinned setuptools,
Cython and numpy, the Python that builds mpi4py and runs its tests), the pinned sdist fetched once
with pip into .deps/mpi4py/ (checked against its sha256, unpacked there: its test/ is the
suite), and mpi4py built per MPI with that MPI's mpicc into .deps/mpi4py-<mpi>/.

Each run is `multilane exec` (the same launch as any program under the layer; --no-layer for
the plain one) of mpi4py_rank.py, which runs test/main.py and writes every test's outcome per
rank as it goes.  Locally MLN_NODE_SIZE=1 makes every rank its own host and site, so every
peer is remote to the layer; with --scenario the ranks go to the running test bed's hosts as
`bench --scenario` places them (--np 4: 2 per host).  The stripe and broadcast thresholds are
lowered (MLN_STRIPE_THRESHOLD=128, its minimum; MLN_BCAST_THRESHOLD=1) so that striping and
the broadcast are exercised; the layer's stats lines prove it.  Both runs ask for
MPI_THREAD_SERIALIZED (under mpi4py's default, MULTIPLE, the layer stands aside).  Exit 1
when a test differs, a run did not finish, or the layer neither striped a byte nor ran a
broadcast."""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from . import mpi as mpimod
from . import paths
from .errors import RunError, UsageError
from .external import parse_stats_line, preload_path, stats_totals

MPI4PY_VERSION = "4.1.1"
MPI4PY_SHA256 = "eb2c8489bdbc47fdc6b26ca7576e927a11b070b6de196a443132766b3d0a2a22"
# numpy: mpi4py's suite tests every buffer with it too, and sends bigger messages with it
TOOL_REQUIREMENTS = ("setuptools==84.2.1", "Cython==3.3.1", "numpy==2.4.6")
STAMP = ".multilane-mpi4py"
# After Python's own flags (-g -O2): Cython's generated MPI.c compiles in a fraction of the time
# unoptimised and without debug information; the suite's time is MPI's, not mpi4py's.
BUILD_CFLAGS = "-O0 -g0"
RANK_SCRIPT = Path(__file__).resolve().parent / "mpi4py_rank.py"
# crash and hang: a run in parts (mpi4py_grid) went on past the test a rank died or hung in
OUTCOMES = ("pass", "fail", "error", "skip", "xfail", "xpass", "crash", "hang")
# mpi4py's tests move small messages (mostly under 1 KiB): the stripe threshold at its
# minimum, and every broadcast of at least one byte through mln_bcast
LAYER_ENV = {"MLN_STRIPE_THRESHOLD": "128", "MLN_BCAST_THRESHOLD": "1"}
LOCAL_ENV = {"MLN_NODE_SIZE": "1"}  # every rank its own host and site: every peer is remote
# --oversubscribe, in the launcher's own environment: Open MPI may start more processes than
# it has slots, as mpi4py's CI sets it.  Without it each MPI_Comm_spawn of test_spawn fails
# at once with MPI_ERR_UNKNOWN (no free slot), in both runs; with it the spawned ranks pile
# up on a small machine (2 cores: 10 ranks polling, minutes per test).
OVERSUBSCRIBE_ENV = {
    "openmpi": {
        "PRTE_MCA_rmaps_default_mapping_policy": ":oversubscribe",  # Open MPI 5 (PRRTE)
        "OMPI_MCA_rmaps_base_oversubscribe": "1",  # Open MPI 4 (ORTE)
    },
}
# The CI subset: point-to-point (buffers, objects, persistent, partitioned), probe and
# matched probe (Message), requests, and the broadcasts of the collective modules.
CI_INCLUDE = (
    r"test_p2p_(buf|obj)(_matched|_part)?\b",
    r"test_request\b",
    r"test_cco_(buf|obj)\b",
)
CI_EXCLUDE_TESTS = ("test_cco_*.test[!B]*",)  # of the collectives, Bcast* and Barrier only
# The CI subset of grid mode (mpi4py_grid, --grid): modules that two sites already run exactly
# as one job does (docs/PRELOAD-MPI4PY.md, "Grid mode"): point-to-point with buffers and
# objects, probes and matched probes, requests, and the blocking collectives (buffers, objects,
# vectors: every one, on the world and on a duplicate).
GRID_CI_INCLUDE = (
    r"test_p2p_(buf|obj)(_matched)?\b",
    r"test_request\b",
    r"test_cco_(buf|obj|vec)\b",
)
SUBSETS = {
    "ci": (CI_INCLUDE, (), CI_EXCLUDE_TESTS),
    "grid-ci": (GRID_CI_INCLUDE, (), ()),
    "full": ((), (), ()),
}
DEFAULT_TIMEOUT_S = 1800.0
STOP_GRACE_S = 15.0
THREAD_LEVEL = "serialized"
MISSING_SHOWN = 5  # tests a stopped run never reached: the first few are named

Say = Callable[[str], None]


class SdistUnavailable(RunError):
    """The sdist or the tools to build it could not be fetched (no network, no index)."""


# --- set-up ------------------------------------------------------------------------------


def cache_dir(root: Path) -> Path:
    """.deps/mpi4py: the tool environment, the sdist and its unpacked tree."""
    return root / ".deps" / "mpi4py"


def tool_python(root: Path) -> Path:
    """The Python that builds mpi4py and runs its suite."""
    return cache_dir(root) / "venv" / "bin" / "python"


def suite_dir(root: Path) -> Path:
    """The unpacked sdist (its test/ folder is the suite)."""
    return cache_dir(root) / f"mpi4py-{MPI4PY_VERSION}"


def install_dir(root: Path, mpi: str) -> Path:
    """.deps/mpi4py-<mpi>: mpi4py built with that MPI's mpicc (pip --target)."""
    return root / ".deps" / f"mpi4py-{mpi}"


def _run_checked(
    argv: Sequence[str],
    what: str,
    env: Mapping[str, str] | None = None,
    error: type[RunError] = RunError,
) -> None:
    proc = subprocess.run(  # noqa: S603 - argument list
        list(argv), env=None if env is None else dict(env), capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
        raise error(f"{what} failed (exit {proc.returncode}):\n" + "\n".join(tail))


def ensure_tools(root: Path, say: Say) -> Path:
    """The tool environment (a venv with TOOL_REQUIREMENTS); its Python."""
    python = tool_python(root)
    stamp = python.parent.parent / STAMP
    want = " ".join(TOOL_REQUIREMENTS)
    if python.exists() and stamp.exists() and stamp.read_text().strip() == want:
        return python
    say(f"mpi4py-suite: tool environment {paths.display(python.parent.parent, root)}: {want}")
    _run_checked([sys.executable, "-m", "venv", "--clear", str(python.parent.parent)], "venv")
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    _run_checked([*pip, *TOOL_REQUIREMENTS], "pip install " + want, error=SdistUnavailable)
    stamp.write_text(want + "\n")
    return python


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def ensure_sdist(root: Path, say: Say) -> Path:
    """The pinned sdist in .deps/mpi4py (fetched once with pip, sha256 checked) and unpacked;
    the unpacked folder.  SdistUnavailable when it (or the tools) cannot be fetched, RunError
    when what was fetched is not the pinned file."""
    python = ensure_tools(root, say)
    cache = cache_dir(root)
    tarball = cache / f"mpi4py-{MPI4PY_VERSION}.tar.gz"
    if not tarball.exists():
        say(f"mpi4py-suite: fetching the mpi4py {MPI4PY_VERSION} sdist with pip")
        _run_checked(
            [str(python), "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
             "--no-binary", ":all:", "--no-deps", "--no-build-isolation",
             f"mpi4py=={MPI4PY_VERSION}", "-d", str(cache)],
            f"pip download mpi4py=={MPI4PY_VERSION}",
            error=SdistUnavailable,
        )  # fmt: skip
    got = sha256(tarball)
    if got != MPI4PY_SHA256:
        raise RunError(f"{tarball}: sha256 {got}, expected {MPI4PY_SHA256}: remove it to refetch")
    unpacked = suite_dir(root)
    if not (unpacked / "test" / "main.py").exists():
        with tarfile.open(tarball) as tar:
            if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4, 3.10.12, 3.9.17
                tar.extractall(cache, filter="data")
            else:
                tar.extractall(cache)  # the file's sha256 was checked above
    return unpacked


def ensure_build(root: Path, mpi: str, say: Say) -> Path:
    """mpi4py built with `mpi`'s mpicc in .deps/mpi4py-<mpi> (a stamp names the mpi4py and
    MPI versions; anything else is rebuilt); the folder to put on PYTHONPATH."""
    install = mpimod.discover_one(mpi, root, {})
    if not install.available:
        raise UsageError(f"MPI '{mpi}' is {install.hint}")
    target = install_dir(root, mpi)
    want = f"mpi4py {MPI4PY_VERSION} {install.name} {install.version} CFLAGS={BUILD_CFLAGS}"
    stamp = target / STAMP
    if stamp.exists() and stamp.read_text().strip() == want:
        return target
    ensure_sdist(root, say)
    tarball = cache_dir(root) / f"mpi4py-{MPI4PY_VERSION}.tar.gz"  # not the unpacked tree:
    python = tool_python(root)  # pip would build in it, and main.py tests its build/ first
    mpicc = Path(install.prefix) / "bin" / "mpicc"
    say(f"mpi4py-suite: building mpi4py {MPI4PY_VERSION} with {mpicc} (minutes)")
    fresh = target.with_name(target.name + ".tmp")
    shutil.rmtree(fresh, ignore_errors=True)
    start = time.monotonic()
    _run_checked(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "--no-build-isolation", "--no-deps", "--target", str(fresh), str(tarball)],
        f"building mpi4py with {mpicc}",
        env={**os.environ, "MPICC": str(mpicc), "CFLAGS": BUILD_CFLAGS},
    )  # fmt: skip
    (fresh / STAMP).write_text(want + "\n")
    if target.exists():
        shutil.rmtree(target)
    fresh.rename(target)
    say(f"mpi4py-suite: built {paths.display(target, root)} in {time.monotonic() - start:.0f} s")
    return target


# --- one run -----------------------------------------------------------------------------


@dataclass
class SuiteRun:
    """One run of the suite: what each rank recorded, the layer's counters, how it ended."""

    mpi: str
    np: int
    where: str  # "local" or the scenario's stem
    layer: bool
    outdir: Path
    seconds: float = 0.0
    returncode: int | None = None  # None: killed after the timeout
    outcomes: dict[int, dict[str, str]] = field(default_factory=dict)  # rank -> test -> outcome
    details: dict[int, dict[str, str]] = field(default_factory=dict)
    unfinished: dict[int, str] = field(default_factory=dict)  # rank -> test it was in ('' none)
    stats: dict[str, int] = field(default_factory=dict)
    stats_ranks: int = 0
    library: str = ""  # the layer: path, sha256 and time of the file at the start of the run

    @property
    def mode(self) -> str:
        return "layer" if self.layer else "plain"

    @property
    def label(self) -> str:
        return f"{self.mpi} np={self.np} {self.where} {self.mode}"

    def counts(self, rank: int = 0) -> dict[str, int]:
        """Outcomes of one rank's tests (rank 0: what mpi4py's summary line says)."""
        found = self.outcomes.get(rank, {})
        counts = {k: 0 for k in OUTCOMES}
        for outcome in found.values():
            counts[outcome] += 1
        return {"tests": len(found), **counts}

    def complete(self) -> bool:
        """Every rank wrote its file and reached the end of the run."""
        return len(self.outcomes) == self.np and not self.unfinished

    def summary(self) -> str:
        c = self.counts()
        text = (
            f"{self.label}: {c['tests']} tests: pass {c['pass']} fail {c['fail']} "
            f"error {c['error']} skip {c['skip']}"
        )
        if c["xfail"] or c["xpass"]:
            text += f" xfail {c['xfail']} xpass {c['xpass']}"
        if c["crash"] or c["hang"]:
            text += f" crash {c['crash']} hang {c['hang']}"
        ended = "timed out" if self.returncode is None else f"exit {self.returncode}"
        text += f"; {self.seconds:.1f} s, {ended}"
        if self.layer:
            s = self.stats
            text += (
                f"; layer ({self.stats_ranks} stats lines): striped {s.get('striped_send_msgs', 0)}"
                f" sends {s.get('striped_send_bytes', 0)} B, {s.get('striped_recv_msgs', 0)} "
                f"receives {s.get('striped_recv_bytes', 0)} B, bcast {s.get('bcast_calls', 0)} "
                f"calls {s.get('bcast_bytes', 0)} B"
            )
        if self.library:
            text += f"\n  layer: {self.library}"
        for rank, test in sorted(self.unfinished.items()):
            text += f"\n  rank {rank} did not finish" + (f": it was in {test}" if test else "")
        return text

    def to_json(self) -> dict[str, object]:
        return {
            "mpi": self.mpi, "np": self.np, "where": self.where, "layer": self.layer,
            "seconds": round(self.seconds, 1), "returncode": self.returncode,
            "counts": self.counts(), "complete": self.complete(), "stats": self.stats,
            "stats_ranks": self.stats_ranks, "unfinished": self.unfinished,
            "library": self.library,
            "outdir": str(self.outdir),
        }  # fmt: skip


def main_options(include: Sequence[str], exclude: Sequence[str], skip: Sequence[str]) -> list[str]:
    """test/main.py's options: -v, --no-builddir (mpi4py from PYTHONPATH only, never from a
    build/ in the sdist), the thread level, -i REGEX (modules), -e REGEX, -x PATTERN (tests).
    mpi4py asks for MPI_THREAD_MULTIPLE by default, and under it the layer passes every call
    to MPI unchanged: both runs ask for MPI_THREAD_SERIALIZED instead."""
    words = ["-v", "--no-builddir", "--thread-level", THREAD_LEVEL]
    words += [w for r in include for w in ("-i", r)]
    words += [w for r in exclude for w in ("-e", r)]
    words += [w for p in skip for w in ("-x", p)]
    return words


@dataclass(frozen=True)
class RunSpec:
    """What one run is: MPI, ranks, with or without the layer, where, test/main.py options
    and the ranks' environment."""

    mpi: str
    np: int
    layer: bool
    options: tuple[str, ...] = ("-v", "--thread-level", THREAD_LEVEL)
    env: Mapping[str, str] = field(default_factory=dict)
    scenario: Path | None = None  # the running test bed's scenario; None: this machine
    timeout_s: float = DEFAULT_TIMEOUT_S
    oversubscribe: bool = False  # Open MPI: let MPI_Comm_spawn start ranks beyond the slots

    @property
    def where(self) -> str:
        return "local" if self.scenario is None else self.scenario.stem


def exec_command(root: Path, spec: RunSpec, outdir: Path) -> list[str]:
    """`multilane exec` of the suite: the ranks' environment through --env."""
    argv = [sys.executable, "-m", "multilane", "exec", "--mpi", spec.mpi]
    argv += ["--timeout", f"{spec.timeout_s:g}"]
    if spec.scenario is not None:
        argv += ["--scenario", str(spec.scenario), "--ppn", str(max(1, spec.np // 2))]
    else:
        argv += ["--np", str(spec.np)]
    argv += ["--stats"] if spec.layer else ["--no-layer"]
    argv += [w for k, v in spec.env.items() for w in ("--env", f"{k}={v}")]
    rank = [str(tool_python(root)), str(RANK_SCRIPT), str(suite_dir(root) / "test"), str(outdir)]
    return [*argv, "--", *rank, *spec.options]


def read_rank_files(run: SuiteRun) -> None:
    """Fill the run's outcomes from outdir/rank-R.jsonl."""
    for path in sorted(run.outdir.glob("rank-*.jsonl")):
        rank = int(path.stem.split("-", 1)[1])
        outcomes, details, current, done = {}, {}, "", False
        for line in path.read_text(errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a line cut short by a kill
            event = record.get("event")
            if event == "start":
                current = record["id"]
            elif event == "end":
                outcomes[record["id"]] = record["outcome"]
                details[record["id"]] = record.get("detail", "")
                current = ""
            elif event == "done":
                done = True
        run.outcomes[rank], run.details[rank] = outcomes, details
        if not done:
            run.unfinished[rank] = current
    for rank in range(run.np):
        if rank not in run.outcomes:
            run.unfinished[rank] = ""


def launcher_env(spec: RunSpec) -> dict[str, str]:
    """What the launcher itself (not the ranks) gets on top of our environment."""
    return dict(OVERSUBSCRIBE_ENV.get(spec.mpi, {})) if spec.oversubscribe else {}


def stop_exec(child: subprocess.Popen[bytes]) -> None:
    """Stop a `multilane exec` child: SIGINT first (it then stops the launcher's process
    group, which is not its own), SIGKILL to its group after a grace period."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(child.pid, signal.SIGINT)
    try:
        child.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()


def run_suite(root: Path, spec: RunSpec, outdir: Path) -> SuiteRun:
    """One run of the suite, its output in outdir/log; nothing raised for failed tests."""
    outdir = outdir.resolve()  # the ranks may start elsewhere (a test-bed host)
    outdir.mkdir(parents=True, exist_ok=True)
    run = SuiteRun(spec.mpi, spec.np, spec.where, spec.layer, outdir)
    if spec.layer:
        library = preload_path(root, spec.mpi)
        when = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(library.stat().st_mtime))
        run.library = f"{library} sha256 {sha256(library)[:16]} built {when}"
    argv = exec_command(root, spec, outdir)
    (outdir / "command").write_text(" ".join(argv) + "\n")
    start = time.monotonic()
    with (outdir / "log").open("w") as log:
        child = subprocess.Popen(  # noqa: S603 - argument list
            argv, cwd=root, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, paths.ROOT_ENV: str(root), **launcher_env(spec)},
        )  # fmt: skip
        try:
            run.returncode = child.wait(timeout=spec.timeout_s + 120)  # exec's --timeout first
        except BaseException:  # our own timeout, or Ctrl-C: exec stops MPI's group on SIGINT
            stop_exec(child)
            if not isinstance(sys.exc_info()[1], subprocess.TimeoutExpired):
                raise
    run.seconds = time.monotonic() - start
    if run.returncode == 124:  # multilane exec: killed after --timeout
        run.returncode = None
    records = []
    for line in (outdir / "log").read_text(errors="replace").splitlines():
        record = parse_stats_line(line)
        if record is not None:
            records.append(record)
    run.stats, run.stats_ranks = stats_totals(records), len(records)
    read_rank_files(run)
    return run


# --- comparison --------------------------------------------------------------------------


def differences(plain: SuiteRun, layer: SuiteRun) -> list[str]:
    """One line per test whose outcome differs on some rank, with the last line of its
    detail (the layer run's, else the plain run's); the tests that one run never reached
    (it stopped) are counted per rank, the first few named."""
    lines = []
    for rank in range(plain.np):
        a, b = plain.outcomes.get(rank, {}), layer.outcomes.get(rank, {})
        missing: dict[str, list[str]] = {"plain": [], "layer": []}
        for test in sorted(set(a) | set(b)):
            was, now = a.get(test), b.get(test)
            if was == now:
                continue
            if was is None or now is None:
                missing["plain" if was is None else "layer"].append(test)
                continue
            detail = layer.details.get(rank, {}).get(test) or plain.details.get(rank, {}).get(
                test, ""
            )
            last = [x for x in detail.strip().splitlines() if x.strip()][-1:] or [""]
            lines.append(f"  rank {rank} {test}: plain {was}, layer {now}  {last[0][:200]}")
        for mode, tests in missing.items():
            if tests:
                more = ", ..." if len(tests) > MISSING_SHOWN else ""
                named = ", ".join(tests[:MISSING_SHOWN]) + more
                lines.append(
                    f"  rank {rank}: {len(tests)} tests missing in the {mode} run: {named}"
                )
    return lines


def compare(plain: SuiteRun, layer: SuiteRun) -> tuple[bool, list[str]]:
    """(same, report lines): same when both runs finished and every rank's every test has
    the same outcome."""
    lines = differences(plain, layer)
    for run in (plain, layer):
        if not run.complete():
            lines.append(f"  {run.label}: did not finish (see {run.outdir / 'log'})")
    tag = f"{plain.mpi} np={plain.np} {plain.where}"
    if not lines:
        return True, [f"{tag}: SAME: plain == layer ({plain.counts()['tests']} tests)"]
    return False, [f"{tag}: DIFFERENT: {len(lines)} problem(s):", *lines]


# --- command line ------------------------------------------------------------------------


def _csv(text: str) -> list[str]:
    return [w for w in text.split(",") if w]


def _mpis(text: str) -> list[str]:
    """openmpi,mpich,a=openmpi,b=mpich: each MPI, and the sites of a pair (--grid) as one."""
    found: list[str] = []
    sites: set[str] = set()
    for word in _csv(text):
        site, eq, _ = word.partition("=")
        if eq and found and "=" in found[-1] and site not in sites:
            found[-1] += "," + word
            sites.add(site)
        else:
            found.append(word)
            sites = {site} if eq else set()
    return found


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m multilane.mpi4py_suite",
        description="mpi4py's test suite without and with libmultilane-preload.so",
    )
    p.add_argument(
        "--mpi",
        type=_mpis,
        default=["openmpi", "mpich"],
        help="openmpi,mpich (--grid: also a pair of sites, a=openmpi,b=mpich)",
    )
    p.add_argument("--np", type=lambda s: [int(x) for x in _csv(s)], default=[2], help="2,4")
    p.add_argument("--scenario", type=Path, help="on this running test bed (else local)")
    p.add_argument("--modes", type=_csv, help="plain,layer (--grid: plain,grid)")
    p.add_argument("--subset", choices=sorted(SUBSETS), default="full")
    p.add_argument("-i", dest="include", action="append", default=[], help="modules: REGEX")
    p.add_argument("-e", dest="exclude", action="append", default=[], help="not modules: REGEX")
    p.add_argument("-x", dest="skip", action="append", default=[], help="not tests: PATTERN")
    p.add_argument("--env", action="append", default=[], metavar="VAR=VALUE")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds per run")
    p.add_argument("--out", type=Path, help="folder (default results/<time>-mpi4py-suite)")
    p.add_argument(
        "--oversubscribe",
        action="store_true",
        help="Open MPI: spawned ranks may exceed the slots (test_spawn runs; heavy on 2 cores)",
    )
    p.add_argument("--setup-only", action="store_true", help="fetch and build, run nothing")
    p.add_argument(
        "--grid",
        action="store_true",
        help="across two sites under `multilane grid run --local`, beside one plain job",
    )
    p.add_argument("--trunks", type=int, default=2, help="--grid: gateways per site")
    p.add_argument(
        "--test-timeout",
        type=float,
        default=180.0,
        help="--grid: seconds without a test's end before the run goes on past it (hang)",
    )
    args = p.parse_args(argv)
    if args.grid and args.scenario is not None:
        p.error("--grid runs on this machine (--local): no --scenario")
    if not args.grid and any("=" in m for m in args.mpi):
        p.error("--mpi a=..,b=..: sites of different MPIs are for --grid")
    if not args.grid:
        args.modes = args.modes or ["plain", "layer"]
    return args


def mpis_of(names: Sequence[str]) -> list[str]:
    """The MPIs that --mpi names, those of a pair of sites too, once each."""
    found: dict[str, None] = {}
    for name in names:
        for item in name.split(","):
            found[item.partition("=")[2] or item] = None
    return list(found)


def rank_env(root: Path, mpi: str, scenario: Path | None, extra: Sequence[str]) -> dict[str, str]:
    """The ranks' environment, the same for the plain and the layer run."""
    env = {"PYTHONPATH": str(install_dir(root, mpi)), **LAYER_ENV}
    if scenario is None:
        env.update(LOCAL_ENV)
    if mpi == "openmpi":
        env["OMPI_MCA_mpi_yield_when_idle"] = "1"  # 2 cores, shared
    for item in extra:
        key, eq, value = item.partition("=")
        if not eq:
            raise UsageError(f"--env '{item}': expected VAR=VALUE")
        env[key] = value
    return env


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    root = paths.find_root()

    def say(text: str) -> None:
        print(text, flush=True)

    try:
        ensure_sdist(root, say)  # and the tool environment, which also runs the suite
        for mpi in mpis_of(args.mpi):
            ensure_build(root, mpi, say)
            if (
                not args.setup_only
                and (args.grid or "layer" in args.modes)
                and not preload_path(root, mpi).is_file()
            ):
                raise UsageError(f"{preload_path(root, mpi)} is missing: run make build")
    except (RunError, UsageError) as exc:
        print(f"mpi4py-suite: error: {exc}", file=sys.stderr)
        return 2
    if args.setup_only:
        return 0
    include, exclude, skip = SUBSETS[args.subset]
    options = main_options([*include, *args.include], [*exclude, *args.exclude],
                           [*skip, *args.skip])  # fmt: skip
    if args.grid:
        from . import mpi4py_grid  # noqa: PLC0415 - it imports this module

        try:
            return mpi4py_grid.main_grid(root, args, options, say)
        except UsageError as exc:
            print(f"mpi4py-suite: error: {exc}", file=sys.stderr)
            return 2
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = args.out or paths.default_results_dir(root) / f"{stamp}-mpi4py-suite"
    say(f"mpi4py-suite: mpi4py {MPI4PY_VERSION}, test/main.py {' '.join(options)}; {out}")
    runs: list[SuiteRun] = []
    verdicts: list[tuple[bool, list[str]]] = []
    for mpi in args.mpi:
        env = rank_env(root, mpi, args.scenario, args.env)
        for np in args.np:
            pair = {}
            for mode in args.modes:
                spec = RunSpec(mpi, np, mode == "layer", tuple(options), env, args.scenario,
                               args.timeout, args.oversubscribe)  # fmt: skip
                outdir = out / f"{mpi}-np{np}-{spec.where}-{mode}"
                run = run_suite(root, spec, outdir)
                say("mpi4py-suite: " + run.summary())
                runs.append(run)
                pair[mode] = run
            if "plain" in pair and "layer" in pair:
                verdicts.append(compare(pair["plain"], pair["layer"]))
                for line in verdicts[-1][1]:
                    say("mpi4py-suite: " + line if not line.startswith("  ") else line)
    layer_runs = [r for r in runs if r.layer]
    striped = sum(r.stats.get("striped_send_bytes", 0) for r in layer_runs)
    bcasts = sum(r.stats.get("bcast_calls", 0) for r in layer_runs)
    problems = [v for v in verdicts if not v[0]]
    idle = bool(layer_runs) and striped == 0 and bcasts == 0
    (out / "summary.json").write_text(
        json.dumps({"mpi4py": MPI4PY_VERSION, "options": options,
                    "runs": [r.to_json() for r in runs],
                    "same": [v[0] for v in verdicts], "striped_send_bytes": striped,
                    "bcast_calls": bcasts}, indent=2) + "\n"
    )  # fmt: skip
    if layer_runs:
        say(f"mpi4py-suite: the layer striped {striped} B and ran {bcasts} broadcasts in all")
    if idle:
        say("mpi4py-suite: FAIL: the layer neither striped nor broadcast (thresholds too high?)")
    if problems:
        say(f"mpi4py-suite: FAIL: {len(problems)} of {len(verdicts)} comparisons differ")
    elif verdicts and not idle:
        say(f"mpi4py-suite: PASS: {len(verdicts)} comparisons, plain == layer")
    return 1 if problems or idle else 0


if __name__ == "__main__":
    sys.exit(main())
