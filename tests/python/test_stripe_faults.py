"""Faults of striped point-to-point between two sites, for real (issue 17, "Faults, tested";
root, namespaces, both MPIs).  Each fault strikes a striped transfer from rank 0 (host a1) to
rank 1 (host b1) over tcp lanes, and every other rank must get an error status or a clean
abort within MLN_STRIPE_TIMEOUT (plus the launcher's own time), never a hang, never wrong data:

  kill       rank 1 SIGKILLs itself once part of a 64 MiB message landed
  reset      rank 0's lane 0 resets after 1 MiB (MLN_STRIPE_FAULT=reset:0:1048576)
  blackhole  the delay line drops every frame of one lane, both ways, once it carried 4 MiB
             (scenario `blackhole` on the WAN link; MLN_STRIPE_PORT puts the lanes on its
             port), so that only timers can tell
  stranger   during a long verified exchange, a process in another namespace connects to
             rank 1's lane port (MLN_STRIPE_PORT) and sends garbage, replays a genuine hello
             from a rank's host (a1), or connects from a host that is no rank's (a2): each
             connection is closed by the rank, with a log line, and the exchange passes

One test bed for the module (two sites of two hosts, 500 Mbit/s, 2 ms); the blackhole strikes
once per port, so each MPI has its own ports.  Each test prints what the ranks saw and how long
it took as one line `fault-report: {JSON}` (pytest -s shows them)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import (
    BUILT_MPIS,
    REPO_ROOT,
    built_program,
    check_ok,
    launch_across_testbed,
    private_testbed,
    run_across_testbed,
    two_sites_network,
)

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.mpi]

MPIS = BUILT_MPIS
STRIPE_TIMEOUT_S = 5  # MLN_STRIPE_TIMEOUT of every run here
LAUNCHER_SLACK_S = 15  # a launcher's own time to notice a dead rank and end the job
RUN_TIMEOUT_S = 120
# Per MPI (the blackhole strikes once per port): the lane ports of the blackhole and stranger
# runs; kill and reset take free ports.
BLACKHOLE_PORT = {"openmpi": 21000, "mpich": 21100}
STRANGER_PORT = {"openmpi": 22000, "mpich": 22100}
BLACKHOLE_AFTER = 4 * 2**20
NETWORK = 'name = "stripe-faults"\n' + two_sites_network(
    "500mbit",
    "2ms",
    "mtu = 9000\n",
    "blackhole = ["
    + ", ".join(f"{{ port = {p}, after = {BLACKHOLE_AFTER} }}" for p in BLACKHOLE_PORT.values())
    + "]\n",
    hosts=2,
)
STRANGER = Path(__file__).parent / "lane_stranger.py"
STATUS_NAMES = {
    "peer or lane failed": "MLN_ERR_PEER",
    "timed out": "MLN_ERR_TIMEOUT",
    "success": "MLN_OK",
}
# What each launcher prints when a rank of its job was killed.
LAUNCHER_KILLED = re.compile(
    r"signal 9|KILLED BY SIGNAL: 9|exited on signal|BAD TERMINATION|was killed", re.IGNORECASE
)


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], Path]]:
    """A private two-site test bed of two hosts per site for the module; always taken down."""
    yield from private_testbed(tmp_path_factory.mktemp("tbfaults"), "stripe-faults", NETWORK)


def _report(fault: str, mpi: str, **values: Any) -> dict[str, Any]:
    """Prints what the ranks saw as one `fault-report:` line and returns it."""
    doc = {"fault": fault, "mpi": mpi, **values}
    print(f"fault-report: {json.dumps(doc, sort_keys=True)}", flush=True)
    return doc


def _program(mpi: str, *args: str) -> list[str]:
    """mpi_stripe over 4 tcp lanes between the sites, MLN_STRIPE_TIMEOUT = STRIPE_TIMEOUT_S."""
    program = [str(built_program(mpi, "mpi_stripe")), "--local", "0", "--backend", "tcp"]
    return [*program, "--lanes", "4", "--stripe-timeout", str(STRIPE_TIMEOUT_S), *args]


def _lane_failures(out: str, what: str) -> dict[str, dict[str, Any]]:
    """Each rank's line `rank R: WHAT: STATUS after T s, as expected` (lane_fault_run)."""
    seen = {}
    pattern = rf"rank (\d+): {what}: (.+?) after ([0-9.]+) s, as expected"
    for rank, text, seconds in re.findall(pattern, out):
        seen[f"rank{rank}"] = {"status": STATUS_NAMES.get(text, text), "after_s": float(seconds)}
    return seen


