"""The judgement's vocabulary: every verdict name (`VerdictName`, the one source of them), the misses among
them, and a prefix change (`PrefixChange`: cause names and where the prompt diverged). judge/verdict.py
judges with them; they live apart, importing nothing, so that the capture record and every reader of it
(and the policies below the judge) name verdicts without loading the judge and the contracts."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import NamedTuple

__all__ = ["MISSES", "PrefixChange", "VerdictName", "miss_cause"]


class VerdictName(StrEnum):
    """Every verdict name (a str: stored, sent in headers and compared as its text)."""

    HIT = "hit"
    PARTIAL = "partial"
    MISS_PREFIX_CHANGED = "miss_prefix_changed"
    MISS_TTL_EXPIRED = "miss_ttl_expired"
    MISS_SERVER_SIDE = "miss_server_side"
    BELOW_MINIMUM = "below_minimum"
    NO_BREAKPOINT = "no_breakpoint"
    NO_PREFIX_CACHING = "no_prefix_caching"  # no prefix cached: the server's setting, or a model cached by none
    NOT_REPORTED = "not_reported"
    COLD = "cold"
    ERROR = "error"
    MISS_UNEXPLAINED = "miss_unexplained"  # a log's turn read less and the log cannot tell why
    PENDING = "pending"  # the proxy's header, before the analysis answers
    UNKNOWN = "unknown"  # the proxy's header, when the analysis could not answer


# Misses: what a report counts as lost reads (the one list; a hit, cold or error is none).
MISSES = (
    VerdictName.MISS_PREFIX_CHANGED,
    VerdictName.MISS_TTL_EXPIRED,
    VerdictName.MISS_SERVER_SIDE,
    VerdictName.MISS_UNEXPLAINED,
)


class PrefixChange(NamedTuple):
    """What changed in the prompt inside what the earlier request had cached: compare's cause names (values
    of judge.causes.Cause) and where the prompt diverged. Shown as "a+b at /pointer" (str()); stored as
    its fields (capture/record.py), never as that text."""

    causes: tuple[str, ...]
    pointer: str | None = None

    def __str__(self) -> str:
        return "+".join(self.causes) + (f" at {self.pointer}" if self.pointer else "")


def miss_cause(verdict: str | None, causes: Iterable[str]) -> str:
    """The cause label of a miss: the first cause a prefix change names, else what the verdict says
    (ttl_expired, ...)."""
    if verdict == VerdictName.MISS_PREFIX_CHANGED:
        return next(iter(causes), "unknown")
    return (verdict or "unknown").removeprefix("miss_")
