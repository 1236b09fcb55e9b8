"""Checks on volatile content: values that vary between requests inside the cached prefix, under a
breakpoint, or inside the tokens that route a request to a cache; and ids in the cached system prompt.

A finding needs evidence. A value that merely looks volatile (a date, a UUID) is reported only when the
request itself says it varies (a clock value or a per-request id in the system prompt, which apps render
for every request: rules/volatile.toml `varies`) or, in sequence mode, when it changed since the earlier
request of the same session (`Context.earlier`). A block byte-identical to the earlier request's is never
called volatile, and constants inside tool definitions never are.
"""

from __future__ import annotations

from collections.abc import Iterator

from prefixguard.lint.checks.base import check, quote
from prefixguard.lint.context import Context, Volatile
from prefixguard.lint.finding import Hit

EVIDENCE = {
    "clock": "a clock value: a request rendered later renders another one",
    "request": "an id made per request",
    "user": "a pattern configured as volatile",
}


def _volatile_hit(rule: str, v: Volatile, message: str, ctx: Context) -> Hit:
    why = (
        f"changed since line {ctx.earlier_line}"
        if v.changed and ctx.earlier_line is not None
        else "changed since the earlier request"
        if v.changed
        else EVIDENCE.get(v.varies, "volatile")
    )
    return Hit(
        rule=rule,
        pointer=v.pointer,
        message=f"{message}: {v.name} {quote(v.text)} ({why})",
        key=v.name,
        inner=(v.start, v.end),
    )


@check("volatile-in-prefix")
def volatile_in_prefix(ctx: Context) -> Iterator[Hit]:
    for i in range(ctx.prefix_end):
        for v in ctx.varying(i):
            yield _volatile_hit("volatile-in-prefix", v, "volatile content in the cached prefix", ctx)


@check("breakpoint-on-volatile")
def breakpoint_on_volatile(ctx: Context) -> Iterator[Hit]:
    for bp in ctx.breakpoints:
        found = ctx.varying(bp.segment)
        if found:
            where = "automatic cache breakpoint lands" if bp.auto else "cache breakpoint"
            yield _volatile_hit("breakpoint-on-volatile", found[0], f"{where} on a block with volatile content", ctx)


@check("volatile-routing-prefix")
def volatile_routing_prefix(ctx: Context) -> Iterator[Hit]:
    if ctx.total < ctx.contract.min_cacheable_tokens:
        return  # nothing is cached either way
    limit = ctx.limits.routing_prefix_tokens
    if limit is None:
        return  # the contract routes by no prefix
    for i, seg in enumerate(ctx.segments):
        if ctx.before[i] >= limit:
            break
        for v in ctx.varying(i):
            at = ctx.before[i] + round(seg.tokens * v.at)
            if at < limit:
                yield _volatile_hit(
                    "volatile-routing-prefix",
                    v,
                    f"volatile content at token {at:,}, inside the first {limit} tokens "
                    "that route the request to a cache",
                    ctx,
                )
    if not ctx.prompt.settings.get("prompt_cache_key"):
        yield Hit(
            rule="volatile-routing-prefix",
            pointer="",
            message=f"no prompt_cache_key on a prompt of {ctx.tokens(ctx.total)}: requests sharing this "
            "prefix may be routed to different machines",
            key="no-cache-key",
            variant="no-cache-key",
        )


@check("id-in-cached-prefix")
def id_in_cached_prefix(ctx: Context) -> Iterator[Hit]:
    for i in range(ctx.prefix_end):
        for v in ctx.ids(i):
            yield Hit(
                rule="id-in-cached-prefix",
                pointer=v.pointer,
                message=f"an id in the cached system prompt: {v.name} {quote(v.text)} (if it is made per "
                "session, user or request, each one writes a prefix no other reads)",
                key=v.name,
                inner=(v.start, v.end),
            )
