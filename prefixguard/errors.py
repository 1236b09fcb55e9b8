"""The one error type users see: a one-line message naming the input and the problem (CLIs exit 2)."""
from __future__ import annotations


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
