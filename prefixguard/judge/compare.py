"""Compare an earlier request A with a later request B: does B reuse A's cached prefix, and if not,
where does it first diverge, why, what must be prefilled again and what that costs.

Content is compared by the fingerprint chain (segment keys leave breakpoint markers out); breakpoints,
the model and the cache-keying settings are compared on their own, each against the provider contract
in rules/providers.toml (which level a setting change invalidates).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from itertools import accumulate, islice
from typing import Any, NamedTuple

from prefixguard.contracts.providers import Contract, invalidated_levels, model_contract, provider_for, providers
from prefixguard.judge.causes import FIXES, Cause
from prefixguard.judge.classify import FALLBACK, another_conversation, classify, too_deep
from prefixguard.judge.jsondiff import common_start, excerpts, short
from prefixguard.judge.policies import make_policy, policy_name
from prefixguard.model.breakpoints import breakpoints
from prefixguard.model.fingerprint import chain as make_chain
from prefixguard.model.fingerprint import common_prefix
from prefixguard.model.prompt import LEVELS, TEXT_PIECES, Prompt


class Divergence(NamedTuple):
    level: str  # "tools" | "system" | "messages"
    pointer: str  # JSON pointer in B of the first diverging segment
    byte_offset: int  # first differing byte in B's body
    token_offset: int  # B's tokens before the divergence (= reused tokens)
    segment_index: int  # index of that segment in B's segments


class Comparison(NamedTuple):
    broken: bool
    causes: list[str]
    divergence: Divergence | None
    reused_tokens: int
    reprefill_tokens: int
    cost_usd: float  # extra cost of the re-prefill at B's model prices (written or uncached vs read)
    before: str = ""  # excerpt of A at the divergence
    after: str = ""  # excerpt of B at the divergence
    detail: str = ""  # what changed inside the diverging segment
    fix: str = ""
    setting: str | None = None  # which setting changed, for setting_changed
    api: str = ""
    model: str | None = None
    tokens_estimated: bool = False
    extra: Sequence[str] = ()  # later, secondary findings (one line each)

    def to_dict(self) -> dict[str, Any]:
        return self._asdict() | {"divergence": self.divergence._asdict() if self.divergence else None}


class _Finding(NamedTuple):
    segment: int  # index of the segment of B where it invalidates
    cause: str
    detail: str = ""
    before: str = ""
    after: str = ""
    setting: str | None = None
    offset: int = 0  # character offset of the first difference inside B's segment
    subject: str = ""  # what the fix talks about ("the iso-timestamp '...'", a setting's name)
    byte_extra: int = 0  # bytes the first differing characters share (UTF-8 sequences with a common lead)


def compare(a: Prompt, b: Prompt, elapsed: float | None = None) -> Comparison:
    """How B (the later request) reuses A's prefix: the first divergence, its causes, tokens and cost.

    Tokens follow B's provider contract, A alone having written the cache (`elapsed` seconds before B,
    where known, so the TTL applies): reused_tokens is what B can read of what A wrote (breakpoints,
    lookback, minimum, token steps); reprefill_tokens is what A had cached past that point, as B renders
    it, which B must write again."""
    a_chain = a.chain or make_chain(a.segments)
    b_chain = b.chain or make_chain(b.segments)
    shared = common_prefix(a_chain, b_chain)
    findings = _setting_findings(a, b)
    bp = _breakpoint_finding(a, b, shared)
    if bp is not None:
        findings.append(bp)
    # another API: nothing to align; a text read in pieces that B goes on with: A's text stands whole in B's
    if shared < min(len(a.segments), len(b.segments)) and a.api == b.api and not _goes_on(a, b, shared):
        findings.append(_content_finding(a, b, shared))
    findings.sort(key=lambda f: f.segment)
    # A finding at or past A's end leaves all of A's prefix in place: B still reuses it whole.
    breaking = [f for f in findings if f.segment < len(a.segments)]
    reused, cached = contract_reads(a, b, elapsed)
    if not breaking:
        return Comparison(
            broken=False,
            causes=["append_only"],
            divergence=None,
            reused_tokens=reused,
            reprefill_tokens=0,
            cost_usd=0.0,
            detail=_append_detail(a, b),
            fix=FIXES["append_only"],
            api=b.api,
            model=b.model,
            tokens_estimated=a.estimated or b.estimated,
            extra=[f"{f.cause}: {f.detail}" for f in findings],
        )
    first = breaking[0]
    at = [f for f in breaking if f.segment == first.segment]
    causes = list(dict.fromkeys(f.cause for f in at))
    d = first.segment
    reprefill = _rewritten(a, b, d, reused, cached, causes)
    seg = b.segments[d] if d < len(b.segments) else None
    char = (seg.start + first.offset) if seg else len(b.text)
    level = _level_at(a, b, d)
    before_divergence = sum(s.tokens for s in islice(b.segments, d))
    if seg is not None:  # and the part of the diverging segment before its first differing character
        before_divergence += seg.tokens * first.offset // max(1, seg.end - seg.start)
    divergence = Divergence(
        level=level,
        pointer=_pointer_at(b, a, d, level),
        byte_offset=b.byte_offset(char) + first.byte_extra,
        token_offset=before_divergence,
        segment_index=d,
    )
    setting = next((f.setting for f in at if f.setting), None)
    return Comparison(
        broken=True,
        causes=causes,
        divergence=divergence,
        reused_tokens=reused,
        reprefill_tokens=reprefill,
        cost_usd=_extra_cost(b, d, reprefill),
        before=first.before,
        after=first.after,
        detail="; ".join(dict.fromkeys(f.detail for f in at if f.detail)),
        fix=" ".join(_fix(f, level) for f in at[:2]),
        setting=setting,
        api=b.api,
        model=b.model,
        tokens_estimated=a.estimated or b.estimated,
        extra=[
            f"{f.cause} at {_pointer_of(b, f.segment)}: {f.detail}"
            for f in breaking
            if f.segment > d and f.cause not in causes
        ],
    )


# ---- what the contract lets B reuse


def contract_reads(a: Prompt, b: Prompt, elapsed: float | None = None) -> tuple[int, int]:
    """(tokens B can read of what A wrote, tokens of A's still cached) under B's provider contract, with A
    the only request the cache has seen and B sent `elapsed` seconds after it (None: once the provider
    kept what A wrote). What A wrote and the TTL has since dropped is no loss of B's: a change after it
    costs nothing. The policy module is the one place that knows the contracts."""
    policy = make_policy(policy_name(b.api, b.model))
    policy.commit(a, 0.0)
    now = policy.ready if elapsed is None else max(elapsed, policy.ready)
    cached = policy.lookup(a, now).cache_read
    return (policy.lookup(b, now).cache_read if cached else 0), cached


def _rewritten(a: Prompt, b: Prompt, d: int, reused: int, cached: int, causes: Sequence[str]) -> int:
    """B's tokens past what it reuses, up to where A's cached prefix ends as B renders it: found by the
    block A's cache ended on, where B still has it after the divergence; else A's own count, as far as B
    goes (B cannot prefill again more than it holds), and none of B's messages where they are another
    conversation (a request without A's tools asking something else), not A's history shortened or
    summarized (`causes`)."""
    if cached <= reused:
        return 0
    ends = list(accumulate(s.tokens for s in a.segments))
    w = min(bisect_left(ends, cached), len(a.segments) - 1)
    key = a.segments[w].key
    j = next((j for j in range(len(b.segments) - 1, d - 1, -1) if b.segments[j].key == key), None)
    if j is None:
        history = {Cause.HISTORY_TRUNCATED, Cause.HISTORY_COMPACTED} & set(causes)
        fresh = not history and another_conversation(a, b)  # new content, never cached
        held = [s for s in b.segments if s.level != "messages"] if fresh else b.segments
        return max(0, min(cached, sum(s.tokens for s in held)) - reused)
    return max(0, sum(s.tokens for s in b.segments[: j + 1]) - reused)


# ---- model and settings


def _contract_table(p: Prompt) -> Contract:
    return providers()[provider_for(p.api, p.model)]


def _setting_findings(a: Prompt, b: Prompt) -> list[_Finding]:
    invalidates = invalidated_levels(provider_for(b.api, b.model), b.model)
    out = []
    if a.api != b.api or a.model != b.model:
        apis = f" ({a.api} -> {b.api})" if a.api != b.api else ""
        out.append(
            _Finding(
                segment=_first_at_level(b, invalidates.get("model", LEVELS[0])),
                cause="model_changed",
                detail=f"model {a.model} -> {b.model}{apis}",
                before=f"model: {a.model}",
                after=f"model: {b.model}",
            )
        )
    if a.api != b.api:  # settings of two API shapes do not compare
        return out
    for key in dict.fromkeys([*a.settings, *b.settings]):
        old, new = a.settings.get(key), b.settings.get(key)
        level = invalidates.get(key)
        if old == new or level is None:  # a setting the contract does not key the cache on
            continue
        cause = "images_changed" if key == "images" else "setting_changed"
        detail = (
            f"images {'added to' if new else 'removed from'} the request"
            if key == "images"
            else f"{key}: {short(old)} -> {short(new)}"
        )
        out.append(
            _Finding(
                segment=_first_at_level(b, level),
                cause=cause,
                detail=f"{detail} (invalidates the {level} level)",
                before=f"{key}: {short(old)}",
                after=f"{key}: {short(new)}",
                setting=None if key == "images" else key,
            )
        )
    return out


def _first_at_level(p: Prompt, level: str) -> int:
    rank = LEVELS.index(level)
    return next((i for i, s in enumerate(p.segments) if LEVELS.index(s.level) >= rank), len(p.segments))


# ---- breakpoints


def _breakpoints(p: Prompt) -> dict[int, str]:
    """Block index -> TTL of each breakpoint, the automatic one on the last block that can hold one."""
    return breakpoints(p, _contract_table(p).breakpoint_ineligible_kinds)


def _breakpoint_finding(a: Prompt, b: Prompt, shared: int) -> _Finding | None:
    """B loses part of A's cache when it cannot read the longest entry A wrote inside the shared content.

    A writes an entry at each of its breakpoints. B reads an entry through a later breakpoint (looking
    back), or through one on the same block with the same TTL. Moving the newest breakpoint forward
    each turn is the normal pattern and breaks nothing.
    """
    writes, reads = _breakpoints(a), _breakpoints(b)
    ours = sorted(q for q in writes if q < shared)
    if not ours:
        return None

    def readable(q: int) -> bool:
        return any(p > q for p in reads) or reads.get(q) == writes[q]

    best = max((q for q in ours if readable(q)), default=-1)
    if best == ours[-1]:
        return None
    first = next(i for i in range(best + 1, ours[-1] + 1) if writes.get(i) != reads.get(i))
    old, new = writes.get(first), reads.get(first)
    what = "TTL changed" if old and new else "breakpoint removed" if old else "breakpoint added"
    detail = f"{what} at {b.segments[first].pointer} ({_ttl_text(old)} -> {_ttl_text(new)}): B cannot read "
    last = a.segments[ours[-1]].pointer
    detail += "the entry A wrote there" if first == ours[-1] else f"the entry A wrote at {last}"
    return _Finding(
        segment=best + 1,
        cause="breakpoint_changed",
        detail=detail,
        before=f"cache_control: {_ttl_text(old)}",
        after=f"cache_control: {_ttl_text(new)}",
    )


def _ttl_text(ttl: str | None) -> str:
    return f"ttl {ttl}" if ttl else "none"


# ---- content


def _goes_on(a: Prompt, b: Prompt, i: int) -> bool:
    """Whether B's part i goes on from A's last part, both pieces of one text prompt: B's piece holds all of A's
    and more, as a longer prompt's piece there does (it ends where its next piece starts)."""
    if i != len(a.segments) - 1:
        return False
    mine, theirs = a.segments[i], b.segments[i]
    return (
        mine.pointer == theirs.pointer == TEXT_PIECES
        and isinstance(mine.value, str)
        and isinstance(theirs.value, str)
        and theirs.value.startswith(mine.value)
    )


def _content_finding(a: Prompt, b: Prompt, i: int) -> _Finding:
    sa, sb = a.segments[i], b.segments[i]
    ta, tb = a.text[sa.start : sa.end], b.text[sb.start : sb.end]
    p = common_start(ta, tb)
    before, after = excerpts(ta, tb, p)
    level = min(sa.level, sb.level, key=LEVELS.index)
    try:
        if too_deep(sa.value) or too_deep(sb.value):  # checked first: a RecursionError deep in the walk
            raise RecursionError  # can also fire in finalizers and print noise
        cause, detail = classify(a, b, sa, sb, ta, tb, p, level, at=i)
    except RecursionError:  # a part nested too deeply to walk: still a break, at this level
        cause, detail = FALLBACK[level], "nested too deeply to explain"
    subject = f"the {detail.split(' ', 1)[0]} ({detail.split(' -> ')[-1]})" if cause == "volatile_content" else ""
    shared_bytes = (
        common_start(ta[p].encode("utf-8", "surrogatepass"), tb[p].encode("utf-8", "surrogatepass"))
        if p < min(len(ta), len(tb))
        else 0
    )
    return _Finding(
        segment=i,
        cause=cause,
        detail=detail,
        before=before,
        after=after,
        offset=p,
        subject=subject,
        byte_extra=shared_bytes,
    )


# ---- values


# ---- offsets, excerpts, cost


def _level_at(a: Prompt, b: Prompt, d: int) -> str:
    segs = [p.segments[d].level for p in (a, b) if d < len(p.segments)]
    return min(segs, key=LEVELS.index) if segs else LEVELS[-1]


def _pointer_at(b: Prompt, a: Prompt, d: int, level: str) -> str:
    seg = b.segments[d] if d < len(b.segments) else None
    if seg is not None and seg.level == level:
        return seg.pointer
    # B's part here belongs to a later level (a tool or system block removed at the end): point at the list
    other = a.segments[d].pointer if d < len(a.segments) else ""
    return other.rsplit("/", 1)[0] or other


def _pointer_of(p: Prompt, i: int) -> str:
    return p.segments[i].pointer if i < len(p.segments) else "(end)"


def _extra_cost(b: Prompt, d: int, tokens: int) -> float:
    """What re-prefilling costs over reading from cache: written where a breakpoint (or automatic caching)
    writes it, else uncached; at B's model prices."""
    contract = model_contract(b.api, b.model)
    marks = _breakpoints(b)
    ttl = next((marks[i] for i in sorted(marks) if i >= d), None)
    if ttl is None and "default" in contract.write_multiplier:  # automatic caching writes every prefix
        ttl = "default"
    return contract.reprefill_cost(tokens, ttl)


def _fix(f: _Finding, level: str) -> str:
    return FIXES[f.cause].format(what=f.subject or f.setting or "it", level=level)


def _append_detail(a: Prompt, b: Prompt) -> str:
    if len(b.segments) < len(a.segments):
        return f"B is a prefix of A ({len(b.segments)} of A's {len(a.segments)} parts): nothing new to prefill"
    added = len(b.segments) - len(a.segments)
    return f"B extends A by {added} part{'s' * (added != 1)}" if added else "B is the same prompt as A"
