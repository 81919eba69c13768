"""`multilane exec` and `multilane bench exec`: any MPI program under the layer
(libmultilane-preload.so through LD_PRELOAD on the ranks only).

Argument lists and errors run on a fake tree (no MPI).  The real runs build a tiny MPI
program with each wheel's mpicc and run it under the real launchers: without a layer, with
a stand-in layer (a PMPI MPI_Finalize that prints the stats line, so that the whole path is
tested before src/preload/ exists), and with the real layer when build/<mpi>/ has it."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import (
    FAKE_CONFIG,
    OMPI_INFO,
    REPO_ROOT,
    _script,
    clean_env,
    multilane,
    private_testbed,
    recorded_bed,
    two_sites_network,
)
from multilane.context import Context
from multilane.errors import UsageError
from multilane.external import (
    EXIT_TIMEOUT,
    ExecRequest,
    HostSlots,
    parse_env_items,
    parse_hostfile,
    parse_stats_line,
    plan,
    preload_path,
    run_passthrough,
    stats_table,
)
from multilane.launchers import MPICH_IDLE_ENV, launcher_for
from multilane.results import load_result

MPIS = ("openmpi", "mpich")
MPICHVERSION = 'print("MPICH Version:      9.9.9\\nMPICH configure: --without-cuda")'
WAN_2SITE = REPO_ROOT / "scenarios" / "wan-2site.toml"
USER, ROOT = 1000, 0


# --- a fake tree: both MPIs installed, mln-config and the layer "built" ------------------


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    (root / "scenarios").mkdir(parents=True)
    (root / "CMakeLists.txt").write_text("# fake\n")
    for mpi, tool, body in (
        ("openmpi", "ompi_info", OMPI_INFO),
        ("mpich", "mpichversion", MPICHVERSION),
    ):
        prefix = root / ".deps" / mpi
        (prefix / "bin").mkdir(parents=True)
        (prefix / ".multilane-mpi").write_text(f"{mpi} 9.9.9\n")
        _script(prefix / "bin" / "mpicc", "")
        _script(prefix / "bin" / tool, body)
        _script(root / "build" / mpi / "bin" / "mln-config", FAKE_CONFIG)
        library = preload_path(root, mpi)
        library.parent.mkdir(parents=True)
        library.write_bytes(b"")
    return root


@pytest.fixture
def app(tmp_path: Path) -> Path:
    program = tmp_path / "bin" / "app"
    _script(program, "")
    return program


def _ctx(root: Path, euid: int = USER, **env: str) -> Context:
    return Context(root=root, env=clean_env(root, **env), ncpus=4, euid=euid)


def _prefix(root: Path, mpi: str) -> Path:
    return root / ".deps" / mpi


def test_preload_path() -> None:
    assert preload_path(Path("/r"), "deb-mpich") == Path(
        "/r/build/deb-mpich/src/preload/libmultilane-preload.so"
    )


# --- argument lists ------------------------------------------------------------------------


def test_openmpi_local(tree: Path, app: Path) -> None:
    run = plan(ExecRequest((str(app), "-n", "5"), mpi="openmpi", np=3), _ctx(tree))
    lib = preload_path(tree, "openmpi")
    assert run.launch.argv == (
        f"{_prefix(tree, 'openmpi')}/bin/mpirun", "-np", "3", "--mca", "pml", "ob1",
        "--mca", "osc", "^ucx", "--mca", "btl", "self,sm",
        "-x", f"LD_PRELOAD={lib}", str(app), "-n", "5",
    )  # fmt: skip
    assert "LD_PRELOAD" not in run.launch.env  # the ranks only, never mpirun itself
    assert run.np == 3 and run.library == lib and run.where == "shm"


def test_mpich_local_tcp(tree: Path, app: Path) -> None:
    request = ExecRequest((str(app),), mpi="mpich", transport="tcp", stats=True)
    run = plan(request, _ctx(tree))
    lib = preload_path(tree, "mpich")
    assert run.launch.argv == (
        f"{_prefix(tree, 'mpich')}/bin/mpiexec", "-n", "2",
        "-genv", "MLN_PRELOAD_STATS", "1", "-genv", "LD_PRELOAD", str(lib), str(app),
    )  # fmt: skip
    assert run.launch.env["MPIR_CVAR_CH4_NETMOD"] == "ofi"  # the launcher's own, unchanged
    assert "LD_PRELOAD" not in run.launch.env


@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_no_layer_is_the_usual_launch(tree: Path, app: Path, mpi: str, transport: str) -> None:
    ctx = _ctx(tree, euid=ROOT)
    run = plan(ExecRequest((str(app), "x"), mpi=mpi, np=4, transport=transport, layer=False), ctx)
    usual = launcher_for(mpi, _prefix(tree, mpi)).command(
        [str(app), "x"], 4, transport, ncpus=4, euid=ROOT
    )
    assert run.launch == usual
    assert run.library is None


def test_rank_environment_order(tree: Path, app: Path) -> None:
    """The caller's MLN_* (sorted), then --env, then the stats switch and the layer."""
    ctx = _ctx(tree, MLN_STRIPE_LANES="4", MLN_LOG="info")
    request = ExecRequest(
        (str(app),), mpi="openmpi", stats=True, env={"MLN_LOG": "debug", "OMP_NUM_THREADS": "1"}
    )
    run = plan(request, ctx)
    flags = list(run.launch.argv[run.launch.argv.index("btl") + 2 : -1])
    lib = preload_path(tree, "openmpi")
    assert flags == [
        "-x", "MLN_LOG=debug", "-x", "MLN_STRIPE_LANES=4", "-x", "OMP_NUM_THREADS=1",
        "-x", "MLN_PRELOAD_STATS=1", "-x", f"LD_PRELOAD={lib}",
    ]  # fmt: skip


