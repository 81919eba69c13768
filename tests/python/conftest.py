"""Shared fixtures: the fixture files, and a fake Multilane tree whose "MPI" and "benchmark"
are small Python scripts, so that the CLI's whole flow runs without MPI."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from multilane.context import Context
from multilane.scenario import load_scenario
from multilane.testbed.state import State

FIXTURES = Path(__file__).parent / "fixtures"
REPO_ROOT = Path(__file__).resolve().parents[2]

FAKE_LAUNCHER = r"""
import os, sys
args = sys.argv[1:]
while args and args[0].startswith("-"):
    flag = args.pop(0)
    if flag in ("-np", "-n"):
        args.pop(0)
    elif flag == "--mca":
        del args[:2]
os.execv(args[0], args)
"""

FAKE_BENCH = r"""
import json, os, subprocess, sys, time
args, meta, out, inject = sys.argv[1:], {}, None, None
sizes = [1, 2, 4]
i = 0
while i < len(args):
    a = args[i]
    if a == "--meta":
        k, v = args[i + 1].split("=", 1); meta[k] = v; i += 2
    elif a == "--json":
        out = args[i + 1]; i += 2
    elif a == "--inject-error":
        inject = int(args[i + 1]); i += 2
    elif a == "--sizes":
        sizes = [int(s) for s in args[i + 1].split(",")]; i += 2
    elif a == "--reps":
        i += 2
    else:
        print(f"mln-pt2pt: error: unknown option '{a}'"); sys.exit(2)
if os.environ.get("FAKE_SLEEP"):
    child = subprocess.Popen(["sleep", "300"])
    with open(os.environ["FAKE_PIDFILE"], "w") as f:
        f.write(str(child.pid))
    time.sleep(float(os.environ["FAKE_SLEEP"]))
print("# multilane pt2pt (fake)")
print("#       bytes  iters  errors  latency_us")
print("#         [B]                        [us]")
rows, errors = [], 0
for b in sizes:
    e = 1 if b == inject else 0
    errors += e
    rows.append({"bytes": b, "iters": 10, "errors": e, "latency_us": 1.0 + b,
                 "latency_us_min": 0.5 + b, "latency_us_max": 2.0 + b})
    print(f"{b:>13} {10:>6} {e:>7} {1.0 + b:>11.2f}", flush=True)
status = "fail" if errors else "pass"
print(f"# verdict: {status.upper()}")
doc = {"schema": "multilane-result", "data_version": 1, "benchmark": "pt2pt",
       "status": status, "errors": errors,
       "provenance": {"multilane_version": "0.1.0", "mpi_library": "Fake MPI 1.0",
                      "mpi_standard": "3.1", "nranks": 2, "nhosts": 1, "hosts": ["h"],
                      "date": "2026-01-01T00:00:00Z", "command": " ".join(sys.argv),
                      "params": {}, "meta": meta},
       "metrics": [{"name": "latency_us", "unit": "us", "statistic": "median",
                    "description": "fake latency", "higher_is_better": False}],
       "rows": rows}
if out:
    with open(out, "w") as f:
        json.dump(doc, f)
sys.exit(1 if errors else 0)
"""

FAKE_STRIPE = r"""
import json, sys
args, meta, out, params = sys.argv[1:], {}, None, {"lanes": "tcp:8", "sizes": "1,1M"}
values = ("--lanes", "--local", "--sizes", "--reps", "--warmup", "--min-iters", "--max-iters",
          "--iter-budget", "--tests", "--window", "--window-bytes")
i = 0
while i < len(args):
    a = args[i]
    if a == "--meta":
        k, v = args[i + 1].split("=", 1); meta[k] = v
    elif a == "--json":
        out = args[i + 1]
    elif a in values:
        params[a[2:].replace("-", "_")] = args[i + 1]
    else:
        print(f"mln-stripe: error: unknown option '{a}'"); sys.exit(2)
    i += 2
from multilane.sizes import parse_size_spec
sizes = parse_size_spec(params["sizes"])
fast = 8 if params["lanes"].startswith(("tcp:", "helper:")) else 1
print("#        bytes   iters  window  time_us  bw_Mbps  errors")
rows = []
for b in sizes:
    t, bw = 5000.0 + b / (16.0 * fast), 100.0 * fast
    rows.append({"bytes": b, "iters": 5, "errors": 0, "window": 8, "time_us": t,
                 "time_us_min": t, "time_us_max": t, "bw_Mbps": bw, "bw_Mbps_min": bw,
                 "bw_Mbps_max": bw})
    print(f"{b:>13} {5:>6} {8:>7} {t:>8.1f} {bw:>8.1f} {0:>7}", flush=True)
