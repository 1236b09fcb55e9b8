"""A request's cache verdict: what the provider reported against what its contract predicts.

Two moments:
- `early`: when the response headers arrive, from the request alone (the prompt's comparison with the
  earlier request and the policy's expectation). It goes into the x-prefixguard-* response headers.
- `final`: once the response is complete, with the reported usage. It goes to the console and the store.

The judge is the contract, not our comparison alone: a read within the tolerance of the prediction
(rules/verdict.toml) is as predicted. A change our comparison found is a miss only when the provider
read clearly less than it owed had the prefix not changed; a change that cost nothing is a note on a hit.

Final verdicts: hit, partial, miss_prefix_changed, miss_ttl_expired, miss_server_side, below_minimum,
no_breakpoint, not_reported, cold, error. Early ones (header only, what the request alone predicts):
expect_hit, expect_partial, miss_prefix_changed, miss_ttl_expired, below_minimum, no_breakpoint, cold; the
addon adds pending and unknown.
"""
from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple

from prefixguard.compare import Comparison
from prefixguard.contracts import verdict_rules
from prefixguard.policy import Expected
from prefixguard.usage import Usage


class VerdictName(StrEnum):
    """Every verdict name (a str: stored, sent in headers and compared as its text)."""
    HIT = "hit"
    PARTIAL = "partial"
    MISS_PREFIX_CHANGED = "miss_prefix_changed"
    MISS_TTL_EXPIRED = "miss_ttl_expired"
    MISS_SERVER_SIDE = "miss_server_side"
    BELOW_MINIMUM = "below_minimum"
    NO_BREAKPOINT = "no_breakpoint"
    NOT_REPORTED = "not_reported"
    COLD = "cold"
    ERROR = "error"
    EXPECT_HIT = "expect_hit"          # early only
    EXPECT_PARTIAL = "expect_partial"  # early only
    PENDING = "pending"                # the addon's, before analysis answers
    UNKNOWN = "unknown"                # the addon's, when analysis could not answer


class Verdict(NamedTuple):
    verdict: VerdictName
    cause: str | None = None


class PrefixChange(NamedTuple):
    """The cause of a miss_prefix_changed verdict: compare's cause names and where the prompt diverged.
    Stored as its text, "a+b at /pointer" (str()); `parse` reads it back."""
    causes: tuple[str, ...]
    pointer: str | None = None

    def __str__(self) -> str:
        return "+".join(self.causes) + (f" at {self.pointer}" if self.pointer else "")

    @classmethod
    def parse(cls, cause: str | None) -> PrefixChange:
        """A stored cause; other causes (free text) give their text as the one name."""
        if not cause:
            return cls(())
        names, _, where = cause.partition(" at ")
        return cls(tuple(names.split("+")), where or None)


def _prefix_changed(cmp: Comparison | None) -> str | None:
    """The cause when the prompt changed inside what the earlier request had cached, else None."""
    if cmp is not None and cmp.broken and cmp.reprefill_tokens > 0:
        return str(PrefixChange(tuple(cmp.causes), cmp.divergence.pointer if cmp.divergence else None))
    return None


def early(expected: Expected, cmp: Comparison | None) -> Verdict:
    """The verdict the request alone supports (no usage yet)."""
    if expected.cache_read == 0 and expected.reason in ("no_breakpoint", "below_minimum"):
        return Verdict(VerdictName(expected.reason))
    changed = _prefix_changed(cmp)
    if changed:
        return Verdict(VerdictName.MISS_PREFIX_CHANGED, changed)
    if expected.reason == "ttl_expired":
        return Verdict(VerdictName.MISS_TTL_EXPIRED)
    if expected.cache_read:
        return Verdict(VerdictName.EXPECT_PARTIAL if expected.reason == "partial" else VerdictName.EXPECT_HIT)
    return Verdict(VerdictName.COLD)


def final(expected: Expected | None, cmp: Comparison | None, usage: Usage, status: int | None,
          error: str | None = None, owed: int | None = None) -> Verdict:
    """The verdict with the reported usage. `expected` is None when the request could not be analysed.
    owed: what the request would have read had its prefix not changed (in the provider's tokens); by
    default the expected read plus the comparison's re-prefill. When nothing of the earlier request is
    reusable, an expected read comes from another entry (a setting changed back): the larger of the two
    then, not their sum."""
    if error or status is None or not (200 <= status < 300 or status == 304):  # 304: no body, not an error
        return Verdict(VerdictName.ERROR, error or f"http {status}")
    if not usage.reported:
        return Verdict(VerdictName.NOT_REPORTED)
    if expected is None:
        return Verdict(VerdictName.HIT if usage.cache_read else VerdictName.COLD)
    rules = verdict_rules()
    tol = rules["read_tolerance"]
    read, want = usage.cache_read, expected.cache_read
    as_predicted = abs(read - want) <= tol * max(read, want)
    changed = _prefix_changed(cmp)
    if not changed:
        owed = want
    elif owed is None:
        owed = want + cmp.reprefill_tokens if cmp.reused_tokens else max(want, cmp.reprefill_tokens)
    cost_nothing = read >= (1 - tol) * owed
    if changed and not cost_nothing and (as_predicted or read < want):
        return Verdict(VerdictName.MISS_PREFIX_CHANGED, changed)
    if read == 0 and usage.cache_write == 0 and expected.reason in ("no_breakpoint", "below_minimum"):
        return Verdict(VerdictName(expected.reason))
    note = f"note: {changed} cost nothing" if changed and cost_nothing else None
    if as_predicted:
        if read:
            return Verdict(VerdictName.HIT, note)
        return Verdict(VerdictName.MISS_TTL_EXPIRED if expected.reason == "ttl_expired" else VerdictName.COLD, note)
    if read > want:
        if not want and read < rules["negligible_read"] * max(usage.prompt_total, 1):
            return Verdict(VerdictName.COLD, f"read {read} of {usage.prompt_total}: too little to count")
        # More than predicted: what the change seemed to break was read after all, or a cache that
        # traffic we did not see wrote (an earlier run, another client): no earlier request is no proof.
        after = f" after {changed}" if changed else ""
        return Verdict(VerdictName.HIT, note or f"read {read} where ~{want} was predicted{after}: a cache written by "
                                      "traffic not seen here")
    if read == 0:
        if expected.reason == "ttl_expired":
            return Verdict(VerdictName.MISS_TTL_EXPIRED, "prefix unchanged, last used longer ago than its TTL")
        return Verdict(VerdictName.MISS_SERVER_SIDE, f"expected ~{want} cached tokens, provider read none")
    return Verdict(VerdictName.PARTIAL, f"read {read} of ~{want} expected")