def test_program_found_on_path(tree: Path, app: Path) -> None:
    ctx = _ctx(tree, PATH=f"{app.parent}:/usr/bin:/bin")
    run = plan(ExecRequest(("app", "1"), mpi="mpich", layer=False), ctx)
    assert run.launch.argv[-2:] == (str(app), "1")  # absolute: the launch may run elsewhere


def test_hostfile_openmpi(tree: Path, tmp_path: Path) -> None:
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# cluster\nnode1 slots=2\nnode2 slots=2 max_slots=4\n")
    ctx = _ctx(tree, euid=ROOT)
    run = plan(ExecRequest(("./app", "a"), mpi="openmpi", hostfile=hostfile), ctx)
    prefix = _prefix(tree, "openmpi")
    assert run.launch.argv == (
        f"{prefix}/bin/mpirun", "--prefix", str(prefix), "-np", "4", "--host",
        "node1:2,node2:2", "-x", f"LD_PRELOAD={preload_path(tree, 'openmpi')}", "./app", "a",
    )  # fmt: skip
    assert run.launch.env == {
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    }
    assert run.hosts == ("node1", "node2") and run.np == 4 and run.where == "hosts"


def test_hostfile_mpich_format_with_ppn(tree: Path, tmp_path: Path) -> None:
    hostfile = tmp_path / "machines"
    hostfile.write_text("node1:4\nnode2:4  # big\nnode3\n")
    run = plan(ExecRequest(("./app",), mpi="mpich", hostfile=hostfile, ppn=2, np=5), _ctx(tree))
    assert run.launch.argv == (
        f"{_prefix(tree, 'mpich')}/bin/mpiexec", "-hosts", "node1:2,node2:2,node3:2", "-n", "5",
        "-genv", "LD_PRELOAD", str(preload_path(tree, "mpich")), "./app",
    )  # fmt: skip
    assert dict(run.launch.env) == {}


