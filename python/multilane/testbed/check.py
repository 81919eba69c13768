"""`testbed check`: configured against measured: RTT between sites (ping), loss (iperf3 UDP,
when loss is configured), TCP throughput with 1 and 8 streams or the given counts (iperf3),
and the bytes the delay lines forwarded meanwhile.

With private sites (docs/TESTBED.md) also: isolation (every host of a private site probes
every address of the other sites: `ip route get`, one ping, one TCP connect; any answer or
route fails the check), inside reachability (compute hosts ping their site's hosts), and
per WAN link between private sites the RTT between front-ends, each front-end's WAN NIC
(iperf3, 1 stream, front-end k of one site -> front-end k of the other) and all front-end
pairs at once (the aggregate)."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import hostload
from ..context import Context
from .bed import HostInfo, Testbed
from .state import State
from .system import TestbedError, spawn, start_time, stop_process

PING_COUNT = 10
IPERF_SECONDS = 5
IPERF_PORT = 5201
UDP_MAX_BPS = 100_000_000  # loss probe: at most this, and half the link rate
UDP_SECONDS = 3
SERVER_TIMEOUT_S = 10.0
DEFAULT_STREAMS = (1, 8)  # iperf3 TCP stream counts of a check
MAX_STREAMS = 64
FRONTEND_SECONDS = 2  # iperf3 per front-end, and for all front-end pairs at once
PROBE_TIMEOUT_S = 1.0  # one ping, one TCP connect
PROBE_WORKERS = 16
# Run inside a host (through the agent) with a JSON argument {"port", "targets"}: for each
# target address `ip route get`, one ping and one TCP connect, in parallel; prints a JSON list.
PROBE = r"""
import json, socket, subprocess, sys
from concurrent.futures import ThreadPoolExecutor
spec = json.loads(sys.argv[1])
def probe(address):
    route = subprocess.run(["ip", "-4", "route", "get", address], capture_output=True,
                           text=True, check=False)
    ping = subprocess.run(["ping", "-n", "-q", "-c", "1", "-W", str(int(spec["timeout"])),
                           address], capture_output=True, text=True, check=False)
    try:
        socket.create_connection((address, spec["port"]), timeout=spec["timeout"]).close()
        tcp = "connected"
    except ConnectionRefusedError:
        tcp = "refused"
    except OSError as exc:
        tcp = exc.strerror or type(exc).__name__
    text = route.stdout.strip().splitlines()[0].strip() if route.returncode == 0 else ""
    return {"address": address, "route": text or None, "ping": ping.returncode == 0,
            "tcp": tcp}
with ThreadPoolExecutor(max(1, min(spec["workers"], len(spec["targets"])))) as pool:
    print(json.dumps(list(pool.map(probe, spec["targets"]))))
"""
_RTT = re.compile(r"= ([0-9.]+)/([0-9.]+)/([0-9.]+)/")


@dataclass
class Row:
    """One line of the report."""

    item: str
    configured: str
    measured: str
    values: dict[str, Any] = field(default_factory=dict)


def _run(argv: list[str], timeout_s: float) -> str:
    try:
        proc = subprocess.run(  # noqa: S603 - argument list, no shell
            argv, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        raise TestbedError(f"`{' '.join(argv)}` did not finish in {timeout_s:g} s") from None
    if proc.returncode != 0 and not proc.stdout.lstrip().startswith("{"):
        detail = " ".join((proc.stderr or proc.stdout).split())
        raise TestbedError(f"`{' '.join(argv)}` failed: {detail}")
    return proc.stdout


def _iperf_doc(client: str, server: str, out: str) -> dict[str, Any]:
    """iperf3's --json output; TestbedError when it has none or reports an error."""
    try:
        doc = json.loads(out)
    except ValueError:
        raise TestbedError(f"iperf3 {client} -> {server}: no JSON ({out[:200]})") from None
    if "error" in doc:
        raise TestbedError(f"iperf3 {client} -> {server}: {doc['error']}")
    return doc


