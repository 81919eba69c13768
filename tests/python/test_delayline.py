"""mln-delayline for real, between network namespaces of its own (root): it rides out a link
flap on its interfaces (POLLERR with ENETDOWN used to end it, and with it the test bed's
WAN), still ends when an interface is deleted, writes interface names that need escaping
into valid JSON, and a --blackhole cuts off exactly the one TCP connection it names.

Topology, per test:  A (va, 10.250.0.1) --veth-- (wa) W [mln-delayline] (w"b\\) --veth-- (vb,
10.250.0.2) B.  Every link is made inside these namespaces, never in the caller's, so removing
the namespaces (by the names recorded) removes the links too; mln-delayline is stopped by PID.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import built_delayline, netns_skip_reason

pytestmark = [pytest.mark.root]

A_ADDR, B_ADDR = "10.250.0.1", "10.250.0.2"
# W's ends of the veth pairs: --a and --b.  Linux allows '"' and '\' in interface names.
W_A, W_B = "wa", 'w"b\\'
READY_S = 10.0
OFFLOADS = ("tx", "off", "tso", "off", "gso", "off", "gro", "off", "sg", "off")
# A TCP receiver in B: accepts one connection after another and prints, per connection, the
# bytes it got before the peer closed or 1 s passed without a byte.
SINK = """
import socket, sys
srv = socket.create_server((sys.argv[1], int(sys.argv[2])))
print("listening", flush=True)
for _ in range(int(sys.argv[3])):
    conn, _ = srv.accept()
    conn.settimeout(1.0)
    got = 0
    try:
        while data := conn.recv(65536):
            got += len(data)
    except socket.timeout:
        pass
    print(got, flush=True)
    conn.close()
"""
# A TCP sender in A: one connection from a port of its own, N bytes (what it can within T s:
# a cut-off flow stops taking them), then close.
SOURCE = """
import socket, sys
with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[4])) as s:
    try:
        s.sendall(bytes(int(sys.argv[3])))
    except socket.timeout:
        pass
