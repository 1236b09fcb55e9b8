"""A request's cache verdict: one judgement, made by `judge`, that every surface shows as it is.

`judge(expected, comparison, usage)` takes what the request's contract predicts it reads (`expected`,
from the provider's policy), how it departs from its predecessor (`comparison`) and the provider's
usage, and returns a typed `Verdict`: its name, its cause or note, the tokens it reused and the tokens
the change made it prefill again (and what that cost). Without a usage (`diff`, the testing API, the
response header the proxy sends before the usage exists) it judges the usage the contract predicts:
the prediction IS the verdict the request gets when the provider keeps its contract, with the same
name and the same numbers. `judge_pair` is the same judgement for a request and its predecessor alone.

The judge is the contract, not our comparison alone: a read within the tolerance of the prediction
(rules/verdict.toml) is as predicted. A change our comparison found is a miss when the provider read
what the changed prompt predicts (closer to it than to what it owed had the prefix not changed), less,
or, reading more than predicted from a cache that traffic not seen here wrote, wrote more than it read
(rules/verdict.toml): the change cost most of the prefix. A change that cost nothing is a note on a hit.

Verdicts: hit, partial, miss_prefix_changed, miss_ttl_expired, miss_server_side, below_minimum,
no_breakpoint, no_prefix_caching, not_reported, cold, error; an agent's log (no prompt to compare) adds
miss_unexplained (`judge_logged`); the proxy's header adds pending (the analysis has not answered yet)
and unknown (no request it could read).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from prefixguard.contracts.providers import verdict_rules
from prefixguard.judge.names import PrefixChange, VerdictName
from prefixguard.judge.policies import Expected
from prefixguard.model.usage import Usage

if TYPE_CHECKING:
    from prefixguard.judge.compare import Comparison
    from prefixguard.model.prompt import Prompt


class Verdict(NamedTuple):
    verdict: VerdictName
    cause: str | None = None  # what surfaces show: a miss_prefix_changed's change (str(change)), else a note
    reused_tokens: int = 0  # read from cache: as the provider reported, else as its contract predicts
    reprefill_tokens: int = 0  # prefilled again because the prefix changed (0 unless miss_prefix_changed)
    cost_usd: float = 0.0  # that re-prefill, paid as written or uncached instead of read
    change: PrefixChange | None = None  # the prefix change found (a miss's cause; a hit's when it cost nothing)

    @property
    def note(self) -> str | None:
        """The free text apart from the change: a note, a reason, an error (None for a miss_prefix_changed)."""
        return None if self.verdict is VerdictName.MISS_PREFIX_CHANGED else self.cause

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict.value,
            "cause": self.cause,
            "reused_tokens": self.reused_tokens,
            "reprefill_tokens": self.reprefill_tokens,
            "cost_usd": self.cost_usd,
        }


def _prefix_changed(cmp: Comparison | None) -> PrefixChange | None:
    """The change when the prompt changed inside what the earlier request had cached, else None."""
    if cmp is not None and cmp.broken and cmp.reprefill_tokens > 0:
        return PrefixChange(causes=tuple(cmp.causes), pointer=cmp.divergence.pointer if cmp.divergence else None)
    return None


def contracted(expected: Expected) -> Usage:
    """The usage a provider reports when it keeps its contract: what `expected` says."""
    return Usage(
        prompt_total=expected.cache_read + expected.cache_write + expected.uncached,
        cache_read=expected.cache_read,
        cache_write_5m=expected.cache_write,
        uncached=expected.uncached,
        reported=True,
    )


def judge(
    expected: Expected | None,
    cmp: Comparison | None,
    usage: Usage | None = None,
    status: int | None = 200,
    error: str | None = None,
    owed: int | None = None,
) -> Verdict:
    """The verdict of one request. expected: what its contract predicts it reads (None when the request
    could not be analysed); cmp: it against its predecessor (None when it continues it, or has none);
    usage: what the provider reported (None: judged as if it reported what the contract predicts).
    owed: what the request would have read had its prefix not changed (in the provider's tokens); by
    default the expected read plus the comparison's re-prefill. When nothing of the earlier request is
    reusable, an expected read comes from another entry (a setting changed back): the larger of the two
    then, not their sum."""
    if usage is None:
        usage = contracted(expected) if expected is not None else Usage()
    if error or status is None or not (200 <= status < 300 or status == 304):  # 304: no body, not an error
        return Verdict(verdict=VerdictName.ERROR, cause=error or f"http {status}")
    if not usage.reported:
        return Verdict(verdict=VerdictName.NOT_REPORTED)
    read = usage.cache_read
    if expected is None:
        return Verdict(verdict=VerdictName.HIT if read else VerdictName.COLD, reused_tokens=read)
    if expected.reason == "no_prefix_caching" and read == 0:  # what that server does, never a miss
        return Verdict(verdict=VerdictName.NO_PREFIX_CACHING)
    if read == 0 and usage.cache_write == 0 and expected.reason == "below_minimum":
        # No part of this prompt reaches the minimum: it reads nothing whatever changed before it.
        return Verdict(verdict=VerdictName.BELOW_MINIMUM)
    rules = verdict_rules()
    tol = rules["read_tolerance"]
    want = expected.cache_read
    as_predicted = abs(read - want) <= tol * max(read, want)
    # a few tokens read where none were predicted (a server matching per token or block, inside the changed part)
    negligible = not want and read < rules["negligible_read"] * max(usage.prompt_total, 1)
    changed = _prefix_changed(cmp)
    cost_nothing = False
    if changed:
        assert cmp is not None
        if owed is None:
            owed = want + cmp.reprefill_tokens if cmp.reused_tokens else max(want, cmp.reprefill_tokens)
        # What the provider read settles it: nearer what it owed than what the changed prompt predicts.
        cost_nothing = read >= (1 - tol) * owed and abs(read - owed) <= abs(read - want)
        lost = max(owed - max(read, want), 0)
        rewritten = read > want and usage.cache_write > rules["rewrite_over_read"] * read
        # A read short of a prediction that the change did not lower (it came from an entry the change
        # left whole) is the provider's partial read, not the change's loss.
        if not cost_nothing and lost and (as_predicted or negligible or read < want or rewritten):
            cost = cmp.cost_usd * lost / cmp.reprefill_tokens
            return Verdict(
                verdict=VerdictName.MISS_PREFIX_CHANGED,
                cause=str(changed),
                reused_tokens=read,
                reprefill_tokens=lost,
                cost_usd=cost,
                change=changed,
            )
    if read == 0 and usage.cache_write == 0 and expected.reason == "no_breakpoint":
        return Verdict(verdict=VerdictName.NO_BREAKPOINT)
    note = f"note: {changed} cost nothing" if cost_nothing else None
    kept = changed if cost_nothing else None
    if as_predicted:
        if read:
            return Verdict(verdict=VerdictName.HIT, cause=note, reused_tokens=read, change=kept)
        return Verdict(
            verdict=VerdictName.MISS_TTL_EXPIRED if expected.reason == "ttl_expired" else VerdictName.COLD,
            cause=note,
            change=kept,
        )
    if read > want:
        if negligible:
            return Verdict(
                verdict=VerdictName.COLD,
                cause=f"read {read} of {usage.prompt_total}: too little to count",
                reused_tokens=read,
            )
        # More than predicted: what the change seemed to break was read after all, or a cache that
        # traffic we did not see wrote (an earlier run, another client): no earlier request is no proof.
        after = f" after {changed}" if changed else ""
        return Verdict(
            verdict=VerdictName.HIT,
            cause=note or f"read {read} where ~{want} was predicted{after}: a cache written by traffic not seen here",
            reused_tokens=read,
            change=kept,
        )
    if read == 0:
        if expected.reason == "ttl_expired":
            return Verdict(
                verdict=VerdictName.MISS_TTL_EXPIRED, cause="prefix unchanged, last used longer ago than its TTL"
            )
        return Verdict(
            verdict=VerdictName.MISS_SERVER_SIDE, cause=f"expected ~{want} cached tokens, provider read none"
        )
    return Verdict(verdict=VerdictName.PARTIAL, cause=f"read {read} of ~{want} expected", reused_tokens=read)


def judge_logged(
    want: int | None,
    usage: Usage,
    *,
    expired: str | None = None,
    change: PrefixChange | None = None,
    price: Callable[[int], float] = lambda tokens: 0.0,
) -> Verdict:
    """The verdict of a turn read from an agent's log, which keeps usage but no prompt to compare: judged
    against what the turn before it left cached (`want`; None for a lineage's first turn), with `judge`'s
    tolerance. A turn that read clearly less missed: expired (the gap, in words) when more time passed than
    the entry's TTL, else `change` when the log says the prompt changed (a compaction, a model switch),
    else miss_unexplained. price(tokens): what re-prefilling that many tokens cost over reading them."""
    read = usage.cache_read
    if not want or read >= want * (1 - verdict_rules()["read_tolerance"]):
        return Verdict(verdict=VerdictName.HIT if read else VerdictName.COLD, reused_tokens=read)
    lost = want - read
    if expired:
        return Verdict(
            verdict=VerdictName.MISS_TTL_EXPIRED,
            cause=expired,
            reused_tokens=read,
            reprefill_tokens=lost,
            cost_usd=price(lost),
        )
    if change is not None:
        return Verdict(
            verdict=VerdictName.MISS_PREFIX_CHANGED,
            cause=str(change),
            reused_tokens=read,
            reprefill_tokens=lost,
            cost_usd=price(lost),
            change=change,
        )
    return Verdict(
        verdict=VerdictName.MISS_UNEXPLAINED,
        cause="the log holds no prompt to compare",
        reused_tokens=read,
        reprefill_tokens=lost,
        cost_usd=price(lost),
    )


def early(expected: Expected, cmp: Comparison | None) -> Verdict:
    """The verdict the request alone supports: `judge` without a usage."""
    return judge(expected, cmp)


def final(
    expected: Expected | None,
    cmp: Comparison | None,
    usage: Usage,
    status: int | None,
    error: str | None = None,
    owed: int | None = None,
) -> Verdict:
    """The verdict with the reported usage: `judge`."""
    return judge(expected, cmp, usage, status, error, owed)


def judge_pair(
    a: Prompt, b: Prompt, elapsed: float | None = None, cmp: Comparison | None = None
) -> tuple[Verdict, Comparison]:
    """The verdict of request B sent after request A (`elapsed` seconds after, where known; else once the
    provider kept what A wrote), A the only request its cache has seen and B's provider keeping its
    contract; and the comparison it rests on. A B that starts a new conversation changes no prefix (the
    session model's rule)."""
    from prefixguard.judge.compare import compare
    from prefixguard.judge.policies import make_policy, policy_name
    from prefixguard.judge.session import new_conversation

    cmp = cmp if cmp is not None else compare(a, b, elapsed)
    policy = make_policy(policy_name(b.api, b.model))
    policy.commit(a, 0.0)
    expected = policy.lookup(b, policy.ready if elapsed is None else elapsed)
    broke = cmp.broken and not new_conversation(a, b, cmp)
    return judge(expected, cmp if broke else None), cmp


def of_row(row: dict[str, Any]) -> Verdict | None:
    """A stored verdict read back from a capture row (the export shape), None when the row has none: the
    numbers as they were judged, not judged again."""
    name = row.get("verdict")
    if not isinstance(name, str) or name not in VerdictName.__members__.values():
        return None
    usage = row.get("usage") or {}
    judged = usage.get("reported") and name not in (VerdictName.ERROR, VerdictName.NOT_REPORTED)
    reused = (usage.get("cache_read") or 0) if judged else 0
    causes = tuple(c for c in row.get("causes") or () if isinstance(c, str))
    change = PrefixChange(causes=causes, pointer=row.get("pointer")) if causes else None
    return Verdict(
        verdict=VerdictName(name),
        cause=row.get("cause"),
        reused_tokens=reused,
        reprefill_tokens=row.get("reprefill_tokens") or 0,
        cost_usd=row.get("cost_usd") or 0.0,
        change=change,
    )
