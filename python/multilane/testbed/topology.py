"""The `[network]` section of a scenario file: a declarative, typed test-bed topology.

Units are converted once, here: rates in bit/s, delays in seconds, loss as a fraction,
sizes in bytes.  Every problem is reported through the caller's `fail(where, problem)`, so
messages read ``FILE: network.wan[0].delay: invalid time 'fast' (expected e.g. 5ms)``.

Layout (docs/TESTBED.md): each site is one L2 segment (a switch namespace with a bridge);
a WAN link joins the switches of two sites through a delay line.  Hosts carry a list of
interfaces, each on a named network.

A site may be `private = true`: its own /24 (``lan-<site>``), no route to any other site.
Its `frontends = N` dual-homed front-end hosts (``<site>fe1`` .. ``<site>feN``) have a second
interface, ``eth1``, on the site's outside segment (``out-<site>``); a WAN link between two
private sites joins their outside segments, so front-ends reach each other's WAN-side
addresses and compute hosts reach only their own site.  Addresses (site i, host j, both from
1, in file order; front-ends numbered after the compute hosts of their site):

    public site, host j            SUBNET + i.j /16          (e.g. 10.77.1.2/16)
    private site, compute host j   SUBNET + i.j /24          (e.g. 10.77.1.2/24)
    private site, front-end k      inside  SUBNET + i.(N+k) /24  (N compute hosts)
                                   WAN side FRONTEND_SUBNET + i.k /16 (e.g. 10.78.1.1/16)

API for launchers: `Network.sites`; a `Site` has `hosts` (the compute hosts: name, address),
`frontends` (name, `address` = inside address, `wan_address`), `private` and `subnet`;
`Network.variant("direct")` is the same sites made routable (every site public, no
front-ends, compute hosts at the same addresses with /16): one MPI job can span them."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

Fail = Callable[[str, str], Exception]

CONGESTION = ("reno", "cubic", "bbr")
DEFAULT_SUBNET = "10.77.0.0/16"
DEFAULT_MTU = 1500
MAX_SITES = 250
MAX_HOSTS_PER_SITE = 250
HOST_IFACE = "eth0"
WAN_IFACE = "eth1"  # a front-end's WAN-side interface
MAX_FRONTENDS = 64
VARIANTS = ("private", "direct")  # what `Network.variant` makes of a scenario's network
NETWORK_KEYS = ("mtu", "subnet", "frontend_subnet", "tcp", "site", "wan")
SITE_KEYS = ("name", "hosts", "nic_rate", "tcp", "private", "frontends", "frontend_nic_rate")
TCP_KEYS = ("rmem_max", "wmem_max", "congestion")
LINK_KEYS = ("rate", "delay", "loss", "queue", "flow_rate", "flow_queue")
WAN_KEYS = ("name", "sites", *LINK_KEYS, "ab", "ba", "blackhole")
BLACKHOLE_KEYS = ("port", "after")
MAX_BLACKHOLES = 8  # mln-delayline's DL_MAX_BLACKHOLES
NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,7}$")
HOST_RE = re.compile(r"^[a-z][a-z0-9-]{0,11}$")

_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
_RATE_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}
_SIZE_UNITS = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "k": 2**10,
    "m": 2**20,
    "g": 2**30,
}
_NUMBER_UNIT = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([a-z]*)\s*$")


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _with_unit(value: object, units: Mapping[str, float], default: str | None) -> float | None:
    """`value` times its unit; None when it does not parse."""
    if _is_number(value):
        return float(value) if value == 0 or default else None  # type: ignore[arg-type]
    if not isinstance(value, str):
        return None
    match = _NUMBER_UNIT.match(value.lower())
    if not match:
        return None
    unit = match.group(2) or default
    if unit is None and float(match.group(1)) == 0:
        return 0.0
    if unit not in units:
        return None
    return float(match.group(1)) * units[unit]


def parse_time(value: object) -> float | None:
    """Seconds from '5ms', '250us', '1s' or 0; None when invalid."""
    return _with_unit(value, _TIME_UNITS, None)


def parse_rate(value: object) -> int | None:
    """Bit/s from '1gbit', '100mbit', an integer (bit/s) or 0 (unlimited); None when invalid."""
    text = value.lower().removesuffix("/s") if isinstance(value, str) else value
    rate = _with_unit(text, _RATE_UNITS, "bit")
    return None if rate is None else round(rate)


def parse_size(value: object) -> int | None:
    """Bytes from an integer or '256KiB', '1MB', '64K'; None when invalid."""
    size = _with_unit(value, _SIZE_UNITS, "b")
    return None if size is None or size != int(size) else int(size)


def parse_loss(value: object) -> float | None:
    """A fraction in [0, 1) from 0.001 or '0.1%'; None when invalid."""
    if isinstance(value, str) and value.strip().endswith("%"):
        try:
            loss = float(value.strip()[:-1]) / 100
        except ValueError:
            return None
    elif _is_number(value):
        loss = float(value)  # type: ignore[arg-type]
    else:
        return None
    return loss if 0 <= loss < 1 else None


def format_rate(bps: int) -> str:
    """'1gbit', '100mbit', '1500kbit' (tc and delay-line syntax); '0' is unlimited."""
    for unit, scale in (("gbit", 10**9), ("mbit", 10**6), ("kbit", 10**3)):
        if bps and bps % scale == 0:
            return f"{bps // scale}{unit}"
    return f"{bps}bit"


def format_time(seconds: float) -> str:
    """'5ms' or '250us' (microsecond resolution)."""
    micros = round(seconds * 1e6)
    return f"{micros // 1000}ms" if micros % 1000 == 0 else f"{micros}us"


@dataclass(frozen=True)
class TcpSettings:
    """Per-host TCP sysctls; a None maximum keeps the kernel's autotuning default."""

    rmem_max: int | None = None
    wmem_max: int | None = None
    congestion: str = "cubic"

    def sysctls(self) -> dict[str, str]:
        """The sysctl values to set in the host's namespace."""
        values = {
            "net.ipv4.tcp_congestion_control": self.congestion,
            "net.ipv4.tcp_no_metrics_save": "1",
        }
        if self.rmem_max is not None:
            values["net.ipv4.tcp_rmem"] = f"4096 {min(131072, self.rmem_max)} {self.rmem_max}"
        if self.wmem_max is not None:
            values["net.ipv4.tcp_wmem"] = f"4096 {min(16384, self.wmem_max)} {self.wmem_max}"
        return values


