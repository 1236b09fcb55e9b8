"""Single-request rules: each reads one Prompt (through a Context) and yields Hits.

A check knows prompt structure (segments, breakpoints, token counts), not provider field names; the
numbers it compares against (minimums, breakpoint limits, lookback, TTLs, routing prefix) come from
rules/providers.toml. Which rules run for a prompt is decided by the catalog (`providers` of each rule).
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property, lru_cache
from itertools import accumulate, pairwise
from typing import Any, Mapping

from prefixguard.contracts import model_contract, provider_for, providers
from prefixguard.lint.finding import Hit, tokens_text
from prefixguard.lint.position import join_pointer
from prefixguard.policy import can_carry_breakpoint
from prefixguard.prompt import MARKER_KEYS, Prompt, Segment
from prefixguard.volatile import VolatileMatch, find_volatile

Check = Callable[["Context"], Iterator[Hit]]
CHECKS: dict[str, Check] = {}


def check(name: str) -> Callable[[Check], Check]:
    def register(fn: Check) -> Check:
        CHECKS[name] = fn
        return fn
    return register


# Content the model or a tool produced once and the app resends as it was: a timestamp in it is history,
# not something re-rendered per request, so volatile-in-prefix looks only at what the app writes.
PRODUCED_KINDS = ("tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use")
PRODUCED_ROLES = ("assistant", "tool")
# Where tool schemas and tool-call arguments sit (Anthropic, Chat and Responses shapes): found by key,
# at most two objects deep in a tool or tool-call segment.
SCHEMA_KEYS = ("input_schema", "parameters", "schema")
ARGUMENT_KEYS = ("input", "arguments")
# Values that are not prompt text: encoded payloads and signatures, and the breakpoint markers.
NOT_TEXT_KEYS = ("signature", "data", "encrypted_content", *MARKER_KEYS)


@dataclass(frozen=True, slots=True)
class Breakpoint:
    index: int          # segment it sits on (the automatic one: the block the API puts it on)
    ttl: str
    pointer: str        # where it is written: the block, or the top-level marker for the automatic one
    auto: bool = False


@dataclass(frozen=True, slots=True)
class Volatile:
    pointer: str        # the string value holding the match
    start: int          # character span of the match in that string
    end: int
    name: str           # pattern name
    text: str
    at: float           # where in the segment's text the match starts, 0..1 (for token positions)


class Context:
    """One prompt with what several checks need, computed once."""

    def __init__(self, prompt: Prompt, extra_patterns: Mapping[str, str] | None = None) -> None:
        self.prompt = prompt
        self.segments = prompt.segments
        self.provider = provider_for(prompt.api, prompt.model)
        self.limits: dict[str, Any] = providers()[self.provider]
        self.contract = model_contract(prompt.api, prompt.model)
        self._extra = tuple(sorted((extra_patterns or {}).items()))  # hashable: the key of _find's cache
        # blocks no breakpoint may sit on, and that the automatic breakpoint walks back over
        self.ineligible = tuple(self.limits.get("breakpoint_ineligible_kinds", ()))
        self.before = list(accumulate((s.tokens for s in self.segments), initial=0))  # tokens before i
        self._volatile: dict[int, list[Volatile]] = {}

    @property
    def total(self) -> int:
        return self.before[-1]

    def tokens(self, n: int) -> str:
        """'N tokens', said to be an estimate when no tokenizer counted them."""
        return tokens_text(n, self.prompt.tokens_estimated)

    @cached_property
    def explicit(self) -> list[Breakpoint]:
        return [Breakpoint(i, s.breakpoint, s.pointer) for i, s in enumerate(self.segments) if s.breakpoint]

    @cached_property
    def auto(self) -> Breakpoint | None:
        """The top-level automatic breakpoint, placed on the last block that can carry one."""
        if not self.prompt.auto_breakpoint:
            return None
        target = next((i for i in range(len(self.segments) - 1, -1, -1) if self._can_carry(self.segments[i])), None)
        return None if target is None else Breakpoint(target, self.prompt.auto_breakpoint, "/cache_control", True)

    @cached_property
    def breakpoints(self) -> list[Breakpoint]:
        """Distinct cache positions in prefix order (an automatic one on an explicit one's block is one)."""
        out = list(self.explicit)
        if self.auto and all(b.index != self.auto.index for b in out):
            out.append(self.auto)
        return sorted(out, key=lambda b: b.index)

    @cached_property
    def last_message_start(self) -> int:
        """Index of the first segment of the latest message (len(segments) if there is none)."""
        last = max((s.message_index for s in self.segments if s.message_index is not None), default=None)
        return next((i for i, s in enumerate(self.segments) if last is not None and s.message_index == last),
                    len(self.segments))

    @cached_property
    def previous_end(self) -> int | None:
        """Index of the last block the previous request of this conversation sent: the end of the latest
        user message that an assistant reply follows (None on a first turn)."""
        end = last_user = None
        for i, s in enumerate(self.segments):
            if s.role == "user":
                last_user = i
            elif s.role == "assistant" and last_user is not None:
                end = last_user
        return end

    @cached_property
    def prefix_end(self) -> int:
        """Segments [0, prefix_end) form the prefix a later request of this conversation should reuse:
        up to the last breakpoint (Anthropic) and in every case before the latest message."""
        if self.provider == "anthropic":
            end = self.breakpoints[-1].index + 1 if self.breakpoints else 0
            return min(end, self.last_message_start)
        return self.last_message_start

    def _can_carry(self, seg: Segment) -> bool:
        return can_carry_breakpoint(seg, self.ineligible)

    def volatile(self, i: int) -> list[Volatile]:
        if i not in self._volatile:
            self._volatile[i] = list(_scan(self.segments[i], self._extra))
        return self._volatile[i]


def _text(seg: Segment) -> str | None:
    """The text of a text block (None for other kinds)."""
    if seg.kind != "text":
        return None
    return seg.value if isinstance(seg.value, str) else seg.value.get("text") if isinstance(seg.value, dict) else None


def _written_by_app(seg: Segment) -> bool:
    return seg.kind not in PRODUCED_KINDS and seg.role not in PRODUCED_ROLES


def _strings(value: Any, pointer: str) -> Iterator[tuple[str, str]]:
    """(pointer, text) of the string leaves a provider renders as prompt text. Ids and encoded payloads
    (base64 images, signatures) are skipped: they look random but stay the same for the same item."""
    if isinstance(value, str):
        if not value.startswith("data:"):
            yield pointer, value
    elif isinstance(value, dict):
        for k, v in value.items():
            if not (k == "id" or k.endswith("_id") or k in NOT_TEXT_KEYS):
                yield from _strings(v, join_pointer(pointer, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, f"{pointer}/{i}")


@lru_cache(maxsize=8192)
def _find(text: str, extra: tuple[tuple[str, str], ...]) -> tuple[VolatileMatch, ...]:
    """Cached: in a capture each request repeats the history of the one before, string for string."""
    return tuple(find_volatile(text, dict(extra)))


def _scan(seg: Segment, extra: tuple[tuple[str, str], ...]) -> Iterator[Volatile]:
    leaves = list(_strings(seg.value, seg.pointer))
    total = sum(len(t) for _, t in leaves) or 1
    seen = 0
    for pointer, text in leaves:
        for m in _find(text, extra):
            yield Volatile(pointer, m.start, m.end, m.name, m.text, (seen + m.start) / total)
        seen += len(text)


def _quote(text: str, limit: int = 48) -> str:
    text = text if len(text) <= limit else text[:limit - 1] + "…"
    return json.dumps(text, ensure_ascii=False)


def _volatile_hit(rule: str, v: Volatile, message: str) -> Hit:
    return Hit(rule, v.pointer, f"{message}: {v.name} {_quote(v.text)}", key=v.name, inner=(v.start, v.end))


# ---------------------------------------------------------------------------------- volatile content

@check("volatile-in-prefix")
def volatile_in_prefix(ctx: Context) -> Iterator[Hit]:
    for i in range(ctx.prefix_end):
        if _written_by_app(ctx.segments[i]):
            for v in ctx.volatile(i):
                yield _volatile_hit("volatile-in-prefix", v, "volatile content in the cached prefix")


@check("breakpoint-on-volatile")
def breakpoint_on_volatile(ctx: Context) -> Iterator[Hit]:
    for bp in ctx.breakpoints:
        found = ctx.volatile(bp.index)
        if found:
            where = "automatic cache breakpoint lands" if bp.auto else "cache breakpoint"
            yield _volatile_hit("breakpoint-on-volatile", found[0], f"{where} on a block with volatile content")


@check("volatile-routing-prefix")
def volatile_routing_prefix(ctx: Context) -> Iterator[Hit]:
    if ctx.total < ctx.contract.min_cacheable_tokens:
        return  # nothing is cached either way
    limit = ctx.limits["routing_prefix_tokens"]
    for i, seg in enumerate(ctx.segments):
        if ctx.before[i] >= limit:
            break
        if not _written_by_app(seg):
            continue
        for v in ctx.volatile(i):
            at = ctx.before[i] + round(seg.tokens * v.at)
            if at < limit:
                yield _volatile_hit("volatile-routing-prefix", v,
                                    f"volatile content at token {at:,}, inside the first {limit} tokens "
                                    "that route the request to a cache")
    if not ctx.prompt.settings.get("prompt_cache_key"):
        yield Hit("volatile-routing-prefix", "",
                  f"no prompt_cache_key on a prompt of {ctx.tokens(ctx.total)}: requests sharing this "
                  "prefix may be routed to different machines", key="no-cache-key", variant="no-cache-key")


# ------------------------------------------------------------------------- ordering and serialization

def _tool_name(value: Any) -> str | None:
    if not isinstance(value, dict):
        return None
    name = value.get("name")
    if name is None and isinstance(value.get("function"), dict):
        name = value["function"].get("name")
    return name if isinstance(name, str) else None


@check("tools-unsorted")
def tools_unsorted(ctx: Context) -> Iterator[Hit]:
    tools = [(s, _tool_name(s.value)) for s in ctx.segments if s.level == "tools" and s.kind == "tool"]
    named = [(s, n) for s, n in tools if n is not None]
    for (seg, name), (_, after) in pairwise(named):
        if name > after:
            yield Hit("tools-unsorted", seg.pointer,
                      f"tools are not sorted by name: {_quote(name)} comes before {_quote(after)}")
            return


def _objects(value: Any, pointer: str, keys: tuple[str, ...], depth: int = 2) -> Iterator[tuple[str, Any]]:
    """Members named by keys, found at most `depth` objects deep."""
    if not isinstance(value, dict) or depth == 0:
        return
    for k, v in value.items():
        if k in keys:
            yield join_pointer(pointer, k), v
        elif isinstance(v, dict):
            yield from _objects(v, join_pointer(pointer, k), keys, depth - 1)


def _unsorted(value: Any, pointer: str) -> tuple[str, str, str] | None:
    """The first object (depth first) whose keys are out of sorted order: (pointer, key, next key)."""
    if isinstance(value, dict):
        for a, b in pairwise(value):
            if a > b:
                return pointer, a, b
        items = value.items()
    elif isinstance(value, list):
        items = ((str(i), v) for i, v in enumerate(value))
    else:
        return None
    for k, v in items:
        found = _unsorted(v, join_pointer(pointer, k))
        if found:
            return found
    return None


@check("unstable-key-order")
def unstable_key_order(ctx: Context) -> Iterator[Hit]:
    for seg in ctx.segments:
        if seg.level == "tools":
            parts, what = _objects(seg.value, seg.pointer, SCHEMA_KEYS), "schema"
        elif seg.kind == "tool_use":
            parts, what = _objects(seg.value, seg.pointer, ARGUMENT_KEYS), "tool-call input"
        else:
            continue
        for pointer, value in parts:
            if isinstance(value, str):  # arguments sent as a JSON string: the key order is inside it
                try:
                    found = _unsorted(json.loads(value), "")
                except ValueError:
                    continue
                where = pointer
            else:
                found = _unsorted(value, pointer)
                where = found[0] if found else pointer
            if found:
                yield Hit("unstable-key-order", where,
                          f"{what} keys not in sorted order: {_quote(found[1])} before {_quote(found[2])}",
                          key=found[0])
                break


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
    ttls = ctx.limits.get("ttl_seconds", {})
    for bp in ctx.explicit:
        seg = ctx.segments[bp.index]
        if seg.kind in ctx.ineligible:
            yield Hit("invalid-breakpoint", bp.pointer, f"cache breakpoint on a {seg.kind.replace('_', ' ')} block",
                      key=seg.kind)
        elif _text(seg) == "":
            yield Hit("invalid-breakpoint", bp.pointer, "cache breakpoint on an empty text block", key="empty-text")
        if bp.ttl not in ttls:
            yield Hit("invalid-breakpoint", bp.pointer,
                      f"cache breakpoint TTL {_quote(bp.ttl)} is not one of {', '.join(ttls)}", key="ttl")
    for seg in ctx.segments:
        for pointer in _sub_markers(seg.value, seg.pointer):
            yield Hit("invalid-breakpoint", pointer, "cache breakpoint on a sub-block (put it on the block itself)",
                      key="sub-block")
    auto, limit = ctx.auto, ctx.limits.get("max_breakpoints")
    if auto is None:
        return
    if limit is not None and len(ctx.explicit) >= limit:
        yield Hit("invalid-breakpoint", auto.pointer,
                  f"automatic cache_control with {len(ctx.explicit)} explicit breakpoints: it needs one of the "
                  f"{limit} slots (the API answers 400)", key="auto-slots")
    on_last = next((b for b in ctx.explicit if b.index == auto.index), None)
    if on_last is not None and on_last.ttl != auto.ttl:
        yield Hit("invalid-breakpoint", auto.pointer,
                  f"automatic cache_control TTL {auto.ttl} differs from TTL {on_last.ttl} on the last block "
                  f"{on_last.pointer} (the API answers 400)", key="auto-ttl")


@check("ttl-order")
def ttl_order(ctx: Context) -> Iterator[Hit]:
    seconds = ctx.limits.get("ttl_seconds", {})
    shortest: Breakpoint | None = None
    for bp in ctx.breakpoints:
        if bp.ttl not in seconds:
            continue
        if shortest is not None and seconds[bp.ttl] > seconds[shortest.ttl]:
            yield Hit("ttl-order", bp.pointer,
                      f"{bp.ttl} breakpoint after a {shortest.ttl} breakpoint at {shortest.pointer}: "
                      "longer TTLs must come first")
        if shortest is None or seconds[bp.ttl] < seconds[shortest.ttl]:
            shortest = bp


@check("no-breakpoint")
def no_breakpoint(ctx: Context) -> Iterator[Hit]:
    minimum = ctx.contract.min_cacheable_tokens
    if not ctx.breakpoints and ctx.total >= minimum:
        yield Hit("no-breakpoint", "",
                  f"no cache breakpoint on a prompt of {ctx.tokens(ctx.total)} (cacheable from {minimum} "
                  f"on {ctx.prompt.model or 'this model'}): every request pays the full input price")


# ------------------------------------------------------------------------------------- provider limits

@check("too-many-breakpoints")
def too_many_breakpoints(ctx: Context) -> Iterator[Hit]:
    limit = ctx.limits.get("max_breakpoints")
    count = len(ctx.explicit) + (ctx.auto is not None)
    if limit is None or count <= limit:
        return
    over = limit - (ctx.auto is not None)   # the first explicit breakpoint with no slot left
    pointer = ctx.explicit[over].pointer if over < len(ctx.explicit) else "/cache_control"
    auto = " including the automatic one" if ctx.auto else ""
    yield Hit("too-many-breakpoints", pointer, f"{count} cache breakpoints{auto}; at most {limit} are allowed")


@check("below-minimum")
def below_minimum(ctx: Context) -> Iterator[Hit]:
    minimum = ctx.contract.min_cacheable_tokens
    model = ctx.prompt.model or "this model"
    if ctx.provider != "anthropic":
        if ctx.total < minimum:
            yield Hit("below-minimum", "", f"prompt of {ctx.tokens(ctx.total)} is below the {minimum}-token "
                      f"minimum of {model}: nothing is cached", variant=ctx.provider, key=ctx.provider)
        return
    for bp in ctx.breakpoints:
        upto = ctx.before[bp.index + 1]
        if upto < minimum:
            yield Hit("below-minimum", bp.pointer,
                      f"prefix up to this breakpoint is {ctx.tokens(upto)}, below the {minimum}-token "
                      f"minimum of {model}: nothing is cached here")


@check("lookback-exceeded")
def lookback_exceeded(ctx: Context) -> Iterator[Hit]:
    lookback = ctx.limits.get("lookback_blocks")
    if lookback is None:
        return
    turn = _turn_past_lookback(ctx, lookback)
    if turn is not None:
        yield turn
    for prev, bp in pairwise(ctx.breakpoints):
        if bp.index - prev.index + 1 > lookback and (turn is None or turn.pointer != bp.pointer):
            yield Hit("lookback-exceeded", bp.pointer,
                      f"the previous breakpoint ({prev.pointer}) is {bp.index - prev.index} blocks back; a breakpoint "
                      f"looks back over {lookback} blocks, itself included")


def _turn_past_lookback(ctx: Context, lookback: int) -> Hit | None:
    """The common case: a breakpoint that moves with the conversation (or the automatic one) wrote an
    entry at the previous request's last block, and this turn appended `lookback` blocks or more after
    it. Unless some breakpoint sits within the lookback of that block, nothing reads the entry."""
    end = ctx.previous_end
    if end is None or any(end <= b.index < end + lookback for b in ctx.breakpoints):
        return None
    bp = next((b for b in ctx.breakpoints if b.index >= end + lookback), None)
    if bp is None:
        return None
    return Hit("lookback-exceeded", bp.pointer,
               f"this turn added {bp.index - end} blocks after the previous request's last block "
               f"({ctx.segments[end].pointer}); a breakpoint looks back over {lookback} blocks, itself included, "
               "so the entry written there is not read")
