"""Launcher classes: each builds the mpirun/mpiexec argument list and environment for one MPI
flavour and transport.  No process is started here (STYLE 17, after ReFrame's
``reframe/core/launchers/mpi.py``); what is looked at in the MPI's bin/ is which launcher
programs it has (`tool_path`, `openmpi_runtime`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import ClassVar

from .errors import UsageError

TRANSPORTS = ("shm", "tcp")


def tool_path(prefix: Path, program: str, flavour: str) -> Path:
    """<prefix>/bin/<program>.<flavour> where it exists, else <prefix>/bin/<program>.

    Debian and Ubuntu install Open MPI and MPICH side by side in /usr and name each one's tools
    so (mpirun.openmpi, mpiexec.mpich); the unsuffixed name is an alternative that may point
    to the other MPI."""
    named = prefix / "bin" / f"{program}.{flavour}"
    return named if flavour and named.exists() else prefix / "bin" / program


def openmpi_runtime(prefix: Path) -> str:
    """'orte' for an Open MPI up to 4.x (its daemons are <prefix>/bin/orted; Debian 12 has
    4.1), else 'prrte' (5.x: prted).  What differs in our commands is in the tables below."""
    return "orte" if (prefix / "bin" / "orted").exists() else "prrte"


# The shared-memory BTL: "vader" up to 4.x (4.1's "sm" is a stub that fails MPI_Init), "sm"
# from 5.0 on.  And the option naming the rsh/ssh agent that starts daemons on other hosts.
OPENMPI_SHM_BTL = MappingProxyType({"orte": "vader", "prrte": "sm"})
OPENMPI_AGENT_OPTION = MappingProxyType(
    {"orte": ("--mca", "plm_rsh_agent"), "prrte": ("--prtemca", "plm_ssh_agent")}
)


@dataclass(frozen=True)
class LaunchCommand:
    """An argument list and the environment variables the launcher adds to the caller's."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Launcher:
    """Base class: `prefix` is the MPI installation (its bin/ holds the launcher)."""

    prefix: Path
    flavour: ClassVar[str] = ""
    program: ClassVar[str] = ""

    @property
    def executable(self) -> str:
        """The launcher program, e.g. <prefix>/bin/mpirun (Debian: /usr/bin/mpirun.openmpi)."""
        return str(tool_path(self.prefix, self.program, self.flavour))

    def command(
        self,
        program_argv: Sequence[str],
        np: int,
        transport: str,
        *,
        ncpus: int,
        euid: int,
    ) -> LaunchCommand:
        """The launch of `program_argv` on `np` local ranks over `transport`.

        `ncpus` and `euid` are the caller's (os.cpu_count(), os.geteuid()), passed in so
        that the result depends on the arguments only."""
        if transport not in TRANSPORTS:
            raise UsageError(f"unknown transport '{transport}' (known: {', '.join(TRANSPORTS)})")
        if isinstance(np, bool) or not isinstance(np, int) or np < 1:
            raise UsageError(f"the number of ranks must be a positive integer, got {np!r}")
        if not program_argv:
            raise UsageError("no program to launch")
        return self._build(list(program_argv), np, transport, ncpus, euid)

    def _build(
        self, program_argv: list[str], np: int, transport: str, ncpus: int, euid: int
    ) -> LaunchCommand:
        raise NotImplementedError


@dataclass(frozen=True)
class OpenMpiLauncher(Launcher):
    """Open MPI's mpirun with the ob1 PML and an explicit BTL list."""

    flavour: ClassVar[str] = "openmpi"
    program: ClassVar[str] = "mpirun"

    def _build(
        self, program_argv: list[str], np: int, transport: str, ncpus: int, euid: int
    ) -> LaunchCommand:
        argv = [self.executable, "-np", str(np)]
        oversubscribed = np > ncpus
        if oversubscribed:
            argv.append("--oversubscribe")
        # osc/ucx needs pml/ucx: without it, it prints an error at each window creation
        argv += ["--mca", "pml", "ob1", "--mca", "osc", "^ucx"]
        if transport == "shm":
            argv += ["--mca", "btl", f"self,{OPENMPI_SHM_BTL[openmpi_runtime(self.prefix)]}"]
        else:
            argv += ["--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo"]
        if oversubscribed:
            argv += ["--mca", "mpi_yield_when_idle", "1"]
        env: dict[str, str] = {}
        if euid == 0:
            env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
            env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
        return LaunchCommand(tuple(argv + program_argv), env)


