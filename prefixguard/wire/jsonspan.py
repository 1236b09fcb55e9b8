"""Decode a JSON body while keeping the text span of the parts we care about.

Only the containers named by a spec are walked here (the top level, tools, system, messages, content
lists); every other value is decoded whole by the C scanner (JSONDecoder.raw_decode), which also gives
its end offset. So most bytes are decoded at C speed while each segment knows where it stands.

A spec describes which containers to walk: for an object, {key: spec of that member}; the key "[]"
gives the spec of each element when the value is an array. A member not named, or a spec of None, is
a leaf. Example (Anthropic): {"tools": {"[]": None}, "messages": {"[]": {"content": {"[]": None}}}}.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from json.decoder import scanstring
from typing import Any

_scan = json.JSONDecoder().raw_decode
_ws = re.compile(r"[ \t\n\r]*")
_colon = re.compile(r"[ \t\n\r]*:[ \t\n\r]*")
_after = re.compile(r"[ \t\n\r]*([,}\]])[ \t\n\r]*")  # the delimiter after a value, and what follows
_plain_key = re.compile(r'"([^"\\\x00-\x1f]*)"[ \t\n\r]*:[ \t\n\r]*')  # a key without escapes, its colon, what follows

Spec = dict[str, "Spec | None"]


@dataclass(slots=True)
class Node:
    """A decoded value and its span in the text; kids for the containers the spec walked."""

    value: Any
    start: int
    end: int
    kids: dict[str, Node] | list[Node] | None = None

    def get(self, key: str) -> Node | None:
        return self.kids.get(key) if isinstance(self.kids, dict) else None


def parse(text: str, spec: Spec) -> Node:
    """Decode a whole JSON document; raises json.JSONDecodeError (or RecursionError) on bad input."""
    idx = _ws.match(text, 0).end()
    node = _value(text, idx, spec)
    tail = _ws.match(text, node.end).end()
    if tail != len(text):
        raise json.JSONDecodeError("Extra data", text, tail)
    return node


def _value(text: str, idx: int, spec: Spec | None) -> Node:
    if spec is not None and idx < len(text):
        char = text[idx]
        if char == "{":
            return _object(text, idx, spec)
        if char == "[" and "[]" in spec:
            return _array(text, idx, spec["[]"])
    value, end = _scan(text, idx)
    return Node(value, idx, end)


def _object(text: str, start: int, spec: Spec) -> Node:
    kids: dict[str, Node] = {}
    value: dict[str, Any] = {}
    idx = _ws.match(text, start + 1).end()
    if text.startswith("}", idx):
        return Node(value, start, idx + 1, kids)
    while True:
        plain = _plain_key.match(text, idx)  # one regex for the usual key; scanstring for escaped ones
        if plain is not None:
            key, idx = plain[1], plain.end()
        else:
            if not text.startswith('"', idx):
                raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, idx)
            key, idx = scanstring(text, idx + 1)
            colon = _colon.match(text, idx)
            if colon is None:
                raise json.JSONDecodeError("Expecting ':' delimiter", text, idx)
            idx = colon.end()
        sub = spec.get(key)
        if sub is None:  # a leaf member: decode it directly (most members are)
            value[key], end = _scan(text, idx)
            node = Node(value[key], idx, end)
        else:
            node = _value(text, idx, sub)
        value[key] = node.value
        kids[key] = node
        after = _after.match(text, node.end)
        if after is None or after[1] == "]":
            raise json.JSONDecodeError("Expecting ',' delimiter", text, node.end)
        if after[1] == "}":
            return Node(value, start, after.start(1) + 1, kids)
        idx = after.end()


def _array(text: str, start: int, spec: Spec | None) -> Node:
    kids: list[Node] = []
    idx = _ws.match(text, start + 1).end()
    if text.startswith("]", idx):
        return Node([], start, idx + 1, kids)
    while True:
        if spec is None:  # leaf elements (tools, blocks): decode directly, the hot path
            value, end = _scan(text, idx)
            node = Node(value, idx, end)
        else:
            node = _value(text, idx, spec)
        kids.append(node)
        after = _after.match(text, node.end)
        if after is None or after[1] == "}":
            raise json.JSONDecodeError("Expecting ',' delimiter", text, node.end)
        if after[1] == "]":
            return Node([k.value for k in kids], start, after.start(1) + 1, kids)
        idx = after.end()
