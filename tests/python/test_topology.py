"""The [network] section of scenario files: units, the shipped scenarios, and every malformed
case rejected with file, key and problem.  No root needed."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from multilane.cli import build_parser
from multilane.context import Context
from multilane.errors import UsageError
from multilane.scenario import ScenarioError, load_scenario
from multilane.testbed.commands import cmd_testbed
from multilane.testbed.topology import (
    format_rate,
    format_time,
    parse_loss,
    parse_rate,
    parse_size,
    parse_time,
)

REPO = Path(__file__).resolve().parents[2]

GOOD = """
name = "tiny"
[network]
mtu = 9000
[network.tcp]
rmem_max = "256KiB"
wmem_max = 262144
congestion = "reno"
[[network.site]]
name = "a"
hosts = ["x", "y"]
nic_rate = "10gbit"
[[network.site]]
name = "b"
tcp = { rmem_max = "auto", congestion = "bbr" }
[[network.wan]]
sites = ["a", "b"]
rate = "1gbit"
delay = "5ms"
loss = "0.1%"
queue = "1MB"
flow_rate = "100mbit"
ba = { delay = "250us", rate = 0 }
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "net.toml"
    path.write_text(text)
    return path


def test_units() -> None:
    assert parse_time("5ms") == pytest.approx(0.005)
    assert parse_time("250us") == pytest.approx(250e-6)
    assert parse_time(0) == 0.0
    assert parse_time("fast") is None and parse_time(5) is None and parse_time("5") is None
    assert parse_rate("1gbit") == 10**9 and parse_rate("100Mbit/s") == 10**8
    assert parse_rate(0) == 0 and parse_rate("1gbps") is None and parse_rate(True) is None
    assert parse_size("256KiB") == 262144 and parse_size("1MB") == 10**6 and parse_size(42) == 42
    assert parse_size("1.5") is None and parse_size("x") is None
    assert parse_loss("0.1%") == pytest.approx(0.001) and parse_loss(0.02) == 0.02
    assert parse_loss(1) is None and parse_loss("-1%") is None and parse_loss("a%") is None
    assert (format_rate(10**9), format_rate(1_500_000), format_rate(1234)) == (
        "1gbit",
        "1500kbit",
        "1234bit",
    )
    assert (format_time(0.005), format_time(250e-6)) == ("5ms", "250us")


def test_good_network(tmp_path: Path) -> None:
    net = load_scenario(_write(tmp_path, GOOD)).network
    assert net is not None
    assert net.mtu == 9000 and net.subnet == "10.77.0.0/16"
    assert [(h.name, h.site, h.address) for h in net.hosts] == [
        ("x", "a", "10.77.1.1"),
        ("y", "a", "10.77.1.2"),
        ("b1", "b", "10.77.2.1"),
    ]
    x, b1 = net.hosts[0], net.hosts[2]
    assert x.nic_rate_bps == 10**10 and b1.nic_rate_bps == 0
    assert x.interfaces[0].name == "eth0" and x.interfaces[0].network == "lan-a"
    assert x.tcp.sysctls()["net.ipv4.tcp_rmem"] == "4096 131072 262144"
    assert x.tcp.sysctls()["net.ipv4.tcp_congestion_control"] == "reno"
    assert b1.tcp.rmem_max is None and b1.tcp.wmem_max == 262144 and b1.tcp.congestion == "bbr"
    assert "net.ipv4.tcp_rmem" not in b1.tcp.sysctls()
    assert b1.tcp.sysctls()["net.ipv4.tcp_no_metrics_save"] == "1"
    (wan,) = net.wan
    assert (wan.name, wan.site_a, wan.site_b) == ("ab", "a", "b")
    assert wan.ab.rate_bps == 10**9 and wan.ab.delay_s == pytest.approx(0.005)
    assert wan.ab.loss == pytest.approx(0.001) and wan.ab.queue_bytes == 10**6
    assert wan.ba.rate_bps == 0 and wan.ba.delay_s == pytest.approx(250e-6)
    assert wan.ba.flow_rate_bps == 10**8
    args = wan.delayline_args()
    assert args[:6] == ["--delay-ab", "5ms", "--rate-ab", "1gbit", "--loss-ab", "0.001"]
    assert args[10:14] == ["--delay-ba", "250us", "--rate-ba", "0"]


