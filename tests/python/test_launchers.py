"""Launcher argument lists for every flavour x transport x rank count (pure functions)."""

from __future__ import annotations

from pathlib import Path

import pytest

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
        "/opt/mpi/bin/mpirun", "-np", str(np), "--mca", "pml", "ob1", "--mca", "btl", "self,sm",
        *PROGRAM,
    )  # fmt: skip
    assert dict(cmd.env) == {}


@pytest.mark.parametrize("np", [1, 2, 4])
def test_openmpi_tcp(np: int) -> None:
    cmd = OpenMpiLauncher(PREFIX).command(PROGRAM, np, "tcp", ncpus=4, euid=USER)
    assert cmd.argv == (
        "/opt/mpi/bin/mpirun", "-np", str(np), "--mca", "pml", "ob1",
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


@pytest.mark.parametrize("np", [1, 2, 3, 8])
@pytest.mark.parametrize("euid", [USER, ROOT])
def test_mpich_shm(np: int, euid: int) -> None:
    cmd = MpichLauncher(PREFIX).command(PROGRAM, np, "shm", ncpus=2, euid=euid)
    assert cmd.argv == ("/opt/mpi/bin/mpiexec", "-n", str(np), *PROGRAM)
    assert dict(cmd.env) == {}


@pytest.mark.parametrize("np", [1, 2, 3, 8])
def test_mpich_tcp(np: int) -> None:
    cmd = MpichLauncher(PREFIX).command(PROGRAM, np, "tcp", ncpus=2, euid=ROOT)
    assert cmd.argv == ("/opt/mpi/bin/mpiexec", "-n", str(np), *PROGRAM)
    assert dict(cmd.env) == {
        "MPIR_CVAR_NOLOCAL": "1",
        "MPIR_CVAR_CH4_NETMOD": "ofi",
        "FI_PROVIDER": "tcp",
        "FI_TCP_IFACE": "lo",
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