print("# verdict: PASS")
doc = {"schema": "multilane-result", "data_version": 1, "benchmark": "stripe",
       "status": "pass", "errors": 0,
       "provenance": {"multilane_version": "0.1.0", "mpi_library": "Fake MPI 1.0",
                      "mpi_standard": "3.1", "nranks": 2, "nhosts": 1, "hosts": ["h"],
                      "date": "2026-01-01T00:00:00Z", "command": " ".join(sys.argv),
                      "params": params, "meta": meta},
       "metrics": [{"name": "time_us", "unit": "us", "statistic": "median",
                    "description": "fake one-way time", "higher_is_better": False},
                   {"name": "bw_Mbps", "unit": "Mbit/s", "statistic": "median",
                    "description": "fake bandwidth", "higher_is_better": True}],
       "rows": rows}
if out:
    with open(out, "w") as f:
        json.dump(doc, f)
"""

FAKE_CONFIG = r"""
import os, sys
value = os.environ.get("MLN_LOG", "warn")
if value not in ("none", "error", "warn", "info", "debug", "trace"):
    print(f"MLN_LOG: invalid value '{value}' (expected one of: none, error, warn, info, "
          "debug, trace)", file=sys.stderr)
    sys.exit(2)
if "--json" in sys.argv:
    print('[{"env": "MLN_LOG", "type": "enum", "default": "warn", "value": "%s", "help": "x"}]'
          % value)
else:
    print(f"MLN_LOG  enum  warn  {value}  log level")
"""

OMPI_INFO = r"""
print("ompi:version:full:9.9.9")
print("mca:opal:base:param:opal_built_with_cuda_support:value:false")
"""


def _script(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(0o755)


@pytest.fixture
def fixtures() -> Path:
    """The folder of hand-written result files."""
    return FIXTURES


@pytest.fixture
def fake_root(tmp_path: Path) -> Path:
    """A Multilane tree with a fake Open MPI (installed, mln-pt2pt and mln-stripe built) and
    no MPICH."""
    root = tmp_path / "tree"
    (root / "scenarios").mkdir(parents=True)
    (root / "CMakeLists.txt").write_text("# fake\n")
    prefix = root / ".deps" / "openmpi"
    (prefix / "bin").mkdir(parents=True)
    (prefix / ".multilane-mpi").write_text("openmpi 9.9.9\n")
    _script(prefix / "bin" / "mpicc", "")
    _script(prefix / "bin" / "ompi_info", OMPI_INFO)
    _script(prefix / "bin" / "mpirun", FAKE_LAUNCHER)
    _script(root / "build" / "openmpi" / "bin" / "mln-pt2pt", FAKE_BENCH)
    _script(root / "build" / "openmpi" / "bin" / "mln-config", FAKE_CONFIG)
    _script(root / "build" / "openmpi" / "bin" / "mln-stripe", FAKE_STRIPE)
    return root


def two_sites_network(
    rate: str, delay: str, extra_network: str = "", extra_wan: str = "", hosts: int = 1
) -> str:
    """The TOML of a [network] with sites a and b (`hosts` hosts each: a1, a2, ...) joined by
    one WAN link."""
    count = f"hosts = {hosts}\n" if hosts != 1 else ""
    return (
        f"[network]\n{extra_network}"
        f'[[network.site]]\nname = "a"\n{count}[[network.site]]\nname = "b"\n{count}'
        f'[[network.wan]]\nsites = ["a", "b"]\nrate = "{rate}"\ndelay = "{delay}"\n{extra_wan}'
    )


def clean_env(root: Path | None = None, **extra: str) -> dict[str, str]:
    """The caller's environment without MPI or MLN settings, optionally rooted at `root`."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MLN_", "MULTILANE_", "FAKE_")) and k not in ("MPI_HOME", "MPICC")
    }
    if root is not None:
        env["MULTILANE_ROOT"] = str(root)
    env.update(extra)
    return env


