"""Single-request rules: each reads one Prompt (through a Context) and yields Hits.

A check knows prompt structure (segments, breakpoints, token counts), not provider field names; the
numbers it compares against (minimums, breakpoint limits, lookback, TTLs, routing prefix) come from
rules/providers.toml. Which rules run for a prompt is decided by the catalog (`providers` of each rule).

A finding needs evidence. A value that merely looks volatile (a date, a UUID) is reported only when the
request itself says it varies (a clock value or a per-request id in the system prompt, which apps render
for every request: rules/volatile.toml `varies`) or, in sequence mode, when it changed since the earlier
request of the same session (`Context.earlier`). A block byte-identical to the earlier request's is never
called volatile, and constants inside tool definitions never are.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from itertools import pairwise
from typing import Any

from prefixguard.lint import catalog
from prefixguard.lint.context import Breakpoint, Context, Volatile, block_text
from prefixguard.lint.finding import Hit
from prefixguard.model.breakpoints import breakpoints as policy_breakpoints
from prefixguard.model.prompt import MARKER_KEYS
from prefixguard.wire.fields import ARGUMENT_KEYS
from prefixguard.wire.jsonspan import join_pointer
from prefixguard.wire.segments import tool_name

Check = Callable[["Context"], Iterator[Hit]]
CHECKS: dict[str, Check] = {}
# Rules about what the API rejects: the only ones that apply to a token-counting request (nothing cached).
VERSIONED = re.compile(r"_\d{8}$")
VALIDITY = frozenset({"invalid-breakpoint", "too-many-breakpoints", "ttl-order"})


def check(name: str) -> Callable[[Check], Check]:
    def register(fn: Check) -> Check:
        CHECKS[name] = fn
        return fn

    return register


def _quote(text: str, limit: int = 48) -> str:
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return json.dumps(text, ensure_ascii=False)


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
        message=f"{message}: {v.name} {_quote(v.text)} ({why})",
        key=v.name,
        inner=(v.start, v.end),
    )


# ---------------------------------------------------------------------------------- volatile content


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
                message=f"an id in the cached system prompt: {v.name} {_quote(v.text)} (if it is made per "
                "session, user or request, each one writes a prefix no other reads)",
                key=v.name,
                inner=(v.start, v.end),
            )


# ------------------------------------------------------------------------- ordering and serialization


def _tool_name(value: Any) -> str | None:
    return tool_name(value)


@check("tools-unsorted")
def tools_unsorted(ctx: Context) -> Iterator[Hit]:
    tools = [(s, _tool_name(s.value)) for s in ctx.segments if s.level == "tools" and s.kind == "tool"]
    named = [(s, n) for s, n in tools if n is not None]
    for (seg, name), (_, after) in pairwise(named):
        if name > after:
            yield Hit(
                rule="tools-unsorted",
                pointer=seg.pointer,
                message=f"tools are not sorted by name: {_quote(name)} comes before {_quote(after)}",
            )
            return


def _reordered(old: Any, new: Any, pointer: str) -> tuple[str, str, str] | None:
    """The first object (depth first) that holds the same data in both with its keys in another order:
    (pointer, key, the key that now follows it). JSON text inside strings (tool-call arguments) counts."""
    if isinstance(old, str) and isinstance(new, str):
        if old == new or old[:1] not in "{[" or new[:1] not in "{[":
            return None
        try:
            return _reordered(json.loads(old), json.loads(new), pointer)
        except (ValueError, RecursionError):
            return None
    if isinstance(old, dict) and isinstance(new, dict):
        if old == new and list(old) != list(new):
            a, b = next((x, y) for x, y in zip(new, old, strict=True) if x != y)
            return pointer, a, b
        for k, v in new.items():
            if k in old and (found := _reordered(old[k], v, join_pointer(pointer, k))):
                return found
    elif isinstance(old, list) and isinstance(new, list):
        for i, (x, y) in enumerate(zip(old, new, strict=False)):
            if found := _reordered(x, y, f"{pointer}/{i}"):
                return found
    return None


def _call_arguments(value: Any, pointer: str) -> Iterator[tuple[str, Any]]:
    """(pointer, object) of a tool call's arguments, found by key at most two objects deep (the keys of
    every shape: wire/fields.py; a JSON string where the shape sends one)."""
    if not isinstance(value, dict):
        return
    for k, v in value.items():
        if k in ARGUMENT_KEYS:
            if isinstance(v, str):
                try:
                    v = json.loads(v)
                except (ValueError, RecursionError):
                    continue
            yield join_pointer(pointer, k), v
        elif isinstance(v, dict):
            yield from _call_arguments(v, join_pointer(pointer, k))


def _serializer_drift(ctx: Context) -> Iterator[Hit]:
    """Evidence inside one request: calls of the same tool whose arguments have the same keys in two
    different orders. Whatever wrote them does not keep an order (a map serialized unordered, objects
    rebuilt on resume), so the next rebuild can reorder the history too."""
    seen: dict[tuple[str | None, frozenset[str]], tuple[tuple[str, ...], str]] = {}
    for seg in ctx.segments:
        if seg.kind != "tool_use":
            continue
        name = _tool_name(seg.value)
        for pointer, args in _call_arguments(seg.value, seg.pointer):
            if not isinstance(args, dict) or len(args) < 2:
                continue
            key, order = (name, frozenset(args)), tuple(args)
            first = seen.setdefault(key, (order, pointer))
            if first[0] != order:
                yield Hit(
                    rule="unstable-key-order",
                    pointer=pointer,
                    message=f"arguments of {_quote(name or 'a tool')} written with their keys in another "
                    f"order than at {first[1]} ({', '.join(order)} vs {', '.join(first[0])}): the "
                    "serializer does not keep an order",
                    key=pointer,
                )
                return


@check("unstable-key-order")
def unstable_key_order(ctx: Context) -> Iterator[Hit]:
    """Only on evidence: the same object as in the earlier request of the session with its keys in
    another order (sequence mode), or calls of one tool whose arguments come in two key orders in this
    request. Unsorted keys alone are the usual layout of a hand-written schema."""
    reported = set()
    for hit in _serializer_drift(ctx):
        reported.add(hit.pointer)
        yield hit
    if ctx.earlier is None:
        return
    for seg in ctx.segments:
        before = ctx.earlier_segment(seg)
        if before is None or before.key == seg.key:
            continue
        found = _reordered(before.value, seg.value, seg.pointer)
        if found and found[0] not in reported:
            yield Hit(
                rule="unstable-key-order",
                pointer=found[0],
                message=f"the same data as on line {ctx.earlier_line} serialized with its keys in another order: "
                f"{_quote(found[1])} now comes before {_quote(found[2])}",
                key=found[0],
            )


# ------------------------------------------------------------------------------------------ breakpoints


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
                message=f"cache breakpoint TTL {_quote(bp.ttl)} is not one of {', '.join(ttls)}",
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


def _model_unknown(ctx: Context) -> bool:
    """No contract for this model: the body does not name it (Bedrock, Gemini: the path does) or, where
    only the listed models cache at all (Bedrock), it is not listed. Its minimum is then unknown."""
    return not ctx.contract.confirmed and (ctx.prompt.model is None or ctx.limits.listed_models_only)


@check("no-breakpoint")
def no_breakpoint(ctx: Context) -> Iterator[Hit]:
    minimum = ctx.contract.min_cacheable_tokens
    if _model_unknown(ctx):
        return
    if not ctx.breakpoints and ctx.total >= minimum:
        yield Hit(
            rule="no-breakpoint",
            pointer="",
            message=f"no cache breakpoint on a prompt of {ctx.tokens(ctx.total)} (cacheable from {minimum} "
            f"on {ctx.prompt.model or 'this model'}): every request pays the full input price",
        )


# ------------------------------------------------------------------------------------- provider limits


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


def _clearly_below(tokens: int, minimum: int) -> bool:
    """Our tokenizer is not the provider's (which counts more, and adds its template): a count within the
    catalog's margin under a minimum is no evidence of being under it."""
    return tokens * (1 + catalog.count_margin()) < minimum


def _versioned_tool(value: Any) -> bool:
    """A provider-defined tool (its type carries a version date: web_search_20250305, bash_20250124,
    tool_search_tool_bm25_20251119): the provider renders a prompt of its own for it."""
    kind = value.get("type") if isinstance(value, dict) else None
    return isinstance(kind, str) and VERSIONED.search(kind) is not None


@check("below-minimum")
def below_minimum(ctx: Context) -> Iterator[Hit]:
    minimum = ctx.contract.min_cacheable_tokens
    model = ctx.prompt.model or "this model"
    if _model_unknown(ctx):
        return
    if not ctx.breakpointed:
        if _clearly_below(ctx.total, minimum):
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
    covered = any(not _clearly_below(ctx.before[bp.segment + 1], minimum) for bp in ctx.breakpoints)
    for bp in ctx.breakpoints:
        upto = ctx.before[bp.segment + 1]
        if _clearly_below(upto, minimum):
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
