"""`multilane testbed up|down|status|check|exec|set-delay`: the arguments are added to cli.py's
parser here, the work is done in build.py, bed.py and check.py."""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from .. import paths
from ..context import Context
from ..errors import UsageError
from ..scenario import Scenario, load_scenario
from .bed import Testbed
from .build import down, up
from .check import (
    DEFAULT_STREAMS,
    MAX_STREAMS,
    StreamsError,
    check,
    check_document,
    format_rows,
    stream_counts,
)
from .system import require_root
from .topology import VARIANTS, Network, format_rate, format_time, parse_time


def _streams(text: str) -> tuple[int, ...]:
    """--streams 1,2,4: iperf3 TCP stream counts."""
    words = text.split(",")
    try:
        values: list[object] = [int(w) if re.fullmatch(r" *[0-9]+ *", w) else w for w in words]
        return stream_counts(values)
    except StreamsError as exc:
        raise argparse.ArgumentTypeError(f"{exc} (e.g. --streams 1,2,4)") from None


def _delay(text: str) -> float | None:
    """set-delay DELAY: a time (0 allowed, at most 10 s), or 'configured' (None)."""
    if text == "configured":
        return None
    seconds = parse_time(text)
    if seconds is None or seconds > 10:
        raise argparse.ArgumentTypeError(
            f"invalid delay {text!r} (expected e.g. 5ms, 250us, 0, at most 10s, or configured)"
        )
    return seconds


def variant_network(scenario: Scenario, variant: str | None) -> Network:
    """The scenario's network as `variant` (None: as written) wants it; UsageError naming
    the file when it cannot be (private without a private site)."""
    if scenario.network is None:
        raise UsageError(f"{scenario.path}: no [network] table: nothing to build")
    try:
        return scenario.network.variant(variant or scenario.network.variant_name)
    except ValueError as exc:
        raise UsageError(f"{scenario.path}: network {variant}: {exc}") from None


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """The `testbed` subcommand and its actions."""
    tb = sub.add_parser("testbed", help="the emulated multi-site network (docs/TESTBED.md)")
    actions = tb.add_subparsers(dest="testbed_command", metavar="ACTION", required=True)
    tb_up = actions.add_parser("up", help="build the network of a scenario file")
    tb_up.add_argument("scenario", type=Path, metavar="SCENARIO.toml")
    tb_up.add_argument(
        "--network",
        choices=VARIANTS,
        default=None,
        help="with private sites: the network as written (private, the default) or the same "
        "sites made routable (direct)",
    )
    actions.add_parser("down", help="remove everything the test bed made")
    tb_delay = actions.add_parser(
        "set-delay", help="change the WAN links' one-way delay on the live test bed"
    )
    tb_delay.add_argument(
        "delay",
        type=_delay,
        metavar="DELAY",
        help="one way, both directions: 5ms, 250us, 0; 'configured': the scenario's again",
    )
    tb_delay.add_argument("--link", metavar="NAME", help="only this WAN link (default: every one)")
    tb_status = actions.add_parser("status", help="hosts, addresses, delay lines")
    tb_status.add_argument("--json", action="store_true", help="print JSON")
    tb_check = actions.add_parser("check", help="configured vs measured RTT, loss, TCP")
    tb_check.add_argument("--json", action="store_true", help="print JSON")
    default = ",".join(str(s) for s in DEFAULT_STREAMS)
    tb_check.add_argument(
        "--streams",
        type=_streams,
        default=DEFAULT_STREAMS,
        metavar="N,N...",
        help=f"iperf3 TCP runs, one per stream count (distinct, 1..{MAX_STREAMS}; default "
        f"{default})",
    )
    tb_exec = actions.add_parser(
        "exec", help="run a command in a host", usage="%(prog)s HOST -- COMMAND..."
    )
    tb_exec.add_argument("host", metavar="HOST")


def _live(ctx: Context) -> Testbed:
    require_root(ctx.euid)
    bed = Testbed.load(ctx)
    if bed is None:
        raise UsageError("no test bed is up: run multilane testbed up SCENARIO.toml")
    return bed


