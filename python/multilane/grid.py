"""`multilane grid run`: one MPI program across sites whose ranks cannot reach each other
(private addresses), as one MPI job per site joined by gateways on the front-ends (seed 004,
docs/RELAY.md "Running across sites").

    multilane grid run SCENARIO.toml [--trunks K] [--mpi M | --mpi a=M1,b=M2] --np N -- PROG
    multilane grid run --local [--sites 2] [--trunks K] ... -- PROG

The run, in this order: a plan (sites -> ranks, MPI, layer, compute hosts; gateways with
inside and WAN addresses; the wrapper that starts a command on a host), every gateway
(`mln-gateway`, one per site and trunk) until each has printed its ready line, then each
site's MPI job (its own MPI's launcher, its own build of the layer), then a watch: the first
site job that fails, or gateway that dies before its site's job ended, stops everything the
run started (process groups, by id) with one line naming the site and the cause.

The per-run secret (`secrets.token_hex(32)`) reaches the gateways and the launchers through
their environment only; the launchers forward it, and every MLN_* variable, to the ranks BY
NAME (Open MPI `-x NAME`, hydra `-genvlist A,B`): it is on no command line and in no file."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import secrets
import shlex
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import __version__, paths
from . import mpi as mpimod
from .bench import check_tunables
from .context import Context
from .errors import UsageError
from .external import layer_library, parse_env_items, resolve_mpi, resolve_program
from .grid_run import (
    EXIT_TERMINATED,
    GATEWAYS_VAR,
    GRID_VARS,
    SECRET_VAR,
    SITE_VAR,
    SITES_VAR,
    START_TIMEOUT_S,
    SUMMARY_MARK,
    GatewayStart,
    GridRun,
    JobStart,
    RunOptions,
    Terminated,
    sigterm_raises,
)
from .launchers import HOSTS_COMMANDS, HostPlacement, LaunchCommand, launcher_for
from .testbed.bed import SiteInfo, Testbed

GATEWAY_PROGRAM = "mln-gateway"
GATEWAY_ENV = "MULTILANE_GATEWAY"  # another gateway program (tests, a gateway built elsewhere)
GATEWAY_BUILDS = ("openmpi", "mpich", "user", "deb-openmpi", "deb-mpich")
GATEWAY_LOG_LEVELS = ("none", "error", "warn", "info", "debug")
SITE_NAME = re.compile(r"[a-z][a-z0-9]{0,7}\Z")  # as the test bed's site names
LOCAL_ADDRESS = "127.0.0.1"
WAN_PORT = 7300  # test bed: trunk t's gateway takes WAN_PORT + t on its front-end
PORT_FLOOR = 20000  # --local: WAN ports from here to the ephemeral range
DEFAULT_SITES = 2
DEFAULT_RANKS_PER_SITE = 2
MAX_LOCAL_SITES = 26
JSON_SCHEMA = "multilane-grid-run"
NO_PROGRAM = "no program: give it after --, e.g. multilane grid run --local --np 4 -- ./a.out"

Wrap = Callable[[Sequence[str]], list[str]]


def _on_this_machine(argv: Sequence[str]) -> list[str]:
    return list(argv)


# --- the request -------------------------------------------------------------------------


@dataclass(frozen=True)
class GridRequest:
    """What `multilane grid run` was asked for (texts as given, checked by plan())."""

    program: tuple[str, ...]
    scenario: Path | None = None
    local: bool = False
    sites: int | None = None  # --sites (--local)
    np: str | None = None  # "4" or "a=2,b=2"
    mpi: str | None = None  # "openmpi" or "a=openmpi,b=mpich"
    trunks: int | None = None
    layer: bool = True
    env: Mapping[str, str] = field(default_factory=dict)
    label: bool = False
    timeout_s: float | None = None
    start_timeout_s: float = START_TIMEOUT_S
    gateway_log: str | None = None
    json_path: Path | None = None


def parse_assignments(text: str, option: str) -> dict[str, str] | None:
    """'a=x,b=y' as {'a': 'x', 'b': 'y'} (in that order); None for a text without '='."""
    if "=" not in text:
        return None
    found: dict[str, str] = {}
    for item in text.split(","):
        name, eq, value = (part.strip() for part in item.partition("="))
        if not eq or not name or not value:
            raise UsageError(f"{option} {text}: expected SITE=VALUE,SITE=VALUE (e.g. a=2,b=2)")
        if not SITE_NAME.match(name):
            raise UsageError(
                f"{option} {text}: '{name}' is not a site name (a-z first, then a-z 0-9; 8 at most)"
            )
        if name in found:
            raise UsageError(f"{option} {text}: site '{name}' is given twice")
        found[name] = value
    return found


def _check_names(given: Mapping[str, str], sites: Sequence[str], option: str, what: str) -> None:
    for name, value in given.items():
        if name not in sites:
            raise UsageError(
                f"{option} {name}={value}: no site '{name}' (sites: {', '.join(sites)})"
            )
    missing = [s for s in sites if s not in given]
    if missing:
        raise UsageError(
            f"{option}: no {what} given for site {', '.join(missing)} (give every site: "
            + ",".join(f"{s}=..." for s in sites)
            + ")"
        )


def _count(text: str, what: str) -> int:
    if not re.fullmatch(r"[0-9]+", text.strip()) or int(text) < 1:
        raise UsageError(f"{what}: expected a positive integer, got '{text}'")
    return int(text)


def split_ranks(
    text: str | None, sites: Sequence[str], default: Mapping[str, int]
) -> dict[str, int]:
    """--np: N split evenly over the sites, or a=2,b=3; `default` when not given."""
    if text is None:
        return dict(default)
    given = parse_assignments(text, "--np")
    if given is not None:
        _check_names(given, sites, "--np", "ranks")
        return {s: _count(given[s], f"--np {s}={given[s]}") for s in sites}
    total = _count(text, "--np")
    if total % len(sites):
        raise UsageError(
            f"--np {total} does not split evenly over {len(sites)} sites ({', '.join(sites)}): "
            f"give a multiple of {len(sites)}, or ranks per site: --np "
            + ",".join(f"{s}=N" for s in sites)
        )
    return {s: total // len(sites) for s in sites}


def site_mpis(text: str | None, sites: Sequence[str]) -> dict[str, str | None]:
    """--mpi: one MPI for every site, or a=openmpi,b=mpich; None: the first installed."""
    if text is None:
        return dict.fromkeys(sites)
    given = parse_assignments(text, "--mpi")
    if given is None:
        return dict.fromkeys(sites, text.strip())
    _check_names(given, sites, "--mpi", "MPI")
    return {s: given[s] for s in sites}


def local_site_names(request: GridRequest) -> tuple[str, ...]:
    """--local: the sites named by --np or --mpi (a=..,b=..), else --sites N of a, b, c, ..."""
    for option, text in (("--np", request.np), ("--mpi", request.mpi)):
        named = parse_assignments(text, option) if text is not None else None
        if named is None:
            continue
        if len(named) < 2:
            raise UsageError(f"{option} {text}: a grid needs 2 sites or more")
        if request.sites is not None and request.sites != len(named):
            raise UsageError(f"--sites {request.sites} but {option} {text} names {len(named)}")
        return tuple(named)
    count = DEFAULT_SITES if request.sites is None else request.sites
    if not 2 <= count <= MAX_LOCAL_SITES:
        raise UsageError(f"--sites {count}: expected 2 to {MAX_LOCAL_SITES} sites")
    return tuple(chr(ord("a") + i) for i in range(count))


def program_for(program: Sequence[str], mpi: str, site: str) -> tuple[str, ...]:
    """The program's words with {mpi} and {site} filled in (a program built per MPI:
    build/{mpi}/bin/grid_p2p)."""
    return tuple(w.replace("{mpi}", mpi).replace("{site}", site) for w in program)


# --- the plan ----------------------------------------------------------------------------


@dataclass(frozen=True)
class GatewayPlan:
    """One gateway: site `site`'s end of trunk `trunk`."""

    site: str
    trunk: int
    host: str  # the front-end; "" on this machine
    listen: str  # inside ADDR:PORT (port 0: any; the ready line says which)
    wan: str  # WAN-side ADDR:PORT (fixed: the other sites' gateways are told it)
    argv: tuple[str, ...]  # as started (wrapped into the host)


