"""The share of this machine's CPU time that the hypervisor gave to other guests (steal) while
a run or a measurement ran.

On a shared virtual machine the ranks and the test bed's userspace delay lines lose the CPU in
bursts that no process of ours causes: a delay line that is not scheduled for a few ms drops
what overflows its queue, and a run's rates fall with it (on this project's 2-core VM, iperf3
with one stream on `wan-short` read 982 Mbit/s in one hour and 210 in another).  Recording the
steal beside every result lets a reader tell such a run from a change in the code
(docs/METRICS.md: `provenance.host`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

STAT = Path("/proc/stat")
# A run during which the hypervisor took more than this share of the CPU is named in the
# report's notes: its rates and times are less comparable with the others'.
NOTE_STEAL_PCT = 5.0
SCOPE = (
    "share of this machine's CPU time (all CPUs, /proc/stat) that the hypervisor gave to other "
    "guests (steal) between the start and the end of the run"
)


@dataclass(frozen=True)
class CpuSample:
    """The machine's CPU time since boot, in clock ticks: all of it, and the stolen part."""

    steal: int
    total: int


def parse_stat(text: str) -> CpuSample | None:
    """The `cpu` line of /proc/stat: user nice system idle iowait irq softirq steal (guest
    time is inside user and nice); None without one."""
    for line in text.splitlines():
        fields = line.split()
        if not fields or fields[0] != "cpu":
            continue
        try:
            ticks = [int(v) for v in fields[1:9]]
        except ValueError:
            return None
        if len(ticks) < 8 or min(ticks) < 0:
            return None
        return CpuSample(steal=ticks[7], total=sum(ticks))
    return None


def sample(path: Path = STAT) -> CpuSample | None:
    """Now's CpuSample; None where /proc/stat cannot be read (not Linux)."""
    try:
        return parse_stat(path.read_text())
    except OSError:
        return None


def steal_pct(before: CpuSample | None, after: CpuSample | None) -> float | None:
    """Stolen ticks over all ticks between two samples, in percent; None when either sample
    is missing or no time passed."""
    if before is None or after is None or after.total <= before.total:
        return None
    stolen = max(after.steal - before.steal, 0)
    return round(100.0 * stolen / (after.total - before.total), 2)


def host_record(before: CpuSample | None, after: CpuSample | None) -> dict[str, Any] | None:
    """provenance.host of a result: {steal_pct, scope}; None when it cannot be measured."""
    pct = steal_pct(before, after)
    return None if pct is None else {"steal_pct": pct, "scope": SCOPE}