@pytest.mark.parametrize("mpi", MPIS)
def test_testbed_launch(tree: Path, app: Path, tmp_path: Path, mpi: str) -> None:
    """On the test bed: the launch of `bench --scenario` (one host per site, ppn each),
    started inside the first host, LD_PRELOAD among the ranks' flags only."""
    ctx = recorded_bed(tmp_path / "state", WAN_2SITE, root=tree)
    run = plan(ExecRequest((str(app), "z"), mpi=mpi, scenario=WAN_2SITE, ppn=2), ctx)
    argv = list(run.launch.argv)
    assert argv[:2] == [str(tmp_path / "state" / "agent"), "a1"]
    inner = shlex.split(argv[2])
    lib = str(preload_path(tree, mpi))
    assert inner[0] == "exec" and inner[-2:] == [str(app), "z"]
    if mpi == "openmpi":
        assert inner[inner.index("--host") + 1] == "a1:2,b1:2"
        assert inner[-4:-2] == ["-x", f"LD_PRELOAD={lib}"]
    else:
        assert inner[inner.index("-hosts") + 1] == "a1,b1"
        assert inner[-5:-2] == ["-genv", "LD_PRELOAD", lib]
    assert "LD_PRELOAD" not in run.launch.env and "LD_PRELOAD" not in ctx.env
    assert run.np == 4 and run.hosts == ("a1", "b1") and run.where == "wan-2site"


def test_testbed_np_must_match(tree: Path, app: Path, tmp_path: Path) -> None:
    ctx = recorded_bed(tmp_path / "state", WAN_2SITE, root=tree)
    request = ExecRequest((str(app),), mpi="openmpi", scenario=WAN_2SITE, np=3)
    with pytest.raises(UsageError, match=r"--np 3: .* 2 hosts .* --ppn 1 = 2"):
        plan(request, ctx)


def test_testbed_must_be_up(tree: Path, app: Path, tmp_path: Path) -> None:
    ctx = _ctx(tree, euid=ROOT, MULTILANE_TESTBED_DIR=str(tmp_path / "none"))
    with pytest.raises(UsageError, match="no test bed is up: run multilane testbed up"):
        plan(ExecRequest((str(app),), mpi="openmpi", scenario=WAN_2SITE), ctx)


# --- input parsing and errors --------------------------------------------------------------


def test_parse_hostfile_forms() -> None:
    text = "a slots=2\nb:3\n\n  # comment\nc\na slots=1\n"
    assert parse_hostfile(text, "f") == (HostSlots("a", 3), HostSlots("b", 3), HostSlots("c", 1))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("# none\n", "f: no hosts in it (lines HOST slots=N or HOST:N)"),
        ("a slots=0\n", "f:1: 'a slots=0': slots must be a positive integer"),
        ("a\nb:x\n", "f:2: 'b:x': slots must be a positive integer"),
        ("a cpus=4\n", "f:1: cannot read 'a cpus=4' (expected HOST, HOST slots=N or HOST:N)"),
        ("a/b\n", "f:1: 'a/b' is not a host name"),
    ],
)
def test_parse_hostfile_errors(text: str, message: str) -> None:
    with pytest.raises(UsageError) as err:
        parse_hostfile(text, "f")
    assert str(err.value) == message


def test_parse_env_items() -> None:
    assert parse_env_items(["A=1", "B_2=x=y", "C="]) == {"A": "1", "B_2": "x=y", "C": ""}
    for bad in ("A", "=1", "1A=2", "A-B=1"):
        with pytest.raises(UsageError, match="expected VAR=VALUE"):
            parse_env_items([bad])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"mpi": "nope"}, "unknown MPI 'nope' (known: openmpi, mpich, user"),
        ({"mpi": "user"}, "MPI 'user' is not configured: set MPI_HOME"),
        ({"ppn": 2}, "--ppn needs --scenario or --hostfile"),
        ({"stats": True, "layer": False}, "--stats counts what the layer did"),
        ({"env": {"LD_PRELOAD": "x.so"}}, "--env LD_PRELOAD: the layer sets LD_PRELOAD"),
        ({"program": ()}, "no program: give it after --"),
        ({"program": (), "hostfile": Path("h")}, "no program: give it after --"),
        ({"program": ("/no/such/prog",)}, "program /no/such/prog: no such file"),
        ({"program": ("no-such-prog-xyz",)}, "program 'no-such-prog-xyz': not found on PATH"),
        ({"transport": "tcp", "hostfile": Path("h")}, "--transport is for runs on this machine"),
        ({"scenario": WAN_2SITE, "hostfile": Path("h")}, "--scenario and --hostfile: give one"),
        ({"hostfile": Path("/no/hosts")}, "--hostfile /no/hosts: No such file"),
    ],
)
def test_bad_requests(tree: Path, app: Path, change: dict[str, object], message: str) -> None:
    fields: dict[str, object] = {"program": (str(app),), "mpi": "openmpi", **change}
    with pytest.raises(UsageError) as err:
        plan(ExecRequest(**fields), _ctx(tree))  # type: ignore[arg-type]
    assert message in str(err.value)


