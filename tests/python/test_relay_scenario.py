"""Seed 004's scenarios and their launch, without a test bed: seed004-relay.toml and its quick
variant parse into the expected runs (direct on the direct network, relayed through `launch =
"grid"` with 1, 2, 4, 8 trunks, both MPIs and one mixed grid, WAN delays 0-10 ms), in the
order the runner brings the networks up; the dry run lists them; a relayed run's prepared
launch is the grid plan (`multilane grid run` on the recorded private test bed: gateways on the
front-ends, one job per site, mln-relay --split 2) and a direct one the stock launch; bad
combinations are one line each.  Fake MPIs and programs (test_grid's stand-ins); nothing runs."""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

import pytest

from conftest import REPO_ROOT, clean_env, recorded_grid_bed
from multilane.bench import prepare
from multilane.context import Context
from multilane.experiment import run_scenario
from multilane.experiment import testbed_groups as groups_of
from multilane.external import preload_path
from multilane.scenario import ScenarioError, load_scenario
from test_grid import fake_tree

FULL = REPO_ROOT / "scenarios" / "seed004-relay.toml"
QUICK = REPO_ROOT / "scenarios" / "seed004-relay-quick.toml"
MIXED = "a=openmpi,b=mpich"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Both MPIs installed (stand-in launchers), mln-config, mln-relay, the layer and the
    gateway built."""
    return fake_tree(tmp_path / "tree", ("mln-relay",))


def _ctx(root: Path, state: Path) -> Context:
    env = clean_env(root, MULTILANE_TESTBED_DIR=str(state))
    return Context(root=root, env=env, ncpus=2, euid=0, out=io.StringIO())


def _run(scenario: Path, label: str):
    return next(r for r in load_scenario(scenario).runs if r.label == label)


def test_full_scenario() -> None:
    s = load_scenario(FULL)
    assert len(s.runs) == 123 and s.testbed_check
    grid = [r for r in s.runs if r.launch == "grid"]
    direct = [r for r in s.runs if r.launch == "mpi"]
    assert len(direct) == 24
    assert all(r.network_variant == "direct" and r.hosts == 4 and r.ppn == 1 for r in direct)
    assert all(r.network_variant == "private" and r.hosts is None for r in grid)
    assert Counter((r.mpi, r.trunks) for r in grid) == {
        **{(m, k): 12 for m in ("openmpi", "mpich") for k in (1, 2, 4, 8)},
        (MIXED, 8): 3,
    }
    assert {r.wan_delay_s for r in s.runs} == {0.0, 0.001, 0.005, 0.010}
    tests = Counter((r.options["tests"], r.options["sizes"]) for r in s.runs)
    assert tests == {("pingpong", "0,8,1K,64K"): 41, ("stream", "1M,16M,64M"): 41,
                     ("alltoall", "1M,4M"): 41}  # fmt: skip
    stream = _run(FULL, "mpich-delay10ms-trunks4-stream")
    assert stream.options == {"tests": "stream", "sizes": "1M,16M,64M", "reps": 3, "warmup": 0,
                              "min_iters": 1}  # fmt: skip
    assert stream.trunks == 4 and stream.wan_delay_s == 0.010 and stream.mpi == "mpich"
    assert "split" not in stream.options  # the runner sets it: the ranks of site a
    # the direct network first, then the private one; each delay once per network
    groups = groups_of(s)
    assert [v for v, _ in groups] == ["direct", "private"]
    assert [(d, len(i)) for d, i in groups[0][1]] == [(0.0, 6), (0.001, 6), (0.005, 6),
                                                      (0.01, 6)]  # fmt: skip
    assert [(d, len(i)) for d, i in groups[1][1]] == [(0.0, 24), (0.001, 24), (0.005, 27),
                                                      (0.01, 24)]  # fmt: skip


def test_quick_scenario() -> None:
    s = load_scenario(QUICK)
    assert len(s.runs) == 18 and s.testbed_check
    assert {r.mpi for r in s.runs} == {"openmpi"}
    assert {r.wan_delay_s for r in s.runs} == {0.0, 0.005}
    assert Counter(r.trunks for r in s.runs) == {None: 6, 1: 6, 8: 6}
    assert s.runs[0].label == "delay0ms-direct-pingpong"
    assert _run(QUICK, "delay5ms-trunks8-alltoall").launch == "grid"
    full = FULL.read_text()
    assert full[full.index("[network]") :] in QUICK.read_text()  # the same network


def test_dry_run(tree: Path, tmp_path: Path) -> None:
    """Without a test bed up, the dry run lists every run, the networks and delays in order."""
    ctx = _ctx(tree, tmp_path / "state")
    run_scenario(load_scenario(QUICK), ctx, tmp_path / "results", dry_run=True)
    out = ctx.out.getvalue()  # type: ignore[attr-defined]
    assert "scenario seed004-relay-quick: 18 runs" in out
    assert "test bed: the direct network; WAN delay 0ms: 3 runs, 5ms: 3 runs" in out
    assert "test bed: the private network; WAN delay 0ms: 6 runs, 5ms: 6 runs" in out
    assert (
        "first: testbed check of each network (RTT, loss, iperf3 with 1 and 8 streams) -> "
        "testbed-check-direct.json, testbed-check-private.json"
    ) in out
    assert (
        "(4/18) delay0ms-trunks1-pingpong: relay across the private sites (multilane grid run, "
        "openmpi: every compute host, ppn 1, 1 trunk, WAN delay 0ms)"
    ) in out
    assert "(1/18) delay0ms-direct-pingpong: relay on the test bed (the default placement" in out
    assert not (tmp_path / "results").exists()


def test_grid_launch(tree: Path, tmp_path: Path) -> None:
    """A relayed run on the live private test bed: the grid plan, the command that repeats
    it, the program with --split 2 and the meta, the placement for the crossing proof."""
    recorded_grid_bed(tmp_path / "state", FULL, "private")
    ctx = _ctx(tree, tmp_path / "state")
    out = tmp_path / "out"
    run = prepare(_run(FULL, "openmpi-delay5ms-trunks4-stream"), ctx, out)
    assert run.grid is not None and run.tag == "openmpi/grid:4"
    assert run.request.np == 4 and run.request.trunks == 4 and run.request.options["split"] == 2
    json_path = out / "openmpi-delay5ms-trunks4-stream.json"
    assert run.json_path == json_path
    argv = list(run.launch.argv)
    assert argv[: argv.index("--")] == [
        "multilane", "grid", "run", str(FULL), "--np", "a=2,b=2", "--mpi", "openmpi",
        "--trunks", "4", "--timeout", "600", "--gateway-log", "info",
    ]  # fmt: skip
    program = argv[argv.index("--") + 1 :]
    assert program[0] == str(tree / "build" / "{mpi}" / "bin" / "mln-relay")
    assert program[1:12] == ["--tests", "stream", "--sizes", "1M,16M,64M", "--reps", "3",
                             "--warmup", "0", "--min-iters", "1", "--split"]  # fmt: skip
    assert program[12] == "2" and program[-2:] == ["--json", str(json_path)]
    metas = dict(program[i + 1].split("=", 1) for i, w in enumerate(program) if w == "--meta")
    assert {k: metas[k] for k in ("launch", "trunks", "network", "wan_delay", "site_mpi",
                                  "frontend_nic_rate", "wan_rate", "hosts", "np")} == {
        "launch": "grid", "trunks": "4", "network": "private", "wan_delay": "5ms",
        "site_mpi": "a=openmpi,b=openmpi", "frontend_nic_rate": "125mbit",
        "wan_rate": "1gbit", "hosts": "a1,a2,b1,b2", "np": "4",
    }  # fmt: skip
    plan = run.grid.plan
    assert plan.sites_text == "a:2,b:2" and plan.trunks == 4
    a, b = plan.sites
    assert [g.host for g in a.gateways] == ["afe1", "afe2", "afe3", "afe4"]
    assert [g.wan for g in b.gateways] == [f"10.78.2.{k}:{7299 + k}" for k in range(1, 5)]
    gw = a.gateways[3].argv[-1]
    assert "--trunk 3 --trunks 4 --sites a:2,b:2 --listen 10.77.1.6:0" in gw
    assert "--log info" in gw  # the summary line: frames per trunk into the result
    assert a.hosts == ("a1", "a2") and a.launch.argv[1] == "a1" and b.launch.argv[1] == "b1"
    assert str(tree / "build" / "openmpi" / "bin" / "mln-relay") in a.launch.argv[-1]
    assert str(preload_path(tree, "openmpi")) in a.launch.argv[-1]
    assert run.testbed is not None and run.testbed.placement.hosts == ("a1", "a2", "b1", "b2")
    assert run.testbed.sites == 2
    assert "multilane grid run" in run.describe()


def test_mixed_grid_launch(tree: Path, tmp_path: Path) -> None:
    recorded_grid_bed(tmp_path / "state", FULL, "private")
    run = prepare(_run(FULL, "mixed-delay5ms-trunks8-alltoall"), _ctx(tree, tmp_path / "state"),
                  tmp_path / "out")  # fmt: skip
    a, b = run.grid.plan.sites
    assert (a.install.name, b.install.name) == ("openmpi", "mpich")
    assert a.launcher == "mpirun" and b.launcher == "mpiexec"
    assert str(tree / "build" / "mpich" / "bin" / "mln-relay") in b.launch.argv[-1]
    assert len(a.gateways) == 8 and run.tag == f"{MIXED}/grid:8"


def test_direct_launch(tree: Path, tmp_path: Path) -> None:
    """A direct run: one stock job over a1, a2, b1, b2 on the direct network, --split 2."""
    recorded_grid_bed(tmp_path / "state", FULL, "direct")
    run = prepare(_run(FULL, "openmpi-delay0ms-direct-pingpong"), _ctx(tree, tmp_path / "state"),
                  tmp_path / "out")  # fmt: skip
    assert run.grid is None and run.request.np == 4 and run.request.options["split"] == 2
    assert run.testbed is not None and run.testbed.placement.hosts == ("a1", "a2", "b1", "b2")
    inner = run.launch.argv[-1]
    assert "--split 2" in inner and "--meta launch=mpi" in inner
    assert "--meta network=direct" in inner and "--meta wan_rate=1gbit" in inner


def test_grid_needs_the_private_bed(tree: Path, tmp_path: Path) -> None:
    recorded_grid_bed(tmp_path / "state", FULL, "direct")
    with pytest.raises(Exception, match=r"needs the private one|private network"):
        prepare(_run(FULL, "openmpi-delay0ms-trunks1-stream"), _ctx(tree, tmp_path / "state"),
                tmp_path / "out")  # fmt: skip


NETWORK = QUICK.read_text()[QUICK.read_text().index("[network]") :]
BAD = [
    ('trunks = 2\n', "trunks needs launch = \"grid\""),
    ('launch = "grid"\nnetwork = "direct"\n', 'runs across the private network, not network'),
    (f'mpi = "{MIXED}"\n', f'mpi = "{MIXED}" (one per site) needs launch = "grid"'),
    ('launch = "grid"\nhosts = 2\n', 'hosts is not for launch = "grid"'),
    ('launch = "grid"\ntrunks = 0\n', "expected gateways per site from 1 to 64, got 0"),
    ('launch = "grid"\nmpi = "a=openmpi,b=nosuch"\n', "unknown MPI 'nosuch'"),
    ('launch = "grid"\nmpi = "a=openmpi,c=mpich"\n', "name every private site once, in order"),
    ('launch = "fast"\n', "expected one of mpi, grid, got 'fast'"),
]  # fmt: skip


@pytest.mark.parametrize(("run", "message"), BAD)
def test_bad_runs(tmp_path: Path, run: str, message: str) -> None:
    path = tmp_path / "s.toml"
    path.write_text(f'[defaults]\nbenchmark = "relay"\nmpi = "openmpi"\n[[run]]\n{run}\n{NETWORK}')
    with pytest.raises(ScenarioError, match=None) as err:
        load_scenario(path)
    assert message in str(err.value), err.value
    assert str(err.value).startswith(str(path))


def test_bad_groups(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    head = '[defaults]\nbenchmark = "relay"\nmpi = "openmpi"\n[matrix]\n'
    cases = [
        ('trunks = [1]\np = [{ trunks = 2 }]\n', "matrix.p[0].trunks: also a key of [matrix]"),
        ('p = [{ testbed = false }]\n', "matrix.p[0].testbed: not in a [matrix] group"),
        ('p = [{ nosuch = 1 }]\n', "matrix.p[0].nosuch: unknown key"),
        ('mpi = [{ label = "x" }]\n', "matrix.mpi: expected an array of values, not of tables"),
    ]  # fmt: skip
    for matrix, message in cases:
        path.write_text(head + matrix + NETWORK)
        with pytest.raises(ScenarioError) as err:
            load_scenario(path)
        assert message in str(err.value), (matrix, err.value)
    path.write_text('[[run]]\nbenchmark = "relay"\nmpi = "openmpi"\nlaunch = "grid"\n')
    with pytest.raises(ScenarioError, match="launch needs a"):
        load_scenario(path)


# --- the grid run's hooks for benchmark runs (grid_run.RunOptions.on_line, watchdog) -------

SUMMARY_GATEWAY = r"""
import signal, sys, time
site, trunk = sys.argv[1], sys.argv[2]
def bye(*_):
    print(f"mln-gateway[{site}/{trunk}] info: summary: rank 0 of site {site} in 5 frames 10 B, "
          f"out 2 frames 0 B; the gateway of site {'b' if site == 'a' else 'a'} (trunk {trunk}) "
          f"in 1 frames 0 B, out 7 frames {1000 + int(trunk)} B; dropped 0",
          file=sys.stderr, flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, bye)
