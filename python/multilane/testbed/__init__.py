"""The emulated multi-site test bed: hosts are network namespaces, sites are bridges, WAN links
are delay lines (docs/TESTBED.md).  Launchers use `Testbed.load(ctx)`: its agent, hosts (name,
address, emulated interface), sites (`SiteInfo`: compute hosts and, for a private site, the
dual-homed front-ends with their WAN-side addresses), `set_delay()` and `link_stats()`, the
delay lines' counters."""

from __future__ import annotations

from .bed import HostInfo, SiteInfo, Testbed
from .system import TestbedError
from .topology import Network

__all__ = ["HostInfo", "Network", "SiteInfo", "Testbed", "TestbedError"]