class StreamsError(ValueError):
    """A bad list of stream counts; `index`: the position of the bad item (None: the list)."""

    def __init__(self, problem: str, index: int | None = None) -> None:
        super().__init__(problem)
        self.index = index


def stream_counts(values: Sequence[object]) -> tuple[int, ...]:
    """The iperf3 TCP stream counts of a check, in the given order: a non-empty sequence of
    distinct integers from 1 to MAX_STREAMS; StreamsError naming the first bad item."""
    if not values:
        raise StreamsError(f"expected at least one stream count (1..{MAX_STREAMS})")
    counts: list[int] = []
    for i, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, int):
            raise StreamsError(f"expected a stream count (an integer), got {value!r}", i)
        if not 1 <= value <= MAX_STREAMS:
            raise StreamsError(f"expected a stream count from 1 to {MAX_STREAMS}, got {value}", i)
        if value in counts:
            raise StreamsError(f"stream count {value} is given twice (counts must differ)", i)
        counts.append(value)
    return tuple(counts)


def streams_text(streams: Sequence[int]) -> str:
    """'1 and 8 streams', '1, 2 and 4 streams', '1 stream'."""
    words = [str(s) for s in streams]
    joined = words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"
    return f"{joined} stream{'' if list(streams) == [1] else 's'}"


def _mbit(bps: float) -> str:
    return f"{bps / 1e6:.1f} Mbit/s"


