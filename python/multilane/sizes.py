"""Message-size specifications: the grammar of the C harness (`mln_size_list_parse` in
bench/harness_util.c), checked here so that bad input is refused before any launch.

    spec  := item (',' item)*         sorted ascending, duplicates dropped
    item  := size | size ':' size     LO:HI = LO, 2*LO, 4*LO, ... <= HI (LO = 0: 0, 1, 2, 4, ...)
    size  := digits [K|M|G|T] [B|iB]  binary multiples, case-insensitive ('iB' only after a
                                      multiple); at most 2147483647 bytes (MPI counts are ints)

Examples: ``1:64M``, ``0,1,4K``, ``0:1K,1000,65537``, ``8KiB:1MB``.
"""

from __future__ import annotations

import re
from types import MappingProxyType

MAX_BYTES = 2147483647
MAX_SIZES = 1024
MULTIPLIERS = MappingProxyType({"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40})
EXPECTED = "expected e.g. 1:64M, 4K or 0,1,1000; K, M, G are binary, B or iB optional"
_SIZE_RE = re.compile(r"^\s*(\d+)(?:([KMGT])(iB|B)?|(B))?\s*$", re.IGNORECASE)


class SizeSpecError(ValueError):
    """An invalid size specification; the message says what is expected."""


def _parse_raw(text: str) -> int:
    match = _SIZE_RE.match(text)
    if not match:
        raise SizeSpecError(f"invalid size '{text}' ({EXPECTED})")
    return int(match.group(1)) * MULTIPLIERS[(match.group(2) or "").upper()]


def parse_size(text: str) -> int:
    """One size such as ``4096``, ``4K``, ``4KiB``, ``1MB`` or ``16B``, in bytes."""
    value = _parse_raw(text)
    if value > MAX_BYTES:
        raise SizeSpecError(f"size '{text}' is above the largest MPI message ({MAX_BYTES} bytes)")
    return value


def _parse_item(item: str) -> list[int]:
    if ":" not in item:
        return [parse_size(item)]
    low_text, _, high_text = item.partition(":")
    try:
        if ":" in high_text:
            raise SizeSpecError
        low, high = _parse_raw(low_text), _parse_raw(high_text)
    except SizeSpecError:
        raise SizeSpecError(f"invalid range '{item}' (expected LO:HI, e.g. 1:64M)") from None
    if low > high:
        raise SizeSpecError(f"invalid range '{item}': the lower bound is above the upper bound")
    if high > MAX_BYTES:
        raise SizeSpecError(
            f"range '{item}' goes above the largest MPI message ({MAX_BYTES} bytes)"
        )
    sizes = [0] if low == 0 else []
    size = max(low, 1)
    while size <= high:
        sizes.append(size)
        size *= 2
    return sizes


def parse_size_spec(spec: str) -> list[int]:
    """All sizes a spec names, ascending and distinct; SizeSpecError says what is expected."""
    try:
        if not spec:
            raise SizeSpecError(f"empty size list ({EXPECTED})")
        sizes: list[int] = []
        for item in spec.split(","):
            sizes += _parse_item(item)
            if len(sizes) > MAX_SIZES:
                raise SizeSpecError(f"more than {MAX_SIZES} message sizes")
    except SizeSpecError as exc:
        raise SizeSpecError(f"invalid size spec '{spec}': {exc}") from None
    return sorted(set(sizes))


def format_size(nbytes: int) -> str:
    """Exact compact binary form: 0, 512, 1K, 64K, 1M; 1536 and 65537 stay in bytes."""
    for unit, mult in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if nbytes >= mult and nbytes % mult == 0:
            return f"{nbytes // mult}{unit}"
    return str(nbytes)