@pytest.mark.parametrize("name", ["wan-2site", "wan-lossy", "wan-perflow", "lan-4host"])
def test_shipped_scenarios(name: str) -> None:
    scenario = load_scenario(REPO / "scenarios" / f"{name}.toml")
    net = scenario.network
    assert net is not None and scenario.runs == ()
    if name == "lan-4host":
        assert len(net.hosts) == 4 and not net.wan
        assert all(h.nic_rate_bps == 10**9 for h in net.hosts)
        return
    (wan,) = net.wan
    assert len(net.hosts) == 2 and wan.ab.rate_bps == 10**9
    assert wan.ab.delay_s == pytest.approx(0.005) == wan.ba.delay_s
    if name == "wan-2site":
        assert net.mtu == 9000 and net.hosts[0].tcp.rmem_max == 262144
    if name == "wan-lossy":
        assert net.mtu == 1500 and wan.ab.loss == pytest.approx(0.001)
        assert net.hosts[0].tcp.rmem_max is None and net.hosts[0].tcp.congestion == "cubic"
    if name == "wan-perflow":
        assert wan.ab.flow_rate_bps == 10**8 and net.hosts[0].tcp.rmem_max is None


def test_network_with_runs(tmp_path: Path) -> None:
    text = GOOD + '[[run]]\nmpi = "openmpi"\n'
    scenario = load_scenario(_write(tmp_path, text))
    assert scenario.network is not None and len(scenario.runs) == 1


SITE = '[[network.site]]\nname = "a"\n'
SITES = SITE + '[[network.site]]\nname = "b"\n'
WAN = '[[network.wan]]\nsites = ["a", "b"]\n'