def test_missing_layer_says_how_to_build(tree: Path, app: Path) -> None:
    preload_path(tree, "mpich").unlink()
    with pytest.raises(UsageError) as err:
        plan(ExecRequest((str(app),), mpi="mpich"), _ctx(tree))
    assert str(err.value) == (
        "the layer is not built for mpich (build/mpich/src/preload/libmultilane-preload.so is "
        "missing): run make build, or --no-layer to run without it"
    )
    run = plan(ExecRequest((str(app),), mpi="mpich", layer=False), _ctx(tree))
    assert run.library is None  # --no-layer needs no build


def test_not_executable(tree: Path, tmp_path: Path) -> None:
    data = tmp_path / "data.txt"
    data.write_text("x")
    with pytest.raises(UsageError, match=r"data.txt: not executable"):
        plan(ExecRequest((str(data),), mpi="openmpi"), _ctx(tree))


def test_hostfile_too_many_ranks(tree: Path, tmp_path: Path) -> None:
    hostfile = tmp_path / "hosts"
    hostfile.write_text("a slots=2\nb slots=1\n")
    with pytest.raises(UsageError, match=r"--np 4: the 2 hosts of .* take 3 ranks"):
        plan(ExecRequest(("./app",), mpi="openmpi", hostfile=hostfile, np=4), _ctx(tree))


def test_invalid_tunable_refused(tree: Path, app: Path) -> None:
    with pytest.raises(UsageError, match="MLN_LOG: invalid value 'loud'"):
        plan(ExecRequest((str(app),), mpi="openmpi", env={"MLN_LOG": "loud"}), _ctx(tree))


def _one_line_error(proc: subprocess.CompletedProcess[str], fragment: str) -> None:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("multilane: error: "), proc.stderr
    assert fragment in lines[0], lines[0]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["exec", "--mpi", "openmpi"], "no program: give it after --"),
        (["exec", "--np", "0", "--", "x"], "argument --np: expected a positive integer"),
        (["exec", "--scenario", "a.toml", "--hostfile", "h", "--", "x"], "not allowed with"),
        (["exec", "--env", "NOEQUALS", "--", "x"], "--env 'NOEQUALS': expected VAR=VALUE"),
        (["exec", "--timeout", "0", "--", "x"], "argument --timeout"),
        (["bench", "exec", "--sizes", "1K", "--", "x"], "--sizes does not apply"),
        (["bench", "exec", "--mpi", "openmpi"], "no program: give it after --"),
        (["bench", "exec", "--reps", "0", "--", "x"], "argument --reps"),
    ],
)
def test_cli_bad_input(tree: Path, args: list[str], fragment: str) -> None:
    _one_line_error(multilane(args, clean_env(tree)), fragment)
    assert not (tree / "results").exists()


def test_cli_dry_run(tree: Path, app: Path) -> None:
    proc = multilane(
        ["exec", "--mpi", "mpich", "--np", "3", "--env", "A=b c", "--dry-run", "--", str(app)],
        clean_env(tree),
    )
    assert proc.returncode == 0, proc.stderr
    # 3 ranks on fewer cores: MPICH's idle ranks told to throttle their polling (launchers.py)
    idle = [f"{k}={v}" for k, v in MPICH_IDLE_ENV.items()] if (os.cpu_count() or 1) < 3 else []
    assert shlex.split(proc.stdout) == [
        *idle,
        f"{_prefix(tree, 'mpich')}/bin/mpiexec", "-n", "3", "-genv", "A", "b c",
        "-genv", "LD_PRELOAD", str(preload_path(tree, "mpich")), str(app),
    ]  # fmt: skip


# --- the stats lines -----------------------------------------------------------------------

