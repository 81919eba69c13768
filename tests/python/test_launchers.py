"""Launcher argument lists for every flavour x transport x rank count (pure functions)."""

from __future__ import annotations

from pathlib import Path

import pytest

from multilane import launchers
from multilane.errors import UsageError
from multilane.launchers import (
    LAUNCHERS,
    TRANSPORTS,
    MpichLauncher,
    OpenMpiLauncher,
    launcher_for,
)

PREFIX = Path("/opt/mpi")
PROGRAM = ["/b/mln-pt2pt", "--sizes", "1:4K"]
USER, ROOT = 1000, 0


def test_registry() -> None:
    assert set(LAUNCHERS) == {"openmpi", "mpich"}
    assert isinstance(launcher_for("openmpi", PREFIX), OpenMpiLauncher)
    assert isinstance(launcher_for("mpich", PREFIX), MpichLauncher)
    with pytest.raises(UsageError, match="unknown flavour"):
        launcher_for("unknown", PREFIX)


@pytest.mark.parametrize("np", [1, 2, 4])
def test_openmpi_shm(np: int) -> None:
    cmd = OpenMpiLauncher(PREFIX).command(PROGRAM, np, "shm", ncpus=4, euid=USER)
    assert cmd.argv == (
        "/opt/mpi/bin/mpirun", "-np", str(np), "--mca", "pml", "ob1", "--mca", "osc", "^ucx",
        "--mca", "btl", "self,sm", *PROGRAM,
    )  # fmt: skip
    assert dict(cmd.env) == {}


@pytest.mark.parametrize("np", [1, 2, 4])
def test_openmpi_tcp(np: int) -> None:
    cmd = OpenMpiLauncher(PREFIX).command(PROGRAM, np, "tcp", ncpus=4, euid=USER)
    assert cmd.argv == (
        "/opt/mpi/bin/mpirun", "-np", str(np), "--mca", "pml", "ob1", "--mca", "osc", "^ucx",
        "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo", *PROGRAM,
    )  # fmt: skip
    assert dict(cmd.env) == {}


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_openmpi_oversubscribed(transport: str) -> None:
    cmd = OpenMpiLauncher(PREFIX).command(PROGRAM, 3, transport, ncpus=2, euid=USER)
    argv = list(cmd.argv)
    assert argv[:4] == ["/opt/mpi/bin/mpirun", "-np", "3", "--oversubscribe"]
    i = argv.index("mpi_yield_when_idle")
    assert argv[i - 1 : i + 2] == ["--mca", "mpi_yield_when_idle", "1"]
    assert argv[-len(PROGRAM) :] == PROGRAM