# MPICH's counterpart of Open MPI's mpi_yield_when_idle (ch4, MPICH 4.3 on; older MPICHs ignore
# the variables): after this many polls in a row that found nothing, each further poll sleeps
# in usleep(1), so that idle ranks leave the cores to the busy ones when ranks outnumber cores
# (its ranks otherwise poll without yielding: MPICH's plain C tests of 3 ranks or more took
# 206 s on 2 cores, 96 s with it; mpi_halo_np4 28 s, 5 s).
MPICH_IDLE_ENV = MappingProxyType(
    {
        "MPIR_CVAR_CH4_PROGRESS_THROTTLE": "1",
        "MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT": "1000",
    }
)


def mpich_tcp_env(iface: str) -> dict[str, str]:
    """MPICH's network traffic on TCP over `iface`, whichever netmod the library has: the OFI
    netmod's tcp provider where it has OFI (the wheel: ch4:ucx,ofi; its UCX refuses lo:
    "Destination is unreachable"), else UCX's tcp transport alone (Debian 12's MPICH 4.0 is
    ch4:ucx only; its UCX 1.13 takes lo).  Not UCX's shared-memory or cma transports: between
    test-bed hosts they would bypass the emulated link.  The variables of the netmod that is
    not used are ignored."""
    return {
        "MPIR_CVAR_CH4_NETMOD": "ofi",
        "FI_PROVIDER": "tcp",
        "FI_TCP_IFACE": iface,
        "UCX_TLS": "tcp,self",
        "UCX_NET_DEVICES": iface,
    }


@dataclass(frozen=True)
class MpichLauncher(Launcher):
    """MPICH's hydra mpiexec; the TCP path is TCP on lo (`mpich_tcp_env`), with MPICH's own
    shared memory between local ranks turned off."""

    flavour: ClassVar[str] = "mpich"
    program: ClassVar[str] = "mpiexec"

    def _build(
        self, program_argv: list[str], np: int, transport: str, ncpus: int, euid: int
    ) -> LaunchCommand:
        argv = [self.executable, "-n", str(np)]
        env: dict[str, str] = {}
        if transport == "tcp":
            env = {"MPIR_CVAR_NOLOCAL": "1", **mpich_tcp_env("lo")}
        if np > ncpus:
            env.update(MPICH_IDLE_ENV)
        return LaunchCommand(tuple(argv + program_argv), env)


@dataclass(frozen=True)
class HostPlacement:
    """Ranks spread over emulated hosts (network namespaces of the test bed).

    `hosts` are host names the agent knows, `ppn` ranks go on each; `agent` is the ssh
    stand-in the MPI's launcher calls to start its daemons on the other hosts; `subnet`
    (CIDR) and `iface` restrict MPI to the emulated network.  The command built here must
    itself be started inside the first host (the root namespace has no route to the emulated
    network): the test bed wraps it."""

    hosts: tuple[str, ...]
    ppn: int
    agent: str
    subnet: str
    iface: str

    @property
    def np(self) -> int:
        """Total ranks."""
        return self.ppn * len(self.hosts)


def _check_placement(placement: HostPlacement, program_argv: Sequence[str]) -> None:
    if not placement.hosts:
        raise UsageError("no hosts to place ranks on")
    if isinstance(placement.ppn, bool) or not isinstance(placement.ppn, int) or placement.ppn < 1:
        raise UsageError(f"ranks per host must be a positive integer, got {placement.ppn!r}")
    if not program_argv:
        raise UsageError("no program to launch")