LINE = (
    "multilane-preload: rank=1 size=2 striped_send_msgs=3 striped_send_bytes=3000 "
    "striped_recv_msgs=2 striped_recv_bytes=2000 bcast_calls=1 bcast_bytes=10"
)


def test_parse_stats_line() -> None:
    record = parse_stats_line("[1,1]<stderr>: " + LINE)
    assert record is not None
    assert record["rank"] == 1 and record["striped_send_bytes"] == 3000
    assert parse_stats_line("ring rank=1") is None
    assert parse_stats_line("multilane-preload: rank=x size=2") is None
    assert parse_stats_line("multilane-preload: striped_send_msgs=1") is None


def test_stats_table() -> None:
    one = parse_stats_line(LINE)
    zero = parse_stats_line(LINE.replace("rank=1", "rank=0"))
    assert one is not None and zero is not None
    lines = stats_table([one, zero], 3)
    assert lines[0] == "multilane: layer stats (MLN_PRELOAD_STATS=1) of 2 ranks:"
    assert lines[2].split() == ["0", "3", "3000", "2", "2000", "1", "10"]
    assert lines[4].split() == ["total", "6", "6000", "4", "4000", "2", "20"]
    assert lines[5] == "multilane: layer stats: no line from rank(s) 2 of 3"
    assert "the layer was not in effect" in stats_table([], 2)[0]


# --- the runner: streams, exit status, the process group on timeout ---------------------