def test_openmpi_not_oversubscribed_at_core_count() -> None:
    argv = OpenMpiLauncher(PREFIX).command(PROGRAM, 2, "shm", ncpus=2, euid=USER).argv
    assert "--oversubscribe" not in argv
    assert "mpi_yield_when_idle" not in argv


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_openmpi_as_root(transport: str) -> None:
    cmd = OpenMpiLauncher(PREFIX).command(PROGRAM, 2, transport, ncpus=2, euid=ROOT)
    assert dict(cmd.env) == {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


MPICH_IDLE = {
    "MPIR_CVAR_CH4_PROGRESS_THROTTLE": "1",
    "MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT": "1000",
}


@pytest.mark.parametrize("np", [1, 2, 3, 8])
@pytest.mark.parametrize("euid", [USER, ROOT])
def test_mpich_shm(np: int, euid: int) -> None:
    """Idle ranks throttle their polling only when the ranks outnumber the 2 cores."""
    cmd = MpichLauncher(PREFIX).command(PROGRAM, np, "shm", ncpus=2, euid=euid)
    assert cmd.argv == ("/opt/mpi/bin/mpiexec", "-n", str(np), *PROGRAM)
    assert dict(cmd.env) == (MPICH_IDLE if np > 2 else {})


@pytest.mark.parametrize("np", [1, 2, 3, 8])
def test_mpich_tcp(np: int) -> None:
    cmd = MpichLauncher(PREFIX).command(PROGRAM, np, "tcp", ncpus=2, euid=ROOT)
    assert cmd.argv == ("/opt/mpi/bin/mpiexec", "-n", str(np), *PROGRAM)
    assert dict(cmd.env) == {
        "MPIR_CVAR_NOLOCAL": "1",
        "MPIR_CVAR_CH4_NETMOD": "ofi",
        "FI_PROVIDER": "tcp",
        "FI_TCP_IFACE": "lo",
        "UCX_TLS": "tcp,self",
        "UCX_NET_DEVICES": "lo",
        **(MPICH_IDLE if np > 2 else {}),
    }


@pytest.mark.parametrize("cls", [OpenMpiLauncher, MpichLauncher])
@pytest.mark.parametrize(
    ("np", "transport", "fragment"),
    [(0, "shm", "positive integer"), (-1, "tcp", "positive integer"),
     (True, "shm", "positive integer"), (2, "udp", "unknown transport")],
)  # fmt: skip
def test_bad_arguments(cls: type, np: int, transport: str, fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment):
        cls(PREFIX).command(PROGRAM, np, transport, ncpus=2, euid=USER)


def test_commands_are_argument_lists() -> None:
    """Arguments with spaces stay single arguments: no shell ever parses them."""
    program = ["/b/mln-pt2pt", "--meta", "label=a b; rm -rf /"]
    cmd = MpichLauncher(PREFIX).command(program, 2, "shm", ncpus=2, euid=USER)
    assert cmd.argv[-1] == "label=a b; rm -rf /"


def _placement(ppn: int = 1) -> launchers.HostPlacement:
    return launchers.HostPlacement(
        hosts=("siteA-h0", "siteB-h0"),
        ppn=ppn,
        agent="/run/agent",
        subnet="10.77.0.0/16",
        iface="eth0",
    )


def test_openmpi_hosts_command() -> None:
    cmd = launchers.openmpi_hosts_command(Path("/mpi"), ["prog", "--x"], _placement(), euid=0)
    argv = list(cmd.argv)
    assert argv[0] == "/mpi/bin/mpirun"
    assert argv[argv.index("-np") + 1] == "2"
    assert argv[argv.index("--host") + 1] == "siteA-h0:1,siteB-h0:1"
    assert argv[argv.index("--bind-to") + 1] == "none"
    assert argv[argv.index("plm_ssh_agent") + 1] == "/run/agent"
    assert argv[argv.index("btl") + 1] == "self,tcp"
    assert argv[argv.index("btl_tcp_if_include") + 1] == "10.77.0.0/16"
    assert argv[argv.index("oob_tcp_if_include") + 1] == "10.77.0.0/16"
    assert argv[-2:] == ["prog", "--x"]
    assert cmd.env["PATH"].startswith("/mpi/bin:")
    assert cmd.env["OMPI_ALLOW_RUN_AS_ROOT"] == "1"
    two = launchers.openmpi_hosts_command(Path("/mpi"), ["p"], _placement(2), euid=1000)
    assert "self,sm,tcp" in two.argv and "4" in two.argv
    assert "OMPI_ALLOW_RUN_AS_ROOT" not in two.env


def test_openmpi_hosts_command_yields_when_ranks_outnumber_cores() -> None:
    """Helper ranks (stripe's helper:K, ppn = 1 + K) put more ranks on the machine than it
    has cores: idle ranks must give their core to the busy ones and the delay line."""
    build = launchers.openmpi_hosts_command
    three = list(build(Path("/mpi"), ["p", "--x"], _placement(3), euid=0, ncpus=2).argv)
    assert three[three.index("mpi_yield_when_idle") - 1] == "--mca"
    assert three[three.index("mpi_yield_when_idle") + 1] == "1"
    assert three[-2:] == ["p", "--x"]  # the program and its arguments stay last
    for ncpus in (2, None):  # 2 ranks on 2 cores; or no core count given
        one = build(Path("/mpi"), ["p"], _placement(1), euid=0, ncpus=ncpus)
        assert "mpi_yield_when_idle" not in one.argv
    mpich = launchers.mpich_hosts_command(Path("/mpi"), ["p"], _placement(3), euid=0, ncpus=2)
    assert mpich.argv[-1] == "p"
    genv = {mpich.argv[i + 1]: mpich.argv[i + 2] for i, a in enumerate(mpich.argv) if a == "-genv"}
    assert {k: genv[k] for k in MPICH_IDLE} == MPICH_IDLE  # MPICH's counterpart
    for ncpus in (2, None):
        one = launchers.mpich_hosts_command(Path("/mpi"), ["p"], _placement(1), euid=0, ncpus=ncpus)
        assert not set(MPICH_IDLE) & set(one.argv)


def test_mpich_hosts_command() -> None:
    cmd = launchers.mpich_hosts_command(Path("/mpi"), ["prog"], _placement(3), euid=0)
    argv = list(cmd.argv)
    assert argv[0] == "/mpi/bin/mpiexec"
    assert argv[argv.index("-launcher-exec") + 1] == "/run/agent"
    assert argv[argv.index("-iface") + 1] == "eth0"
    assert argv[argv.index("-hosts") + 1] == "siteA-h0,siteB-h0"
    assert argv[argv.index("-ppn") + 1] == "3"
    assert argv[argv.index("-n") + 1] == "6"
    genv = {argv[i + 1]: argv[i + 2] for i, a in enumerate(argv) if a == "-genv"}
    assert genv == {
        "MPIR_CVAR_CH4_NETMOD": "ofi",
        "FI_PROVIDER": "tcp",
        "FI_TCP_IFACE": "eth0",
        "UCX_TLS": "tcp,self",  # Debian's MPICH 4.0 has UCX only: no shared memory across hosts
        "UCX_NET_DEVICES": "eth0",
    }
    assert argv[-1] == "prog"


@pytest.mark.parametrize("flavour", ["openmpi", "mpich"])
def test_hosts_command_rejects_bad_placement(flavour: str) -> None:
    build = launchers.HOSTS_COMMANDS[flavour]
    bad = launchers.HostPlacement((), 1, "/a", "10.0.0.0/8", "eth0")
    with pytest.raises(UsageError):
        build(Path("/mpi"), ["p"], bad, euid=0)
    with pytest.raises(UsageError):
        build(Path("/mpi"), ["p"], _placement(0), euid=0)
    with pytest.raises(UsageError):
        build(Path("/mpi"), [], _placement(), euid=0)


# ---- Debian's packaged MPIs (deb-openmpi, deb-mpich): one prefix, /usr, for both ----------


def _debian_prefix(tmp_path: Path, *tools: str) -> Path:
    """A stand-in for Debian's /usr: bin/ with the named (empty) tools."""
    (tmp_path / "bin").mkdir()
    for tool in tools:
        (tmp_path / "bin" / tool).write_text("")
    return tmp_path


DEBIAN_TOOLS = ("mpirun", "mpiexec", "mpirun.openmpi", "orted", "mpiexec.mpich", "ompi_info")


def test_tool_path_prefers_the_flavours_own_name(tmp_path: Path) -> None:
    """/usr/bin/mpirun is an alternative that may be MPICH's: the suffixed name wins."""
    usr = _debian_prefix(tmp_path, *DEBIAN_TOOLS)
    assert launchers.tool_path(usr, "mpirun", "openmpi") == usr / "bin" / "mpirun.openmpi"
    assert launchers.tool_path(usr, "mpiexec", "mpich") == usr / "bin" / "mpiexec.mpich"
    assert launchers.tool_path(usr, "mpiexec", "openmpi") == usr / "bin" / "mpiexec"
    assert launchers.tool_path(PREFIX, "mpirun", "openmpi") == PREFIX / "bin" / "mpirun"
    assert launchers.tool_path(usr, "mpirun", "") == usr / "bin" / "mpirun"


def test_openmpi_runtime(tmp_path: Path) -> None:
    assert launchers.openmpi_runtime(_debian_prefix(tmp_path, "orted")) == "orte"
    assert launchers.openmpi_runtime(PREFIX) == "prrte"


@pytest.mark.parametrize("np", [1, 2, 3])
def test_deb_openmpi_shm(tmp_path: Path, np: int) -> None:
    """Open MPI 4.1: its mpirun.openmpi, and the shared-memory BTL under its old name."""
    usr = _debian_prefix(tmp_path, *DEBIAN_TOOLS)
    cmd = launcher_for("openmpi", usr).command(PROGRAM, np, "shm", ncpus=2, euid=ROOT)
    over = ["--oversubscribe"] if np > 2 else []
    yield_ = ["--mca", "mpi_yield_when_idle", "1"] if np > 2 else []
    assert list(cmd.argv) == [
        str(usr / "bin" / "mpirun.openmpi"), "-np", str(np), *over, "--mca", "pml", "ob1",
        "--mca", "osc", "^ucx", "--mca", "btl", "self,vader", *yield_, *PROGRAM,
    ]  # fmt: skip
    assert dict(cmd.env) == {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def test_deb_openmpi_tcp(tmp_path: Path) -> None:
    usr = _debian_prefix(tmp_path, *DEBIAN_TOOLS)
    argv = launcher_for("openmpi", usr).command(PROGRAM, 2, "tcp", ncpus=2, euid=USER).argv
    assert argv == (
        str(usr / "bin" / "mpirun.openmpi"), "-np", "2", "--mca", "pml", "ob1", "--mca", "osc",
        "^ucx", "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo", *PROGRAM,
    )  # fmt: skip


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_deb_mpich(tmp_path: Path, transport: str) -> None:
    usr = _debian_prefix(tmp_path, *DEBIAN_TOOLS)
    cmd = launcher_for("mpich", usr).command(PROGRAM, 2, transport, ncpus=2, euid=ROOT)
    assert cmd.argv == (str(usr / "bin" / "mpiexec.mpich"), "-n", "2", *PROGRAM)
    assert (
        cmd.env
        == launchers.MpichLauncher(PREFIX).command(PROGRAM, 2, transport, ncpus=2, euid=ROOT).env
    )


def test_deb_openmpi_hosts_command(tmp_path: Path) -> None:
    """Open MPI 4.1 across test-bed hosts: ORTE's agent option, vader, daemons from /usr/bin;
    the rest as for Open MPI 5."""
    usr = _debian_prefix(tmp_path, *DEBIAN_TOOLS)
    build = launchers.HOSTS_COMMANDS["openmpi"]
    cmd = build(usr, ["prog", "--x"], _placement(2), euid=0, ncpus=2)
    argv = list(cmd.argv)
    assert argv[0] == str(usr / "bin" / "mpirun.openmpi")
    i = argv.index("plm_rsh_agent")
    assert argv[i - 1 : i + 2] == ["--mca", "plm_rsh_agent", "/run/agent"]
    assert "--prtemca" not in argv and "plm_ssh_agent" not in argv
    assert argv[argv.index("btl") + 1] == "self,vader,tcp"
    assert argv[argv.index("--host") + 1] == "siteA-h0:2,siteB-h0:2"
    assert argv[argv.index("oob_tcp_if_include") + 1] == "10.77.0.0/16"
    assert argv[argv.index("mpi_yield_when_idle") + 1] == "1"  # 4 ranks on 2 cores
    assert argv[-2:] == ["prog", "--x"]
    assert cmd.env["PATH"].startswith(f"{usr / 'bin'}:")  # orted, as over ssh
    five = list(build(PREFIX, ["prog"], _placement(2), euid=0).argv)
    assert five[five.index("plm_ssh_agent") - 1] == "--prtemca"
    assert five[five.index("btl") + 1] == "self,sm,tcp"


def test_deb_mpich_hosts_command(tmp_path: Path) -> None:
    usr = _debian_prefix(tmp_path, *DEBIAN_TOOLS)
    cmd = launchers.HOSTS_COMMANDS["mpich"](usr, ["prog"], _placement(1), euid=0)
    argv = list(cmd.argv)
    assert argv[0] == str(usr / "bin" / "mpiexec.mpich")
    plain = launchers.mpich_hosts_command(PREFIX, ["prog"], _placement(1), euid=0).argv
    assert argv[1:] == list(plain[1:])
    assert cmd.env["UCX_TLS"] == "tcp,self" and cmd.env["UCX_NET_DEVICES"] == "eth0"
