"""`multilane exec`: an unmodified MPI program under the Multilane layer.

The layer is `libmultilane-preload.so` (PMPI interposition, src/preload/) of the MPI's build
folder.  It reaches the ranks and only the ranks: `LD_PRELOAD` goes through the launcher's own
flags for the ranks' environment (Open MPI `-x VAR=VALUE`, MPICH hydra `-genv VAR VALUE`),
never into the environment of mpirun/mpiexec, its daemons or the test-bed agent.  The launch
itself is the argument list that launchers.py builds for the place the ranks go: this machine
(`--transport`), the hosts of the running test bed (`--scenario`, the placement of
`bench --scenario`), or the hosts of a hostfile.  With `MLN_PRELOAD_STATS=1` every rank prints
one line at MPI_Finalize::

    multilane-preload: rank=R size=N striped_send_msgs=A striped_send_bytes=B ...

which `--stats` sums up after the run."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from . import mpi as mpimod
from . import paths
from .bench import check_tunables
from .context import Context
from .errors import RunError, UsageError
from .launchers import HOSTS_COMMANDS, TRANSPORTS, LaunchCommand, launcher_for
from .runner import _stop_group, end_group, pump_output
from .scenario import load_scenario
from .testbed import launch as tblaunch
from .testbed.launch import TestbedRun

PRELOAD_LIBRARY = "libmultilane-preload.so"
STATS_VAR = "MLN_PRELOAD_STATS"
STATS_MARK = "multilane-preload:"
STATS_COUNTERS = (
    "striped_send_msgs",
    "striped_send_bytes",
    "striped_recv_msgs",
    "striped_recv_bytes",
    "bcast_calls",
    "bcast_bytes",
)
EXIT_TIMEOUT = 124  # as timeout(1): the program ran past --timeout and was killed
DEFAULT_NP = 2
NO_PROGRAM = "no program: give it after --, e.g. multilane exec --np 2 -- ./a.out"
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
HOST_NAME = re.compile(r"[A-Za-z0-9_.-]+\Z")


def _openmpi_rank_env(name: str, value: str) -> tuple[str, ...]:
    return ("-x", f"{name}={value}")


def _mpich_rank_env(name: str, value: str) -> tuple[str, ...]:
    return ("-genv", name, value)


# How each launcher flavour sets one variable in the ranks' environment only (launcher hook:
# belongs beside the launcher classes in launchers.py).
RANK_ENV_FLAGS: Mapping[str, Callable[[str, str], tuple[str, ...]]] = MappingProxyType(
    {"openmpi": _openmpi_rank_env, "mpich": _mpich_rank_env}
)


def preload_path(root: Path, mpi: str) -> Path:
    """build/<mpi>/src/preload/libmultilane-preload.so."""
    return paths.build_dir(root, mpi) / "src" / "preload" / PRELOAD_LIBRARY


# --- input -----------------------------------------------------------------------------


@dataclass(frozen=True)
class HostSlots:
    """One host of a hostfile and the ranks it may take."""

    name: str
    slots: int


def parse_hostfile(text: str, source: str) -> tuple[HostSlots, ...]:
    """Hosts of a hostfile in Open MPI's form (`host`, `host slots=N`, with `max_slots=M`
    ignored) or MPICH's (`host`, `host:N`); `#` starts a comment, a host without a count has
    1 slot, a host named twice adds up.  UsageError naming `source:line` on a bad line."""
    found: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        words = raw.split("#", 1)[0].split()
        if not words:
            continue
        where = f"{source}:{number}"
        host, slots = words[0], 1
        if ":" in host:
            host, _, count = host.partition(":")
            slots = _slot_count(count, where, raw)
        for word in words[1:]:
            key, eq, value = word.partition("=")
            if key in ("slots", "slot") and eq:
                slots = _slot_count(value, where, raw)
            elif key in ("max_slots", "max-slots") and eq:
                _slot_count(value, where, raw)
            else:
                raise UsageError(
                    f"{where}: cannot read '{raw.strip()}' (expected HOST, HOST slots=N or HOST:N)"
                )
        if not HOST_NAME.match(host):
            raise UsageError(f"{where}: '{host}' is not a host name")
        found[host] = found.get(host, 0) + slots
    if not found:
        raise UsageError(f"{source}: no hosts in it (lines HOST slots=N or HOST:N)")
    return tuple(HostSlots(name, slots) for name, slots in found.items())


def _slot_count(text: str, where: str, raw: str) -> int:
    if not re.fullmatch(r"[0-9]+", text) or int(text) < 1:
        raise UsageError(f"{where}: '{raw.strip()}': slots must be a positive integer")
    return int(text)


def parse_env_items(items: Iterable[str]) -> dict[str, str]:
    """--env VAR=VALUE items as a dict; UsageError for a malformed one."""
    env: dict[str, str] = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not ENV_NAME.match(name):
            raise UsageError(f"--env '{item}': expected VAR=VALUE (VAR: letters, digits, _)")
        env[name] = value
    return env


def resolve_program(program: Sequence[str], env: Mapping[str, str]) -> tuple[str, ...]:
    """The program with its first word made an absolute path (a bare name through PATH):
    the launch may run under another PATH or working directory (a test-bed host).  The
    path keeps its symbolic links (a virtual environment's python must stay itself)."""
    if not program:
        raise UsageError(NO_PROGRAM)
    first = program[0]
    if "/" in first:
        path = Path(first)
        if not path.is_file():
            raise UsageError(f"program {first}: no such file")
    else:
        found = shutil.which(first, path=env.get("PATH", os.defpath))
        if found is None:
            raise UsageError(f"program '{first}': not found on PATH")
        path = Path(found)
    if not os.access(path, os.X_OK):
        raise UsageError(f"program {first}: not executable (chmod +x?)")
    return (os.path.abspath(path), *program[1:])


# --- the launch ------------------------------------------------------------------------


@dataclass(frozen=True)
class ExecRequest:
    """What `multilane exec` (and each half of `bench exec`) runs."""

    program: tuple[str, ...]
    mpi: str | None = None
    np: int | None = None
    ppn: int | None = None
    transport: str | None = None  # local runs only; None: shm
    scenario: Path | None = None
    hostfile: Path | None = None
    layer: bool = True
    stats: bool = False
    env: Mapping[str, str] = field(default_factory=dict)  # --env: the ranks' environment
    timeout_s: float | None = None


@dataclass(frozen=True)
class ExecPlan:
    """A request with every check passed and its launch built."""

    request: ExecRequest
    install: mpimod.MpiInstall
    launch: LaunchCommand
    np: int
    hosts: tuple[str, ...]  # the hosts the ranks go to; () on this machine
    where: str  # 'shm', 'tcp', the scenario's stem, or the hostfile's name
    rank_env: Mapping[str, str]  # what the launcher's flags set for the ranks only
    library: Path | None = None  # the layer; None with --no-layer
    testbed: TestbedRun | None = None

    def describe(self) -> str:
        """The command as a shell would read it, the launcher's environment first."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.launch.env.items())
        return (env + " " if env else "") + shlex.join(self.launch.argv)


def resolve_mpi(name: str | None, ctx: Context, layer: bool) -> mpimod.MpiInstall:
    """The MPI called `name`, or the first installed one (with the layer built, if any is)."""
    if name is None:
        found = [m for m in mpimod.discover(ctx.root, ctx.env) if m.available]
        if not found:
            raise UsageError("no MPI found: run make deps (or set MPI_HOME)")
        built = [m for m in found if preload_path(ctx.root, m.name).is_file()]
        return (built or found)[0] if layer else found[0]
    if name not in mpimod.KNOWN:
        raise UsageError(f"unknown MPI '{name}' (known: {', '.join(mpimod.KNOWN)})")
    install = mpimod.discover_one(name, ctx.root, ctx.env)
    if not install.available:
        raise UsageError(f"MPI '{name}' is {install.hint}")
    return install


def layer_library(ctx: Context, install: mpimod.MpiInstall) -> Path:
    """The layer of an MPI's build; UsageError saying how to build it when it is missing."""
    library = preload_path(ctx.root, install.name)
    if not library.is_file():
        how = "make build MPI_HOME=..." if install.name == mpimod.USER else "make build"
        raise UsageError(
            f"the layer is not built for {install.name} ({paths.display(library, ctx.root)} "
            f"is missing): run {how}, or --no-layer to run without it"
        )
    return library


def rank_environment(ctx: Context, request: ExecRequest, library: Path | None) -> dict[str, str]:
    """What the ranks get through the launcher's flags: the caller's MLN_* (a remote host
    would not see them otherwise), --env, MLN_PRELOAD_STATS=1 with --stats, LD_PRELOAD with
    the layer."""
    env = {k: v for k, v in sorted(ctx.env.items()) if k.startswith("MLN_")}
    if library is not None and "LD_PRELOAD" in request.env:
        raise UsageError("--env LD_PRELOAD: the layer sets LD_PRELOAD; add --no-layer to set it")
    env.update(request.env)
    if request.stats:
        env[STATS_VAR] = "1"
    if library is not None:
        env["LD_PRELOAD"] = str(library)
    return env


def with_rank_env(
    launch: LaunchCommand, program: Sequence[str], flavour: str, env: Mapping[str, str]
) -> LaunchCommand:
    """`launch` (which ends with `program`) with the flags that set `env` for the ranks put
    just before the program."""
    n = len(program)
    if tuple(launch.argv[-n:]) != tuple(program):
        raise UsageError("internal: the launch does not end with the program")
    to_flags = RANK_ENV_FLAGS.get(flavour)
    if to_flags is None:
        raise UsageError(f"cannot pass the ranks' environment through a {flavour} launcher")
    flags = [word for name, value in env.items() for word in to_flags(name, value)]
    return LaunchCommand((*launch.argv[:-n], *flags, *program), launch.env)


def hostfile_command(
    flavour: str,
    prefix: Path,
    program: Sequence[str],
    hosts: Sequence[HostSlots],
    np: int,
    *,
    euid: int,
) -> LaunchCommand:
    """The launch of `np` ranks on real hosts, filled in order, each up to its slots: Open MPI
    `mpirun --prefix P -np N --host a:2,b:2` (--prefix: the remote daemons find this MPI at
    the same path), MPICH `mpiexec -hosts a:2,b:2 -n N`.  The MPI picks its own network."""
    listing = ",".join(f"{h.name}:{h.slots}" for h in hosts)
    executable = launcher_for(flavour, prefix).executable  # the launcher's own program name
    if flavour == "openmpi":
        argv = [executable, "--prefix", str(prefix), "-np", str(np), "--host", listing]
        env = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
        return LaunchCommand((*argv, *program), env if euid == 0 else {})
    if flavour == "mpich":
        argv = [executable, "-hosts", listing, "-n", str(np), *program]
        return LaunchCommand(tuple(argv), {})
    raise UsageError(f"cannot launch an MPI of flavour {flavour} on a hostfile's hosts")


def check_options(request: ExecRequest) -> None:
    """The program and the option combinations of a request; UsageError for a missing
    program or options that do not go together."""
    if not request.program:
        raise UsageError(NO_PROGRAM)
    if request.scenario is not None and request.hostfile is not None:
        raise UsageError("--scenario and --hostfile: give one (test-bed hosts or real hosts)")
    remote = request.scenario is not None or request.hostfile is not None
    if remote and request.transport is not None:
        raise UsageError(
            "--transport is for runs on this machine: with --scenario or --hostfile the "
            "ranks talk over the network between hosts"
        )
    if not remote and request.ppn is not None:
        raise UsageError("--ppn needs --scenario or --hostfile (ranks per host)")
    if request.transport is not None and request.transport not in TRANSPORTS:
        raise UsageError(f"unknown transport '{request.transport}' (known: shm, tcp)")
    if request.stats and not request.layer:
        raise UsageError("--stats counts what the layer did: leave out --no-layer")


def plan(request: ExecRequest, ctx: Context, name: str = "exec") -> ExecPlan:
    """Check a request (placement options, MPI, layer, tunables, program) and build its
    launch.  UsageError with one line on the first problem; nothing is started."""
    check_options(request)
    install = resolve_mpi(request.mpi, ctx, request.layer)
    launcher = launcher_for(install.flavour, Path(install.prefix))  # unknown flavour: error
    library = layer_library(ctx, install) if request.layer else None
    rank_env = rank_environment(ctx, request, library)
    if library is not None:
        check_tunables(ctx, install.name, request.env)
    remote = request.hostfile is not None
    program = request.program if remote else resolve_program(request.program, ctx.env)
    prefix = Path(install.prefix)
    testbed = None
    if request.hostfile is not None:
        launch, np, hosts = _hostfile_launch(request, install, program, ctx)
        where = request.hostfile.name
    elif request.scenario is not None:
        testbed = _testbed_placement(request, ctx, name)
        np, hosts = testbed.placement.np, testbed.placement.hosts
        hosts_command = HOSTS_COMMANDS.get(install.flavour)
        if hosts_command is None:
            raise UsageError(f"{install.name}: no test-bed launcher for flavour {install.flavour}")
        launch = hosts_command(prefix, program, testbed.placement, euid=ctx.euid, ncpus=ctx.ncpus)
        where = request.scenario.stem
    else:
        np = request.np or DEFAULT_NP
        transport = request.transport or "shm"
        launch = launcher.command(program, np, transport, ncpus=ctx.ncpus, euid=ctx.euid)
        hosts, where = (), transport
    launch = with_rank_env(launch, program, install.flavour, rank_env)
    if testbed is not None:
        launch = LaunchCommand(tuple(testbed.wrap(launch.argv)), launch.env)
    return ExecPlan(request, install, launch, np, hosts, where, rank_env, library, testbed)


def precheck(request: ExecRequest, ctx: Context) -> None:
    """What plan() checks before it needs a test bed: the options, the MPI, the layer, the
    program (before `bench exec --scenario` brings a test bed up)."""
    check_options(request)
    install = resolve_mpi(request.mpi, ctx, request.layer)
    if request.layer:
        layer_library(ctx, install)
    if request.hostfile is None:
        resolve_program(request.program, ctx.env)


def _hostfile_launch(
    request: ExecRequest, install: mpimod.MpiInstall, program: Sequence[str], ctx: Context
) -> tuple[LaunchCommand, int, tuple[str, ...]]:
    assert request.hostfile is not None
    try:
        text = request.hostfile.read_text()
    except OSError as exc:
        raise UsageError(f"--hostfile {request.hostfile}: {exc.strerror or exc}") from None
    hosts = parse_hostfile(text, str(request.hostfile))
    if request.ppn is not None:  # K ranks on every host, whatever its slots
        hosts = tuple(HostSlots(h.name, request.ppn) for h in hosts)
    capacity = sum(h.slots for h in hosts)
    np = request.np or capacity
    if np > capacity:
        per = f"--ppn {request.ppn}" if request.ppn else "their slots"
        raise UsageError(
            f"--np {np}: the {len(hosts)} hosts of {request.hostfile} take {capacity} ranks "
            f"({per}); lower --np or raise the slots"
        )
    launch = hostfile_command(
        install.flavour, Path(install.prefix), program, hosts, np, euid=ctx.euid
    )
    return launch, np, tuple(h.name for h in hosts)


def _testbed_placement(request: ExecRequest, ctx: Context, name: str) -> TestbedRun:
    """The placement of `bench --scenario` on the running test bed of the request's scenario."""
    assert request.scenario is not None
    scenario = load_scenario(request.scenario)
    if scenario.network is None:
        raise UsageError(f"{request.scenario}: no [network] table: not a test-bed scenario")
    if ctx.euid != 0:
        raise UsageError("runs on the test bed need root (network namespaces): run as root")
    run = tblaunch.placement(ctx, request.scenario, scenario.network, request.ppn or 1, name)
    if request.np is not None and request.np != run.placement.np:
        hosts = len(run.placement.hosts)
        raise UsageError(
            f"--np {request.np}: on the test bed the ranks go to {hosts} hosts (one per "
            f"site) x --ppn {run.placement.ppn} = {run.placement.np}: leave out --np, or "
            "set --ppn"
        )
    return run


# --- the layer's stats lines -------------------------------------------------------------


def parse_stats_line(line: str) -> dict[str, int] | None:
    """The counters of one `multilane-preload: rank=R size=N ...` line (anything before the
    mark, such as a launcher's output tag, is ignored); None for any other line."""
    at = line.find(STATS_MARK)
    if at < 0:
        return None
    record: dict[str, int] = {}
    for word in line[at + len(STATS_MARK) :].split():
        key, eq, value = word.partition("=")
        if not eq or not re.fullmatch(r"[0-9]+", value):
            return None
        record[key] = int(value)
    if "rank" not in record or "size" not in record:
        return None
    return record


def stats_totals(records: Sequence[Mapping[str, int]]) -> dict[str, int]:
    """Every counter summed over the ranks' lines."""
    return {k: sum(r.get(k, 0) for r in records) for k in STATS_COUNTERS}


def missing_ranks(records: Sequence[Mapping[str, int]], np: int) -> list[int]:
    """Ranks 0 .. np-1 that printed no stats line."""
    seen = {r["rank"] for r in records}
    return [rank for rank in range(np) if rank not in seen]


def stats_table(records: Sequence[Mapping[str, int]], np: int) -> list[str]:
    """The --stats summary: one row per rank's line and a total row, or why there is none."""
    if not records:
        return [
            "multilane: layer stats: no rank printed its line: the layer was not in effect "
            "(a statically linked program?) or no rank reached MPI_Finalize"
        ]
    head = ("rank", "sends", "sent [B]", "recvs", "received [B]", "bcasts", "bcast [B]")
    rows = [head]
    for r in sorted(records, key=lambda r: r["rank"]):
        rows.append((str(r["rank"]), *(str(r.get(k, 0)) for k in STATS_COUNTERS)))
    totals = stats_totals(records)
    rows.append(("total", *(str(totals[k]) for k in STATS_COUNTERS)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = [f"multilane: layer stats ({STATS_VAR}=1) of {len(records)} ranks:"]
    lines += ["  " + "  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in rows]
    gone = missing_ranks(records, np)
    if gone:
        listing = ", ".join(map(str, gone))
        lines.append(f"multilane: layer stats: no line from rank(s) {listing} of {np}")
    return lines


# --- running ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Finished:
    """How a pass-through run ended."""

    returncode: int | None  # None after a timeout or a watchdog stop
    timed_out: bool
    aborted: str
    duration_s: float
    pgid: int


def run_passthrough(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    timeout_s: float | None,
    on_stderr_line: Callable[[str], None],
    watchdog: Callable[[], str] | None = None,
) -> Finished:
    """Run `argv` in its own process group with stdout passed straight through and stderr
    copied through as it comes (each complete line also to `on_stderr_line`); stdin is
    /dev/null.  After `timeout_s` seconds, or when `watchdog` names a reason, the group is
    sent SIGTERM, then SIGKILL (by its id)."""
    sys.stdout.flush()
    sys.stderr.flush()
    start = time.monotonic()
    try:
        proc = subprocess.Popen(  # noqa: S603 - argument list, no shell
            list(argv),
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        raise RunError(f"cannot start {argv[0]}: {exc.strerror or exc}") from None
    pgid = proc.pid
    deadline = None if timeout_s is None else start + timeout_s
    assert proc.stderr is not None
    out = sys.stderr.buffer
    pending = b""

    def on_chunk(chunk: bytes) -> None:
        nonlocal pending
        out.write(chunk)
        out.flush()
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            on_stderr_line(line.decode(errors="replace").rstrip("\r"))

    try:
        pumped = pump_output(
            proc,
            proc.stderr.fileno(),
            start=start,
            deadline=deadline,
            watchdog=watchdog,
            on_chunk=on_chunk,
        )
    except BaseException:
        _stop_group(proc, pgid)
        raise
    finally:
        proc.stderr.close()
    if pending:
        on_stderr_line(pending.decode(errors="replace").rstrip("\r"))
    end_group(proc, pgid, pumped)
    timed_out, aborted = pumped.timed_out, pumped.aborted
    code = None if timed_out or aborted else proc.returncode
    return Finished(code, timed_out, aborted, time.monotonic() - start, pgid)


def exit_status(returncode: int) -> int:
    """A child's status as a shell reports it: killed by signal S is 128 + S."""
    return 128 - returncode if returncode < 0 else returncode


def exec_program(request: ExecRequest, ctx: Context, *, dry_run: bool = False) -> int:
    """`multilane exec`: plan, run with output passed through, print the stats summary; the
    program's exit status (EXIT_TIMEOUT after --timeout)."""
    prepared = plan(request, ctx)
    if dry_run:
        ctx.say(prepared.describe())
        return 0
    err = sys.stderr
    layer = "no layer" if prepared.library is None else "layer " + paths.display(prepared.library)
    print(
        f"multilane: {prepared.install.name}, {prepared.np} ranks, {layer}: {prepared.describe()}",
        file=err,
        flush=True,
    )
    records: list[dict[str, int]] = []

    def collect(line: str) -> None:
        record = parse_stats_line(line)
        if record is not None:
            records.append(record)

    finished = run_passthrough(
        prepared.launch.argv,
        env={**ctx.env, **prepared.launch.env},
        timeout_s=request.timeout_s,
        on_stderr_line=collect,
        watchdog=prepared.testbed.watchdog if prepared.testbed is not None else None,
    )
    if request.stats:
        for line in stats_table(records, prepared.np):
            print(line, file=err)
    if finished.timed_out or finished.aborted:
        reason = finished.aborted or f"timed out after {request.timeout_s:g} s"
        cleaned = clean_hosts(prepared)
        print(
            f"multilane: error: {Path(request.program[0]).name}: {reason}: its process group "
            f"{finished.pgid} was killed{cleaned}",
            file=err,
        )
        return EXIT_TIMEOUT if finished.timed_out else 1
    assert finished.returncode is not None
    return exit_status(finished.returncode)


def clean_hosts(prepared: ExecPlan) -> str:
    """After a stopped test-bed run: stop what it left in the hosts; a note, or ''."""
    if prepared.testbed is None:
        return ""
    stopped = prepared.testbed.bed.stop_host_processes()
    return f"; stopped {len(stopped)} processes it left in the test-bed hosts" if stopped else ""