def test_passthrough_streams_and_status(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "prog"
    _script(
        script,
        "import sys\nprint('to stdout')\n"
        f"print({LINE!r}, file=sys.stderr)\nprint('tail', end='', file=sys.stderr)\nsys.exit(5)\n",
    )
    seen: list[str] = []
    done = run_passthrough(
        [str(script)], env=dict(os.environ), timeout_s=30, on_stderr_line=seen.append
    )
    assert done.returncode == 5 and not done.timed_out
    assert seen == [LINE, "tail"]
    out, err = capfd.readouterr()
    assert out == "to stdout\n" and err == LINE + "\ntail"


def _group_alive(pgid: int) -> bool:
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def test_passthrough_timeout_kills_the_group(tmp_path: Path) -> None:
    script = tmp_path / "prog"
    script.write_text("#!/bin/sh\nsleep 300 &\nsleep 300\n")
    script.chmod(0o755)
    start = time.monotonic()
    done = run_passthrough([str(script)], env=dict(os.environ), timeout_s=1, on_stderr_line=print)
    assert done.timed_out and done.returncode is None
    assert time.monotonic() - start < 20
    # SIGKILL went to the whole group; the orphaned `sleep 300 &` (reparented, reaped by init)
    # may take a moment to die on a loaded machine: wait for it, never for its 300 s
    gone_by = time.monotonic() + 10
    while _group_alive(done.pgid) and time.monotonic() < gone_by:
        time.sleep(0.05)
    assert not _group_alive(done.pgid)


# --- real runs: the wheels' MPIs, a tiny program, a stand-in and the real layer ------------

RING_C = r"""
/* ring N [CODE]: each rank sends N bytes to the next (MPI_Irecv + MPI_Send), rank 0
   broadcasts N bytes; both are checked; rank 0 exits with CODE. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, size, bad = 0;
    MPI_Request req;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int n = argc > 1 ? atoi(argv[1]) : 65536;
    int code = argc > 2 ? atoi(argv[2]) : 0;
    unsigned char *out = malloc(n), *in = malloc(n);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    for (int i = 0; i < n; i++) out[i] = (unsigned char)(rank + i);
    MPI_Irecv(in, n, MPI_BYTE, prev, 7, MPI_COMM_WORLD, &req);
    MPI_Send(out, n, MPI_BYTE, next, 7, MPI_COMM_WORLD);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    for (int i = 0; i < n; i++) bad += in[i] != (unsigned char)(prev + i);
    MPI_Bcast(out, n, MPI_BYTE, 0, MPI_COMM_WORLD);
    for (int i = 0; i < n; i++) bad += out[i] != (unsigned char)i;
    const char *preload = getenv("LD_PRELOAD");
    printf("ring rank=%d size=%d bad=%d preload=%s\n", rank, size, bad, preload ? preload : "-");
    free(out);
    free(in);
    MPI_Finalize();
    return bad ? 1 : rank == 0 ? code : 0;
}
"""

# A stand-in layer: only MPI_Finalize, printing the contract's stats line.
STANDIN_C = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int MPI_Finalize(void)
{
    int rank, size;
    const char *on = getenv("MLN_PRELOAD_STATS");
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    if (on && on[0] == '1')
        fprintf(stderr, "multilane-preload: rank=%d size=%d striped_send_msgs=1 "
                "striped_send_bytes=%d striped_recv_msgs=1 striped_recv_bytes=%d "
                "bcast_calls=1 bcast_bytes=5\n", rank, size, 100 + rank, 200 + rank);
    return PMPI_Finalize();
}
"""

MIB = 1 << 20


def _compile(mpi: str, source: Path, out: Path, *flags: str) -> None:
    mpicc = REPO_ROOT / ".deps" / mpi / "bin" / "mpicc"
    proc = subprocess.run(
        [str(mpicc), *flags, "-o", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """Per MPI: the ring program and a tree (MULTILANE_ROOT) whose layer is the stand-in;
    an MPI that is not installed or not built is left out."""
    work = tmp_path_factory.mktemp("exec-real")
    (work / "ring.c").write_text(RING_C)
    (work / "standin.c").write_text(STANDIN_C)
    found: dict[str, Path] = {}
    tree = work / "tree"
    (tree / "scenarios").mkdir(parents=True)
    (tree / "CMakeLists.txt").write_text("# stand-in layer\n")
    (tree / ".deps").symlink_to(REPO_ROOT / ".deps")
    for mpi in MPIS:
        config = REPO_ROOT / "build" / mpi / "bin" / "mln-config"
        if not (REPO_ROOT / ".deps" / mpi / "bin" / "mpicc").exists() or not config.exists():
            continue
        _compile(mpi, work / "ring.c", work / f"ring-{mpi}")
        layer = preload_path(tree, mpi)
        layer.parent.mkdir(parents=True)
        _compile(mpi, work / "standin.c", layer, "-shared", "-fPIC")
        (tree / "build" / mpi / "bin").mkdir(parents=True)
        (tree / "build" / mpi / "bin" / "mln-config").symlink_to(config)
        found[mpi] = work / f"ring-{mpi}"
    found["tree"] = tree
    yield found


def _ring(built: dict[str, Path], mpi: str) -> Path:
    if mpi not in built:
        pytest.skip(f"{mpi}: needs make deps and make build (.deps/{mpi}, build/{mpi})")
    return built[mpi]


def _real_layer(mpi: str) -> Path:
    layer = preload_path(REPO_ROOT, mpi)
    if not layer.is_file():
        pytest.skip(
            f"{layer.relative_to(REPO_ROOT)} is not built yet (issue 16: src/preload/); "
            "run make build once it exists"
        )
    return layer


def _ring_lines(stdout: str) -> list[dict[str, str]]:
    rows = [dict(w.split("=", 1) for w in line.split()[1:]) for line in stdout.splitlines()
            if line.startswith("ring rank=")]  # fmt: skip
    return sorted(rows, key=lambda r: int(r["rank"]))


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("mpi", MPIS)
def test_real_no_layer(built: dict[str, Path], mpi: str) -> None:
    ring = _ring(built, mpi)
    proc = multilane(
        ["exec", "--mpi", mpi, "--np", "3", "--no-layer", "--", str(ring), "70000", "3"],
        clean_env(built["tree"]),
        timeout=120,
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr  # the program's exit status
    rows = _ring_lines(proc.stdout)
    assert [r["rank"] for r in rows] == ["0", "1", "2"]
    assert all(r["bad"] == "0" and r["preload"] == "-" for r in rows)


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("transport", ["shm", "tcp"])
@pytest.mark.parametrize("mpi", MPIS)
def test_real_standin_layer(built: dict[str, Path], mpi: str, transport: str) -> None:
    ring = _ring(built, mpi)
    layer = preload_path(built["tree"], mpi)
    proc = multilane(
        ["exec", "--mpi", mpi, "--transport", transport, "--stats", "--", str(ring), "70000"],
        clean_env(built["tree"]),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = _ring_lines(proc.stdout)
    assert [r["preload"] for r in rows] == [str(layer)] * 2  # every rank, through the flags
    assert all(r["bad"] == "0" for r in rows)
    assert "multilane-preload:" not in proc.stdout  # stderr stays stderr
    err = proc.stderr.splitlines()
    assert "multilane: layer stats (MLN_PRELOAD_STATS=1) of 2 ranks:" in err
    assert next(x for x in err if x.split()[:1] == ["total"]).split() == [
        "total", "2", "201", "2", "401", "2", "10"
    ]  # fmt: skip


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize(
    ("mpi", "line"), [("openmpi", "localhost slots=2"), ("mpich", "localhost:2")]
)
def test_real_hostfile(built: dict[str, Path], mpi: str, line: str, tmp_path: Path) -> None:
    """A hostfile in each MPI's own form, its one host this machine (no ssh needed)."""
    ring = _ring(built, mpi)
    hostfile = tmp_path / "hosts"
    hostfile.write_text(f"# this machine\n{line}\n")
    proc = multilane(
        ["exec", "--mpi", mpi, "--hostfile", str(hostfile), "--stats", "--timeout", "60",
         "--", str(ring), "70000"],
        clean_env(built["tree"]),
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = _ring_lines(proc.stdout)
    assert [(r["bad"], r["preload"]) for r in rows] == [
        ("0", str(preload_path(built["tree"], mpi)))
    ] * 2
    assert "  total      2       201" in proc.stderr


TWO_SITES = 'name = "exec-2site"\n' + two_sites_network("1gbit", "1ms")


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], Path]]:
    """A private two-site test bed for the module; always taken down."""
    yield from private_testbed(tmp_path_factory.mktemp("exec-bed"), "exec-2site", TWO_SITES)


