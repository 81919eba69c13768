"""Helpers the report's figures share: the message-size axis."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
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


def draw_figures(
    benchmark: str,
    found: Sequence[Any],
    out_dir: Path,
    figures: Sequence[tuple[str, Callable[[Sequence[Any], Path], bool], str]],
) -> tuple[list[Path], list[str]]:
    """A report section's figures: each (file name, plot, alt text) whose plot draws from
    `found` into out_dir (it returns False when it has no data); the images written and their
    Markdown lines."""
    images: list[Path] = []
    md: list[str] = []
    for name, plot, alt in figures:
        if plot(found, out_dir / name):
            images.append(out_dir / name)
            md += [f"![{benchmark}: {alt}]({name})", ""]
    return images, md
