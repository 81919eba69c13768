"""MPI discovery: tool output parsing and where each MPI is found."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from multilane import mpi
from multilane.errors import UsageError

MPICHVERSION = """MPICH Version:      5.0.2
MPICH Release date: Fri Sep 25 20:45:26 UTC 2026
MPICH Device:       ch4:ucx ofi
MPICH configure:    --with-device=ch4:ucx,ofi --with-pm=hydra:gforker{extra}
MPICH CC:           cc
"""


def test_parse_ompi_info() -> None:
    text = (
        "ompi:version:full:5.0.11\n"
        "mca:opal:base:param:opal_built_with_cuda_support:value:true\n"
        "mca:opal:base:param:opal_built_with_cuda_support:source:default\n"
    )
    assert mpi.parse_ompi_info(text) == ("5.0.11", "yes")
    assert mpi.parse_ompi_info(text.replace("value:true", "value:false")) == ("5.0.11", "no")
    assert mpi.parse_ompi_info("") == ("unknown", "unknown")


@pytest.mark.parametrize(
    ("extra", "cuda"),
    [
        ("", "unknown"),
        (" --with-cuda=/usr/local/cuda", "yes"),
        (" --with-cuda", "yes"),
        (" --without-cuda", "no"),
        (" --with-cuda=no", "no"),
        (" --with-cudart=x", "unknown"),
    ],
)
def test_parse_mpichversion(extra: str, cuda: str) -> None:
    assert mpi.parse_mpichversion(MPICHVERSION.format(extra=extra)) == ("5.0.2", cuda)


@pytest.mark.parametrize(
    ("text", "flavour"),
    [
        ("mpirun (Open MPI) 5.0.11", "openmpi"),
        ("prterun (PRRTE) 3.0", "openmpi"),
        ("HYDRA build details:\n    Version: 4.0.2", "mpich"),
        ("Intel(R) MPI Library for Linux* OS", "unknown"),
        ("", "unknown"),
    ],
)
def test_flavour_from_version_text(text: str, flavour: str) -> None:
    assert mpi.flavour_from_version_text(text) == flavour


@pytest.fixture(autouse=True)
def _no_debian_mpis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine's /usr stays out of these tests; a test that wants Debian's MPIs points
    DEB_PREFIX at a stand-in."""
    monkeypatch.setattr(mpi, "DEB_PREFIX", tmp_path / "no-usr")


def _fake_prefix(path: Path, tool: str, body: str) -> Path:
    (path / "bin").mkdir(parents=True)
    script = path / "bin" / tool
    script.write_text(f"#!{sys.executable}\n{body}")
    script.chmod(0o755)
    (path / "bin" / "mpicc").write_text("")
    return path


def test_discover_fake_tree(fake_root: Path) -> None:
    found = {m.name: m for m in mpi.discover(fake_root, {})}
    assert list(found) == ["openmpi", "mpich", "user", "deb-openmpi", "deb-mpich"]
    ompi = found["openmpi"]
    assert (ompi.available, ompi.flavour, ompi.version, ompi.cuda_aware) == (
        True, "openmpi", "9.9.9", "no",
    )  # fmt: skip
    assert not found["mpich"].available
    assert "make deps" in found["mpich"].hint
    assert not found["user"].available
    assert "MPI_HOME" in found["user"].hint
    for name in ("deb-openmpi", "deb-mpich"):
        assert not found[name].available
        assert "not installed" in found[name].hint and "apt-get install" in found[name].hint


def test_user_mpi_from_mpi_home_and_mpicc(fake_root: Path, tmp_path: Path) -> None:
    body = 'print("MPICH Version: 4.0.2\\nMPICH configure: --without-cuda")'
    prefix = _fake_prefix(tmp_path / "mympi", "mpichversion", body)
    for env in ({"MPI_HOME": str(prefix)}, {"MPICC": str(prefix / "bin" / "mpicc")}):
        user = mpi.discover_one("user", fake_root, env)
        assert (user.available, user.flavour, user.version, user.cuda_aware) == (
            True, "mpich", "4.0.2", "no",
        )  # fmt: skip
        assert Path(user.prefix).resolve() == prefix.resolve()


def test_user_mpi_unknown_flavour(fake_root: Path, tmp_path: Path) -> None:
    prefix = _fake_prefix(tmp_path / "odd", "mpiexec", 'print("Some MPI 1.0")')
    user = mpi.discover_one("user", fake_root, {"MPI_HOME": str(prefix)})
    assert (user.available, user.flavour, user.version) == (True, "unknown", "Some MPI 1.0")