def _print_status(bed: Testbed, ctx: Context) -> None:
    state = bed.state
    ctx.say(
        f"test bed {state.prefix}* from {paths.display(Path(state.scenario))}"
        f"{'' if state.complete else ' (INCOMPLETE)'}; MTU {state.mtu}; "
        f"agent {state.agent}"
    )
    if state.variant == "private":
        ctx.say(
            "private sites: "
            + ", ".join(f"{s.name} {s.subnet}" for s in bed.sites if s.private)
            + " (no route between sites; front-ends' WAN side in wan address)"
        )
    ctx.say(f"{'host':<13} {'site':<9} {'address':<15} {'iface':<6} namespace")
    for h in bed.hosts:
        wan = f"  wan {h.wan_address} ({h.wan_interface})" if h.wan_address else ""
        ctx.say(f"{h.name:<13} {h.site:<9} {h.address:<15} {h.interface:<6} {h.namespace}{wan}")
    alive = {p["link"]: p for p in bed.delaylines()}
    for w in state.wan:
        props = ", ".join(
            f"{d} {format_rate(w[d]['rate_bps']) if w[d]['rate_bps'] else 'unlimited'} "
            f"{format_time(w[d]['delay_s'])} loss {w[d]['loss']:g}"
            + (f" flow {format_rate(w[d]['flow_rate_bps'])}" if w[d]["flow_rate_bps"] else "")
            for d in ("ab", "ba")
        )
        props += "".join(
            f"; blackhole port {h['port']} after {h['after_bytes']} B"
            for h in w.get("blackhole", [])
        )
        proc = alive.get(w["name"])
        how = (
            "bridge stand-in (no delay, rate or loss)"
            if state.wan_mode == "bridge"
            else f"delay line pid {proc['pid']} {'running' if proc['alive'] else 'GONE'}"
            if proc
            else "no delay line"
        )
        ctx.say(f"wan {w['name']}: {w['sites'][0]} <-> {w['sites'][1]}: {props}; {how}")


def cmd_testbed(args: argparse.Namespace, ctx: Context) -> int:
    """Dispatch one `testbed` action."""
    action = args.testbed_command
    if action == "up":
        require_root(ctx.euid)
        scenario = load_scenario(args.scenario)
        state = up(variant_network(scenario, args.network), args.scenario, ctx)
        _print_status(Testbed(state), ctx)
        ctx.say("multilane: test bed is up; `multilane testbed down` removes it")
        return 0
    if action == "down":
        state = down(ctx)
        if state is None:
            ctx.say("multilane: no test bed is up; nothing to do")
        else:
            ctx.say(f"multilane: removed {state.prefix}* ({len(state.hosts)} hosts)")
        return 0
    if action == "status":
        require_root(ctx.euid)
        bed = Testbed.load(ctx)
        if bed is None:
            ctx.say(json.dumps({"up": False}) if args.json else "no test bed is up")
        elif args.json:
            ctx.say(json.dumps(bed.to_json(), indent=2))
        else:
            _print_status(bed, ctx)
        return 0
    if action == "set-delay":
        for line in _live(ctx).set_delay(args.delay, args.link):
            ctx.say(line)
        return 0
    if action == "check":
        bed = _live(ctx)
        rows = check(ctx, bed.state, quiet=args.json, streams=args.streams)
        if args.json:
            ctx.say(json.dumps(check_document(bed.state, rows), indent=2))
        else:
            ctx.say(format_rows(rows))
        return 0
    # exec
    if not args.extra:
        raise UsageError("testbed exec: give the command after --, e.g. exec a1 -- hostname")
    bed = _live(ctx)
    argv = bed.exec_argv(args.host, args.extra)
    sys.stdout.flush()
    return subprocess.run(argv, check=False).returncode  # noqa: S603 - argument list


@contextlib.contextmanager
def testbed_for(scenario_path: Path, ctx: Context, variant: str | None = None) -> Iterator[Testbed]:
    """The test bed of `scenario_path` (its network as `variant` wants it: "private",
    "direct"; None: as written) for the duration of a run: a live one built from the same
    file and variant is used as it is; otherwise one is brought up and taken down afterwards
    (also when the run fails).  A live one from another scenario or variant is an error."""
    require_root(ctx.euid)
    scenario = load_scenario(scenario_path)
    network = variant_network(scenario, variant)
    live = Testbed.load(ctx)
    if live is not None:
        if Path(live.state.scenario) != scenario_path.resolve():
            raise UsageError(
                f"a test bed from {live.state.scenario} is up: run multilane testbed down first"
            )
        if live.state.variant != network.variant_name:
            raise UsageError(
                f"the test bed that is up is the {live.state.variant} network of "
                f"{paths.display(scenario_path)}, this run needs the {network.variant_name} "
                "one: run multilane testbed down first"
            )
        yield live
        return
    what = "" if variant is None else f" ({network.variant_name} network)"
    ctx.say(f"multilane: bringing up the test bed of {paths.display(scenario_path)}{what}")
    state = up(network, scenario_path, ctx)
    try:
        yield Testbed(state)
    finally:
        down(ctx)
        ctx.say(f"multilane: test bed {state.prefix}* taken down")
