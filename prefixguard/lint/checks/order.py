"""Checks on order and serialization: tools not sorted by name, and objects whose keys come in another
order than before (the same data reserialized), which changes the prefix's bytes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import pairwise
from typing import Any

from prefixguard.lint.checks.base import check, quote
from prefixguard.lint.context import Context
from prefixguard.lint.finding import Hit
from prefixguard.wire.fields import ARGUMENT_KEYS
from prefixguard.wire.jsonspan import join_pointer
from prefixguard.wire.segments import tool_name


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
                message=f"tools are not sorted by name: {quote(name)} comes before {quote(after)}",
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
                    message=f"arguments of {quote(name or 'a tool')} written with their keys in another "
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
                f"{quote(found[1])} now comes before {quote(found[2])}",
                key=found[0],
            )
