"""The test bed for real (root, network namespaces): up/down leave nothing behind, status,
exec with the host's own hostname, check against the configured delay, rate and loss, and a
failure halfway torn down automatically.  Each test uses its own state folder, so a test bed
that a user has up is never touched."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import (
    REPO_ROOT,
    built_delayline,
    clean_env,
    multilane,
    netns_skip_reason,
    two_sites_network,
)
from multilane.testbed.system import is_ours

pytestmark = [pytest.mark.root, pytest.mark.slow]

DELAY_S = 0.002
TINY = 'name = "tiny"\n' + two_sites_network(
    "100mbit",
    "2ms",
    extra_network='mtu = 9000\n[network.tcp]\ncongestion = "cubic"\n',
    extra_wan='loss = "1%"\n',
)


def _snapshot() -> tuple[set[str], set[str]]:
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True)
    names = {line.split()[0] for line in netns.stdout.splitlines() if line.strip()}
    return names, {line.split(":")[1].strip() for line in links.stdout.splitlines()}


def _allowed_cc() -> str:
    return Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control").read_text()


@pytest.fixture
def bed(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment of a private test bed (own state folder); `down` afterwards, always,
    and a check that no namespace or root link was left."""
    reason = netns_skip_reason()
    if reason:
        pytest.skip(reason)
    before, cc_before = _snapshot(), _allowed_cc()
    env = clean_env(REPO_ROOT, MULTILANE_TESTBED_DIR=str(tmp_path / "state"))
    if built_delayline() is None:
        env["MULTILANE_DELAYLINE"] = "bridge"
    (tmp_path / "tiny.toml").write_text(TINY)
    try:
        yield env
    finally:
        down = multilane(
            ["testbed", "down"],
            clean_env(REPO_ROOT, **{"MULTILANE_TESTBED_DIR": env["MULTILANE_TESTBED_DIR"]}),
        )
        netns, links = _snapshot()
        assert down.returncode == 0, down.stderr
        # Only what is ours: other sessions may add or remove their own namespaces meanwhile.
        assert not {n for n in netns - before[0] if re.match(r"mln[0-9a-f]{4}-", n)}
        assert not {n for n in links - before[1] if n.startswith(("p-", "w-", "to-", "br0"))}
        others = {n for n in netns | before[0] if re.match(r"mln[0-9a-f]{4}-", n)}
        assert _allowed_cc() == cc_before or others  # another test bed may have changed it
        assert not (tmp_path / "state" / "state.json").exists()


def _up(env: dict[str, str], scenario: Path) -> subprocess.CompletedProcess[str]:
    return multilane(["testbed", "up", str(scenario)], env, timeout=120)


def test_up_status_exec_down(bed: dict[str, str], tmp_path: Path) -> None:
    before = _snapshot()
    proc = _up(bed, tmp_path / "tiny.toml")
    assert proc.returncode == 0, proc.stderr
    status = multilane(["testbed", "status", "--json"], bed)
    doc = json.loads(status.stdout)
    hosts = [(h["name"], h["site"], h["address"], h["interface"]) for h in doc["hosts"]]
    assert hosts == [("a1", "a", "10.77.1.1", "eth0"), ("b1", "b", "10.77.2.1", "eth0")]
    prefix = doc["prefix"]
    assert re.fullmatch(r"mln[0-9a-f]{4}-", prefix)
    assert all(h["namespace"].startswith(prefix) for h in doc["hosts"])
    assert set(doc["namespaces"]) <= _snapshot()[0]
    if bed.get("MULTILANE_DELAYLINE") != "bridge":
        assert [p["alive"] for p in doc["processes"] if p["role"] == "delayline"] == [True]

    for host in ("a1", "b1"):
        out = multilane(["testbed", "exec", host, "--", "hostname"], bed)
        assert (out.returncode, out.stdout.strip()) == (0, host), out.stderr
    out = multilane(
        ["testbed", "exec", "a1", "--", "sysctl", "-n", "net.ipv4.tcp_congestion_control"], bed
    )
    assert out.stdout.strip() == "cubic"
    out = multilane(["testbed", "exec", "b1", "--", "sh", "-c", "exit 7"], bed)
    assert out.returncode == 7

    again = _up(bed, tmp_path / "tiny.toml")
    assert again.returncode == 1 and "already up" in again.stderr, again.stderr

    down = multilane(["testbed", "down"], bed)
    assert down.returncode == 0 and f"removed {prefix}*" in down.stdout
    assert _snapshot() == before or not any(n.startswith(prefix) for n in _snapshot()[0])
    nothing = multilane(["testbed", "down"], bed)
    assert nothing.returncode == 0 and "no test bed is up" in nothing.stdout


