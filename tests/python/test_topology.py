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
    "action",
    [
        ["up", "scenarios/wan-2site.toml"],
        ["down"],
        ["status"],
        ["check"],
        ["exec", "a1"],
        ["set-delay", "5ms"],
    ],
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


PRIVATE = (
    '[[network.site]]\nname = "a"\nprivate = true\nhosts = 2\nfrontends = 2\n'
    'frontend_nic_rate = "125mbit"\nnic_rate = "10gbit"\n'
    '[[network.site]]\nname = "b"\nprivate = true\nfrontends = 1\n'
)


def test_private_sites(tmp_path: Path) -> None:
    """Private sites: their own /24, front-ends numbered after the compute hosts inside and
    on the /16 after `subnet` outside; the direct variant: the same sites made routable."""
    net = load_scenario(_write(tmp_path, PRIVATE + WAN + 'rate = "1gbit"\n')).network
    assert net is not None and net.private and net.variant_name == "private"
    assert net.frontend_subnet == "10.78.0.0/16"
    a, b = net.sites
    assert (a.private, a.subnet, b.subnet) == (True, "10.77.1.0/24", "10.77.2.0/24")
    assert [(h.name, h.interfaces[0].address) for h in a.hosts] == [
        ("a1", "10.77.1.1/24"),
        ("a2", "10.77.1.2/24"),
    ]
    assert [(h.name, h.role, h.address, h.wan_address) for h in a.frontends] == [
        ("afe1", "frontend", "10.77.1.3", "10.78.1.1"),
        ("afe2", "frontend", "10.77.1.4", "10.78.1.2"),
    ]
    afe1 = a.frontends[0]
    assert afe1.wan_interface is not None and afe1.wan_interface.name == "eth1"
    assert afe1.wan_interface.network == "out-a" and afe1.wan_interface.address.endswith("/16")
    assert (afe1.nic_rate_bps, afe1.wan_nic_rate_bps) == (10**10, 125 * 10**6)
    assert a.hosts[0].wan_address is None and a.hosts[0].role == "compute"
    assert [(h.name, h.wan_address, h.wan_nic_rate_bps) for h in b.frontends] == [
        ("bfe1", "10.78.2.1", 0)
    ]
    assert [h.name for h in net.hosts] == ["a1", "a2", "b1"]  # compute hosts: MPI ranks
    assert [h.name for h in net.all_hosts] == ["a1", "a2", "afe1", "afe2", "b1", "bfe1"]
    assert net.variant("private") is net
    direct = net.variant("direct")
    assert direct.variant_name == "direct" and direct.frontend_subnet is None
    assert [(h.name, h.interfaces[0].address) for h in direct.all_hosts] == [
        ("a1", "10.77.1.1/16"),
        ("a2", "10.77.1.2/16"),
        ("b1", "10.77.2.1/16"),
    ]
    assert direct.wan == net.wan and all(not s.frontends for s in direct.sites)
    assert direct.hosts[0].nic_rate_bps == 10**10
    with pytest.raises(ValueError, match="no private site"):
        direct.variant("private")
    with pytest.raises(ValueError, match="unknown network variant"):
        net.variant("nat")


@pytest.mark.parametrize("name", ["seed004-relay", "seed004-relay-small"])
def test_seed004_scenarios(name: str) -> None:
    net = load_scenario(REPO / "scenarios" / f"{name}.toml").network
    assert net is not None and net.mtu == 9000 and net.private
    size = 8 if name == "seed004-relay" else 2
    for site in net.sites:
        assert site.private and len(site.frontends) == size
        assert all(f.wan_nic_rate_bps == 125 * 10**6 for f in site.frontends)
        assert all(h.tcp.rmem_max is None and h.tcp.wmem_max is None for h in site.all_hosts)
    (wan,) = net.wan
    assert wan.ab.rate_bps == 10**9 == wan.ba.rate_bps
    assert net.sites[1].frontends[-1].wan_address == f"10.78.2.{size}"


PRIV_A = '[[network.site]]\nname = "a"\nprivate = true\n'


@pytest.mark.parametrize(
    ("text", "where", "problem"),
    [
        (PRIV_A.replace("true", '"yes"'), "network.site[0].private", "expected true or false"),
        (SITE + "frontends = 2\n", "network.site[0].frontends", "need private = true"),
        (PRIV_A + "frontends = 65\n", "network.site[0].frontends", "0 to 64 front-ends, got 65"),
        (PRIV_A + "frontends = true\n", "network.site[0].frontends", "got True"),
        (
            PRIV_A + "hosts = 240\nfrontends = 11\n",
            "network.site[0].frontends",
            "at most 250 in all",
        ),
        (
            PRIV_A + 'frontend_nic_rate = "1gbit"\n',
            "network.site[0].frontend_nic_rate",
            "needs frontends = N",
        ),
        (
            PRIV_A + 'frontends = 1\nfrontend_nic_rate = "x"\n',
            "network.site[0].frontend_nic_rate",
            "invalid rate 'x'",
        ),
        (
            PRIV_A + 'hosts = ["afe1"]\nfrontends = 1\n',
            "network.site[0].frontends",
            "host 'afe1' is also in site 'a'",
        ),
        (
            PRIV_A + "frontends = 1\n" + '[[network.site]]\nname = "b"\n' + WAN,
            "network.wan[0].sites",
            "joins private site 'a' and public site 'b'",
        ),
        (
            PRIV_A + '[[network.site]]\nname = "b"\nprivate = true\nfrontends = 1\n' + WAN,
            "network.wan[0].sites",
            "private site 'a' has no front-ends",
        ),
        (
            '[network]\nsubnet = "10.255.0.0/16"\n' + PRIV_A + "frontends = 1\n",
            "network.frontend_subnet",
            "the /16 after subnet 10.255.0.0/16 (11.0.0.0/16) is not private",
        ),
        (
            '[network]\nfrontend_subnet = "10.77.0.0/16"\n' + PRIV_A + "frontends = 1\n",
            "network.frontend_subnet",
            "must differ from subnet",
        ),
        (
            '[network]\nfrontend_subnet = "10.9.0.0/24"\n' + PRIV_A + "frontends = 1\n",
            "network.frontend_subnet",
            "expected a private IPv4 /16",
        ),
        (
            '[network]\nfrontend_subnet = "10.9.0.0/16"\n' + SITE,
            "network.frontend_subnet",
            "no site has front-ends",
        ),
    ],
)
def test_private_errors(tmp_path: Path, text: str, where: str, problem: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    message = str(info.value)
    assert message.startswith(f"{path}: {where}: "), message
    assert problem in message, message
    assert "\n" not in message


def test_explicit_frontend_subnet(tmp_path: Path) -> None:
    text = '[network]\nsubnet = "192.168.0.0/16"\nfrontend_subnet = "172.20.0.0/16"\n' + PRIVATE
    net = load_scenario(_write(tmp_path, text)).network
    assert net is not None and net.frontend_subnet == "172.20.0.0/16"
    assert net.sites[0].frontends[1].address == "192.168.1.4"
    assert net.sites[1].frontends[0].wan_address == "172.20.2.1"


def test_set_delay_argument() -> None:
    args = build_parser().parse_args(["testbed", "set-delay", "0"])
    assert args.delay == 0.0 and args.link is None
    args = build_parser().parse_args(["testbed", "set-delay", "250us", "--link", "ab"])
    assert args.delay == pytest.approx(250e-6) and args.link == "ab"
    assert build_parser().parse_args(["testbed", "set-delay", "configured"]).delay is None
    for bad in ("5", "fast", "11s"):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["testbed", "set-delay", bad])
