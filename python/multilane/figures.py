"""Helpers the report's figures share: the message-size axis, a log or linear y axis chosen by
the spread of the values, and the drawing of a section's figures."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter, NullLocator

from .sizes import format_size

TICK_STEPS = (1, 2, 5, 10)
LOG_SPREAD = 10.0  # values spanning more than this factor get a log y axis (y_scale)


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


def plain_number(value: float, _pos: object = None) -> str:
    """A tick label without exponents: 0.05, 0.5, 20, 1,000, 20,000."""
    return f"{value:,.0f}" if value >= 10 else f"{value:g}"


def log_y(ax: Any) -> None:
    """A log y axis labelled 1, 2, 5, 10, 20, ... in plain numbers."""
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(plain_number))
    ax.yaxis.set_minor_formatter(NullFormatter())


def y_scale(ax: Any, values: Sequence[float], spread: float = LOG_SPREAD) -> None:
    """Log y when the positive values span more than `spread`, else linear from 0."""
    positive = [v for v in values if v > 0]
    if positive and max(positive) / min(positive) > spread:
        log_y(ax)
    else:
        ax.set_ylim(bottom=0, top=max(positive, default=1) * 1.1)


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