def test_check_delay_rate_loss(bed: dict[str, str], tmp_path: Path) -> None:
    if bed.get("MULTILANE_DELAYLINE") == "bridge":
        pytest.skip("mln-delayline is not built (make build)")
    if shutil.which("iperf3") is None:
        pytest.skip("needs iperf3 (make system)")
    assert _up(bed, tmp_path / "tiny.toml").returncode == 0
    proc = multilane(["testbed", "check", "--json", "--streams", "8,2"], bed, timeout=180)
    assert proc.returncode == 0, proc.stderr
    streams = [
        r["values"]["streams"] for r in json.loads(proc.stdout)["rows"] if "streams" in r["values"]
    ]
    assert streams == [8, 2]  # one iperf3 run per count, in the order given
    rows = {
        r["item"].split(" ")[0] + str(r["values"].get("streams", "")): r["values"]
        for r in json.loads(proc.stdout)["rows"]
    }
    rtt = rows["RTT"]
    assert rtt["expected_s"] == pytest.approx(2 * DELAY_S)
    assert 0.9 * 2 * DELAY_S <= rtt["min_s"] <= rtt["avg_s"] < 2 * DELAY_S + 0.05
    assert 0.002 <= rows["loss"]["measured"] <= 0.03  # 1% configured; ~2000 datagrams
    eight = rows["TCP8"]
    assert 0.3e8 <= eight["bps"] <= 1.1e8, eight  # 100 Mbit/s link
    assert 0 <= eight["steal_pct"] <= 100  # the hypervisor's share of the CPU meanwhile
    ab = next(r for r in json.loads(proc.stdout)["rows"] if r["item"].startswith("delay line"))
    assert ab["values"]["tx_bytes"] > 10e6  # the iperf3 bytes crossed the delay line


def test_delayline_killed_is_a_clear_failure(bed: dict[str, str], tmp_path: Path) -> None:
    if bed.get("MULTILANE_DELAYLINE") == "bridge":
        pytest.skip("mln-delayline is not built (make build)")
    assert _up(bed, tmp_path / "tiny.toml").returncode == 0
    doc = json.loads(multilane(["testbed", "status", "--json"], bed).stdout)
    (proc,) = [p for p in doc["processes"] if p["role"] == "delayline"]
    os.kill(proc["pid"], 9)
    check = multilane(["testbed", "check"], bed, timeout=60)
    assert check.returncode == 1 and "delay line of link ab" in check.stderr, check.stderr
    assert "GONE" in multilane(["testbed", "status"], bed).stdout


@pytest.mark.parametrize("fault", ["3", "12", "25"])
def test_failure_halfway_leaves_nothing(bed: dict[str, str], tmp_path: Path, fault: str) -> None:
    env = {**bed, "MULTILANE_TESTBED_FAULT": fault}
    proc = _up(env, tmp_path / "tiny.toml")
    assert proc.returncode == 1, proc.stdout
    assert "mln-injected-fault" in proc.stderr and "(torn down)" in proc.stderr, proc.stderr
    assert len(proc.stderr.splitlines()) == 1
    assert not (tmp_path / "state" / "state.json").exists()


def test_delayline_that_fails_to_start(bed: dict[str, str], tmp_path: Path) -> None:
    env = {**bed, "MULTILANE_DELAYLINE": shutil.which("false") or "/bin/false"}
    proc = _up(env, tmp_path / "tiny.toml")
    assert proc.returncode == 1 and "delayline ab exited with status 1" in proc.stderr
    assert not (tmp_path / "state" / "state.json").exists()