def _lane_fault_check(out: str, what: str, bound_s: float) -> dict[str, dict[str, Any]]:
    """Both ranks failed the message with MLN_ERR_PEER or MLN_ERR_TIMEOUT within bound_s."""
    seen = _lane_failures(out, what)
    assert sorted(seen) == ["rank0", "rank1"], out[-3000:]
    for rank, got in seen.items():
        assert got["status"] in ("MLN_ERR_PEER", "MLN_ERR_TIMEOUT"), (rank, got)
        assert got["after_s"] <= bound_s, f"{rank} took {got['after_s']} s (bound {bound_s} s)"
    assert f"{what}: 2 x 4 MiB both ways after it, whole" in out, out[-3000:]
    return seen


@pytest.mark.parametrize("mpi", MPIS)
def test_kill(bed: tuple[dict[str, str], Path], mpi: str) -> None:
    """Rank 1 SIGKILLs itself mid-message: rank 0's send ends with an error (it prints it, then
    aborts the job) or the launcher ends the job first; either way the run ends within
    MLN_STRIPE_TIMEOUT + the launcher's slack of the kill, and nothing completes."""
    program = _program(mpi, "--watchdog", "30", "--test", "kill")
    status, out, _, _ = run_across_testbed(bed, mpi, program, 1, RUN_TIMEOUT_S)
    ended = time.time()
    assert not re.findall(r"^(FAIL .*|ok kill.*)$", out, re.MULTILINE), out[-3000:]
    killed = re.search(
        r"rank 1: kill: SIGKILL now, about (\d+) of (\d+) bytes landed, at ([0-9.]+)", out
    )
    assert killed, f"rank 1 did not die mid-message:\n{out[-3000:]}"
    kill_at = float(killed.group(3))
    sender = re.search(
        r"rank 0: kill: the send ended with (.+?) after ([0-9.]+) s, at ([0-9.]+)", out
    )
    # The library's own warning when the send fails: evidence of rank 0's error even where the
    # launcher ended the job before forwarding the program's line (seen once with Hydra).
    warned = re.search(
        r"multilane\[0\] warn .*striped send of \d+ bytes .* failed: (.+)$", out, re.MULTILINE
    )
    launcher = LAUNCHER_KILLED.search(out)
    doc = _report(
        "kill",
        mpi,
        landed_bytes=int(killed.group(1)),
        message_bytes=int(killed.group(2)),
        rank0=(
            {
                "status": STATUS_NAMES.get(sender.group(1), sender.group(1)),
                "after_kill_s": round(float(sender.group(3)) - kill_at, 3),
            }
            if sender
            else None
        ),
        rank0_warning=STATUS_NAMES.get(warned.group(1), warned.group(1)) if warned else None,
        launcher=launcher.group(0) if launcher else None,
        exit_status=status,
        run_end_after_kill_s=round(ended - kill_at, 3),
    )
    assert status != 0, "a job with a killed rank cannot succeed"
    assert doc["rank0"] is not None or doc["rank0_warning"] or launcher, (
        f"neither an error nor an abort:\n{out[-3000:]}"
    )
    if doc["rank0_warning"]:
        assert doc["rank0_warning"] in ("MLN_ERR_PEER", "MLN_ERR_TIMEOUT"), doc
    if doc["rank0"] is not None:
        assert doc["rank0"]["status"] in ("MLN_ERR_PEER", "MLN_ERR_TIMEOUT"), doc
        assert doc["rank0"]["after_kill_s"] <= STRIPE_TIMEOUT_S + 1, doc
    assert doc["run_end_after_kill_s"] <= STRIPE_TIMEOUT_S + LAUNCHER_SLACK_S, doc


