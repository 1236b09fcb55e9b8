"""Checks on the cache breakpoints themselves: markers the API rejects (on an ineligible, empty or
nested block, an unknown TTL, an automatic marker with no slot or another TTL), TTLs out of order, and
a prompt large enough to cache with no breakpoint at all."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prefixguard.lint import catalog
from prefixguard.lint.checks.base import check, model_unknown, quote
from prefixguard.lint.context import Breakpoint, Context, block_text
from prefixguard.lint.finding import Hit
from prefixguard.model.prompt import MARKER_KEYS
from prefixguard.wire.jsonspan import join_pointer


def _sub_markers(value: Any, pointer: str, top: bool = True) -> Iterator[str]:
    """Pointers of objects below the block itself that carry a cache marker."""
    if isinstance(value, dict):
        if not top and any(isinstance(value.get(k), dict) for k in MARKER_KEYS):
            yield pointer
        for k, v in value.items():
            if k not in MARKER_KEYS:
                yield from _sub_markers(v, join_pointer(pointer, k), False)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _sub_markers(v, f"{pointer}/{i}", False)


@check("invalid-breakpoint")
def invalid_breakpoint(ctx: Context) -> Iterator[Hit]:
    ttls = ctx.limits.ttl_seconds
    for bp in ctx.explicit:
        seg = ctx.segments[bp.segment]
        if seg.kind in ctx.ineligible:
            yield Hit(
                rule="invalid-breakpoint",
                pointer=bp.pointer,
                message=f"cache breakpoint on a {seg.kind.replace('_', ' ')} block",
                key=seg.kind,
            )
        elif block_text(seg) == "":
            yield Hit(
                rule="invalid-breakpoint",
                pointer=bp.pointer,
                message="cache breakpoint on an empty text block",
                key="empty-text",
            )
        if bp.ttl not in ttls:
            yield Hit(
                rule="invalid-breakpoint",
                pointer=bp.pointer,
                message=f"cache breakpoint TTL {quote(bp.ttl)} is not one of {', '.join(ttls)}",
                key="ttl",
            )
    for seg in ctx.segments:
        if not isinstance(seg.value, (dict, list)):  # a string holds no marker: its pointer is not made
            continue
        for pointer in _sub_markers(seg.value, seg.pointer):
            yield Hit(
                rule="invalid-breakpoint",
                pointer=pointer,
                message="cache breakpoint on a sub-block (put it on the block itself)",
                key="sub-block",
            )
    auto, limit = ctx.auto, ctx.limits.max_breakpoints
    if auto is None:
        return
    if limit is not None and len(ctx.explicit) >= limit:
        yield Hit(
            rule="invalid-breakpoint",
            pointer=auto.pointer,
            message=f"automatic cache_control with {len(ctx.explicit)} explicit breakpoints: it needs one of the "
            f"{limit} slots (the API answers 400)",
            key="auto-slots",
        )
    on_last = next((b for b in ctx.explicit if b.segment == auto.segment), None)
    if on_last is not None and on_last.ttl != auto.ttl:
        yield Hit(
            rule="invalid-breakpoint",
            pointer=auto.pointer,
            message=f"automatic cache_control TTL {auto.ttl} differs from TTL {on_last.ttl} on the last block "
            f"{on_last.pointer} (the API answers 400)",
            key="auto-ttl",
        )


@check("ttl-order")
def ttl_order(ctx: Context) -> Iterator[Hit]:
    seconds = ctx.limits.ttl_seconds
    shortest: Breakpoint | None = None
    for bp in ctx.breakpoints:
        if bp.ttl not in seconds:
            continue
        if shortest is not None and seconds[bp.ttl] > seconds[shortest.ttl]:
            yield Hit(
                rule="ttl-order",
                pointer=bp.pointer,
                message=f"{bp.ttl} breakpoint after a {shortest.ttl} breakpoint at {shortest.pointer}: "
                "longer TTLs must come first",
            )
        if shortest is None or seconds[bp.ttl] < seconds[shortest.ttl]:
            shortest = bp


@check("no-breakpoint")
def no_breakpoint(ctx: Context) -> Iterator[Hit]:
    minimum = ctx.contract.min_cacheable_tokens
    if model_unknown(ctx):
        return
    # over the minimum without the media of unknown size (by URL or file id: a documented estimate) and with
    # the tool-use prompt at its figure less the catalog's margin (a provider's median, not a count), or no evidence
    unknown = sum(s.media_tokens for s in ctx.segments if s.estimated) + ctx.prompt.front * catalog.count_margin()
    if not ctx.breakpoints and ctx.total - unknown >= minimum:
        yield Hit(
            rule="no-breakpoint",
            pointer="",
            message=f"no cache breakpoint on a prompt of {ctx.tokens(ctx.total)} (cacheable from {minimum} "
            f"on {ctx.prompt.model or 'this model'}): every request pays the full input price",
        )