@dataclass(frozen=True)
class Interface:
    """One interface of a host: its name inside the host, the network it is on, address/len."""

    name: str
    network: str
    address: str

    @property
    def ip(self) -> str:
        """The address without the prefix length."""
        return self.address.split("/", 1)[0]


@dataclass(frozen=True)
class Host:
    """A host: a network namespace with its own hostname.  A compute host has one interface
    (`eth0` on its site's network); a front-end (role "frontend") of a private site has a
    second one, `eth1`, on the site's outside segment, which WAN links join."""

    name: str
    site: str
    nic_rate_bps: int  # 0: unlimited (eth0, both directions)
    tcp: TcpSettings
    interfaces: tuple[Interface, ...]
    role: str = "compute"  # or "frontend"
    wan_nic_rate_bps: int = 0  # a front-end's eth1 (both directions); 0: unlimited

    @property
    def address(self) -> str:
        """The address of its first interface (without prefix length): for a front-end its
        inside address, on the site's network."""
        return self.interfaces[0].ip

    @property
    def wan_interface(self) -> Interface | None:
        """A front-end's WAN-side interface (None for a compute host)."""
        return self.interfaces[1] if len(self.interfaces) > 1 else None

    @property
    def wan_address(self) -> str | None:
        """A front-end's WAN-side address (None for a compute host)."""
        iface = self.wan_interface
        return None if iface is None else iface.ip


@dataclass(frozen=True)
class Site:
    """A site: hosts on one switch (a bridge in the site's switch namespace).  `hosts` are its
    compute hosts; a private site's `frontends` are dual-homed (inside + WAN side)."""

    name: str
    index: int
    hosts: tuple[Host, ...]
    private: bool = False
    frontends: tuple[Host, ...] = ()
    subnet: str = ""  # the site's network: its own /24 when private, else the shared /16

    @property
    def network(self) -> str:
        """The name of the site's L2 network."""
        return f"lan-{self.name}"

    @property
    def outside(self) -> str:
        """The name of a private site's outside segment (its front-ends' WAN side)."""
        return f"out-{self.name}"

    @property
    def all_hosts(self) -> tuple[Host, ...]:
        """Compute hosts, then front-ends."""
        return self.hosts + self.frontends