@pytest.mark.parametrize("mpi", MPIS)
def test_reset(bed: tuple[dict[str, str], Path], mpi: str) -> None:
    """MLN_STRIPE_FAULT resets rank 0's tcp lane 0 after 1 MiB of a 16 MiB message: the
    message fails on both sides (MLN_ERR_PEER or MLN_ERR_TIMEOUT) within MLN_STRIPE_TIMEOUT
    and some slack; the messages after it (over mpi lanes: 2 x 4 MiB both ways, then the sizes
    and exchange sub-tests) arrive whole."""
    program = _program(mpi, "--fault", "reset:0:1048576", "--test", "fault,sizes,exchange")
    status, out, _, _ = run_across_testbed(bed, mpi, program, 1, RUN_TIMEOUT_S)
    check_ok(status, out, ("fault", "sizes", "exchange"))
    seen = _lane_fault_check(out, "fault", STRIPE_TIMEOUT_S + 5)
    _report("reset", mpi, faulty_rank=0, **seen)


@pytest.mark.parametrize("mpi", MPIS)
def test_blackhole(bed: tuple[dict[str, str], Path], mpi: str) -> None:
    """The delay line silently drops one lane of a 64 MiB message (both ways) once it carried
    4 MiB: both ranks' requests fail with MLN_ERR_TIMEOUT (or MLN_ERR_PEER, when the other side
    said so first) within about MLN_STRIPE_TIMEOUT, no wrong byte; the messages after it arrive
    whole.  The delay line's counters show the flow it cut."""
    port = BLACKHOLE_PORT[mpi]
    program = _program(mpi, "--stripe-port", str(port), "--test", "blackhole")
    status, out, _, _ = run_across_testbed(bed, mpi, program, 1, RUN_TIMEOUT_S)
    stats = _link_stats(bed)
    (hole,) = [h for h in stats["blackhole"] if h["port"] == port]
    dropped = stats["ab"]["drop_blackhole"] + stats["ba"]["drop_blackhole"]
    seen = _lane_failures(out, "blackhole")
    _report("blackhole", mpi, port=port, flow=hole.get("flow"), frames_dropped=dropped, **seen)
    check_ok(status, out, ("blackhole",))
    assert hole["struck"] and hole["flow"].endswith(f":{port}"), hole
    assert dropped > 0
    _lane_fault_check(out, "blackhole", STRIPE_TIMEOUT_S + 5)


def _live(bed: tuple[dict[str, str], Path]) -> Any:
    """The module's live test bed (multilane.testbed.bed.Testbed)."""
    from multilane.context import Context  # noqa: PLC0415
    from multilane.testbed.bed import Testbed  # noqa: PLC0415

    live = Testbed.load(Context(root=REPO_ROOT, env=bed[0], ncpus=1, euid=os.geteuid()))
    assert live is not None
    return live


def _link_stats(bed: tuple[dict[str, str], Path]) -> dict[str, Any]:
    """The counters of the module's one delay line."""
    (stats,) = _live(bed).link_stats().values()
    return stats


class _Run:
    """A launch whose output is read line by line while it runs (its own process group)."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            argv,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def out(self) -> str:
        return "".join(self.lines)

    def wait_for(self, pattern: str, seconds: float) -> re.Match[str] | None:
        """The first match of pattern in the output so far, waiting up to `seconds`."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            match = re.search(pattern, self.out)
            if match or self.proc.poll() is not None:
                return match or re.search(pattern, self.out)
            time.sleep(0.05)
        return None

    def finish(self, seconds: float) -> int:
        """The exit status; after `seconds` the group is killed (status -9)."""
        try:
            status = self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            status = -9
        self.reader.join(timeout=10)
        return status