@pytest.mark.parametrize(
    ("text", "where", "problem"),
    [
        ('network = "x"\n', "network", "expected a table"),
        ("[network]\n", "network.site", "one or more [[network.site]]"),
        ("[network]\nspeed = 1\n" + SITE, "network.speed", "unknown key (allowed: mtu"),
        ("[network]\nmtu = 100\n" + SITE, "network.mtu", "576 to 65535, got 100"),
        ('[network]\nmtu = "9000"\n' + SITE, "network.mtu", "expected an integer"),
        ('[network]\nsubnet = "8.8.0.0/16"\n' + SITE, "network.subnet", "private IPv4 /16"),
        ('[network]\nsubnet = "10.1.0.0/24"\n' + SITE, "network.subnet", "private IPv4 /16"),
        ("[network.tcp]\nrmem_max = 10\n" + SITE, "network.tcp.rmem_max", "invalid size 10"),
        ('[network.tcp]\nwmem_max = "big"\n' + SITE, "network.tcp.wmem_max", "invalid size"),
        ('[network.tcp]\ncongestion = "vegas"\n' + SITE, "network.tcp.congestion", "'vegas'"),
        ("[network.tcp]\nrmem = 1\n" + SITE, "network.tcp.rmem", "unknown key"),
        ("[[network.site]]\nhosts = 1\n", "network.site[0].name", "expected a site name"),
        ('[[network.site]]\nname = "A"\n', "network.site[0].name", "expected a site name"),
        (SITE + SITE, "network.site[1].name", "site 'a' is defined twice"),
        (SITE + "hosts = 0\n", "network.site[0].hosts", "expected 1 to 250 hosts, got 0"),
        (SITE + 'hosts = ["ok", "Bad!"]\n', "network.site[0].hosts[1]", "invalid host name"),
        (
            SITE + 'hosts = ["x"]\n' + '[[network.site]]\nname = "b"\nhosts = ["x"]\n',
            "network.site[1].hosts",
            "host 'x' is also in site 'a'",
        ),
        (SITE + 'nic_rate = "fast"\n', "network.site[0].nic_rate", "invalid rate 'fast'"),
        (SITE + "color = 1\n", "network.site[0].color", "unknown key"),
        (SITES + '[[network.wan]]\nsites = ["a"]\n', "network.wan[0].sites", "two different"),
        (SITES + '[[network.wan]]\nsites = ["a", "a"]\n', "network.wan[0].sites", "different"),
        (SITES + '[[network.wan]]\nsites = ["a", "c"]\n', "network.wan[0].sites", "'c'"),
        (
            SITES + WAN + 'delay = "fast"\n',
            "network.wan[0].delay",
            "invalid time 'fast' (expected e.g. 5ms",
        ),
        (SITES + WAN + "delay = 5\n", "network.wan[0].delay", "invalid time 5"),
        (SITES + WAN + 'rate = "1gbps"\n', "network.wan[0].rate", "invalid rate '1gbps'"),
        (SITES + WAN + "loss = 2\n", "network.wan[0].loss", "invalid loss 2"),
        (SITES + WAN + 'loss = "x%"\n', "network.wan[0].loss", "invalid loss"),
        (SITES + WAN + "queue = 10\n", "network.wan[0].queue", "invalid size 10"),
        (SITES + WAN + 'flow_rate = "-1bit"\n', "network.wan[0].flow_rate", "invalid rate"),
        (SITES + WAN + "jitter = 1\n", "network.wan[0].jitter", "unknown key"),
        (SITES + WAN + 'ab = { delay = "x" }\n', "network.wan[0].ab.delay", "invalid time"),
        (SITES + WAN + "ab = { name = 1 }\n", "network.wan[0].ab.name", "unknown key"),
        (SITES + WAN + WAN, "network.wan[1].name", "unique link name"),
        (SITES + WAN + "blackhole = 21000\n", "network.wan[0].blackhole", "expected a table"),
        (SITES + WAN + "blackhole = []\n", "network.wan[0].blackhole", "an array of 1 to 8"),
        (
            SITES + WAN + "blackhole = [" + "{ port = 1, after = 0 }, " * 9 + "]\n",
            "network.wan[0].blackhole",
            "an array of 1 to 8",
        ),
        (
            SITES + WAN + "blackhole = { port = 0, after = 1 }\n",
            "network.wan[0].blackhole.port",
            "expected a TCP port from 1 to 65535, got 0",
        ),
        (
            SITES + WAN + 'blackhole = { port = "21000", after = 1 }\n',
            "network.wan[0].blackhole.port",
            "got '21000'",
        ),
        (
            SITES + WAN + "blackhole = [{ port = 2, after = 1 }, { port = 70000, after = 0 }]\n",
            "network.wan[0].blackhole[1].port",
            "got 70000",
        ),
        (
            SITES + WAN + "blackhole = { port = 21000 }\n",
            "network.wan[0].blackhole.after",
            "missing",
        ),
        (
            SITES + WAN + 'blackhole = { port = 21000, after = "lots" }\n',
            "network.wan[0].blackhole.after",
            "invalid size 'lots'",
        ),
        (
            SITES + WAN + "blackhole = { port = 21000, after = -1 }\n",
            "network.wan[0].blackhole.after",
            "invalid size -1",
        ),
        (
            SITES + WAN + "blackhole = { port = 21000, after = 1, when = 2 }\n",
            "network.wan[0].blackhole.when",
            "unknown key (allowed: port, after)",
        ),
        (
            SITES + WAN + "ab = { blackhole = { port = 1, after = 1 } }\n",
            "network.wan[0].ab.blackhole",
            "unknown key",
        ),
    ],
)
def test_network_errors(tmp_path: Path, text: str, where: str, problem: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    message = str(info.value)
    assert message.startswith(f"{path}: {where}: "), message
    assert problem in message, message
    assert "\n" not in message


def test_blackhole(tmp_path: Path) -> None:
    """A WAN link's blackholes become --blackhole PORT:BYTES options of its delay line."""
    one = SITES + WAN + 'blackhole = { port = 21000, after = "4MiB" }\n'
    net = load_scenario(_write(tmp_path, one)).network
    assert net is not None
    (wan,) = net.wan
    assert [(h.port, h.after_bytes) for h in wan.blackhole] == [(21000, 4 * 2**20)]
    assert wan.delayline_args()[-2:] == ["--blackhole", "21000:4194304"]
    two = SITES + WAN + "blackhole = [{ port = 21000, after = 0 }, { port = 21100, after = 5 }]\n"
    net = load_scenario(_write(tmp_path, two)).network
    assert net is not None
    args = net.wan[0].delayline_args()
    assert args[-4:] == ["--blackhole", "21000:0", "--blackhole", "21100:5"]
    plain = load_scenario(_write(tmp_path, SITES + WAN)).network
    assert plain is not None and plain.wan[0].blackhole == ()
    assert "--blackhole" not in plain.wan[0].delayline_args()


def test_blackhole_needs_delay_line(tmp_path: Path) -> None:
    """With the bridge stand-in there is nothing to drop a flow: `up` refuses before it makes
    anything (no root needed to get this far)."""
    from multilane.testbed import build  # noqa: PLC0415
    from multilane.testbed.system import TestbedError  # noqa: PLC0415

    path = _write(tmp_path, SITES + WAN + "blackhole = { port = 21000, after = 1 }\n")
    net = load_scenario(path).network
    assert net is not None
    env = {"MULTILANE_DELAYLINE": "bridge", "MULTILANE_TESTBED_DIR": str(tmp_path / "state")}
    ctx = Context(root=REPO, env=env, ncpus=1, euid=0, out=io.StringIO())
    with pytest.raises(TestbedError, match="WAN link ab has a blackhole, which only the delay"):
        build.up(net, path, ctx)
    assert not (tmp_path / "state").exists()


def _ctx(euid: int) -> Context:
    return Context(root=REPO, env={}, ncpus=1, euid=euid, out=io.StringIO())


@pytest.mark.parametrize(
    "action", [["up", "scenarios/wan-2site.toml"], ["down"], ["status"], ["check"], ["exec", "a1"]]
)
def test_not_root(action: list[str]) -> None:
    args = build_parser().parse_args(["testbed", *action])
    args.extra = ["hostname"]
    with pytest.raises(UsageError, match="the test bed needs root") as info:
        cmd_testbed(args, _ctx(euid=1000))
    assert info.value.exit_status == 2


def test_run_needs_runs(tmp_path: Path) -> None:
    from multilane.cli import main  # noqa: PLC0415

    assert main(["run", str(REPO / "scenarios" / "lan-4host.toml"), "--dry-run"]) == 2