class _Checker:
    def __init__(
        self, bed: Testbed, say: Callable[[str], None], streams: Sequence[int] = DEFAULT_STREAMS
    ) -> None:
        self.bed, self.state, self.say = bed, bed.state, say
        self.streams = stream_counts(streams)

    def private_sites(self) -> set[str]:
        """The names of the private sites."""
        return {s.name for s in self.bed.sites if s.private}

    def pairs(self) -> list[tuple[str, str, dict[str, Any] | None]]:
        """(client, server, WAN record) per WAN link between public sites (first compute
        hosts); or two hosts of one site without WAN."""
        first = {}
        for host in self.state.hosts:
            if host.get("role", "compute") == "compute":
                first.setdefault(host["site"], host["name"])
        private = self.private_sites()
        pairs = [
            (first[w["sites"][0]], first[w["sites"][1]], w)
            for w in self.state.wan
            if not set(w["sites"]) & private
        ]
        if not pairs and not self.state.wan and len(self.state.hosts) > 1:
            pairs = [(self.state.hosts[0]["name"], self.state.hosts[1]["name"], None)]
        return pairs

    def ping(
        self, client: str, server: str, wan: dict[str, Any] | None, address: str | None = None
    ) -> Row:
        address = address or self.state.host(server)["address"]
        argv = ["ping", "-c", str(PING_COUNT), "-i", "0.2", "-q", address]
        out = _run(self.bed.exec_argv(client, argv), PING_COUNT + 20)
        match = _RTT.search(out)
        if not match:
            raise TestbedError(f"ping {client} -> {server}: no reply ({' '.join(out.split())})")
        rtt_min, rtt_avg = float(match.group(1)) / 1e3, float(match.group(2)) / 1e3
        expected = (wan["ab"]["delay_s"] + wan["ba"]["delay_s"]) if wan else 0.0
        return Row(
            f"RTT {client} -> {server}",
            f"{expected * 1e3:.2f} ms",
            f"{rtt_avg * 1e3:.2f} ms (min {rtt_min * 1e3:.2f})",
            {"expected_s": expected, "avg_s": rtt_avg, "min_s": rtt_min},
        )

    def iperf_argv(self, client: str, address: str, args: list[str]) -> list[str]:
        argv = ["iperf3", "-c", address, "-p", str(IPERF_PORT), "--json", *args]
        return self.bed.exec_argv(client, argv)

    def iperf(
        self, client: str, server: str, args: list[str], address: str | None = None
    ) -> dict[str, Any]:
        address = address or self.state.host(server)["address"]
        out = _run(self.iperf_argv(client, address, args), IPERF_SECONDS + 30)
        return _iperf_doc(client, server, out)

    def loss(self, client: str, server: str, wan: dict[str, Any]) -> Row:
        rate = min(UDP_MAX_BPS, (wan["ab"]["rate_bps"] or 2 * UDP_MAX_BPS) // 2)
        doc = self.iperf(
            client, server, ["-u", "-b", str(rate), "-l", "1400", "-t", str(UDP_SECONDS)]
        )
        end = doc["end"]["sum"]
        lost = end["lost_packets"] / max(1, end["packets"])
        return Row(
            f"loss {client} -> {server} (UDP {_mbit(rate)})",
            f"{wan['ab']['loss'] * 100:.3f} %",
            f"{lost * 100:.3f} % ({end['lost_packets']} of {end['packets']})",
            {"expected": wan["ab"]["loss"], "measured": lost, "packets": end["packets"]},
        )

    def ceiling(
        self, client: str, server: str, wan: dict[str, Any] | None, streams: int, rtt_s: float
    ) -> tuple[float, str]:
        """The throughput the configuration allows, and what sets it."""
        limits = []
        for name in (client, server):
            rate = self.state.host(name)["nic_rate_bps"]
            if rate:
                limits.append((rate, "NIC"))
        if wan:
            if wan["ab"]["rate_bps"]:
                limits.append((wan["ab"]["rate_bps"], "WAN"))
            if wan["ab"]["flow_rate_bps"]:
                limits.append((wan["ab"]["flow_rate_bps"] * streams, "per-flow cap"))
        rmem = self.state.host(server)["tcp"].get("net.ipv4.tcp_rmem")
        if rmem and rtt_s > 0:  # a window of about half the receiver's rmem maximum
            window = int(rmem.split()[2]) // 2
            limits.append((window * 8 / rtt_s * streams, f"window ~{window // 1024} KiB"))
        if self.state.wan_mode == "bridge":
            return 0.0, "bridge stand-in"
        return min(limits) if limits else (0.0, "unlimited")

    def tcp(
        self, client: str, server: str, wan: dict[str, Any] | None, streams: int, rtt_s: float
    ) -> Row:
        before = hostload.sample()
        doc = self.iperf(client, server, ["-t", str(IPERF_SECONDS), "-P", str(streams)])
        steal = hostload.steal_pct(before, hostload.sample())
        bps = doc["end"]["sum_received"]["bits_per_second"]
        retransmits = doc["end"]["sum_sent"].get("retransmits", 0)
        ceiling, why = self.ceiling(client, server, wan, streams, rtt_s)
        bound = "~" if why.startswith("window") else "<="
        configured = f"{bound} {_mbit(ceiling)} ({why})" if ceiling else why
        # the hypervisor's share of the CPU while iperf3 ran, where it is worth a look
        said = f", steal {steal:.1f}%" if steal is not None and steal >= 1.0 else ""
        values = {
            "streams": streams,
            "ceiling_bps": ceiling,
            "limited_by": why,
            "bps": bps,
            "retransmits": retransmits,
        }
        if steal is not None:
            values["steal_pct"] = steal
        return Row(
            f"TCP {streams} stream{'s' if streams > 1 else ''} {client} -> {server}",
            configured,
            f"{_mbit(bps)} ({retransmits} retransmits{said})",
            values,
        )

    def server(self, host: str) -> dict[str, Any]:
        """Start an iperf3 server in `host`, recorded in the state until it is stopped."""
        log = self.state.file(f"iperf3-{host}.log")
        argv = self.bed.exec_argv(host, ["iperf3", "-s", "-p", str(IPERF_PORT), "--forceflush"])
        proc = spawn(argv, log)
        record = {
            "pid": proc.pid,
            "start_time": start_time(proc.pid),
            "role": "iperf3",
            "link": host,
            "argv": argv,
            "log": str(log),
        }
        self.state.processes.append(record)
        self.state.save()
        deadline = time.monotonic() + SERVER_TIMEOUT_S
        while "listening" not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                text = " ".join(log.read_text(errors="replace").split())
                raise TestbedError(f"iperf3 server in {host} did not start: {text}")
            time.sleep(0.05)
        return record

    def stop(self, record: dict[str, Any]) -> None:
        stop_process(record["pid"], record["start_time"])
        self.state.processes.remove(record)
        self.state.save()

    def forwarded(self, before: dict[str, Any], after: dict[str, Any]) -> list[Row]:
        rows = []
        for link, stats in after.items():
            sites = next(w["sites"] for w in self.state.wan if w["name"] == link)
            for d, way in (("ab", " -> ".join(sites)), ("ba", " -> ".join(sites[::-1]))):
                new, old = stats[d], before.get(link, {}).get(d, {})
                delta = {
                    k: v - old.get(k, 0)
                    for k, v in new.items()
                    if isinstance(v, int) and k != "max_queue_bytes"
                }
                drops = {k: delta[k] for k in delta if k.startswith("drop_") and delta[k]}
                rows.append(
                    Row(
                        f"delay line {link} {way}: forwarded",
                        "",
                        f"{delta.get('tx_bytes', 0) / 1e6:.1f} MB in {delta.get('tx_frames', 0)} "
                        f"frames; drops {drops or 0}",
                        {"link": link, "direction": d, **delta},
                    )
                )
        return rows

    def isolation(self) -> list[Row]:
        """Every host of a private site probes the other sites' addresses (none may answer
        or have a route); its compute hosts ping their own site's hosts (all must answer).
        TestbedError naming each failed probe."""
        jobs: list[tuple[HostInfo, list[str], list[str]]] = []
        for site in (s for s in self.bed.sites if s.private):
            others = [h for h in self.bed.hosts if h.site != site.name]
            foreign = [a for h in others for a in (h.address, h.wan_address) if a]
            own = [h.address for h in (*site.compute, *site.frontends)]
            for host in site.compute:
                jobs.append((host, [a for a in own if a != host.address], foreign))
            for host in site.frontends:  # the WAN side reaches no other site's inside
                jobs.append((host, [], [h.address for h in others]))
        procs = []
        for host, reach, unreachable in jobs:
            spec = {
                "port": IPERF_PORT,
                "timeout": PROBE_TIMEOUT_S,
                "workers": PROBE_WORKERS,
                "targets": [*reach, *unreachable],
            }
            argv = self.bed.exec_argv(host.name, [sys.executable, "-c", PROBE, json.dumps(spec)])
            procs.append(
                subprocess.Popen(  # noqa: S603 - argument list, no shell
                    argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
                )
            )
        rows, broken, silent = [], [], []
        stats: dict[str, dict[str, int]] = {}
        for (host, reach, unreachable), proc in zip(jobs, procs):
            try:
                out, err = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                raise TestbedError(f"isolation probes from {host.name} took over 30 s") from None
            try:
                results = {r["address"]: r for r in json.loads(out)}
            except ValueError:
                detail = " ".join((err or out).split())[:300]
                raise TestbedError(f"isolation probes from {host.name} failed: {detail}") from None
            site = stats.setdefault(host.site, {"probes": 0, "reached": 0, "inside": 0, "ok": 0})
            for address in unreachable:
                r = results[address]
                site["probes"] += 1
                how = [w for w, hit in (("ping", r["ping"]), ("route", r["route"])) if hit]
                if r["tcp"] in ("connected", "refused"):
                    how.append(f"tcp {r['tcp']}")
                if how:
                    site["reached"] += 1
                    what = ", ".join(how) + (f" '{r['route']}'" if r["route"] else "")
                    broken.append(f"{host.name} -> {address} ({what})")
            for address in reach:
                site["inside"] += 1
                if results[address]["ping"]:
                    site["ok"] += 1
                else:
                    silent.append(f"{host.name} -> {address}")
        for name, st in stats.items():
            ok = "yes" if not st["reached"] else "NO"
            rows.append(
                Row(
                    f"isolated: site {name} -> other sites",
                    "no route, no answer",
                    f"{ok} ({st['reached']} of {st['probes']} probes reached)",
                    {"site": name, "isolated": not st["reached"], **st},
                )
            )
            if st["inside"]:
                rows.append(
                    Row(
                        f"inside: site {name} compute hosts -> own site",
                        "every host answers",
                        f"{st['ok']} of {st['inside']} pings answered",
                        {"site": name, "probes": st["inside"], "answered": st["ok"]},
                    )
                )
        if broken:
            raise TestbedError(
                f"isolation broken: {len(broken)} probes reached another site: "
                + "; ".join(broken[:10])
            )
        if silent:
            raise TestbedError(
                f"inside reachability broken: no answer from {len(silent)}: "
                + "; ".join(silent[:10])
            )
        return rows

    def frontend_ceiling(
        self, pairs: Sequence[tuple[HostInfo, HostInfo]], wan: dict[str, Any], rtt_s: float
    ) -> tuple[float, str]:
        """What limits TCP between front-end pairs (one stream each) over `wan`."""
        nics = [
            min(
                [r for n in pair if (r := self.state.host(n.name).get("wan_nic_rate_bps", 0))]
                or [0]
            )
            for pair in pairs
        ]
        limits: list[tuple[float, str]] = []
        if all(nics):
            limits.append((sum(nics), "front-end NIC" + ("s" if len(pairs) > 1 else "")))
        if wan["ab"]["rate_bps"]:
            limits.append((wan["ab"]["rate_bps"], "WAN"))
        if wan["ab"]["flow_rate_bps"]:
            limits.append((wan["ab"]["flow_rate_bps"] * len(pairs), "per-flow cap"))
        rmem = self.state.host(pairs[0][1].name)["tcp"].get("net.ipv4.tcp_rmem")
        if rmem and rtt_s > 0:
            window = int(rmem.split()[2]) // 2
            limits.append((window * 8 / rtt_s * len(pairs), f"window ~{window // 1024} KiB"))
        if self.state.wan_mode == "bridge":
            return 0.0, "bridge stand-in"
        return min(limits) if limits else (0.0, "unlimited")

    def frontend_row(
        self,
        item: str,
        pairs: Sequence[tuple[HostInfo, HostInfo]],
        docs: Sequence[dict[str, Any]],
        wan: dict[str, Any],
        rtt_s: float,
    ) -> Row:
        rates = [d["end"]["sum_received"]["bits_per_second"] for d in docs]
        retransmits = sum(d["end"]["sum_sent"].get("retransmits", 0) for d in docs)
        ceiling, why = self.frontend_ceiling(pairs, wan, rtt_s)
        configured = f"<= {_mbit(ceiling)} ({why})" if ceiling else why
        values: dict[str, Any] = {
            "link": wan["name"],
            "streams": len(pairs),
            "ceiling_bps": ceiling,
            "limited_by": why,
            "bps": sum(rates),
            "retransmits": retransmits,
        }
        if len(pairs) == 1:
            values.update(frontend=pairs[0][0].name, peer=pairs[0][1].name)
        else:
            values["pairs"] = [
                {"frontend": a.name, "peer": b.name, "bps": r} for (a, b), r in zip(pairs, rates)
            ]
        return Row(item, configured, f"{_mbit(sum(rates))} ({retransmits} retransmits)", values)

    def frontends(self, wan: dict[str, Any]) -> list[Row]:
        """A WAN link between private sites: RTT between the first front-ends, each front-end
        pair's WAN NICs (1 stream, FRONTEND_SECONDS), then every pair at once."""
        site_a, site_b = (self.bed.site(n) for n in wan["sites"])
        pairs = list(zip(site_a.frontends, site_b.frontends))
        first_a, first_b = pairs[0]
        rtt = self.ping(first_a.name, first_b.name, wan, first_b.wan_address)
        rtt.item = f"RTT {first_a.name} -> {first_b.name} (WAN side)"
        self.say(f"{rtt.item}: {rtt.measured}")
        rows = [rtt]
        rtt_s = rtt.values["min_s"]
        servers: list[dict[str, Any]] = []
        try:
            for _, peer in pairs:
                servers.append(self.server(peer.name))
            args = ["-t", str(FRONTEND_SECONDS)]
            for fe, peer in pairs:
                doc = self.iperf(fe.name, peer.name, args, peer.wan_address)
                item = f"TCP 1 stream {fe.name} -> {peer.name} (front-end WAN NIC)"
                rows.append(self.frontend_row(item, [(fe, peer)], [doc], wan, rtt_s))
                self.say(f"{rows[-1].item}: {rows[-1].measured}")
            if len(pairs) > 1:
                docs = self.iperf_all(pairs, args)
                item = f"TCP {len(pairs)} front-end pairs at once {site_a.name} -> {site_b.name}"
                rows.append(self.frontend_row(item, pairs, docs, wan, rtt_s))
                self.say(f"{rows[-1].item}: {rows[-1].measured}")
        finally:
            for record in servers:
                self.stop(record)
        return rows

    def iperf_all(
        self, pairs: Sequence[tuple[HostInfo, HostInfo]], args: list[str]
    ) -> list[dict[str, Any]]:
        """iperf3 between every front-end pair at the same time; their JSON documents."""
        procs = [
            subprocess.Popen(  # noqa: S603 - argument list, no shell
                self.iperf_argv(fe.name, peer.wan_address or peer.address, args),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for fe, peer in pairs
        ]
        docs = []
        for (fe, peer), proc in zip(pairs, procs):
            try:
                out, _ = proc.communicate(timeout=IPERF_SECONDS + 30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                raise TestbedError(f"iperf3 {fe.name} -> {peer.name} did not finish") from None
            docs.append(_iperf_doc(fe.name, peer.name, out))
        return docs

    def run(self) -> list[Row]:
        rows: list[Row] = []
        before = self.bed.link_stats()
        private = self.private_sites()
        if private:
            rows += self.isolation()
            for row in rows:
                self.say(f"{row.item}: {row.measured}")
        for client, server, wan in self.pairs():
            row = self.ping(client, server, wan)
            self.say(f"{row.item}: {row.measured}")
            rows.append(row)
            record = self.server(server)
            try:
                if wan and (wan["ab"]["loss"] or wan["ba"]["loss"]):
                    rows.append(self.loss(client, server, wan))
                    self.say(f"{rows[-1].item}: {rows[-1].measured}")
                for streams in self.streams:
                    rows.append(self.tcp(client, server, wan, streams, row.values["min_s"]))
                    self.say(f"{rows[-1].item}: {rows[-1].measured}")
            finally:
                self.stop(record)
        for wan in self.state.wan:
            if set(wan["sites"]) <= private:
                rows += self.frontends(wan)
        rows += self.forwarded(before, self.bed.link_stats())
        return rows


def check(
    ctx: Context, state: State, quiet: bool, streams: Sequence[int] = DEFAULT_STREAMS
) -> list[Row]:
    """Measure the live test bed, iperf3 TCP with each of `streams` stream counts; progress
    lines unless `quiet`."""
    bed = Testbed(state)
    return _Checker(bed, (lambda _: None) if quiet else ctx.say, streams).run()


CHECK_SCHEMA = "multilane-testbed-check"


def check_document(state: State, rows: list[Row]) -> dict[str, Any]:
    """What `testbed check --json` prints and `multilane run` stores as testbed-check.json
    (testbed_check = true or a list of stream counts): the rows with their measured values,
    e.g. for TCP rows `values.streams` and `values.bps` (iperf3's received rate)."""
    return {
        "schema": CHECK_SCHEMA,
        "data_version": 1,
        "scenario": state.scenario,
        "prefix": state.prefix,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "rows": [dataclasses.asdict(r) for r in rows],
    }


def format_rows(rows: list[Row]) -> str:
    """The configured | measured table."""
    table = [
        ("check", "configured", "measured"),
        *((r.item, r.configured, r.measured) for r in rows),
    ]
    widths = [max(len(r[i]) for r in table) for i in range(2)]
    return "\n".join(f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]}" for r in table)