@pytest.mark.root
@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("mpi", MPIS)
def test_real_testbed(
    built: dict[str, Path], bed: tuple[dict[str, str], Path], mpi: str, tmp_path: Path
) -> None:
    """Across the hosts of a running test bed (one per site, --ppn 2): every rank has the
    layer; then bench exec there."""
    ring = _ring(built, mpi)
    env, scenario = bed
    env = {**env, "MULTILANE_ROOT": str(built["tree"])}
    proc = multilane(
        ["exec", "--mpi", mpi, "--scenario", str(scenario), "--ppn", "2", "--stats",
         "--timeout", "120", "--", str(ring), "300000"],
        env,
        timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = _ring_lines(proc.stdout)
    layer = str(preload_path(built["tree"], mpi))
    assert [(r["rank"], r["bad"], r["preload"]) for r in rows] == [
        (str(rank), "0", layer) for rank in range(4)
    ]
    assert "multilane: layer stats (MLN_PRELOAD_STATS=1) of 4 ranks:" in proc.stderr
    out = tmp_path / "r.json"
    proc = multilane(
        ["bench", "exec", "--mpi", mpi, "--scenario", str(scenario), "--reps", "1",
         "--json", str(out), "--results", str(tmp_path / "results"), "--", str(ring), "1000"],
        env,
        timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = load_result(out)
    assert doc["provenance"]["hosts"] == ["a1", "b1"] and doc["provenance"]["nranks"] == 2
    assert doc["provenance"]["testbed"]["hosts"] == ["a1", "b1"]


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("mpi", MPIS)
def test_real_timeout_kills_the_launch(built: dict[str, Path], mpi: str) -> None:
    _ring(built, mpi)
    proc = multilane(
        ["exec", "--mpi", mpi, "--no-layer", "--timeout", "2", "--", "/bin/sleep", "300"],
        clean_env(built["tree"]),
        timeout=60,
    )
    assert proc.returncode == EXIT_TIMEOUT, proc.stderr
    last = proc.stderr.splitlines()[-1]
    assert last.startswith("multilane: error: sleep: timed out after 2 s: its process group")
    assert not _group_alive(int(last.split("process group ")[1].split()[0]))


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("mpi", MPIS)
def test_real_bench_exec_standin(built: dict[str, Path], mpi: str, tmp_path: Path) -> None:
    ring = _ring(built, mpi)
    out = tmp_path / "r.json"
    proc = multilane(
        ["bench", "exec", "--mpi", mpi, "--np", "2", "--reps", "2", "--json", str(out),
         "--results", str(tmp_path / "results"), "--", str(ring), "70000"],
        clean_env(built["tree"]),
        timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = load_result(out)
    assert doc["benchmark"] == "exec" and doc["status"] == "pass"
    runs = doc["provenance"]["params"]["runs"]
    assert [(r["rep"], r["layer"]) for r in runs] == [(1, False), (1, True), (2, False), (2, True)]
    assert all(r["exit_code"] == 0 for r in runs)
    assert [len(r["stats"]) for r in runs if r["layer"]] == [2, 2]
    row = doc["rows"][0]
    assert row["striped_send_bytes"] == 201 and row["bcast_calls"] == 2
    assert row["wall_s_min"] <= row["wall_s"] <= row["wall_s_max"]
    assert doc["provenance"]["nranks"] == 2 and doc["provenance"]["meta"]["mpi"] == mpi
    assert "LD_PRELOAD" not in " ".join(doc["provenance"]["params"]["launch_plain"]["argv"])
    table = [line.split() for line in proc.stdout.splitlines()]
    assert ["without", "with", "ratio"] in table
    assert any(t[:2] == ["wall", "median"] for t in table)
    saved = list((tmp_path / "results").glob("*-exec/*.json"))
    assert len(saved) == 1 and json.loads(saved[0].read_text()) == doc


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("mpi", MPIS)
def test_real_bench_exec_fails_loudly(built: dict[str, Path], mpi: str, tmp_path: Path) -> None:
    ring = _ring(built, mpi)
    proc = multilane(
        ["bench", "exec", "--mpi", mpi, "--reps", "2", "--results", str(tmp_path),
         "--", str(ring), "1000", "4"],
        clean_env(built["tree"]),
        timeout=240,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "multilane: error: exec: run 1/2 without the layer: exited with status 4" in (
        proc.stderr
    )
    assert not list(tmp_path.glob("*-exec/*.json"))  # no result from a failed benchmark


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("mpi", MPIS)
def test_real_layer_stripes(built: dict[str, Path], mpi: str) -> None:
    """The real libmultilane-preload.so: 4 MiB between local ranks with MLN_STRIPE_LOCAL=1
    is above the striping threshold, so each rank's send is striped; the data arrive."""
    ring = _ring(built, mpi)
    layer = _real_layer(mpi)
    proc = multilane(
        ["exec", "--mpi", mpi, "--np", "2", "--stats", "--env", "MLN_STRIPE_LOCAL=1",
         "--timeout", "120", "--", str(ring), str(4 * MIB)],
        clean_env(REPO_ROOT),
        timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = _ring_lines(proc.stdout)
    assert [(r["bad"], r["preload"]) for r in rows] == [("0", str(layer))] * 2
    records = [r for r in map(parse_stats_line, proc.stderr.splitlines()) if r is not None]
    assert sorted(r["rank"] for r in records) == [0, 1], proc.stderr
    assert sum(r["striped_send_bytes"] for r in records) >= 2 * 4 * MIB, proc.stderr
    assert sum(r["striped_recv_bytes"] for r in records) >= 2 * 4 * MIB, proc.stderr


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("mpi", MPIS)
def test_real_layer_bench_exec(built: dict[str, Path], mpi: str, tmp_path: Path) -> None:
    ring = _ring(built, mpi)
    _real_layer(mpi)
    out = tmp_path / "r.json"
    proc = multilane(
        ["bench", "exec", "--mpi", mpi, "--reps", "1", "--json", str(out), "--results",
         str(tmp_path / "results"), "--", str(ring), str(MIB)],
        clean_env(REPO_ROOT, MLN_STRIPE_LOCAL="1"),
        timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = load_result(out)
    assert doc["rows"][0]["striped_send_bytes"] >= 2 * MIB
