"""mln-gateway on loopback (src/relay/gateway.c, docs/RELAY.md): two gateways, sites a and b,
trunk 0 of 1, and tests/c/relay_gw_client standing in for the ranks (the relays' wire without
MPI).  A message goes rank 0 (site a) -> gateway a -> gateway b -> rank 1 (site b) and back,
every byte checked; BYE from every rank ends both gateways with exit 0; another secret is
refused with one line; killing a gateway (by its own PID) delivers FAIL to the ranks of the
other, which exits 1; a rank that leaves without BYE fails the run the same way.

Each gateway is started with subprocess in a session of its own, port 0, and the test reads
its "ready ..." line for the ports; only those PIDs are ever signalled."""

from __future__ import annotations

import os
import re
import secrets
import selectors
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import built_program, clean_env

MPI = "openmpi"
SITES = "a:1,b:1"
READY = re.compile(
    r"^ready site=(?P<site>\w+) trunk=(?P<trunk>\d+) listen=(?P<listen>[\d.]+:\d+) "
    r"wan=(?P<wan>[\d.]+:\d+)$"
)


class Gateway:
    """One mln-gateway, started and read up to its ready line."""

    def __init__(
        self,
        exe: Path,
        site: str,
        env: dict[str, str],
        peers: dict[str, str],
        timeout: float = 10.0,
    ) -> None:
        argv = [
            str(exe),
            "--site",
            site,
            "--trunk",
            "0",
            "--trunks",
            "1",
            "--sites",
            SITES,
            "--listen",
            "127.0.0.1:0",
            "--wan",
            "127.0.0.1:0",
            "--timeout",
            str(timeout),
        ]
        for name, addr in peers.items():
            argv += ["--peer", f"{name}={addr}"]
        self.proc = subprocess.Popen(
            argv,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        line = self._ready_line(10.0)
        m = READY.match(line)
        assert m, f"no ready line from gateway {site}: {line!r} {self.stop()}"
        assert m["site"] == site and m["trunk"] == "0"
        self.listen, self.wan = m["listen"], m["wan"]

    def _ready_line(self, within: float) -> str:
        assert self.proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        if not sel.select(within):
            return ""
        return self.proc.stdout.readline().strip()

    def wait(self, within: float = 15.0) -> tuple[int, str]:
        """(exit status, stderr) once it ended by itself within `within` s."""
        try:
            _, err = self.proc.communicate(timeout=within)
        except subprocess.TimeoutExpired:
            self.stop()
            pytest.fail("the gateway did not end by itself")
        return self.proc.returncode, err

    def stop(self) -> str:
        """Kills this gateway (its own PID only) if it still runs; its stderr."""
        if self.proc.poll() is None:
            self.proc.kill()
        _, err = self.proc.communicate()
        return err


@pytest.fixture
def gateway_exe() -> Path:
    return built_program(MPI, "mln-gateway")


@pytest.fixture
def client_exe() -> Path:
    return built_program(MPI, "relay_gw_client")


def _env(secret: str, **extra: str) -> dict[str, str]:
    return clean_env(MLN_GRID_SECRET=secret, **extra)


def _pair(exe: Path, env: dict[str, str], timeout: float = 10.0) -> tuple[Gateway, Gateway]:
    """Gateway b first (a, the lower site, connects to it), then a."""
    b = Gateway(exe, "b", env, {}, timeout)
    try:
        a = Gateway(exe, "a", env, {"b": b.wan}, timeout)
    except BaseException:
        b.stop()
        raise
    return a, b


def _client(exe: Path, env: dict[str, str], *args: str, timeout: float = 30.0):
    return subprocess.run(
        [str(exe), *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.mark.parametrize("mode", ["auth", "aead", "none"])
def test_message_through_two_gateways_and_exit_after_bye(
    gateway_exe: Path, client_exe: Path, mode: str
) -> None:
    env = _env(secrets.token_hex(32), MLN_LINK_SECURITY=mode, MLN_LOG="info")
    a, b = _pair(gateway_exe, env)
    try:
        out = _client(client_exe, env, "pingpong", SITES, a.listen, b.listen, "70000", "20")
        assert out.returncode == 0, out.stderr
        assert re.search(r"^pingpong: 20 round trips of 70000 bytes", out.stdout, re.M)
        for gw, site in ((a, "a"), (b, "b")):
            status, err = gw.wait()
            assert status == 0, err
            assert f"mln-gateway[{site}/0] info: summary:" in err
            assert " error: " not in err and " warn: " not in err, err
    finally:
        a.stop()
        b.stop()


def test_wrong_secret_is_refused_with_one_line(gateway_exe: Path, client_exe: Path) -> None:
    a, b = _pair(gateway_exe, _env(secrets.token_hex(32)))
    try:
        out = _client(client_exe, _env(secrets.token_hex(32)), "hello", SITES, "0", a.listen)
        assert out.returncode == 1
        assert out.stdout.startswith("refused: ") and out.stdout.count("\n") == 1, out.stdout
        a.proc.send_signal(signal.SIGTERM)
        status, err = a.wait()
        assert status == 0, err
        lines = [ln for ln in err.splitlines() if "handshake" in ln]
        assert len(lines) == 1 and "another job" in lines[0], err
        assert "stopped by SIGTERM" in err
        # b may see a leave before its own SIGTERM: its peer lost, FAIL, exit 1; else 0
        b.proc.send_signal(signal.SIGTERM)
        assert b.wait()[0] in (0, 1)
    finally:
        a.stop()
        b.stop()


def test_fail_reaches_the_ranks_when_a_peer_gateway_dies(
    gateway_exe: Path, client_exe: Path
) -> None:
    env = _env(secrets.token_hex(32))
    a, b = _pair(gateway_exe, env)
    client = subprocess.Popen(
        [str(client_exe), "failwait", SITES, a.listen, b.listen],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert client.stdout is not None
        assert client.stdout.readline().strip() == "connected"
        b.proc.kill()  # its own PID: a front-end that dies
        out, err = client.communicate(timeout=20)
        assert client.returncode == 0, err
        assert out.startswith(
            "FAIL multilane grid: gateway 0 of site a: the gateway of site b (trunk 0) lost"
        ), out
        assert out.rstrip().endswith(": the run cannot go on"), out
        status, err = a.wait()
        assert status == 1, err
        assert "the run cannot go on" in err
    finally:
        if client.poll() is None:
            client.kill()
            client.communicate()
        a.stop()
        b.stop()


def test_rank_leaving_without_bye_fails_both_sites(gateway_exe: Path, client_exe: Path) -> None:
    env = _env(secrets.token_hex(32))
    a, b = _pair(gateway_exe, env)
    try:
        out = _client(client_exe, env, "hello", SITES, "0", a.listen)
        assert out.returncode == 0 and out.stdout == "up\n", out.stderr
        status, err = a.wait()
        assert status == 1 and "rank 0 of site a lost (closed without BYE)" in err, err
        status, err = b.wait()
        assert status == 1 and "FAIL from the gateway of site a" in err, err
    finally:
        a.stop()
        b.stop()


def test_nobody_comes_within_the_timeout(gateway_exe: Path) -> None:
    a, b = _pair(gateway_exe, _env(secrets.token_hex(32)), timeout=1.0)
    try:
        start = time.monotonic()
        for gw in (a, b):
            status, err = gw.wait()
            assert status == 1 and "never connected within 1 s" in err, err
        assert time.monotonic() - start < 10
    finally:
        a.stop()
        b.stop()


@pytest.mark.parametrize(
    ("secret", "args", "says"),
    [
        (None, [], "MLN_GRID_SECRET is not set"),
        ("12ab", [], "MLN_GRID_SECRET is malformed"),
        ("0" * 64, ["--sites", "a:1,a:1"], "--sites: a site is named twice"),
        ("0" * 64, ["--trunk", "1"], "--trunk must be below --trunks"),
        ("0" * 64, ["--listen", "localhost:1"], "--listen and --wan take IPV4:PORT"),
    ],
)
def test_usage_errors_say_one_line(
    gateway_exe: Path, secret: str | None, args: list[str], says: str
) -> None:
    argv = {
        "--site": "a",
        "--trunk": "0",
        "--trunks": "1",
        "--sites": SITES,
        "--listen": "127.0.0.1:0",
        "--wan": "127.0.0.1:0",
        "--peer": "b=127.0.0.1:1",
    }
    argv.update(dict(zip(args[::2], args[1::2])))
    env = clean_env() if secret is None else _env(secret)
    proc = subprocess.run(
        [str(gateway_exe), *[x for kv in argv.items() for x in kv]],
        env=env,
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and says in proc.stderr, proc.stderr
    assert secret is None or secret not in proc.stderr


def test_gateway_links_no_mpi(gateway_exe: Path) -> None:
    out = subprocess.run(["ldd", str(gateway_exe)], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        pytest.skip("no ldd")
    assert "libmpi" not in out.stdout, out.stdout
    assert os.access(gateway_exe, os.X_OK)
