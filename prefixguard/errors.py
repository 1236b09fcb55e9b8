"""The one error type users see: a one-line message naming the input and the problem (CLIs exit 2)."""
from __future__ import annotations

import os


class InputError(Exception):
    """Bad input (not JSON, wrong shape, too large, ...). str(err) is one line, fit to print as is."""

    def __init__(self, message: str, source: str | None = None) -> None:
        message = " ".join(message.split())  # one line, whatever the cause's text held
        super().__init__(f"{source}: {message}" if source else message)


class NotARequest(InputError):
    """Valid JSON that is not a request body prefixguard reads: an API response, another provider's
    shape, unrelated JSON (package.json, test expectations). Lint skips such files with a warning."""


class TooLarge(InputError):
    """A request with more parts than the analysis is allowed to hold in memory (PREFIXGUARD_MAX_PARTS)."""


def check_writable(path: str) -> None:
    """Raise InputError now, before a long run, when an output file cannot be written there."""
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise InputError("cannot write: it is a directory", path)
    if not os.path.isdir(parent):
        raise InputError(f"cannot write: no directory {parent}", path)
    if not os.access(path if os.path.exists(path) else parent, os.W_OK):
        raise InputError("cannot write: permission denied", path)
