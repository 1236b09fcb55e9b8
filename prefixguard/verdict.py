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

from dataclasses import dataclass

from prefixguard.compare import Comparison
from prefixguard.contracts import verdict_rules
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
          error: str | None = None, owed: int | None = None) -> Verdict:
    """The verdict with the reported usage. `expected` is None when the request could not be analysed.
    owed: what the request would have read had its prefix not changed (in the provider's tokens);
    by default the expected read plus the comparison's re-prefill."""
    if error or status is None or not (200 <= status < 300 or status == 304):  # 304: no body, not an error
        return Verdict("error", error or f"http {status}")
    if not usage.reported:
        return Verdict("not_reported")
    if expected is None:
        return Verdict("hit" if usage.cache_read else "cold")
    rules = verdict_rules()
    tol = rules["read_tolerance"]
    read, want = usage.cache_read, expected.read_tokens
    as_predicted = abs(read - want) <= tol * max(read, want)
    changed = _prefix_changed(cmp)
    owed = (want + cmp.reprefill_tokens if owed is None else owed) if changed else want
    cost_nothing = read >= (1 - tol) * owed
    if changed and not cost_nothing and (as_predicted or read < want):
        return Verdict("miss_prefix_changed", changed)
    if read == 0 and usage.cache_write == 0 and expected.reason in ("no_breakpoint", "below_minimum"):
        return Verdict(expected.reason)
    note = f"note: {changed} cost nothing" if changed and cost_nothing else None
    if as_predicted:
        if read:
            return Verdict("hit", note)
        return Verdict("miss_ttl_expired" if expected.reason == "ttl_expired" else "cold", note)
    if read > want:
        if not want and read < rules["negligible_read"] * max(usage.prompt_total, 1):
            return Verdict("cold", f"read {read} of {usage.prompt_total}: too little to count")
        # More than predicted: what the change seemed to break was read after all, or a cache that
        # traffic we did not see wrote (an earlier run, another client): no earlier request is no proof.
        after = f" after {changed}" if changed else ""
        return Verdict("hit", note or f"read {read} where ~{want} was predicted{after}: a cache written by "
                                      "traffic not seen here")
    if read == 0:
        if expected.reason == "ttl_expired":
            return Verdict("miss_ttl_expired", "prefix unchanged, last used longer ago than its TTL")
        return Verdict("miss_server_side", f"expected ~{want} cached tokens, provider read none")
    return Verdict("partial", f"read {read} of ~{want} expected")