@dataclass(frozen=True)
class LinkProps:
    """One direction of an emulated link (0 rate: unlimited; None: the delay line's default)."""

    rate_bps: int = 0
    delay_s: float = 0.0
    loss: float = 0.0
    queue_bytes: int | None = None
    flow_rate_bps: int = 0
    flow_queue_bytes: int | None = None


@dataclass(frozen=True)
class Blackhole:
    """The first TCP flow to `port` whose payload passes `after_bytes` is cut off by the delay
    line: every later frame of it, both ways, dropped (mln-delayline --blackhole)."""

    port: int
    after_bytes: int


@dataclass(frozen=True)
class WanLink:
    """A WAN link between the switches of two sites; `ab` is the direction site_a -> site_b."""

    name: str
    index: int
    site_a: str
    site_b: str
    ab: LinkProps
    ba: LinkProps
    blackhole: tuple[Blackhole, ...] = ()

    def delayline_args(self) -> list[str]:
        """The mln-delayline options for both directions (interfaces excluded)."""
        args: list[str] = []
        for suffix, props in (("-ab", self.ab), ("-ba", self.ba)):
            args += [f"--delay{suffix}", format_time(props.delay_s)]
            args += [f"--rate{suffix}", format_rate(props.rate_bps) if props.rate_bps else "0"]
            args += [f"--loss{suffix}", f"{props.loss:g}"]
            if props.queue_bytes is not None:
                args += [f"--queue{suffix}", str(props.queue_bytes)]
            if props.flow_rate_bps:
                args += [f"--flow-rate{suffix}", format_rate(props.flow_rate_bps)]
        if self.ab.flow_queue_bytes is not None:
            args += ["--flow-queue", str(self.ab.flow_queue_bytes)]
        for hole in self.blackhole:
            args += ["--blackhole", f"{hole.port}:{hole.after_bytes}"]
        return args


@dataclass(frozen=True)
class Network:
    """A validated test-bed topology."""

    mtu: int
    subnet: str
    sites: tuple[Site, ...]
    wan: tuple[WanLink, ...]
    frontend_subnet: str | None = None  # the front-ends' WAN side; None without front-ends

    @property
    def hosts(self) -> tuple[Host, ...]:
        """Every compute host, site by site (where MPI ranks go; front-ends excluded)."""
        return tuple(h for s in self.sites for h in s.hosts)

    @property
    def all_hosts(self) -> tuple[Host, ...]:
        """Every host, site by site: compute hosts, then the site's front-ends."""
        return tuple(h for s in self.sites for h in s.all_hosts)

    @property
    def private(self) -> bool:
        """Whether a site is private (then no MPI job spans sites)."""
        return any(s.private for s in self.sites)

    @property
    def variant_name(self) -> str:
        """ "private" when a site is private, else "direct" (every site routable)."""
        return "private" if self.private else "direct"

    def site(self, name: str) -> Site:
        """The site called `name` (KeyError if none)."""
        for site in self.sites:
            if site.name == name:
                return site
        raise KeyError(name)

    def variant(self, name: str) -> Network:
        """The network as a run factor `network = NAME` wants it: "private" is this network
        (ValueError when no site is private), "direct" the same sites made routable: every
        compute host at the same address on the shared /16, no front-ends, the same WAN
        links (rate, delay, loss) between the sites' switches."""
        if name not in VARIANTS:
            raise ValueError(f"unknown network variant {name!r} (known: {', '.join(VARIANTS)})")
        if name == "private":
            if not self.private:
                raise ValueError("the [network] has no private site")
            return self
        if not self.private:
            return self
        prefix = ipaddress.IPv4Network(self.subnet).prefixlen
        sites = tuple(
            Site(
                s.name,
                s.index,
                tuple(
                    replace(
                        h,
                        interfaces=tuple(
                            replace(i, address=f"{i.ip}/{prefix}") for i in h.interfaces
                        ),
                    )
                    for h in s.hosts
                ),
                subnet=self.subnet,
            )
            for s in self.sites
        )
        return Network(self.mtu, self.subnet, sites, self.wan)


