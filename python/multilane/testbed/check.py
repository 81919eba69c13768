"""`testbed check`: configured against measured: RTT between sites (ping), loss (iperf3 UDP,
when loss is configured), TCP throughput with 1 and 8 streams or the given counts (iperf3),
and the bytes the delay lines forwarded meanwhile."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..context import Context
from .bed import Testbed
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

    def pairs(self) -> list[tuple[str, str, dict[str, Any] | None]]:
        """(client, server, WAN record) per WAN link; or two hosts of one site without WAN."""
        first = {}
        for host in self.state.hosts:
            first.setdefault(host["site"], host["name"])
        pairs = [(first[w["sites"][0]], first[w["sites"][1]], w) for w in self.state.wan]
        if not pairs and len(self.state.hosts) > 1:
            pairs = [(self.state.hosts[0]["name"], self.state.hosts[1]["name"], None)]
        return pairs

    def ping(self, client: str, server: str, wan: dict[str, Any] | None) -> Row:
        address = self.state.host(server)["address"]
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

    def iperf(self, client: str, server: str, args: list[str]) -> dict[str, Any]:
        address = self.state.host(server)["address"]
        argv = ["iperf3", "-c", address, "-p", str(IPERF_PORT), "--json", *args]
        out = _run(self.bed.exec_argv(client, argv), IPERF_SECONDS + 30)
        try:
            doc = json.loads(out)
        except ValueError:
            raise TestbedError(f"iperf3 {client} -> {server}: no JSON ({out[:200]})") from None
        if "error" in doc:
            raise TestbedError(f"iperf3 {client} -> {server}: {doc['error']}")
        return doc

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
        doc = self.iperf(client, server, ["-t", str(IPERF_SECONDS), "-P", str(streams)])
        bps = doc["end"]["sum_received"]["bits_per_second"]
        retransmits = doc["end"]["sum_sent"].get("retransmits", 0)
        ceiling, why = self.ceiling(client, server, wan, streams, rtt_s)
        bound = "~" if why.startswith("window") else "<="
        configured = f"{bound} {_mbit(ceiling)} ({why})" if ceiling else why
        return Row(
            f"TCP {streams} stream{'s' if streams > 1 else ''} {client} -> {server}",
            configured,
            f"{_mbit(bps)} ({retransmits} retransmits)",
            {
                "streams": streams,
                "ceiling_bps": ceiling,
                "limited_by": why,
                "bps": bps,
                "retransmits": retransmits,
            },
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

    def run(self) -> list[Row]:
        rows: list[Row] = []
        before = self.bed.link_stats()
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
