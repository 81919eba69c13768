"""Exceptions that the CLI turns into one line on stderr and an exit status."""

from __future__ import annotations


class MultilaneError(Exception):
    """A failure that the user can act on; the message is one line, the status an exit code."""

    exit_status = 1


class UsageError(MultilaneError):
    """Bad input found before anything is launched (exit status 2)."""

    exit_status = 2


class RunError(MultilaneError):
    """A launched program failed, timed out or wrote results that do not validate."""

    exit_status = 1