def _stranger(bed: tuple[dict[str, str], Path], host: str, *args: str) -> dict[str, Any]:
    """lane_stranger.py inside test-bed host `host`: its JSON report."""
    argv = _live(bed).exec_argv(host, [sys.executable, str(STRANGER), *args])
    proc = subprocess.run(argv, env=bed[0], capture_output=True, text=True, timeout=30, check=False)
    assert proc.stdout.strip(), f"no report from the stranger on {host}: {proc.stderr}"
    return {"from": host, **json.loads(proc.stdout.strip().splitlines()[-1])}


@pytest.mark.parametrize("mpi", MPIS)
def test_stranger(bed: tuple[dict[str, str], Path], tmp_path: Path, mpi: str) -> None:
    """While ranks 0 (a1) and 1 (b1) exchange 4 MiB messages both ways, checked, strangers
    connect to rank 1's lane port: garbage from a1, a replayed genuine hello from a1 (a rank's
    address: admitted to the handshake, fails the challenge), the hello from a2 (no rank's
    address: closed unread).  Each is closed by the rank with its log line; the exchange passes
    with every byte right and the lanes between the ranks stay up."""
    port = STRANGER_PORT[mpi]
    until = tmp_path / "stop"
    program = _program(mpi, "--stripe-port", str(port), "--until", str(until), "--test", "stranger")
    argv, env, run = launch_across_testbed(bed, mpi, program, 1)
    rank_host = run.bed.host("b1").address
    launch = _Run(argv, env)
    try:
        hello = launch.wait_for(r"stranger: hello ([0-9a-f]{144})", 60)
        assert hello, f"rank 0 printed no hello:\n{launch.out[-3000:]}"
        listens = re.search(r"rank 1 listens on port (\d+)", launch.out)
        assert listens and int(listens.group(1)) == port, launch.out[-3000:]
        target = [rank_host, str(port)]
        strangers = [
            _stranger(bed, "a1", *target, "--mode", "garbage"),
            _stranger(bed, "a1", *target, "--mode", "replay", "--hello", hello.group(1)),
            _stranger(bed, "a2", *target, "--mode", "hello", "--hello", hello.group(1)),
        ]
    finally:
        until.touch()
        status = launch.finish(RUN_TIMEOUT_S)
    out = launch.out
    # rank 1's warning for each (src/p2p/tcp_conn.c)
    rejected = {
        mode: re.search(rf"^multilane\[1\] warn \S+: tcp: a connection from .*{text}", out, re.M)
        for mode, text in (
            ("garbage", "that is not a lane of this job to this rank"),
            (
                "replay",
                re.escape(
                    "does not prove the keys of this job and of that rank "
                    "(a replayed or forged hello)"
                ),
            ),
            ("hello", "no rank's address: closed unread"),
        )
    }
    rounds = re.search(r"stranger: (\d+) rounds", out)
    _report(
        "stranger",
        mpi,
        port=port,
        rounds=int(rounds.group(1)) if rounds else None,
        strangers=strangers,
        log={mode: line.group(0) if line else None for mode, line in rejected.items()},
    )
    check_ok(status, out, ("stranger",))
    for seen in strangers:
        assert seen["connected"] and seen["closed"] in ("eof", "reset"), seen
        assert seen["after_s"] < 5, seen
    assert strangers[1].get("challenge"), "the replayed hello got no challenge"
    assert strangers[2]["received"] == 0, strangers[2]
    for mode, line in rejected.items():
        assert line, f"rank 1 logged no rejection of the {mode} stranger:\n{out[-3000:]}"
