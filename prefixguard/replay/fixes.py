"""`--what-if fixed`: each request as the app would send it with prefixguard's fixes applied.

The fixes: volatile values in tools and system prompts frozen (each occurrence keeps the first value
the trace gave it), tool definitions in one stable order, JSON keys of tools, schemas and tool calls
in canonical (sorted) order. The parsed Prompt says where each part sits (its JSON pointer), so this
module needs no provider's field names.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import itertools
import json
from collections.abc import Callable, Iterator
from typing import Any

from prefixguard.model.volatile import find_volatile
from prefixguard.replay.sources import Request
from prefixguard.wire import parse_request
from prefixguard.wire.jsonspan import split_pointer

FROZEN_LEVELS = ("tools", "system")  # where a changing value breaks every later block
CANONICAL_KINDS = ("tool", "schema", "tool_use")


class Fixer:
    """Applies the fixes request by request; remembers the first value of each volatile occurrence."""

    def __init__(self) -> None:
        self._frozen: dict[tuple[str, int], str] = {}

    def apply(self, req: Request) -> Request:
        if req.body is None:
            return req
        body = copy.deepcopy(req.body)
        prompt = parse_request(json.dumps(body, ensure_ascii=False), path=req.path, source=req.ref, count_tokens=False)
        tool_lists: set[str] = set()
        for seg in prompt.segments:
            if seg.kind == "tool":
                tool_lists.add(seg.pointer.rsplit("/", 1)[0])
            if seg.level not in FROZEN_LEVELS and seg.kind not in CANONICAL_KINDS:
                continue
            value = seg.value
            if seg.level in FROZEN_LEVELS:
                value = _map_strings(value, functools.partial(self._freeze, seg.pointer, occurrence=itertools.count()))
            if seg.kind in CANONICAL_KINDS:
                value = canonical(value)
            body = _set(body, seg.pointer, value)
        for pointer in tool_lists:
            tools = _get(body, pointer)
            body = _set(body, pointer, sorted(tools, key=lambda t: json.dumps(t, sort_keys=True)))
        return dataclasses.replace(req, body=body)

    def _freeze(self, pointer: str, text: str, occurrence: Iterator[int]) -> str:
        out, last = [], 0
        for m in find_volatile(text):
            out.append(text[last : m.start])
            out.append(self._frozen.setdefault((pointer, next(occurrence)), m.text))
            last = m.end
        return text if not out else "".join(out) + text[last:]


def canonical(value: Any) -> Any:
    """Keys sorted at every level; a string holding a JSON object (tool call arguments) likewise."""
    if isinstance(value, dict):
        return {k: canonical(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [canonical(v) for v in value]
    if isinstance(value, str) and value.startswith("{"):
        try:
            inner = json.loads(value)
        except ValueError:
            return value
        return json.dumps(canonical(inner), ensure_ascii=False) if isinstance(inner, dict) else value
    return value


def _map_strings(value: Any, fn: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {k: _map_strings(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [_map_strings(v, fn) for v in value]
    return value


def _walk(doc: Any, steps: list[str]) -> Any:
    for step in steps:
        doc = doc[int(step)] if isinstance(doc, list) else doc[step]
    return doc


def _get(doc: Any, pointer: str) -> Any:
    return _walk(doc, split_pointer(pointer))


def _set(doc: Any, pointer: str, value: Any) -> Any:
    """doc with the value at pointer replaced (in place below the root; returns the root)."""
    steps = split_pointer(pointer)
    if not steps:
        return value
    parent = _walk(doc, steps[:-1])
    parent[int(steps[-1]) if isinstance(parent, list) else steps[-1]] = value
    return doc
