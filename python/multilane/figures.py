"""Helpers the report's figures share: the message-size axis."""

from __future__ import annotations

import math
from typing import Any

from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from .sizes import format_size

TICK_STEPS = (1, 2, 5, 10)


def size_axis(ax: Any, xs: list[int], max_ticks: int) -> None:
    """Log2 x axis labelled 1, 4, 16, ... 1K ... 1M: a tick every 1, 2, 5 or 10 powers of
    two, on exponents that are multiples of the step (so 1K and 1M show when in range)."""
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size [bytes]")
    if not xs:
        return
    low, high = int(math.log2(min(xs))), math.ceil(math.log2(max(xs)))
    step = next((s for s in TICK_STEPS if (high - low) // s + 1 <= max_ticks), TICK_STEPS[-1])
    first = -(-low // step) * step
    ticks = [2**e for e in range(first, high + 1, step)] or [2**low]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: format_size(round(x))))