def test_resolve(fake_root: Path) -> None:
    assert mpi.resolve(None, fake_root, {}, "mln-pt2pt").name == "openmpi"
    assert mpi.resolve("openmpi", fake_root, {}, "mln-pt2pt").name == "openmpi"
    with pytest.raises(UsageError, match=r"^unknown MPI 'foo' \(available: openmpi\)$"):
        mpi.resolve("foo", fake_root, {}, "mln-pt2pt")
    with pytest.raises(UsageError, match="make deps"):
        mpi.resolve("mpich", fake_root, {}, "mln-pt2pt")
    with pytest.raises(UsageError, match="MPI_HOME"):
        mpi.resolve("user", fake_root, {}, "mln-pt2pt")
    with pytest.raises(UsageError, match="run make build"):
        mpi.resolve("openmpi", fake_root, {}, "mln-missing")


def test_mpich_lib_cuda(tmp_path: Path) -> None:
    """The yaksa CUDA backend's symbols in libmpi decide; no library means unknown."""
    assert mpi.mpich_lib_cuda(tmp_path) == "unknown"
    (tmp_path / "lib").mkdir()
    lib = tmp_path / "lib" / "libmpi.so.12"
    lib.write_bytes(b"\x7fELF...MPI_Send...MPIR_CVAR_ENABLE_GPU...")
    assert mpi.mpich_lib_cuda(tmp_path) == "no"
    lib.write_bytes(b"\x7fELF...yaksuri_cudai_pup_hindexed_float...")
    assert mpi.mpich_lib_cuda(tmp_path) == "yes"


OMPI_INFO = (
    'print("ompi:version:full:4.1.4\\n'
    'mca:opal:base:param:opal_built_with_cuda_support:value:false")'
)
MPICH_VERSION = 'print("MPICH Version: 4.0.2\\nMPICH configure: --with-device=ch4:ucx")'


def _debian_usr(path: Path) -> Path:
    """A stand-in for Debian's /usr with both MPIs: ompi_info and mpichversion side by side,
    each MPI's compiler and launcher under its suffixed name."""
    bindir = path / "bin"
    bindir.mkdir(parents=True)
    for tool, body in (("ompi_info", OMPI_INFO), ("mpichversion", MPICH_VERSION)):
        (bindir / tool).write_text(f"#!{sys.executable}\n{body}\n")
        (bindir / tool).chmod(0o755)
    for tool in ("mpicc.openmpi", "mpiexec.openmpi", "mpicc.mpich", "mpiexec.mpich"):
        (bindir / tool).write_text("")
    return path


def test_discover_debian(fake_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each Debian MPI asks its own tool, though /usr/bin holds both."""
    usr = _debian_usr(tmp_path / "usr")
    monkeypatch.setattr(mpi, "DEB_PREFIX", usr)
    ompi = mpi.discover_one("deb-openmpi", fake_root, {})
    assert (ompi.available, ompi.flavour, ompi.version, ompi.cuda_aware, ompi.prefix) == (
        True, "openmpi", "4.1.4", "no", str(usr),
    )  # fmt: skip
    mpich = mpi.discover_one("deb-mpich", fake_root, {})
    assert (mpich.available, mpich.flavour, mpich.version, mpich.prefix) == (
        True, "mpich", "4.0.2", str(usr),
    )  # fmt: skip
    (usr / "bin" / "mpiexec.mpich").unlink()
    gone = mpi.discover_one("deb-mpich", fake_root, {})
    assert not gone.available
    assert "mpiexec.mpich missing" in gone.hint and "libmpich-dev" in gone.hint


def test_resolve_debian(fake_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mpi, "DEB_PREFIX", _debian_usr(tmp_path / "usr"))
    with pytest.raises(UsageError, match=r"not built for deb-mpich .*build/deb-mpich.*make build"):
        mpi.resolve("deb-mpich", fake_root, {}, "mln-pt2pt")
    program = fake_root / "build" / "deb-mpich" / "bin" / "mln-pt2pt"
    program.parent.mkdir(parents=True)
    program.write_text("")
    assert mpi.resolve("deb-mpich", fake_root, {}, "mln-pt2pt").flavour == "mpich"
    assert mpi.resolve(None, fake_root, {}, "mln-pt2pt").name == "openmpi"  # pinned first


@pytest.mark.parametrize(
    ("program", "flavour"),
    [("mpicc.mpich", "mpich"), ("mpicc.openmpi", "openmpi"), ("mpicc", None),
     ("mpicc.intel", None), ("mpif90.mpich", "mpich")],
)  # fmt: skip
def test_flavour_from_suffix(program: str, flavour: str | None) -> None:
    assert mpi.flavour_from_suffix(program) == flavour


def test_user_mpi_from_debian_mpicc(fake_root: Path, tmp_path: Path) -> None:
    """make build MPICC=/usr/bin/mpicc.mpich: MPICH, though Open MPI's ompi_info is beside."""
    usr = _debian_usr(tmp_path / "usr")
    for compiler, flavour in (("mpicc.mpich", "mpich"), ("mpicc.openmpi", "openmpi")):
        user = mpi.discover_one("user", fake_root, {"MPICC": str(usr / "bin" / compiler)})
        assert (user.available, user.flavour, user.prefix) == (True, flavour, str(usr.resolve()))
