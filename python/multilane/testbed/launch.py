"""MPI runs across test-bed hosts: where the ranks go, how the launch is wrapped so that it
starts inside a host, and the proof that the bytes crossed the emulated WAN.

The proof is a lower bound, so it cannot be fooled by other traffic: the delay lines' tx byte
counters (both directions, every WAN link) must grow by at least the payload the benchmark
says it moved between sites.  An MPI that takes a shortcut (MPICH's UCX netmod moves
cross-namespace traffic through shared memory) fails it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..context import Context
from ..errors import UsageError
from ..launchers import HostPlacement
from .bed import Testbed
from .topology import Network, format_rate


@dataclass(frozen=True)
class TestbedRun:
    """A live test bed and the placement of one run on it."""

    __test__ = False  # not a pytest class

    bed: Testbed
    placement: HostPlacement
    scenario: str
    sites: int = 2  # sites the placement's hosts are in: with 1, no byte has a WAN to cross
    host_limit: int | None = None  # the run's `hosts = N` (the first N hosts); None: not set
    site: str | None = None  # the run's `site = NAME` (that site's hosts); None: not set
    nic_rates: tuple[int, ...] = ()  # bit/s of each placement host's NIC (0: unlimited)

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """`argv` started inside the first host (with its words intact)."""
        return self.bed.exec_argv(self.placement.hosts[0], argv)

    def wan_tx_bytes(self) -> int:
        """Bytes the delay lines have sent, summed over links and directions (SIGUSR1)."""
        return sum(
            int(direction.get("tx_bytes", 0))
            for link in self.bed.link_stats().values()
            for direction in (link.get("ab", {}), link.get("ba", {}))
        )

    def watchdog(self) -> str:
        """'' while every delay line lives; else why the run must stop (its link is cut, so
        MPI would wait on TCP retransmissions for many minutes)."""
        dead = [p for p in self.bed.delaylines() if not p["alive"]]
        if not dead:
            return ""
        links = ", ".join(f"{p['link']} (pid {p['pid']})" for p in dead)
        return f"the delay line of WAN link {links} died during the run"

    def to_json(self) -> dict[str, Any]:
        """Provenance of the placement."""
        doc: dict[str, Any] = {
            "scenario": self.scenario,
            "prefix": self.bed.state.prefix,
            "hosts": list(self.placement.hosts),
            "ppn": self.placement.ppn,
            "subnet": self.placement.subnet,
            "wan_mode": self.bed.state.wan_mode,
            "sites": self.sites,
        }
        if self.host_limit is not None:
            doc["host_limit"] = self.host_limit
        if self.site is not None:
            doc["site"] = self.site
        doc["nic_rate"] = self.nic_rate
        return doc

    @property
    def nic_rate(self) -> str:
        """The NIC rate of the placement's hosts: "1gbit", "unlimited", or each distinct one
        ("1gbit,unlimited") when they differ; what a report names the link by."""
        rates = dict.fromkeys(self.nic_rates)
        return ",".join(format_rate(r) if r else "unlimited" for r in rates) or "unlimited"


def placement(
    ctx: Context,
    scenario: Path,
    network: Network,
    ppn: int,
    name: str,
    *,
    every_host: bool = False,
    hosts: int | None = None,
    site: str | None = None,
) -> TestbedRun:
    """One host per site (the first of each), or with `every_host` every host site by site,
    or with `hosts` the first `hosts` hosts site by site (1 .. all; the run's `hosts = N`),
    or with `site` that site's hosts (the first `hosts` of them when given), `ppn` ranks
    each, on the live test bed built from `scenario`; UsageError when none is up, or one from
    another scenario."""
    bed = Testbed.load(ctx)
    where = scenario.resolve()
    if bed is None:
        raise UsageError(f"no test bed is up: run multilane testbed up {scenario}")
    if Path(bed.state.scenario) != where:
        raise UsageError(
            f"the test bed that is up was built from {bed.state.scenario}, not {where}: "
            "run multilane testbed down first"
        )
    if not bed.state.complete:
        raise UsageError("the test bed is INCOMPLETE (a failed up): run multilane testbed down")
    if bed.state.variant != network.variant_name:
        raise UsageError(
            f"{name}: the test bed that is up is the {bed.state.variant} network of {where}, "
            f"the run needs the {network.variant_name} one (network = "
            f'"{network.variant_name}"): run multilane testbed down first'
        )
    pool, what = network.hosts, "the test bed has"
    if site is not None:
        try:
            pool, what = network.site(site).hosts, f"site {site} has"
        except KeyError:
            known = ", ".join(s.name for s in network.sites)
            raise UsageError(f"{name}: site {site!r}: no such site (known: {known})") from None
    if hosts is not None:
        if isinstance(hosts, bool) or not 1 <= hosts <= len(pool):
            names = ", ".join(h.name for h in pool)
            raise UsageError(
                f"{name}: hosts {hosts!r}: {what} {len(pool)} hosts ({names}): "
                f"expected 1 to {len(pool)}"
            )
        chosen = pool[:hosts]
    elif site is not None:
        chosen = pool
    elif every_host:
        chosen = network.hosts
    elif not network.wan and len(network.sites) < 2:
        chosen = network.sites[0].hosts[:2]
    else:
        chosen = tuple(s.hosts[0] for s in network.sites)
    if hosts is None and site is None and len(chosen) < 2:
        raise UsageError(f"{name}: the scenario has fewer than 2 hosts to spread ranks over")
    sites = len({h.site for h in chosen})
    if network.private and sites > 1:
        raise UsageError(
            f"{name}: the sites of the private network have no route between them: a run "
            'across sites needs network = "direct" (or multilane grid run), or site = NAME'
        )
    names = tuple(h.name for h in chosen)
    iface = bed.host(names[0]).interface
    place = HostPlacement(names, ppn, str(bed.agent), network.subnet, iface)
    rates = tuple(h.nic_rate_bps for h in chosen)
    return TestbedRun(bed, place, str(where), sites, hosts, site, rates)


def crossed_link(run: TestbedRun, before: int, moved: int) -> tuple[dict[str, int], str]:
    """Compare the delay lines' bytes with the payload moved; (record, problem or '')."""
    if run.bed.state.wan_mode != "delayline" or run.sites < 2:
        # bridge stand-in: no counter; ranks in one site (a LAN, hosts = 1): no WAN to cross
        return {"payload_bytes_min": moved}, ""
    after = run.wan_tx_bytes()
    record = {"wan_tx_bytes": after - before, "payload_bytes_min": moved}
    if after - before < moved:
        return record, (
            f"the bytes did not cross the emulated link: the delay lines forwarded "
            f"{after - before} B, the benchmark moved at least {moved} B between sites "
            "(an MPI shortcut such as shared memory between namespaces?)"
        )
    return record, ""


def payload_bytes(doc: Mapping[str, Any], factors: Mapping[str, str]) -> int:
    """Lower bound of the payload a result moved between pair partners: per row and metric,
    bytes x iters x reps x pairs x factor, where a factor is a number or a row column name
    times a number ("window", "2*window").  Warm-up iterations are not counted."""
    params = doc["provenance"]["params"]
    reps = int(params.get("reps", 1))
    pairs = int(params.get("pairs", 1))
    total = 0
    present = {m["name"] for m in doc["metrics"]}
    for row in doc["rows"]:
        for metric, factor in factors.items():
            if metric not in present or metric not in row:  # not measured at this size
                continue
            mult = 1.0
            for part in factor.split("*"):
                mult *= float(row[part]) if part in row else float(part)
            total += int(row["bytes"] * row["iters"] * reps * pairs * mult)
    return total
