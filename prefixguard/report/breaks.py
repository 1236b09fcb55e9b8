"""Step 3 of the diagnosis, prefix consistency: the breaks by cause, an example of each, the tokens and
money they cost."""

from __future__ import annotations

import json
from typing import Any

from prefixguard.judge.session import Sessions
from prefixguard.judge.verdict import VerdictName, judge_pair, of_row
from prefixguard.model.prompt import Prompt
from prefixguard.report.findings import Cause
from prefixguard.report.human import usd
from prefixguard.utils.errors import InputError
from prefixguard.wire import parse_request

KEEP_PER_TENANT = 1000  # earlier prompts kept per tenant to compare with


def _prompt(row: dict[str, Any]) -> Prompt | None:
    body = row.get("request")
    if not isinstance(body, dict):
        return None
    try:
        return parse_request(json.dumps(body, ensure_ascii=False), path=row.get("path"), source=str(row.get("id")))
    except InputError:
        return None


def by_cause(rows: list[dict[str, Any]], parents: dict[int, dict[str, Any]] | None = None) -> list[Cause]:
    """The breaks by cause, counted as each row was judged (its stored verdict, re-prefilled tokens and
    cost); a row nobody judged (a recorded session: no verdict, no usage; a provider that reported no
    cache field) is judged here by the same
    rule (prefixguard.judge.verdict.judge_pair) against the best earlier request of its tenant (the core's
    session model), and so is what a miss was stored without (its cause, its tokens). Each cause's
    example is its first break with a body, as compared here. parents, where given, gets id(row) -> the
    earlier row each row with a body continued."""
    sessions = Sessions(keep=KEEP_PER_TENANT)
    causes: dict[str, Cause] = {}
    for row in rows:
        prompt = _prompt(row)
        match = None
        if prompt is not None:
            ts = row.get("ts")
            match = sessions.observe(prompt, row, row.get("tenant") or "", ts if isinstance(ts, (int, float)) else None)
            if parents is not None and match.earlier is not None:
                parents[id(row)] = match.earlier
        judged = of_row(row)
        if judged is not None and judged.verdict == VerdictName.NOT_REPORTED:
            judged = None  # no usage to judge by: the verdict its contract predicts, as `diff` gives it
        whole = judged is not None and (
            judged.verdict != VerdictName.MISS_PREFIX_CHANGED
            or (row.get("causes") and row.get("reprefill_tokens") is not None)
        )
        if not whole and match is not None and match.prompt is not None and prompt is not None:
            # no verdict, or a miss stored without its cause or tokens: what is missing is judged here
            then, now = match.earlier.get("ts"), row.get("ts")
            elapsed = now - then if isinstance(now, (int, float)) and isinstance(then, (int, float)) else None
            here = judge_pair(match.prompt, prompt, elapsed, match.comparison)[0]
            judged = (
                here
                if judged is None
                else judged._replace(
                    cause=row.get("cause") or here.cause,
                    change=judged.change or here.change,
                    reprefill_tokens=row.get("reprefill_tokens") or here.reprefill_tokens,
                    cost_usd=row.get("cost_usd") or here.cost_usd,
                )
            )
        if judged is None or judged.verdict != VerdictName.MISS_PREFIX_CHANGED:
            continue
        name = next(iter(judged.change.causes), None) if judged.change is not None else None
        if not name:
            continue
        cause = causes.setdefault(name, Cause(name=name))
        cause.requests += 1
        cause.reprefill_tokens += judged.reprefill_tokens
        cause.cost_usd += judged.cost_usd
        cmp = match.comparison if match is not None and match.broken else None
        if cause.example is None and match is not None and cmp is not None and name in cmp.causes:
            d = cmp.divergence
            cause.example = {
                "request": str(row.get("id")),
                "earlier": str(match.earlier.get("id")),
                "pointer": d.pointer if d else None,
                "byte_offset": d.byte_offset if d else None,
                "before": cmp.before,
                "after": cmp.after,
                "detail": cmp.detail,
                "fix": cmp.fix,
                "causes": cmp.causes,
            }
    return sorted(causes.values(), key=lambda c: (-c.reprefill_tokens, -c.requests, c.name))


def causes_finding(causes: list[Cause]) -> str:
    if not causes:
        return "No prefix breaks: every request reused its predecessor's prefix whole."
    top = causes[0]
    return (
        f"{sum(c.requests for c in causes)} requests broke the cached prefix; the top cause, {top.name}, "
        f"re-prefilled {top.reprefill_tokens:,} tokens ({usd(top.cost_usd)}) in {top.requests} requests."
    )
