"""Multilane: the command-line harness around the C benchmarks (bench, run, report)."""

from __future__ import annotations

__all__ = ["__version__"]

try:
    from importlib.metadata import PackageNotFoundError, version

    __version__ = version("multilane")
except PackageNotFoundError:  # running from a source tree without installing
    __version__ = "0.1.0"