SMALL_PRIVATE = REPO_ROOT / "scenarios" / "seed004-relay-small.toml"


def _ping(env: dict[str, str], host: str, address: str) -> subprocess.CompletedProcess[str]:
    argv = ["testbed", "exec", host, "--", "ping", "-n", "-q", "-c", "3", "-i", "0.2"]
    return multilane([*argv, "-W", "1", address], env, timeout=30)


def _rtt_ms(proc: subprocess.CompletedProcess[str]) -> float:
    match = re.search(r"= ([0-9.]+)/", proc.stdout)
    assert match, proc.stdout + proc.stderr
    return float(match.group(1))


def test_private_sites(bed: dict[str, str]) -> None:
    """seed004-relay-small: compute hosts reach only their own site, front-ends reach each
    other's WAN side through the delay line; check says "isolated: yes", measures each
    front-end's 125 Mbit/s NIC and both at once, and fails loudly once a route leaks;
    set-delay changes the WAN delay of the live bed (0 included); the launcher's API."""
    if bed.get("MULTILANE_DELAYLINE") == "bridge":
        pytest.skip("mln-delayline is not built (make build)")
    if shutil.which("iperf3") is None:
        pytest.skip("needs iperf3 (make system)")
    assert (proc := _up(bed, SMALL_PRIVATE)).returncode == 0, proc.stderr
    doc = json.loads(multilane(["testbed", "status", "--json"], bed).stdout)
    assert doc["variant"] == "private"
    hosts = {h["name"]: (h["role"], h["address"], h["wan_address"]) for h in doc["hosts"]}
    assert hosts == {
        "a1": ("compute", "10.77.1.1", None),
        "afe1": ("frontend", "10.77.1.2", "10.78.1.1"),
        "afe2": ("frontend", "10.77.1.3", "10.78.1.2"),
        "b1": ("compute", "10.77.2.1", None),
        "bfe1": ("frontend", "10.77.2.2", "10.78.2.1"),
        "bfe2": ("frontend", "10.77.2.3", "10.78.2.2"),
    }
    assert {n[len(doc["prefix"]) :] for n in doc["namespaces"]} >= {"o-a", "o-b", "w-ab"}

    # The launcher's view (multilane.testbed.Testbed).
    from multilane.context import Context  # noqa: PLC0415
    from multilane.testbed import Testbed  # noqa: PLC0415

    live = Testbed.load(Context(root=REPO_ROOT, env=bed, ncpus=1, euid=0, out=None))  # type: ignore[arg-type]
    assert live is not None and live.variant == "private"
    site_b = live.site("b")
    assert (site_b.private, site_b.subnet) == (True, "10.77.2.0/24")
    assert [(h.name, h.address, h.interface) for h in site_b.compute] == [
        ("b1", "10.77.2.1", "eth0")
    ]
    assert [(h.name, h.address, h.wan_address, h.wan_interface) for h in site_b.frontends] == [
        ("bfe1", "10.77.2.2", "10.78.2.1", "eth1"),
        ("bfe2", "10.77.2.3", "10.78.2.2", "eth1"),
    ]
    assert site_b.frontends[0].namespace == f"{doc['prefix']}h-bfe1"

    # Isolation, seen directly: no route from a compute host off its site.
    assert _ping(bed, "a1", "10.77.2.1").returncode != 0
    assert _ping(bed, "a1", "10.78.2.1").returncode != 0
    assert _ping(bed, "a1", "10.77.1.2").returncode == 0  # its front-end, inside
    assert _rtt_ms(_ping(bed, "afe1", "10.78.2.1")) >= 9.0  # 5 ms each way

    proc = multilane(["testbed", "check", "--json"], bed, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["rows"]
    isolated = [r["values"] for r in rows if r["item"].startswith("isolated")]
    assert [(v["site"], v["isolated"], v["reached"]) for v in isolated] == [
        ("a", True, 0),
        ("b", True, 0),
    ]
    # a1: b1, bfe1, bfe2 inside and the 2 WAN sides; afe1, afe2: the 3 inside addresses each
    assert all(v["probes"] == 5 + 3 + 3 for v in isolated)
    assert all(r["measured"].startswith("yes") for r in rows if r["item"].startswith("isol"))
    inside = [r["values"] for r in rows if r["item"].startswith("inside")]
    assert [(v["probes"], v["answered"]) for v in inside] == [(2, 2), (2, 2)]
    nics = [r["values"] for r in rows if "front-end WAN NIC" in r["item"]]
    assert [(v["frontend"], v["peer"]) for v in nics] == [("afe1", "bfe1"), ("afe2", "bfe2")]
    for v in nics:
        assert v["ceiling_bps"] == 125e6 and 0.6 * 125e6 <= v["bps"] <= 1.05 * 125e6, v
    (both,) = [r["values"] for r in rows if "pairs at once" in r["item"]]
    assert both["ceiling_bps"] == 250e6 and 0.6 * 250e6 <= both["bps"] <= 1.05 * 250e6, both
    assert [p["frontend"] for p in both["pairs"]] == ["afe1", "afe2"]

    # A leaked route is a loud failure.
    route = ["testbed", "exec", "a1", "--", "ip", "route", "add", "10.0.0.0/8", "dev", "eth0"]
    assert multilane(route, bed).returncode == 0
    broken = multilane(["testbed", "check"], bed, timeout=60)
    assert broken.returncode == 1 and "isolation broken" in broken.stderr, broken.stderr
    assert "a1 -> 10.77.2.1 (route" in broken.stderr
    assert not [
        p
        for p in json.loads(multilane(["testbed", "status", "--json"], bed).stdout)["processes"]
        if p["role"] == "iperf3"
    ]

    # The WAN delay of the live test bed: 0, then the scenario's again.
    out = multilane(["testbed", "set-delay", "0"], bed)
    assert out.returncode == 0 and "wan ab: delay 0ms each way" in out.stdout, out.stderr
    assert _rtt_ms(_ping(bed, "afe2", "10.78.2.2")) < 2.0
    (proc_0,) = [
        p
        for p in json.loads(multilane(["testbed", "status", "--json"], bed).stdout)["processes"]
        if p["role"] == "delayline"
    ]
    assert proc_0["alive"] and proc_0["argv"][proc_0["argv"].index("--delay-ab") + 1] == "0ms"
    out = multilane(["testbed", "set-delay", "configured"], bed)
    assert out.returncode == 0 and "delay 5ms each way" in out.stdout, out.stderr
    assert _rtt_ms(_ping(bed, "afe2", "10.78.2.2")) >= 9.0
    status = json.loads(multilane(["testbed", "status", "--json"], bed).stdout)
    (wan,) = status["wan"]
    assert wan["ab"]["delay_s"] == wan["ba"]["delay_s"] == 0.005
    assert [p["alive"] for p in status["processes"] if p["role"] == "delayline"] == [True]
    assert not is_ours(proc_0["pid"], proc_0["start_time"])  # the old one was stopped


def test_direct_variant(bed: dict[str, str]) -> None:
    """`up --network direct`: the same sites made routable, no front-ends."""
    proc = multilane(["testbed", "up", "--network", "direct", str(SMALL_PRIVATE)], bed)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(multilane(["testbed", "status", "--json"], bed).stdout)
    assert doc["variant"] == "direct"
    assert [(h["name"], h["address"]) for h in doc["hosts"]] == [
        ("a1", "10.77.1.1"),
        ("b1", "10.77.2.1"),
    ]
    assert _ping(bed, "a1", "10.77.2.1").returncode == 0


def test_private_failure_halfway_leaves_nothing(bed: dict[str, str], tmp_path: Path) -> None:
    """A failure while a front-end's WAN side is made (the 60th command: the tbf on its outside
    switch port) tears down the outside segments too."""
    proc = _up({**bed, "MULTILANE_TESTBED_FAULT": "60"}, SMALL_PRIVATE)
    assert proc.returncode == 1 and "(torn down)" in proc.stderr, proc.stderr
    assert "mln-injected-fault" in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert "-o-a qdisc add dev p-afe1" in proc.stderr, proc.stderr
    assert not (tmp_path / "state" / "state.json").exists()