print(f"ready site={site} trunk={trunk} listen=127.0.0.1:1{trunk} wan=127.0.0.1:2{trunk}",
      flush=True)
while True:
    time.sleep(1)
"""


def test_grid_run_lines_and_summaries(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """The jobs' lines and the gateways' lines go to on_line (none to stdout); each gateway's
    summary line at exit is kept and parsed (grid.parse_gateway_summary)."""
    import sys  # noqa: PLC0415

    from multilane.grid import parse_gateway_summary  # noqa: PLC0415
    from multilane.grid_run import GatewayStart, GridRun, JobStart, RunOptions  # noqa: PLC0415

    gateway = tmp_path / "gw.py"
    gateway.write_text(SUMMARY_GATEWAY)
    starts = [GatewayStart(s, t, (sys.executable, str(gateway), s, str(t))) for s in "ab"
              for t in (0, 1)]  # fmt: skip
    job = "import sys; print('#  bytes'); print('   8   1'); print('oops', file=sys.stderr)"
    jobs = [JobStart(s, (sys.executable, "-c", job), {}, "prog", "mpirun") for s in "ab"]
    lines: list[tuple[str, str, str]] = []
    options = RunOptions(on_line=lambda role, site, text: lines.append((role, site, text)))
    run = GridRun(starts, jobs, clean_env(), options)
    assert run.run("0" * 64) == 0, run.failure
    assert ("job", "a", "   8   1") in lines and ("job", "b", "oops") in lines
    assert not capfd.readouterr().out
    summaries = {(c.site, c.trunk): parse_gateway_summary(c.summary) for c in run.children
                 if c.role == "gateway"}  # fmt: skip
    assert summaries[("a", 1)] == {
        "peers": {"b": {"frames_in": 1, "bytes_in": 0, "frames_out": 7, "bytes_out": 1001}},
        "ranks": {"0": {"frames_in": 5, "bytes_in": 10, "frames_out": 2, "bytes_out": 0}},
        "dropped": 0,
    }
    assert all(v is not None for v in summaries.values())
    assert sum(role == "gateway" for role, _, _ in lines) == 4  # the summaries, in the log


def test_grid_run_watchdog(tmp_path: Path) -> None:
    """A reason from the watchdog stops the run (the delay line died): status 1, every
    child stopped."""
    import sys  # noqa: PLC0415

    from multilane.grid_run import GatewayStart, GridRun, JobStart, RunOptions  # noqa: PLC0415

    gateway = tmp_path / "gw.py"
    gateway.write_text(SUMMARY_GATEWAY)
    starts = [GatewayStart(s, 0, (sys.executable, str(gateway), s, "0")) for s in "ab"]
    jobs = [JobStart(s, (sys.executable, "-c", "import time; time.sleep(30)"), {}, "p", "m")
            for s in "ab"]  # fmt: skip
    calls: list[int] = []

    def watchdog() -> str:
        calls.append(1)
        return "the delay line of WAN link ab (pid 1) died during the run" if len(calls) > 1 else ""

    options = RunOptions(on_line=lambda *_: None, watchdog=watchdog)
    run = GridRun(starts, jobs, clean_env(), options)
    assert run.run("0" * 64) == 1
    assert run.failure == "stopped: the delay line of WAN link ab (pid 1) died during the run"
    assert all(c.proc.poll() is not None for c in run.children)
