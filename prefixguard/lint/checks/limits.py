"""Checks against the provider's limits (rules/providers.toml): how many breakpoints a request may
carry, the minimum a cached prefix must reach, and how many blocks a breakpoint looks back for an entry
written earlier."""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import accumulate
from typing import Any

from prefixguard.lint import catalog
from prefixguard.lint.checks.base import check, model_unknown
from prefixguard.lint.context import Context
from prefixguard.lint.finding import Hit
from prefixguard.model.breakpoints import breakpoints as policy_breakpoints

VERSIONED = re.compile(r"_\d{8}$")


@check("too-many-breakpoints")
def too_many_breakpoints(ctx: Context) -> Iterator[Hit]:
    limit = ctx.limits.max_breakpoints
    count = len(ctx.explicit) + (ctx.auto is not None)
    if limit is None or count <= limit:
        return
    over = limit - (ctx.auto is not None)  # the first explicit breakpoint with no slot left
    pointer = ctx.explicit[over].pointer if over < len(ctx.explicit) else "/cache_control"
    auto = " including the automatic one" if ctx.auto else ""
    yield Hit(
        rule="too-many-breakpoints",
        pointer=pointer,
        message=f"{count} cache breakpoints{auto}; at most {limit} are allowed",
    )


def _clearly_below(tokens: int, minimum: int, tools: int = 0, front: int = 0) -> bool:
    """Our tokenizer is not the provider's (which counts more, and adds its template): a count within the
    catalog's margin under a minimum is no evidence of being under it. `tools`: of the count, tool
    definitions, whose margin is wider; `front`: of those, the tool-use prompt the provider puts before
    them (a figure of its rules, not a count: the text's margin)."""
    margins = (tokens - tools + front) * catalog.count_margin() + (tools - front) * catalog.count_margin(tools=True)
    return tokens + margins < minimum


def _versioned_tool(value: Any) -> bool:
    """A provider-defined tool (its type carries a version date: web_search_20250305, bash_20250124,
    tool_search_tool_bm25_20251119): the provider renders a prompt of its own for it."""
    kind = value.get("type") if isinstance(value, dict) else None
    return isinstance(kind, str) and VERSIONED.search(kind) is not None


@check("below-minimum")
def below_minimum(ctx: Context) -> Iterator[Hit]:
    minimum = ctx.contract.min_cacheable_tokens
    model = ctx.prompt.model or "this model"
    if model_unknown(ctx):
        return
    tools = list(accumulate((s.tokens if s.level == "tools" else 0 for s in ctx.segments), initial=0))
    if not ctx.breakpointed:
        if _clearly_below(ctx.total, minimum, tools[-1], ctx.prompt.front):
            yield Hit(
                rule="below-minimum",
                pointer="",
                message=f"prompt of {ctx.tokens(ctx.total)} is below the {minimum}-token "
                f"minimum of {model}: nothing is cached",
                variant=ctx.provider,
                key=ctx.provider,
            )
        return
    if any(_versioned_tool(seg.value) for seg in ctx.segments if seg.level == "tools"):
        return  # the provider adds that tool's own prompt and expansions, which we cannot count
    # A breakpoint under the minimum costs money only when no breakpoint of the request reaches it (then
    # nothing is cached at all); under a later one that does, it is a slot spent for nothing (info).
    covered = any(
        not _clearly_below(ctx.before[bp.segment + 1], minimum, tools[bp.segment + 1], ctx.prompt.front)
        for bp in ctx.breakpoints
    )
    for bp in ctx.breakpoints:
        upto = ctx.before[bp.segment + 1]
        if _clearly_below(upto, minimum, tools[bp.segment + 1], ctx.prompt.front):
            tail = "this breakpoint caches nothing (a later one does)" if covered else "nothing is cached"
            yield Hit(
                rule="below-minimum",
                pointer=bp.pointer,
                message=f"prefix up to this breakpoint is {ctx.tokens(upto)}, below the {minimum}-token "
                f"minimum of {model}: {tail}",
                variant="covered" if covered else None,
            )


@check("lookback-exceeded")
def lookback_exceeded(ctx: Context) -> Iterator[Hit]:
    """A breakpoint looks back `lookback` blocks, itself included, for an entry written earlier. The
    furthest entry the previous request wrote (its real breakpoints in sequence mode; otherwise inferred:
    this request's breakpoints before the new turn, and the previous request's last block when a
    breakpoint moves with the conversation) must be within reach of some breakpoint of this request."""
    lookback = ctx.limits.lookback_blocks
    if lookback is None or not ctx.breakpoints:
        return
    written = _written_before(ctx)
    if not written:
        return
    last = max(written)
    if any(last <= b.segment < last + lookback for b in ctx.breakpoints):
        return
    bp = next((b for b in ctx.breakpoints if b.segment > last), None)
    if bp is None:
        return
    by = f"the request on line {ctx.earlier_line}" if ctx.earlier_line is not None else "the previous request"
    yield Hit(
        rule="lookback-exceeded",
        pointer=bp.pointer,
        message=f"{by} wrote its cache entry at {ctx.segments[last].pointer}, {bp.segment - last} blocks "
        f"before this breakpoint; a breakpoint looks back over {lookback} blocks, itself included, "
        "so that entry is not read and the prefix is written again",
    )


def _written_before(ctx: Context) -> list[int]:
    """Indices of this request's blocks where the previous request of the conversation wrote an entry."""
    if ctx.earlier is not None and not ctx.new_conversation:
        shared = [
            i
            for i in policy_breakpoints(ctx.earlier, ctx.ineligible)
            if i < len(ctx.prompt.chain) and i < len(ctx.earlier.chain) and ctx.earlier.chain[i] == ctx.prompt.chain[i]
        ]
        return shared
    end = ctx.previous_end
    if end is None:
        return []
    moving = any(b.segment > end for b in ctx.breakpoints)
    return [b.segment for b in ctx.breakpoints if b.segment <= end] + ([end] if moving else [])