@dataclass(frozen=True)
class SitePlan:
    """One site's MPI job."""

    name: str
    ranks: int
    install: mpimod.MpiInstall
    library: Path | None  # the layer of this site's MPI; None with --no-layer
    program: tuple[str, ...]
    hosts: tuple[str, ...]  # compute hosts; () on this machine
    launch: LaunchCommand  # wrapped into the site's first host; grid variables by name
    gateways: tuple[GatewayPlan, ...]
    launcher: str = ""  # mpirun, mpiexec, ... (its name, for messages)


@dataclass(frozen=True)
class GridPlan:
    """Every process a run starts, with the addresses that join them."""

    sites: tuple[SitePlan, ...]
    trunks: int
    where: str  # "local" or the scenario's path
    gateway: Path
    forwarded: tuple[str, ...]  # variables the launchers pass to the ranks by name
    notes: tuple[str, ...] = ()
    cleanup: Callable[[], list[int]] | None = None  # test bed: stop what a failed run left

    @property
    def sites_text(self) -> str:
        """MLN_GRID_SITES: "a:2,b:2", in global rank order."""
        return ",".join(f"{s.name}:{s.ranks}" for s in self.sites)

    @property
    def np(self) -> int:
        return sum(s.ranks for s in self.sites)

    def describe(self) -> list[str]:
        """The commands, as a shell would read them (the secret only named)."""
        lines = [f"# {self.where}: sites {self.sites_text}, {self.trunks} trunk(s)"]
        hidden = f"{SECRET_VAR}=<64 hex digits, made at start>"
        for site in self.sites:
            for gw in site.gateways:
                lines.append(f"{hidden} {shlex.join(gw.argv)}")
        for site in self.sites:
            env = " ".join(f"{k}={shlex.quote(v)}" for k, v in site.launch.env.items())
            grid = f"{SITES_VAR}={self.sites_text} {SITE_VAR}={site.name} "
            grid += f"{GATEWAYS_VAR}=<listen addresses from the ready lines> {hidden}"
            lines.append(f"{grid} {env + ' ' if env else ''}{shlex.join(site.launch.argv)}")
        return lines


