"""Turns read from an agent's session logs, judged against the provider's caching contract, and stored as
capture rows (the proxy's Record) marked as imported: no request body exists, only the usage the log kept.

A log has no prompt to compare, so a turn is judged against the turn before it in the same lineage (a
session, or one subagent of it): what that turn read and wrote is what this one could read. This module
gathers those facts; the verdict is judge/verdict.py's (`judge_logged`, the proxy's tolerance and names).
A turn that read clearly less (rules/verdict.toml's tolerance) missed, and the log says why when it can:
- more time passed than the entry's TTL (rules/providers.toml: the TTL it was written with) -> TTL expired;
- the agent compacted the conversation in between -> history_compacted;
- the model changed (each model has its own cache) -> model_changed;
- otherwise the log cannot tell (a changed system prompt or tool list, or the provider): miss_unexplained.

Where the log also kept the API's own cache diagnosis of a call (Claude Code records Anthropic's
`diagnostics.cache_miss_reason`), it is stored beside this verdict with the agreement of the two, as the
proxy stores the diagnoses it asked for: the report's agreement table reads both alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from prefixguard.capture.record import Record
from prefixguard.contracts.providers import model_contract, provider_for, providers
from prefixguard.judge.agreement import UNPLACED, agreement_at
from prefixguard.judge.causes import Cause
from prefixguard.judge.verdict import PrefixChange, VerdictName, judge_logged
from prefixguard.model.diagnosis import NO_MISS, Diagnosis
from prefixguard.model.usage import Usage


@dataclass(slots=True)
class Turn:
    """One model call as an agent's log recorded it."""

    tool: str  # "claude-code" | "codex"
    lineage: str  # session id, plus the subagent's id for a sidechain
    ts: float  # unix seconds
    api: str  # the API shape the agent called ("anthropic", "openai-responses")
    model: str | None
    usage: Usage
    ref: str  # file:line it came from
    sidechain: bool = False
    compacted_before: bool = False  # the agent compacted the conversation since the lineage's previous turn
    notes: list[str] = field(default_factory=list)
    diagnosis: Diagnosis | None = None  # the API's own account of this call's cache misses, when logged


def _ttl_seconds(provider: str, usage: Usage) -> tuple[str, float]:
    """(name, seconds) of the TTL what a turn wrote or read lives for, from the contract."""
    table = providers()[provider]
    if table.ttl_seconds and table.default_ttl:
        name = "1h" if usage.cache_write_1h and not usage.cache_write_5m else table.default_ttl
        return name, float(table.ttl_seconds[name])
    retention = table.retention_seconds
    kept = table.default_retention
    return (kept, float(retention[kept])) if kept is not None and kept in retention else ("none", float("inf"))


def _cached_after(provider: str, usage: Usage) -> int:
    """What a turn left in the cache for the next one: what it read and wrote (explicit caching), or its
    whole prompt in the contract's steps (automatic caching, which reports no writes)."""
    table = providers()[provider]
    if table.usage_convention == "additive":
        return usage.cache_read + usage.cache_write
    step = table.token_step or 1
    minimum = table.min_cacheable_tokens
    total = usage.prompt_total
    return total // step * step if total >= minimum else 0


def _gap(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


def judge(turns: Iterable[Turn]) -> list[Record]:
    """Capture rows, oldest first, each judged against the previous turn of its lineage."""
    last: dict[str, tuple[Turn, str]] = {}
    records = []
    for turn in sorted(turns, key=lambda t: t.ts):
        provider = provider_for(turn.api, turn.model)
        u = turn.usage
        rid = f"{turn.tool}:{Path(turn.ref).name}"  # file:line: a re-import replaces its rows
        rec = Record(
            id=rid,
            ts=turn.ts,
            path=turn.ref,
            method="LOG",
            upstream=f"import:{turn.tool}",
            api=turn.api,
            model=turn.model,
            tenant=turn.lineage,
            request=None,
            status=200,
            usage=u,
        )
        notes = list(turn.notes)
        earlier = last.get(turn.lineage)
        if earlier is None:
            rec.judged(judge_logged(None, u))
            if turn.compacted_before:
                notes.append("compacted before")
        else:
            prev, prev_id = earlier
            rec.previous_id = prev_id
            expected = _cached_after(provider, prev.usage)
            rec.expected_cached = expected
            elapsed = turn.ts - prev.ts
            ttl_name, ttl = _ttl_seconds(provider, prev.usage)
            switched = prev.model != turn.model
            if switched:
                notes.append(f"model {prev.model} -> {turn.model}")
            if turn.compacted_before:
                notes.append("compacted")
            logged = Cause.HISTORY_COMPACTED if turn.compacted_before else Cause.MODEL_CHANGED if switched else None
            gap = f"gap of {_gap(elapsed)} over the {ttl_name} TTL" if elapsed > ttl else None
            v = judge_logged(
                expected,
                u,
                expired=gap,
                change=PrefixChange(causes=(logged,)) if logged else None,
                price=partial(_lost_cost, turn),
            )
            rec.judged(v)
            if v.verdict not in (VerdictName.HIT, VerdictName.COLD):
                rec.reprefill_tokens, rec.cost_usd = v.reprefill_tokens, v.cost_usd
        if turn.diagnosis is not None:
            agreed = agreement_at(turn.diagnosis, our_level(rec))
            rec.diagnosis, rec.agreement = turn.diagnosis, agreed
            said = "no miss" if turn.diagnosis.status == NO_MISS else turn.diagnosis.said()
            notes.append(f"the API says: {said}" + (f" -- {agreed.replace('_', ' ')}" if agreed else ""))
        rec.detail = "; ".join([f"imported from {turn.tool} log (no request body)"] + notes)
        last[turn.lineage] = (turn, rid)
        records.append(rec)
    return records


# Where a log-judged miss broke the prefix, in the diagnoses' levels: a compaction rewrites the messages.
_LEVEL_OF_CAUSE: dict[str, str] = {Cause.MODEL_CHANGED: "model", Cause.HISTORY_COMPACTED: "messages"}


def our_level(rec: Record) -> str | None:
    """Where our verdict says the prefix broke: a level, UNPLACED for a miss the log cannot place, None
    when it found no change in the prompt (a hit, or a TTL expiry: the entry aged out, the prefix held)."""
    if rec.verdict is VerdictName.MISS_PREFIX_CHANGED:
        return next((_LEVEL_OF_CAUSE[c] for c in rec.causes if c in _LEVEL_OF_CAUSE), UNPLACED)
    return UNPLACED if rec.verdict is VerdictName.MISS_UNEXPLAINED else None


def _lost_cost(turn: Turn, tokens: int) -> float:
    """What re-prefilling `tokens` cost over reading them: written (explicit caching) or uncached."""
    return model_contract(turn.api, turn.model).reprefill_cost(tokens, turn.usage.written_as)