"""


def _ip(*args: str) -> None:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"ip {' '.join(args)}: {proc.stderr}"


def _ok(argv: list[str]) -> bool:
    return subprocess.run(argv, capture_output=True, check=False).returncode == 0


def _wait(cond: Callable[[], bool], seconds: float) -> bool:
    end = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


@dataclass
class Line:
    """A running mln-delayline between namespaces a and b (it runs in w)."""

    ns: dict[str, str]
    proc: subprocess.Popen[bytes]
    out: Path
    err: Path
    stats: Path

    def log(self) -> str:
        return self.err.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def ping(self, seconds: float = 5.0) -> bool:
        """One echo from A to B answered within `seconds` (the link may still be coming up)."""
        argv = ["ip", "netns", "exec", self.ns["a"], "ping", "-c", "1", "-W", "1", B_ADDR]
        return _wait(lambda: _ok(argv), seconds)

    def set_link(self, dev: str, state: str) -> None:
        _ip("-n", self.ns["w"], "link", "set", "dev", dev, state)


def _ethtool(ns: str, ifname: str) -> None:
    argv = ["ip", "netns", "exec", ns, "ethtool", "-K", ifname]
    proc = subprocess.run([*argv, *OFFLOADS], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"{' '.join(argv)}: {proc.stderr}"


def _start(program: Path, ns: str, tmp: Path, extra: list[str]) -> subprocess.Popen[bytes]:
    argv = ["ip", "netns", "exec", ns, str(program), "--a", W_A, "--b", W_B, "--delay", "1ms"]
    argv += ["--stats", str(tmp / "dl.json"), *extra]
    with (tmp / "dl.out").open("wb") as out, (tmp / "dl.err").open("wb") as err:
        # `ip netns exec` execs the program: this PID is mln-delayline's own.
        return subprocess.Popen(argv, stdout=out, stderr=err, start_new_session=True)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def line(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Line]:
    """Namespaces a, b, w with unique names, the veth pairs (offloads off: the delay line
    forwards frames of at most the MTU), mln-delayline ready in w with the extra options of an
    indirect parameter; all removed afterwards, also when the test or the setup fails."""
    reason = netns_skip_reason()
    if reason:
        pytest.skip(reason)
    program = built_delayline()
    if program is None:
        pytest.skip("mln-delayline is not built: run make build")
    tag = f"mlndl{os.getpid()}-{secrets.token_hex(3)}"
    created: list[str] = []
    proc = None
    try:
        for role in ("a", "b", "w"):
            _ip("netns", "add", f"{tag}-{role}")
            created.append(f"{tag}-{role}")
        ns = dict(zip("abw", created, strict=True))
        for side, dev, peer in (("a", "va", W_A), ("b", "vb", W_B)):
            veth = ["link", "add", dev, "type", "veth", "peer", "name", peer, "netns", ns["w"]]
            _ip("-n", ns[side], *veth)
            _ip("-n", ns[side], "link", "set", "dev", dev, "up")
            _ip("-n", ns["w"], "link", "set", "dev", peer, "up")
            for where, ifname in ((ns[side], dev), (ns["w"], peer)):
                _ethtool(where, ifname)
        _ip("-n", ns["a"], "addr", "add", f"{A_ADDR}/24", "dev", "va")
        _ip("-n", ns["b"], "addr", "add", f"{B_ADDR}/24", "dev", "vb")
        proc = _start(program, ns["w"], tmp_path, list(getattr(request, "param", [])))
        dl = Line(ns, proc, tmp_path / "dl.out", tmp_path / "dl.err", tmp_path / "dl.json")
        ready = _wait(lambda: "ready" in dl.out.read_text() or not dl.alive(), READY_S)
        assert ready and dl.alive(), f"mln-delayline did not become ready:\n{dl.log()}"
        yield dl
    finally:
        if proc is not None:
            _stop(proc)
        left = [name for name in reversed(created) if not _ok(["ip", "netns", "del", name])]
        assert not left, f"could not remove namespaces {left}"


def test_link_flap_keeps_forwarding(line: Line) -> None:
    assert line.ping(), f"no echo through mln-delayline before the flap:\n{line.log()}"
    for dev in (W_A, W_B):
        line.set_link(dev, "down")
        time.sleep(0.3)  # the kernel reports ENETDOWN on the socket at once
        assert line.alive(), f"mln-delayline ended when {dev} went down:\n{line.log()}"
        line.set_link(dev, "up")
        assert line.ping(), f"no echo after {dev} came back up:\n{line.log()}"
        assert line.alive(), line.log()
    assert line.log().count("went down") == 2, line.log()  # one line per flap
    assert _wait(lambda: line.log().count("is up again") == 2, 2.0), line.log()


def test_deleted_interface_ends_it(line: Line) -> None:
    # A deleted interface never comes back to the socket: the delay line must not live on
    # forwarding nothing, or the test bed's watchdog would not see the WAN cut.
    _ip("-n", line.ns["w"], "link", "del", "dev", W_B)
    assert _wait(lambda: not line.alive(), 3.0), f"still running:\n{line.log()}"
    assert line.proc.returncode == 1
    assert "is gone" in line.log(), line.log()


def test_stats_names_escaped(line: Line) -> None:
    assert line.ping(), line.log()
    before = line.stats.stat().st_mtime_ns
    line.proc.send_signal(signal.SIGUSR1)  # rewrites --stats (and prints the object)
    assert _wait(lambda: line.stats.stat().st_mtime_ns != before, 3.0)
    doc = json.loads(line.stats.read_text())
    assert (doc["a"], doc["b"]) == (W_A, W_B)
    assert doc["ab"]["tx_frames"] > 0 and doc["ba"]["tx_frames"] > 0


@pytest.mark.parametrize("line", [["--blackhole", "5201:20000"]], indirect=True)
def test_blackhole_cuts_one_flow(line: Line) -> None:
    """The first connection to port 5201 stops after 20000 bytes (the rest of it, and its
    ACKs, dropped); a second connection to the same port then carries all of its bytes.  The
    statistics name the flow and count the drops."""
    sink = subprocess.Popen(
        ["ip", "netns", "exec", line.ns["b"], sys.executable, "-c", SINK, B_ADDR, "5201", "2"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert sink.stdout is not None and sink.stdout.readline().strip() == "listening"
        for seconds in ("1", "10"):  # 200 kB each: the first one stalls, the second must not
            argv = ["ip", "netns", "exec", line.ns["a"], sys.executable, "-c", SOURCE]
            subprocess.run([*argv, B_ADDR, "5201", "200000", seconds], check=True, timeout=30)
        out, _ = sink.communicate(timeout=30)
    finally:
        if sink.poll() is None:
            sink.kill()
            sink.wait()
    first, second = (int(n) for n in out.split())
    assert 20000 <= first < 200000, out  # the frame that passed the count went through
    assert second == 200000, out
    line.proc.send_signal(signal.SIGUSR1)
    assert _wait(lambda: '"struck":true' in line.stats.read_text(), 3.0), line.log()
    doc = json.loads(line.stats.read_text())
    (hole,) = doc["blackhole"]
    assert hole["port"] == 5201 and hole["after_bytes"] == 20000 and hole["struck"], hole
    assert hole["flow"].startswith(f"{A_ADDR}:") and hole["flow"].endswith(f">{B_ADDR}:5201")
    assert 20000 < hole["flow_bytes"] <= 20000 + 1500, hole
    assert doc["ab"]["drop_blackhole"] > 0, doc  # the sender's retransmissions, its FIN
    assert "cut off after" in line.log(), line.log()