def forwarded_names(ctx: Context, env: Mapping[str, str]) -> tuple[str, ...]:
    """The variables the ranks get by name: the caller's MLN_* (MLN_LINK_SECURITY, ...),
    --env's, and the grid's own."""
    names = [k for k in sorted(ctx.env) if k.startswith("MLN_") and k not in GRID_VARS]
    names += [k for k in env if k not in names and k not in GRID_VARS]
    return (*names, *GRID_VARS)


def rank_env_flags(flavour: str, names: Sequence[str], library: Path | None) -> list[str]:
    """The launcher flags that pass `names` to the ranks by name (their values come from the
    launcher's own environment) and the layer by value (not the launcher's own LD_PRELOAD)."""
    if flavour == "openmpi":
        flags = [word for name in names for word in ("-x", name)]
        return flags + (["-x", f"LD_PRELOAD={library}"] if library else [])
    if flavour == "mpich":
        flags = ["-genvlist", ",".join(names)]
        return flags + (["-genv", "LD_PRELOAD", str(library)] if library else [])
    raise UsageError(f"cannot pass the ranks' environment through a {flavour} launcher")


def with_flags(
    launch: LaunchCommand, program: Sequence[str], flags: Sequence[str]
) -> LaunchCommand:
    """`launch` (ending with `program`) with `flags` just before the program."""
    n = len(program)
    if tuple(launch.argv[-n:]) != tuple(program):
        raise UsageError("internal: the launch does not end with the program")
    return LaunchCommand((*launch.argv[:-n], *flags, *program), launch.env)


