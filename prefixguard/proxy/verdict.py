"""A request's cache verdict: what the provider reported against what its policy should have read.

Two moments:
- `early`: when the response headers arrive, from the request alone (the prompt's comparison with the
  earlier request and the policy's expectation). It goes into the x-prefixguard-* response headers.
- `final`: once the response is complete, with the reported usage. It goes to the console and the store.

Final verdicts: hit, partial, miss_prefix_changed, miss_ttl_expired, miss_server_side, below_minimum,
no_breakpoint, not_reported, cold, error. Early ones (header only, what the request alone predicts):
expect_hit, expect_partial, miss_prefix_changed, miss_ttl_expired, below_minimum, no_breakpoint, cold; the
addon adds pending and unknown.
"""
from __future__ import annotations

from dataclasses import dataclass

from prefixguard.compare import Comparison
from prefixguard.policy import Expected
from prefixguard.usage import Usage


@dataclass(slots=True)
class Verdict:
    verdict: str
    cause: str | None = None


def _prefix_changed(cmp: Comparison | None) -> str | None:
    """The cause when the prompt changed inside what the earlier request had cached, else None."""
    if cmp is not None and cmp.broken and cmp.reprefill_tokens > 0:
        where = f" at {cmp.divergence.pointer}" if cmp.divergence else ""
        return f"{'+'.join(cmp.causes)}{where}"
    return None


def read_cause(cause: str | None) -> tuple[list[str], str | None]:
    """(cause names, pointer) of a stored miss_prefix_changed cause ("a+b at /pointer"); other causes
    (free text) give their text as the one name."""
    if not cause:
        return [], None
    names, _, where = cause.partition(" at ")
    return names.split("+"), where or None


def early(expected: Expected, cmp: Comparison | None) -> Verdict:
    """The verdict the request alone supports (no usage yet)."""
    if expected.read_tokens == 0 and expected.reason in ("no_breakpoint", "below_minimum"):
        return Verdict(expected.reason)
    changed = _prefix_changed(cmp)
    if changed:
        return Verdict("miss_prefix_changed", changed)
    if expected.reason == "ttl_expired":
        return Verdict("miss_ttl_expired")
    if expected.read_tokens:
        return Verdict("expect_partial" if expected.reason == "partial" else "expect_hit")
    return Verdict("cold")


def final(expected: Expected | None, cmp: Comparison | None, usage: Usage, status: int | None,
          error: str | None = None) -> Verdict:
    """The verdict with the reported usage. `expected` is None when the request could not be analysed."""
    if error or status is None or not (200 <= status < 300 or status == 304):  # 304: no body, not an error
        return Verdict("error", error or f"http {status}")
    if not usage.reported:
        return Verdict("not_reported")
    if expected is None:
        return Verdict("hit" if usage.cache_read else "cold")
    read, want = usage.cache_read, expected.read_tokens
    if read == 0 and usage.cache_write == 0 and expected.reason in ("no_breakpoint", "below_minimum"):
        return Verdict(expected.reason)
    changed = _prefix_changed(cmp)
    if changed:
        return Verdict("miss_prefix_changed", changed)
    if read == 0:
        if want:
            return Verdict("miss_server_side", f"expected ~{want} cached tokens, provider read none")
        if expected.reason == "ttl_expired":
            return Verdict("miss_ttl_expired", "prefix unchanged, last used longer ago than its TTL")
        return Verdict("cold")
    # The policy's expectation already counts what its contract cannot read (a new conversation reads
    # only up to its system breakpoint): reading that much is a hit. Our token counts are estimates
    # (another tokenizer), so only a clear shortfall against it is partial.
    if read * 2 < want:
        return Verdict("partial", f"read {read} of ~{want} expected" if want else None)
    return Verdict("hit")