def table_cells(lines: list[str], first: str, after: str = "") -> list[str]:
    """The cells of the first Markdown table row starting with `first` after a line that
    contains `after` (the report tests' way into a table)."""
    start = next(i for i, line in enumerate(lines) if after in line)
    for line in lines[start:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first:
            return cells[1:]
    raise AssertionError(f"no row {first!r} after {after!r}")


def recorded_bed(
    directory: Path,
    scenario: Path,
    root: Path = REPO_ROOT,
    complete: bool = True,
    variant: str | None = None,
) -> Context:
    """A state file saying the test bed of `scenario` (its network as `variant`, "private"
    or "direct", wants it; None: as written) is up (the record of `testbed up`, as placement
    reads it), and a context at `root` that finds it: nothing is built or started."""
    network = load_scenario(scenario).network
    assert network is not None
    network = network.variant(variant or network.variant_name)
    hosts = [
        {"name": h.name, "site": h.site, "namespace": f"mlnf00d-h-{h.name}",
         "address": h.address, "interface": h.interfaces[0].name}
        for h in network.hosts
    ]  # fmt: skip
    State(
        directory,
        "mlnf00d-",
        str(scenario.resolve()),
        complete=complete,
        hosts=hosts,
        variant=network.variant_name,
    ).save()
    env = clean_env(root, MULTILANE_TESTBED_DIR=str(directory))
    return Context(root=root, env=env, ncpus=2, euid=0)


def recorded_grid_bed(directory: Path, scenario: Path, variant: str) -> None:
    """A state file saying the test bed of `scenario` is up as `variant`, as a grid run and
    its benchmark launch read it (seed 004): its compute hosts (and, private, its front-ends with
    their WAN-side NICs), the sites, the WAN link's rate; nothing is built or started."""
    network = load_scenario(scenario).network
    assert network is not None
    network = network.variant(variant)
    hosts, sites = [], []
    for site in network.sites:
        sites.append({"name": site.name, "private": site.private, "subnet": site.subnet})
        for h in site.all_hosts:
            address = h.interfaces[0].address.split("/")[0]
            record = {"name": h.name, "site": h.site, "namespace": f"mlnf00d-h-{h.name}",
                      "address": address, "interface": h.interfaces[0].name,
                      "role": h.role, "nic_rate_bps": h.nic_rate_bps}  # fmt: skip
            if h.role == "frontend":
                record.update(wan_address=h.wan_address, wan_interface="eth1",
                              wan_nic_rate_bps=h.wan_nic_rate_bps)  # fmt: skip
            hosts.append(record)
    wan = [{"name": w.name, "sites": [w.site_a, w.site_b], "ab": {"rate_bps": w.ab.rate_bps},
            "ba": {"rate_bps": w.ba.rate_bps}} for w in network.wan]  # fmt: skip
    state = State(directory, "mlnf00d-", str(scenario.resolve()), complete=True, hosts=hosts)
    state.variant, state.sites, state.wan = network.variant_name, sites, wan
    state.save()


def multilane(
    args: Sequence[str], env: dict[str, str], timeout: float = 300, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the CLI as a user would (python -m multilane), capturing its output."""
    return subprocess.run(
        [sys.executable, "-m", "multilane", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=cwd,
    )


# MPI builds present in this tree (the test-bed MPI tests run for each).
BUILT_MPIS = [m for m in ("openmpi", "mpich") if (REPO_ROOT / "build" / m / "bin").is_dir()]


def netns_skip_reason() -> str | None:
    """Why network namespaces cannot be made here (not root, no iproute2), or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    if shutil.which("ip") is None:
        return "needs iproute2 (ip)"
    probe = subprocess.run(["ip", "netns", "list"], capture_output=True, check=False)
    return None if probe.returncode == 0 else "`ip netns` is not available here"


def built_delayline() -> Path | None:
    """The first mln-delayline built in this tree, or None."""
    for mpi in ("openmpi", "mpich", "user"):
        program = REPO_ROOT / "build" / mpi / "bin" / "mln-delayline"
        if os.access(program, os.X_OK):
            return program
    return None


def testbed_skip_reason() -> str | None:
    """Why MPI runs across a private test bed cannot happen here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    if not BUILT_MPIS:
        return "no MPI build: run make build"
    if not any((REPO_ROOT / "build" / m / "bin" / "mln-delayline").exists() for m in BUILT_MPIS):
        return "mln-delayline is not built: run make build"
    return None


def private_testbed(tmp: Path, name: str, toml: str) -> Iterator[tuple[dict[str, str], Path]]:
    """Body of a module fixture: a test bed of its own (state under tmp) from `toml`, up for
    the module and always taken down; yields (env, scenario path).  Skips without root."""
    reason = testbed_skip_reason()
    if reason:
        pytest.skip(reason)
    scenario = tmp / f"{name}.toml"
    scenario.write_text(toml)
    env = clean_env(REPO_ROOT, MULTILANE_TESTBED_DIR=str(tmp / "state"))
    up = multilane(["testbed", "up", str(scenario)], env, timeout=120)
    assert up.returncode == 0, up.stderr
    try:
        yield env, scenario
    finally:
        down = multilane(["testbed", "down"], env, timeout=120)
        assert down.returncode == 0, down.stderr


def run_group(argv: Sequence[str], env: dict[str, str], timeout: float) -> tuple[int, str]:
    """Run argv in its own process group; on timeout kill that group (STYLE.md 18).
    (exit status, stdout + stderr); the status is -9 after a timeout."""
    child = subprocess.Popen(
        list(argv),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        out, _ = child.communicate()
        return -9, f"{out}\n[killed after {timeout:g} s]"
    return child.returncode, out


def check_ok(status: int, out: str, names: Sequence[str]) -> None:
    """A C test program's verdict (tests/c/stripe_check.c): exit 0, an "ok NAME" line for
    every sub-test, no FAIL line."""
    passed = set(re.findall(r"^ok (\S+)", out, re.MULTILINE))
    failed = re.findall(r"^FAIL .*$", out, re.MULTILINE)
    assert not failed, "\n".join(failed) + "\n" + out[-3000:]
    assert status == 0, out[-3000:]
    missing = [n for n in names if n not in passed]
    assert not missing, f"no 'ok' line for {missing}\n{out[-3000:]}"


def built_program(mpi: str, name: str) -> Path:
    """build/<mpi>/bin/<name>; the test skips when it is not built."""
    path = REPO_ROOT / "build" / mpi / "bin" / name
    if not path.exists():
        pytest.skip(f"{path.relative_to(REPO_ROOT)} is not built: run make build")
    return path


def launch_across_testbed(
    bed: tuple[dict[str, str], Path],
    mpi: str,
    program: Sequence[str],
    ppn: int,
    *,
    every_host: bool = False,
) -> tuple[list[str], dict[str, str], Any]:
    """How to start `program` through the MPI's launcher on the test bed of `bed` (a
    private_testbed), ppn ranks on the first host of each site (every host with
    `every_host`): (argv, environment, the TestbedRun of the placement)."""
    from multilane.context import Context  # noqa: PLC0415 - conftest imports stay light
    from multilane.launchers import HOSTS_COMMANDS  # noqa: PLC0415
    from multilane.scenario import load_scenario  # noqa: PLC0415
    from multilane.testbed import launch as tblaunch  # noqa: PLC0415

    env, scenario = bed
    ctx = Context(root=REPO_ROOT, env=env, ncpus=os.cpu_count() or 1, euid=os.geteuid())
    network = load_scenario(scenario).network
    assert network is not None
    name = Path(program[0]).name
    run = tblaunch.placement(ctx, scenario, network, ppn, name, every_host=every_host)
    cmd = HOSTS_COMMANDS[mpi](
        REPO_ROOT / ".deps" / mpi, program, run.placement, euid=0, ncpus=ctx.ncpus
    )
    return run.wrap(cmd.argv), {**env, **cmd.env}, run


def run_across_testbed(
    bed: tuple[dict[str, str], Path],
    mpi: str,
    program: Sequence[str],
    ppn: int,
    timeout: float,
    *,
    every_host: bool = False,
) -> tuple[int, str, int | None, tuple[str, ...]]:
    """`program` through the MPI's launcher on the test bed of `bed` (a private_testbed), ppn
    ranks on the first host of each site (every host with `every_host`): (exit status,
    output, bytes the delay lines forwarded during the run or None without delay lines, the
    hosts used)."""
    argv, env, run = launch_across_testbed(bed, mpi, program, ppn, every_host=every_host)
    delayline = run.bed.state.wan_mode == "delayline"
    before = run.wan_tx_bytes() if delayline else 0
    status, out = run_group(argv, env, timeout)
    crossed = run.wan_tx_bytes() - before if delayline else None
    return status, out, crossed, tuple(run.placement.hosts)