def local_launch(
    install: mpimod.MpiInstall, program: Sequence[str], ranks: int, total: int, ctx: Context
) -> LaunchCommand:
    """One site's job on this machine, beside the other sites' jobs: the cores are shared
    out by ranks (so that the sites' ranks together oversubscribe as they do), Open MPI
    binds nothing (two jobs would bind to the same cores)."""
    share = max(1, ctx.ncpus * ranks // total)
    launcher = launcher_for(install.flavour, Path(install.prefix))
    launch = launcher.command(program, ranks, "shm", ncpus=share, euid=ctx.euid)
    if install.flavour == "openmpi":
        launch = LaunchCommand((launch.argv[0], "--bind-to", "none", *launch.argv[1:]), launch.env)
    return launch


def gateway_program(ctx: Context, installs: Sequence[mpimod.MpiInstall]) -> Path:
    """$MULTILANE_GATEWAY, else build/<mpi>/bin/mln-gateway of a site's MPI, else of any
    build (it uses no MPI: any flavour's does)."""
    given = ctx.env.get(GATEWAY_ENV)
    if given:
        path = Path(given)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise UsageError(f"{GATEWAY_ENV}={given}: not an executable file")
        return path.resolve()
    names = [i.name for i in installs] + [m for m in GATEWAY_BUILDS]
    for name in dict.fromkeys(names):
        path = paths.program_path(ctx.root, name, GATEWAY_PROGRAM)
        if os.access(path, os.X_OK):
            return path
    where = paths.program_path(ctx.root, installs[0].name, GATEWAY_PROGRAM)
    raise UsageError(
        f"{GATEWAY_PROGRAM} is not built ({paths.display(where, ctx.root)}): run make build"
    )


def gateway_argv(
    program: Path,
    *,
    site: str,
    trunk: int,
    trunks: int,
    sites: str,
    listen: str,
    wan: str,
    peers: Sequence[tuple[str, str]],
    log: str | None = None,
) -> list[str]:
    """mln-gateway's command line (docs/RELAY.md); the secret is not on it."""
    argv = [str(program), "--site", site, "--trunk", str(trunk), "--trunks", str(trunks)]
    argv += ["--sites", sites, "--listen", listen, "--wan", wan]
    for name, address in peers:
        argv += ["--peer", f"{name}={address}"]
    return argv + (["--log", log] if log else [])


def ephemeral_low(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> int:
    """The first port the kernel hands out on its own (connect, bind to port 0)."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_ports(count: int, address: str = LOCAL_ADDRESS) -> list[int]:
    """`count` distinct TCP ports free on `address` now, chosen at random below the kernel's
    ephemeral range (PORT_FLOOR up), so that no connection made meanwhile takes one before a
    gateway binds it; all held open until all are found."""
    pool = list(range(PORT_FLOOR, max(PORT_FLOOR + 1000, ephemeral_low())))
    random.shuffle(pool)
    held: list[socket.socket] = []
    try:
        for port in pool:
            if len(held) == count:
                break
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.bind((address, port))
            except OSError:
                sock.close()
                continue
            held.append(sock)
        if len(held) < count:
            raise UsageError(f"cannot find {count} free TCP ports on {address}")
        return [s.getsockname()[1] for s in held]
    finally:
        for sock in held:
            sock.close()


@dataclass(frozen=True)
class _SitePlace:
    """Where one site's processes go: compute hosts and front-ends with their wrappers."""

    name: str
    hosts: tuple[str, ...]  # () on this machine
    frontends: tuple[tuple[str, str, str], ...]  # (host, inside address, WAN-side address)
    wrap: Wrap  # starts a command in the site's first compute host
    wrap_on: Callable[[str], Wrap]  # starts a command in a given front-end
    hosts_launch: Callable[[mpimod.MpiInstall, Sequence[str], int, Context], LaunchCommand]


def _resolve_site_mpis(
    request: GridRequest, ctx: Context, mpis: Mapping[str, str | None]
) -> dict[str, tuple[mpimod.MpiInstall, Path | None]]:
    out = {}
    for site, name in mpis.items():
        try:
            install = resolve_mpi(name, ctx, request.layer)
            launcher_for(install.flavour, Path(install.prefix))
            library = layer_library(ctx, install) if request.layer else None
        except UsageError as exc:
            raise UsageError(f"site {site}: {exc}") from None
        out[site] = (install, library)
    return out


def _check_request(request: GridRequest) -> None:
    if not request.program:
        raise UsageError(NO_PROGRAM)
    if request.local == (request.scenario is not None):
        raise UsageError("give a scenario (its test bed's private sites) or --local, not both")
    if request.scenario is not None and request.sites is not None:
        raise UsageError("--sites is for --local: a scenario's sites are its private sites")
    if request.layer and "LD_PRELOAD" in request.env:
        raise UsageError("--env LD_PRELOAD: the layer sets LD_PRELOAD; add --no-layer to set it")
    for name in request.env:
        if name in GRID_VARS:
            raise UsageError(f"--env {name}: the grid sets it")


def plan(request: GridRequest, ctx: Context) -> GridPlan:
    """Check everything (sites, ranks, MPIs, layers, program, gateway) and build every
    command; UsageError with one line on the first problem.  Nothing is started."""
    _check_request(request)
    notes: list[str] = []
    cleanup = None
    if request.local:
        names = local_site_names(request)
        counts = split_ranks(request.np, names, dict.fromkeys(names, DEFAULT_RANKS_PER_SITE))
        trunks = request.trunks or 1
        ports = iter(free_ports(len(names) * trunks))
        places = [
            _SitePlace(
                name,
                (),
                tuple(
                    (f"{name}{t}", LOCAL_ADDRESS, f"{LOCAL_ADDRESS}:{next(ports)}")
                    for t in range(trunks)
                ),
                _on_this_machine,
                lambda host: _on_this_machine,
                lambda install, program, ranks, c: local_launch(
                    install, program, ranks, sum(counts.values()), c
                ),
            )
            for name in names
        ]
        where = "local"
    else:
        assert request.scenario is not None
        places, counts, trunks, cleanup = _testbed_places(request, ctx, notes)
        where = str(request.scenario)
    names = tuple(p.name for p in places)
    installs = _resolve_site_mpis(request, ctx, site_mpis(request.mpi, names))
    for site, (install, library) in installs.items():
        if library is not None:
            try:
                check_tunables(ctx, install.name, request.env)
            except UsageError as exc:
                raise UsageError(f"site {site}: {exc}") from None
    gateway = gateway_program(ctx, [i for i, _ in installs.values()])
    names_fwd = forwarded_names(ctx, request.env)
    sites_text = ",".join(f"{p.name}:{counts[p.name]}" for p in places)
    sites = []
    for place in places:
        install, library = installs[place.name]
        try:
            program = program_for(request.program, install.name, place.name)
            program = resolve_program(program, ctx.env)
        except UsageError as exc:
            raise UsageError(f"site {place.name}: {exc}") from None
        launch = place.hosts_launch(install, program, counts[place.name], ctx)
        launch = with_flags(launch, program, rank_env_flags(install.flavour, names_fwd, library))
        launcher = Path(launch.argv[0]).name
        launch = LaunchCommand(tuple(place.wrap(launch.argv)), launch.env)
        gateways = []
        for t in range(trunks):
            host, inside, wan = place.frontends[t]
            argv = gateway_argv(
                gateway,
                site=place.name,
                trunk=t,
                trunks=trunks,
                sites=sites_text,
                listen=f"{inside}:0",
                wan=wan,
                peers=[(p.name, p.frontends[t][2]) for p in places if p is not place],
                log=request.gateway_log,
            )
            wrapped = tuple(place.wrap_on(host)(argv))
            gateways.append(
                GatewayPlan(place.name, t, host if place.hosts else "", f"{inside}:0", wan, wrapped)
            )
        sites.append(
            SitePlan(
                place.name,
                counts[place.name],
                install,
                library,
                program,
                place.hosts,
                launch,
                tuple(gateways),
                launcher,
            )
        )
    return GridPlan(tuple(sites), trunks, where, gateway, names_fwd, tuple(notes), cleanup)


def _testbed_places(
    request: GridRequest, ctx: Context, notes: list[str]
) -> tuple[list[_SitePlace], dict[str, int], int, Callable[[], list[int]]]:
    """The running test bed of the request's scenario, checked (root, up, complete, built
    from that file, the private variant), and the run's places on it (testbed_places)."""
    assert request.scenario is not None
    if ctx.euid != 0:
        raise UsageError("runs on the test bed need root (network namespaces): run as root")
    bed = Testbed.load(ctx)
    where = request.scenario.resolve()
    if bed is None:
        raise UsageError(f"no test bed is up: run multilane testbed up {request.scenario}")
    if Path(bed.state.scenario) != where:
        raise UsageError(
            f"the test bed that is up was built from {bed.state.scenario}, not {where}: "
            "run multilane testbed down first"
        )
    if not bed.state.complete:
        raise UsageError("the test bed is INCOMPLETE (a failed up): run multilane testbed down")
    if bed.variant != "private":
        raise UsageError(
            f"the test bed is up as the {bed.variant} network (every site routable): a grid "
            "run needs the private one: multilane testbed down, then up"
        )
    places, counts, trunks = testbed_places(bed, request, notes)
    return places, counts, trunks, bed.stop_host_processes


def testbed_places(
    bed: Testbed, request: GridRequest, notes: list[str]
) -> tuple[list[_SitePlace], dict[str, int], int]:
    """The private sites of a live test bed: each site's job on its compute hosts (launched
    in the first, through the agent: its hostname, its site's subnet), trunk t's gateway on
    the site's front-end t (listening on its inside address, WAN side at WAN_PORT + t).
    Trunks: --trunks, at most (and by default) the front-ends of the smallest site."""
    sites = [s for s in bed.sites if s.private and s.frontends and s.compute]
    if len(sites) < 2:
        names = ", ".join(s.name for s in sites) or "none"
        raise UsageError(
            f"{request.scenario}: a grid run needs 2 private sites or more with compute hosts "
            f"and front-ends (private = true, frontends = N); it has {names}"
        )
    names = [s.name for s in sites]
    counts = split_ranks(request.np, names, {s.name: len(s.compute) for s in sites})
    fewest = min(sites, key=lambda s: len(s.frontends))
    trunks = request.trunks or len(fewest.frontends)
    if trunks > len(fewest.frontends):
        notes.append(
            f"--trunks {trunks}: site {fewest.name} has {len(fewest.frontends)} front-ends, so "
            f"{len(fewest.frontends)} trunks"
        )
        trunks = len(fewest.frontends)

    def in_host(host: str) -> Wrap:
        return lambda argv: bed.exec_argv(host, argv)

    def hosts_launch(site: SiteInfo) -> Callable[..., LaunchCommand]:
        hosts = tuple(h.name for h in site.compute)

        def launch(
            install: mpimod.MpiInstall, program: Sequence[str], ranks: int, ctx: Context
        ) -> LaunchCommand:
            used = hosts[:ranks]  # fewer ranks than hosts: one on each of the first
            if ranks % len(used):
                raise UsageError(
                    f"site {site.name}: {ranks} ranks do not split evenly over its "
                    f"{len(hosts)} compute hosts ({', '.join(hosts)})"
                )
            command = HOSTS_COMMANDS.get(install.flavour)
            if command is None:
                raise UsageError(f"{install.name}: no test-bed launcher for {install.flavour}")
            iface = site.compute[0].interface
            place = HostPlacement(used, ranks // len(used), str(bed.agent), site.subnet, iface)
            return command(Path(install.prefix), program, place, euid=ctx.euid, ncpus=ctx.ncpus)

        return launch

    places = [
        _SitePlace(
            s.name,
            tuple(h.name for h in s.compute),
            tuple(
                (fe.name, fe.address, f"{fe.wan_address}:{WAN_PORT + t}")
                for t, fe in enumerate(s.frontends[:trunks])
            ),
            in_host(s.compute[0].name),
            in_host,
            hosts_launch(s),
        )
        for s in sites
    ]
    return places, counts, trunks


def job_starts(grid: GridPlan, ctx: Context, request: GridRequest) -> list[JobStart]:
    """Each site's job with its launcher's environment: the caller's, --env, the launcher's
    own, and the grid variables (the gateways' addresses and the secret come at start)."""
    return [
        JobStart(
            site.name,
            site.launch.argv,
            {
                **ctx.env,
                **request.env,
                **site.launch.env,
                SITES_VAR: grid.sites_text,
                SITE_VAR: site.name,
            },
            Path(site.program[0]).name,
            site.launcher,
        )
        for site in grid.sites
    ]


def summary(grid: GridPlan, run: GridRun, request: GridRequest, status: int) -> dict[str, Any]:
    """The --json record of a run (for benchmarks): sites, ranks, trunks, MPI per site,
    gateways' ready times, exit codes, wall time.  No secret in it."""
    started = {(c.site, c.trunk): c for c in run.children}
    sites = []
    for site in grid.sites:
        job = started.get((site.name, -1))
        gateways = []
        for gw in site.gateways:
            child = started.get((gw.site, gw.trunk))
            gateways.append(
                {
                    "trunk": gw.trunk,
                    "host": gw.host,
                    "listen": child.listen if child else "",
                    "wan": gw.wan,
                    "ready_s": child.ready_s if child else None,
                    "exit_code": child.exit_code if child else None,
                    "pid": child.proc.pid if child else None,
                }
            )
            counts = parse_gateway_summary(child.summary) if child else None
            if counts is not None:  # --gateway-log info (or debug): frames per peer and rank
                gateways[-1]["summary"] = counts
        ended = None if job is None or job.ended_s is None else job.ended_s - job.started_s
        sites.append(
            {
                "name": site.name,
                "ranks": site.ranks,
                "mpi": site.install.name,
                "mpi_version": site.install.version,
                "layer": None if site.library is None else str(site.library),
                "hosts": list(site.hosts),
                "exit_code": None if job is None else job.exit_code,
                "pid": None if job is None else job.proc.pid,
                "job_s": ended,
                "gateways": gateways,
            }
        )
    return {
        "schema": JSON_SCHEMA,
        "data_version": 1,
        "multilane_version": __version__,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "where": grid.where,
        "program": list(request.program),
        "np": grid.np,
        "trunks": grid.trunks,
        "sites": sites,
        "status": status,
        "failure": run.failure,
        "warnings": run.warnings,
        "notes": list(grid.notes),
        "wall_s": time.monotonic() - run.start,
    }


def execute(
    grid: GridPlan, request: GridRequest, ctx: Context, options: RunOptions
) -> tuple[int, GridRun]:
    """Start and watch a planned run to its end (GridRun), then stop what a failed run left in
    the test-bed hosts and write the --json summary; (exit status, the run)."""
    gateways = [GatewayStart(g.site, g.trunk, g.argv) for s in grid.sites for g in s.gateways]
    run = GridRun(gateways, job_starts(grid, ctx, request), ctx.env, options)
    status = 1
    try:
        with sigterm_raises():
            status = run.run(secrets.token_hex(32))
    except Terminated:
        run.failure = "terminated (SIGTERM): every site's job and gateway stopped"
        status = EXIT_TERMINATED
    finally:
        if status != 0 and grid.cleanup is not None:
            with contextlib.suppress(Exception):
                grid.cleanup()  # what the jobs left in the test-bed hosts
        if request.json_path is not None:
            doc = summary(grid, run, request, status)
            request.json_path.parent.mkdir(parents=True, exist_ok=True)
            request.json_path.write_text(json.dumps(doc, indent=2) + "\n")
    return status, run


def run_grid(request: GridRequest, ctx: Context, *, dry_run: bool = False) -> int:
    """`multilane grid run`: plan, start, watch, stop; the exit status."""
    grid = plan(request, ctx)
    for note in grid.notes:
        print(f"multilane grid: note: {note}", file=sys.stderr, flush=True)
    if dry_run:
        for line in grid.describe():
            ctx.say(line)
        return 0
    mpis = ", ".join(f"{s.name}={s.install.name}" for s in grid.sites)
    layer = "under the layer" if request.layer else "no layer"
    print(
        f"multilane grid: {grid.where}: sites {grid.sites_text} ({mpis}), {grid.trunks} "
        f"trunk(s), {layer}",
        file=sys.stderr,
        flush=True,
    )
    options = RunOptions(
        label=request.label,
        timeout_s=request.timeout_s,
        start_timeout_s=request.start_timeout_s,
        echo_gateways=request.gateway_log is not None,
    )
    status, run = execute(grid, request, ctx, options)
    if run.failure:
        print(f"multilane grid: {run.failure}", file=sys.stderr, flush=True)
    for warning in run.warnings:
        print(f"multilane grid: warning: {warning}", file=sys.stderr, flush=True)
    return status


def command_line(request: GridRequest) -> list[str]:
    """The `multilane grid run` command line of a request (what a user types to run it
    again by hand): options as given, then -- and the program."""
    argv = ["multilane", "grid", "run"]
    argv += ["--local"] if request.local else [str(request.scenario)]
    for flag, value in (
        ("--sites", request.sites),
        ("--np", request.np),
        ("--mpi", request.mpi),
        ("--trunks", request.trunks),
        ("--timeout", None if request.timeout_s is None else f"{request.timeout_s:g}"),
        ("--gateway-log", request.gateway_log),
        ("--json", request.json_path),
    ):
        if value is not None:
            argv += [flag, str(value)]
    argv += ["--no-layer"] if not request.layer else []
    for name, value in request.env.items():
        argv += ["--env", f"{name}={value}"]
    return [*argv, "--", *request.program]


_SUMMARY_PART = re.compile(
    r"(?P<dest>rank (?P<rank>[0-9]+) of site (?P<rsite>\w+)|the gateway of site (?P<gsite>\w+) "
    r"\(trunk [0-9]+\)) in (?P<fin>[0-9]+) frames (?P<bin>[0-9]+) B, out (?P<fout>[0-9]+) "
    r"frames (?P<bout>[0-9]+) B"
)
_DROPPED = re.compile(r"dropped ([0-9]+)\s*\Z")


def parse_gateway_summary(line: str) -> dict[str, Any] | None:
    """A gateway's summary line at exit (`mln-gateway[a/0] info: summary: rank 0 of site a in
    N frames N B, out N frames N B; ...; the gateway of site b (trunk 0) in ...; dropped N`)
    as {"peers": {"b": {frames_in, bytes_in, frames_out, bytes_out}}, "ranks": {"0": {...}},
    "dropped": N}: frames and bytes this gateway received from (in) and sent to (out) each
    peer gateway (the WAN) and each rank of its site; None for another line."""
    if SUMMARY_MARK not in line:
        return None
    peers: dict[str, dict[str, int]] = {}
    ranks: dict[str, dict[str, int]] = {}
    for m in _SUMMARY_PART.finditer(line):
        counts = {
            "frames_in": int(m["fin"]),
            "bytes_in": int(m["bin"]),
            "frames_out": int(m["fout"]),
            "bytes_out": int(m["bout"]),
        }
        if m["gsite"]:
            peers[m["gsite"]] = counts
        else:
            ranks[m["rank"]] = counts
    dropped = _DROPPED.search(line)
    return {"peers": peers, "ranks": ranks, "dropped": int(dropped[1]) if dropped else 0}


# --- the command line --------------------------------------------------------------------


def _positive_int(text: str) -> int:
    if not re.fullmatch(r" *\+?[0-9]+ *", text) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got '{text}'")
    return int(text)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got '{text}'")
    return value


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """`multilane grid run`."""
    grid = sub.add_parser(
        "grid", help="one MPI program across private sites, joined by gateways (docs/RELAY.md)"
    )
    actions = grid.add_subparsers(dest="grid_command", metavar="ACTION", required=True)
    run = actions.add_parser(
        "run",
        help="run a program: one MPI job per site, gateways on the front-ends",
        usage="%(prog)s (SCENARIO.toml | --local [--sites N]) [options] -- PROGRAM [ARGS...]",
    )
    run.add_argument(
        "scenario",
        nargs="?",
        type=Path,
        metavar="SCENARIO.toml",
        help="across the private sites of this scenario's running test bed",
    )
    run.add_argument(
        "--local",
        action="store_true",
        help="every site on this machine, gateways on 127.0.0.1 (tests, CI)",
    )
    run.add_argument(
        "--sites",
        type=_positive_int,
        metavar="N",
        help=f"--local: sites a, b, ... (default {DEFAULT_SITES})",
    )
    run.add_argument(
        "--np",
        metavar="N|a=N,b=N",
        help="ranks: N split evenly over the sites, or per site (default: --local "
        f"{DEFAULT_RANKS_PER_SITE} per site; test bed one per compute host)",
    )
    run.add_argument(
        "--mpi",
        metavar="M|a=M,b=M",
        help=f"the MPI of every site, or per site ({', '.join(mpimod.KNOWN)}); the program's "
        "words may say {mpi} and {site}, e.g. build/{mpi}/bin/grid_p2p",
    )
    run.add_argument(
        "--trunks",
        type=_positive_int,
        metavar="K",
        help="gateways per site (default: --local 1; test bed: the front-ends of the "
        "smallest site)",
    )
    run.add_argument(
        "--no-layer",
        action="store_true",
        help="no LD_PRELOAD of the layer (a program that calls the relay itself)",
    )
    run.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="VAR=VALUE",
        help="set in the ranks' environment (repeatable), e.g. MLN_RELAY_WINDOW=4M",
    )
    run.add_argument("--label", action="store_true", help="prefix each output line with [SITE]")
    run.add_argument(
        "--timeout",
        type=_positive_float,
        help="seconds before everything the run started is stopped (default: none)",
    )
    run.add_argument(
        "--start-timeout",
        type=_positive_float,
        default=START_TIMEOUT_S,
        help=f"seconds for the gateways to be ready (default {START_TIMEOUT_S:g})",
    )
    run.add_argument(
        "--gateway-log",
        choices=GATEWAY_LOG_LEVELS,
        help="the gateways' log level (their --log); their lines go to stderr",
    )
    run.add_argument("--json", type=Path, metavar="FILE", help="write a summary of the run")
    run.add_argument("--dry-run", action="store_true", help="check and print the commands only")


def cmd_grid(args: argparse.Namespace, ctx: Context) -> int:
    """Dispatch `grid ACTION` (only `run`)."""
    request = GridRequest(
        program=tuple(args.extra),
        scenario=args.scenario,
        local=args.local,
        sites=args.sites,
        np=args.np,
        mpi=args.mpi,
        trunks=args.trunks,
        layer=not args.no_layer,
        env=parse_env_items(args.env),
        label=args.label,
        timeout_s=args.timeout,
        start_timeout_s=args.start_timeout,
        gateway_log=args.gateway_log,
        json_path=args.json,
    )
    return run_grid(request, ctx, dry_run=args.dry_run)