class _Parser:
    """Validation of one [network] table; every error goes through `fail`."""

    def __init__(self, fail: Fail) -> None:
        self.fail = fail

    def table(self, value: object, where: str, keys: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, "expected a table")
        for key in value:
            if key not in keys:
                raise self.fail(f"{where}.{key}", f"unknown key (allowed: {', '.join(keys)})")
        return value

    def rate(self, value: object, where: str) -> int:
        rate = parse_rate(value)
        if rate is None or rate < 0:
            raise self.fail(
                where, f"invalid rate {value!r} (expected e.g. 1gbit, 100mbit, or 0: unlimited)"
            )
        return rate

    def time(self, value: object, where: str) -> float:
        seconds = parse_time(value)
        if seconds is None or seconds > 10:
            raise self.fail(
                where, f"invalid time {value!r} (expected e.g. 5ms, 250us, at most 10s)"
            )
        return seconds

    def size(self, value: object, where: str, minimum: int = 1) -> int:
        size = parse_size(value)
        if size is None or size < minimum:
            raise self.fail(
                where,
                f"invalid size {value!r} (expected bytes >= {minimum}, e.g. 262144 or 256KiB)",
            )
        return size

    def tcp(self, value: object, where: str, base: TcpSettings) -> TcpSettings:
        table = self.table(value, where, TCP_KEYS)
        fields: dict[str, Any] = {}
        for key in ("rmem_max", "wmem_max"):
            if key in table:
                raw = table[key]
                fields[key] = None if raw == "auto" else self.size(raw, f"{where}.{key}", 8192)
        if "congestion" in table:
            cc = table["congestion"]
            if cc not in CONGESTION:
                raise self.fail(
                    f"{where}.congestion", f"unknown {cc!r} (known: {', '.join(CONGESTION)})"
                )
            fields["congestion"] = cc
        return TcpSettings(**{**base.__dict__, **fields})

    def link_props(self, table: Mapping[str, Any], where: str, base: LinkProps) -> LinkProps:
        fields = dict(base.__dict__)
        for key in LINK_KEYS:
            if key not in table:
                continue
            raw, at = table[key], f"{where}.{key}"
            if key == "rate":
                fields["rate_bps"] = self.rate(raw, at)
            elif key == "flow_rate":
                fields["flow_rate_bps"] = self.rate(raw, at)
            elif key == "delay":
                fields["delay_s"] = self.time(raw, at)
            elif key == "loss":
                loss = parse_loss(raw)
                if loss is None:
                    raise self.fail(
                        at, f"invalid loss {raw!r} (expected 0 <= p < 1, e.g. 0.001 or '0.1%')"
                    )
                fields["loss"] = loss
            else:
                fields[f"{key}_bytes"] = self.size(raw, at, 2048)
        return LinkProps(**fields)

    def blackholes(self, value: object, where: str) -> tuple[Blackhole, ...]:
        """`blackhole = { port = 21000, after = "4MiB" }`, or an array of such tables."""
        tables = [value] if isinstance(value, dict) else value
        if not isinstance(tables, list) or not 1 <= len(tables) <= MAX_BLACKHOLES:
            raise self.fail(
                where,
                f'expected a table {{ port = 21000, after = "4MiB" }} or an array of 1 to '
                f"{MAX_BLACKHOLES} of them",
            )
        holes = []
        for i, raw in enumerate(tables):
            at = where if isinstance(value, dict) else f"{where}[{i}]"
            table = self.table(raw, at, BLACKHOLE_KEYS)
            port = table.get("port")
            if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
                raise self.fail(f"{at}.port", f"expected a TCP port from 1 to 65535, got {port!r}")
            if "after" not in table:
                raise self.fail(
                    f"{at}.after", "missing: the payload bytes the flow carries before it is cut"
                )
            after = parse_size(table["after"])
            if after is None or after < 0:
                raise self.fail(
                    f"{at}.after",
                    f"invalid size {table['after']!r} (expected bytes >= 0, e.g. 4194304 or 4MiB)",
                )
            holes.append(Blackhole(port, after))
        return tuple(holes)

    def host_names(self, value: object, where: str, site: str) -> list[str]:
        if isinstance(value, int) and not isinstance(value, bool):
            if not 1 <= value <= MAX_HOSTS_PER_SITE:
                raise self.fail(where, f"expected 1 to {MAX_HOSTS_PER_SITE} hosts, got {value}")
            return [f"{site}{i}" for i in range(1, value + 1)]
        if not isinstance(value, list) or not value or len(value) > MAX_HOSTS_PER_SITE:
            raise self.fail(where, "expected a number of hosts or an array of host names")
        for i, name in enumerate(value):
            if not isinstance(name, str) or not HOST_RE.match(name):
                raise self.fail(
                    f"{where}[{i}]",
                    f"invalid host name {name!r} (a-z first, then a-z, 0-9, '-'; 12 at most)",
                )
        return list(value)

    def network(self, doc: object) -> Network:
        net = self.table(doc, "network", NETWORK_KEYS)
        mtu = net.get("mtu", DEFAULT_MTU)
        if not isinstance(mtu, int) or isinstance(mtu, bool) or not 576 <= mtu <= 65535:
            raise self.fail("network.mtu", f"expected an integer from 576 to 65535, got {mtu!r}")
        subnet = net.get("subnet", DEFAULT_SUBNET)
        try:
            parsed = ipaddress.IPv4Network(subnet)
        except (ValueError, TypeError):
            parsed = None
        if parsed is None or parsed.prefixlen != 16 or not parsed.is_private:
            raise self.fail(
                "network.subnet",
                f"expected a private IPv4 /16, e.g. {DEFAULT_SUBNET}, got {subnet!r}",
            )
        tcp = self.tcp(net.get("tcp", {}), "network.tcp", TcpSettings())
        site_tables = net.get("site")
        if not isinstance(site_tables, list) or not site_tables:
            raise self.fail("network.site", "expected one or more [[network.site]] tables")
        if len(site_tables) > MAX_SITES:
            raise self.fail("network.site", f"at most {MAX_SITES} sites")
        outside = self.frontend_subnet(net, parsed, site_tables)
        sites: list[Site] = []
        seen_hosts: dict[str, str] = {}
        for i, raw in enumerate(site_tables):
            where = f"network.site[{i}]"
            table = self.table(raw, where, SITE_KEYS)
            name = table.get("name")
            if not isinstance(name, str) or not NAME_RE.match(name):
                raise self.fail(
                    f"{where}.name",
                    f"expected a site name (a-z first, then a-z 0-9; 8 at most), got {name!r}",
                )
            if any(s.name == name for s in sites):
                raise self.fail(f"{where}.name", f"site '{name}' is defined twice")
            names = self.host_names(table.get("hosts", 1), f"{where}.hosts", name)
            nic = self.rate(table.get("nic_rate", 0), f"{where}.nic_rate")
            site_tcp = self.tcp(table.get("tcp", {}), f"{where}.tcp", tcp)
            private, count, fe_rate = self.frontend_keys(table, where, len(names))
            names += [f"{name}fe{k}" for k in range(1, count + 1)]
            base = parsed.network_address + (i + 1) * 256
            hosts = []
            for j, host in enumerate(names):
                if host in seen_hosts:
                    raise self.fail(
                        f"{where}.hosts" if j < len(names) - count else f"{where}.frontends",
                        f"host '{host}' is also in site '{seen_hosts[host]}'",
                    )
                seen_hosts[host] = name
                iface = Interface(
                    HOST_IFACE, f"lan-{name}", f"{base + j + 1}/{24 if private else 16}"
                )
                if j < len(names) - count:
                    hosts.append(Host(host, name, nic, site_tcp, (iface,)))
                    continue
                assert outside is not None  # frontend_subnet() sets it when a site has any
                k = j - (len(names) - count) + 1
                wan = Interface(
                    WAN_IFACE, f"out-{name}", f"{outside.network_address + (i + 1) * 256 + k}/16"
                )
                hosts.append(Host(host, name, nic, site_tcp, (iface, wan), "frontend", fe_rate))
            compute, fronts = tuple(hosts[: len(hosts) - count]), tuple(hosts[len(hosts) - count :])
            subnet = f"{base}/24" if private else str(parsed)
            sites.append(Site(name, i, compute, private, fronts, subnet))
        wan = self.wan(net.get("wan", []), sites)
        return Network(
            mtu, str(parsed), tuple(sites), wan, None if outside is None else str(outside)
        )

    def frontend_keys(
        self, table: Mapping[str, Any], where: str, compute: int
    ) -> tuple[bool, int, int]:
        """A site's private, frontends and frontend_nic_rate (False, 0, 0 when absent)."""
        private = table.get("private", False)
        if not isinstance(private, bool):
            raise self.fail(f"{where}.private", f"expected true or false, got {private!r}")
        count = table.get("frontends", 0)
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_FRONTENDS:
            raise self.fail(
                f"{where}.frontends", f"expected 0 to {MAX_FRONTENDS} front-ends, got {count!r}"
            )
        if count and not private:
            raise self.fail(
                f"{where}.frontends",
                "front-ends need private = true (they join a private site to the WAN)",
            )
        if compute + count > MAX_HOSTS_PER_SITE:
            raise self.fail(
                f"{where}.frontends",
                f"{compute} hosts and {count} front-ends: at most {MAX_HOSTS_PER_SITE} in all",
            )
        rate = 0
        if "frontend_nic_rate" in table:
            if not count:
                raise self.fail(
                    f"{where}.frontend_nic_rate", "needs frontends = N (the front-ends it caps)"
                )
            rate = self.rate(table["frontend_nic_rate"], f"{where}.frontend_nic_rate")
        return private, count, rate

    def frontend_subnet(
        self, net: Mapping[str, Any], subnet: ipaddress.IPv4Network, sites: list[Any]
    ) -> ipaddress.IPv4Network | None:
        """The /16 of the front-ends' WAN side: `frontend_subnet`, by default the /16 after
        `subnet` (10.77.0.0/16 -> 10.78.0.0/16); None when no site has front-ends."""
        wanted = any(isinstance(t, dict) and t.get("frontends") for t in sites)
        where = "network.frontend_subnet"
        if "frontend_subnet" not in net:
            if not wanted:
                return None
            following = ipaddress.IPv4Network(((int(subnet.network_address) + 2**16) % 2**32, 16))
            if not following.is_private:
                raise self.fail(
                    where,
                    f"missing: the /16 after subnet {subnet} ({following}) is not private: "
                    "give the front-ends' WAN-side /16, e.g. 10.78.0.0/16",
                )
            return following
        if not wanted:
            raise self.fail(where, "no site has front-ends (frontends = N) to address with it")
        value = net["frontend_subnet"]
        try:
            parsed = ipaddress.IPv4Network(value)
        except (ValueError, TypeError):
            parsed = None
        if parsed is None or parsed.prefixlen != 16 or not parsed.is_private:
            raise self.fail(where, f"expected a private IPv4 /16, e.g. 10.78.0.0/16, got {value!r}")
        if parsed == subnet:
            raise self.fail(where, f"must differ from subnet ({subnet})")
        return parsed

    def wan(self, value: object, sites: list[Site]) -> tuple[WanLink, ...]:
        if isinstance(value, dict):
            value = [value]
        if not isinstance(value, list):
            raise self.fail("network.wan", "expected [[network.wan]] tables")
        known = [s.name for s in sites]
        links: list[WanLink] = []
        for i, raw in enumerate(value):
            where = f"network.wan[{i}]"
            table = self.table(raw, where, WAN_KEYS)
            pair = table.get("sites")
            if not isinstance(pair, list) or len(pair) != 2 or pair[0] == pair[1]:
                raise self.fail(
                    f"{where}.sites", 'expected two different site names, e.g. ["a", "b"]'
                )
            for name in pair:
                if name not in known:
                    raise self.fail(
                        f"{where}.sites", f"unknown site {name!r} (known: {', '.join(known)})"
                    )
            by_name = {s.name: s for s in sites}
            kinds = [by_name[n].private for n in pair]
            if kinds[0] != kinds[1]:
                private, public = pair if kinds[0] else pair[::-1]
                raise self.fail(
                    f"{where}.sites",
                    f"joins private site '{private}' and public site '{public}': a WAN link "
                    "joins two private sites (through their front-ends) or two public ones",
                )
            for n in pair:
                if by_name[n].private and not by_name[n].frontends:
                    raise self.fail(
                        f"{where}.sites",
                        f"private site '{n}' has no front-ends to reach the WAN through "
                        "(set frontends = N)",
                    )
            name = table.get("name", f"{pair[0]}{pair[1]}")
            if (
                not isinstance(name, str)
                or not NAME_RE.match(name)
                or any(k.name == name for k in links)
            ):
                raise self.fail(
                    f"{where}.name",
                    f"expected a unique link name (a-z, 0-9; 8 at most), got {name!r}",
                )
            both = self.link_props(table, where, LinkProps())
            ab = self.link_props(
                self.table(table.get("ab", {}), f"{where}.ab", LINK_KEYS), f"{where}.ab", both
            )
            ba = self.link_props(
                self.table(table.get("ba", {}), f"{where}.ba", LINK_KEYS), f"{where}.ba", both
            )
            holes = (
                self.blackholes(table["blackhole"], f"{where}.blackhole")
                if "blackhole" in table
                else ()
            )
            links.append(WanLink(name, i, pair[0], pair[1], ab, ba, holes))
        return tuple(links)


def parse_network(doc: object, fail: Fail) -> Network:
    """A Network from the `[network]` table of a scenario file (raises `fail(...)`)."""
    return _Parser(fail).network(doc)