def openmpi_hosts_command(
    prefix: Path,
    program_argv: Sequence[str],
    placement: HostPlacement,
    *,
    euid: int,
    ncpus: int | None = None,
) -> LaunchCommand:
    """Open MPI across test-bed hosts: TCP BTL (plus shared memory between ranks of one
    host), both the BTL and the runtime's out-of-band channel restricted to the emulated
    subnet, daemons started through the agent (the option and BTL names of the prefix's
    runtime: `openmpi_runtime`).  `--bind-to none`: every emulated host sees all cores of the
    one real machine, so default binding would put rank 0 of every host on core 0 (measured:
    4 ms per ping-pong as the ranks take turns on one core).  When the ranks of all hosts
    outnumber the machine's `ncpus` cores (helper ranks), `mpi_yield_when_idle` makes idle
    ranks give their core away to the ones (and the delay line) that have work."""
    _check_placement(placement, program_argv)
    hosts = ",".join(f"{h}:{placement.ppn}" for h in placement.hosts)
    runtime = openmpi_runtime(prefix)
    btl = f"self,{OPENMPI_SHM_BTL[runtime]},tcp" if placement.ppn > 1 else "self,tcp"
    argv = [
        str(tool_path(prefix, "mpirun", "openmpi")),
        "-np",
        str(placement.np),
        "--host",
        hosts,
        "--bind-to",
        "none",
        *OPENMPI_AGENT_OPTION[runtime],
        placement.agent,
        "--mca",
        "pml",
        "ob1",
        "--mca",
        "osc",
        "^ucx",  # needs pml/ucx: else an error line at each window creation
        "--mca",
        "btl",
        btl,
        "--mca",
        "btl_tcp_if_include",
        placement.subnet,
        "--mca",
        "oob_tcp_if_include",
        placement.subnet,
    ]
    if ncpus is not None and placement.np > ncpus:
        argv += ["--mca", "mpi_yield_when_idle", "1"]
    argv += program_argv
    # The remote daemons (prted) are found through PATH, as over ssh.
    env = {"PATH": f"{prefix / 'bin'}:/usr/sbin:/usr/bin:/sbin:/bin"}
    if euid == 0:
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    return LaunchCommand(tuple(argv), env)


def mpich_hosts_command(
    prefix: Path,
    program_argv: Sequence[str],
    placement: HostPlacement,
    *,
    euid: int,
    ncpus: int | None = None,
) -> LaunchCommand:
    """MPICH (hydra) across test-bed hosts: proxies started through the agent and calling
    back on the emulated interface; TCP on that interface (`mpich_tcp_env`: UCX's shared
    memory would carry cross-namespace traffic, never the link).  When the ranks of all hosts
    outnumber the machine's `ncpus` cores, `MPICH_IDLE_ENV` (as Open MPI's yield when idle)."""
    del euid  # hydra has no root guard
    _check_placement(placement, program_argv)
    netenv = mpich_tcp_env(placement.iface)
    if ncpus is not None and placement.np > ncpus:
        netenv.update(MPICH_IDLE_ENV)
    genv = [arg for key, value in netenv.items() for arg in ("-genv", key, value)]
    argv = [
        str(tool_path(prefix, "mpiexec", "mpich")),
        "-launcher",
        "ssh",
        "-launcher-exec",
        placement.agent,
        "-iface",
        placement.iface,
        "-hosts",
        ",".join(placement.hosts),
        "-ppn",
        str(placement.ppn),
        "-n",
        str(placement.np),
        *genv,
        *program_argv,
    ]
    env = {"PATH": f"{prefix / 'bin'}:/usr/sbin:/usr/bin:/sbin:/bin", **netenv}
    return LaunchCommand(tuple(argv), env)


HOSTS_COMMANDS = MappingProxyType({"openmpi": openmpi_hosts_command, "mpich": mpich_hosts_command})


LAUNCHERS: Mapping[str, type[Launcher]] = MappingProxyType(
    {cls.flavour: cls for cls in (OpenMpiLauncher, MpichLauncher)}
)


def launcher_for(flavour: str, prefix: Path) -> Launcher:
    """The registered launcher of an MPI flavour; UsageError for an unknown one."""
    try:
        cls = LAUNCHERS[flavour]
    except KeyError:
        raise UsageError(
            f"cannot launch an MPI of unknown flavour at {prefix} "
            f"(known flavours: {', '.join(LAUNCHERS)}; is ompi_info or mpichversion in its bin/?)"
        ) from None
    return cls(prefix)
