"""Decode a JSON body while keeping the text span of the parts we care about.

Only the containers named by a spec are walked here (the top level, tools, system, messages, content
lists); every other value is decoded whole by the C scanner (the one json.loads runs), which also gives
its end offset. So most bytes are decoded at C speed while each segment knows where it stands.

A spec describes which parts to keep: for an object, {key: spec of that member}; the key "[]" gives the
spec of each element when the value is an array. A named member gets a Node (its span) in its parent's
kids, and is walked when its spec is not None; members not named give their value only.
Example (Anthropic): {"tools": {"[]": None}, "messages": {"[]": {"content": {"[]": None}}}}.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from json.decoder import scanstring  # type: ignore[attr-defined]  # the C scanner, not in typeshed
from typing import Any

from prefixguard.wire.spannodes import ABSENT, RUN_MESSAGE, RUN_VALUE, Elements, Node, PlainMessage, Run, items

# the records are spannodes', read through this module as before
__all__ = [
    "ABSENT",
    "RUN_VALUE",
    "Elements",
    "Node",
    "PlainMessage",
    "Run",
    "Spec",
    "common_prefix",
    "items",
    "join_pointer",
    "merged",
    "parse",
    "split_pointer",
]

# The C scanner behind json.loads: (value, end) for the value starting at idx; StopIteration(idx) when
# none starts there. Called directly, not through raw_decode, since it runs once per walked value.
_scan = json.JSONDecoder().scan_once  # type: ignore[attr-defined]

_WS = r"[ \t\n\r]*"
_KEY = rf'"([^"\\\x00-\x1f]*)"{_WS}:{_WS}'  # a key without escapes (almost all keys), its colon, what follows
_ws = re.compile(_WS)
_colon = re.compile(rf"{_WS}:{_WS}")
# One match per member or element: the delimiter and the next key in one go; group 2 (or 1) is the close.
_object_open = re.compile(rf"\{{{_WS}(?:{_KEY}|(\}}))")
_object_next = re.compile(rf"{_WS}(?:,{_WS}{_KEY}|(\}}))")
_array_open = re.compile(rf"\[{_WS}(\])?")
_array_next = re.compile(rf"{_WS}(?:,{_WS}|(\]))")
# The commonest message of all, {"role": "...", "content": "..."} with no escapes in either string, and
# the delimiter after it, in one match: a body of a million such messages then costs one regex call
# each, not a walk of its members. Groups: 1 the message, 2 its role, 3 its content (quoted), 4 the
# content, 5 the array's close.
_PLAIN = r'"([^"\\\x00-\x1f]*)"'
_plain_message = re.compile(
    rf'(\{{{_WS}"role"{_WS}:{_WS}{_PLAIN}{_WS},{_WS}"content"{_WS}:{_WS}({_PLAIN}){_WS}\}})'
    rf"{_WS}(?:,{_WS}|(\]))"
)
# Plain user and assistant messages each followed by a comma, as many as stand in a row (a Run): matched
# in one call, none decoded, where their characters are known to be another body's.
_run = re.compile(f"(?:{RUN_MESSAGE})++")

Spec = dict[str, "Spec | None"]


def merged(specs: list[Spec]) -> Spec:
    """One spec that walks every part any of `specs` walks (a leaf in one and walked in another is walked)."""
    out: Spec = {}
    for spec in specs:
        for key, sub in spec.items():
            have = out.get(key)
            out[key] = merged([have, sub]) if have is not None and sub is not None else have or sub
    return out


def parse(text: str, spec: Spec | None, known: Iterator[tuple[int, str]] | None = None, shared: int = 0) -> Node:
    """Decode a whole JSON document; raises json.JSONDecodeError (or RecursionError) on bad input.

    known: (start, string) of strings decoded before from another body (a diff's first), by start: a
    plain message's content equal to the one at the same start is that string, not a copy (a body that
    differs from the other only at its end then holds one content string per message, not two).
    shared: how many leading characters of the text that other body has the same (common_prefix): the
    plain messages standing wholly in them are read as Runs, not one by one."""
    try:
        node = _value(text, _ws.match(text).end(), spec, known, shared)  # type: ignore[union-attr]  # _WS matches anywhere
    except StopIteration as err:
        raise json.JSONDecodeError("Expecting value", text, err.value) from None
    tail = _ws.match(text, node.end).end()  # type: ignore[union-attr]
    if tail != len(text):
        raise json.JSONDecodeError("Extra data", text, tail)
    return node


def _value(
    text: str, idx: int, spec: Spec | None, known: Iterator[tuple[int, str]] | None = None, shared: int = 0
) -> Node:
    if spec is not None:
        char = text[idx : idx + 1]
        if char == "{":
            return _object(text, idx, spec, known, shared)
        if char == "[" and "[]" in spec:
            return _array(text, idx, spec["[]"], known, shared)
    value, end = _scan(text, idx)
    return Node(value, idx, end)


def _object(text: str, start: int, spec: Spec, known: Iterator[tuple[int, str]] | None = None, shared: int = 0) -> Node:
    value: dict[str, Any] = {}
    kids: dict[str, Node] = {}
    found = _object_open.match(text, start)
    end = start + 1
    while True:
        if found is None:  # a key with escapes, or bad JSON
            key, idx = _escaped_key(text, end, first=not value)
        elif found[2] is not None:
            return Node(value, start, found.end(), kids)
        else:
            key, idx = found[1], found.end()
        if key in spec:
            # runs only in a messages list (Anthropic, Chat): the Responses API's input items are read as values
            node = kids[key] = _value(text, idx, spec[key], known, shared if key == "messages" else 0)
            value[key], end = node.value, node.end
        else:
            value[key], end = _scan(text, idx)
        found = _object_next.match(text, end)


def _escaped_key(text: str, idx: int, first: bool) -> tuple[str, int]:
    """The slow path of _object: the delimiter and key at idx, or the error json.loads would give."""
    idx = _ws.match(text, idx).end()  # type: ignore[union-attr]
    if not first:
        if not text.startswith(",", idx):
            raise json.JSONDecodeError("Expecting ',' delimiter", text, idx)
        idx = _ws.match(text, idx + 1).end()  # type: ignore[union-attr]
    if not text.startswith('"', idx):
        raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, idx)
    key, idx = scanstring(text, idx + 1)
    colon = _colon.match(text, idx)
    if colon is None:
        raise json.JSONDecodeError("Expecting ':' delimiter", text, idx)
    return key, colon.end()


def _array(
    text: str, start: int, spec: Spec | None, known: Iterator[tuple[int, str]] | None = None, shared: int = 0
) -> Node:
    found = _array_open.match(text, start)
    closed, idx = found[1] is not None, found.end()  # type: ignore[index, union-attr]  # '[' is at start
    if spec is not None and "content" in spec and "role" not in spec:  # elements may be plain messages
        return _messages(text, start, spec, closed, idx, known, shared)
    value: list[Any] = []
    kids: list[Node] = []
    while not closed:
        if spec is None:  # leaf elements (tools, blocks): the hot path
            item, end = _scan(text, idx)
            kids.append(Node(item, idx, end))
        else:
            node = _value(text, idx, spec)
            item, end = node.value, node.end
            kids.append(node)
        value.append(item)
        found = _array_next.match(text, end)
        if found is None:
            raise json.JSONDecodeError("Expecting ',' delimiter", text, end)
        closed, idx = found[1] is not None, found.end()
    return Node(value, start, idx, kids)


def _messages(
    text: str, start: int, spec: Spec, closed: bool, idx: int, known: Iterator[tuple[int, str]] | None, shared: int
) -> Node:
    """_array's loop for an array whose elements may be plain messages: their nodes left to Elements.
    shared: the length of the text another body has the same (0: none): the plain user and assistant
    messages standing wholly in it are read as Runs."""
    value: list[Any] = []
    kids = Elements(value, text, known is not None)
    contents, spans, nodes, runs = kids.contents, kids.spans, kids.nodes, kids.runs
    roles: dict[str, dict[str, Any]] = {}  # one role object per role, not one per message
    none = (len(text), "")  # the next known string at or after this array's start (none: past the end)
    at, was = next(known, none) if known is not None else none
    i = 0  # the element index (a run's messages take one slot for all)
    while not closed:
        if idx < shared:
            found = _run.match(text, idx, shared)
            if found is not None:
                count = text.count('"role"', idx, found.end())  # its strings hold no quote: one per message
                runs.append(Run(i, count, idx, found.end(), text))
                value.append(RUN_VALUE)
                if contents is not None:
                    contents.append(None)
                spans.extend((-1, -1, -1))
                i, idx = i + count, found.end()
                continue
        message = _plain_message.match(text, idx)
        if message is not None:  # the message and the delimiter after it
            role = message[2]
            quote, close = message.span(3)
            if contents is not None:
                while at < quote:
                    at, was = next(known, none)  # type: ignore[arg-type]  # `at` is past the text when known is None
                # the other string when it stands at the same start with the same length and characters
                same = at == quote and len(was) == close - quote - 2 and text.startswith(was, quote + 1)
                contents.append(was if same else None)
            fields = roles.get(role)
            value.append(fields if fields is not None else roles.setdefault(role, {"role": role}))
            spans.extend((idx, message.end(1), quote))
            closed, idx = message[5] is not None, message.end()
            i += 1
            continue
        node = nodes[i] = _value(text, idx, spec, known)
        value.append(node.value)
        if contents is not None:
            contents.append(None)
        spans.extend((-1, -1, -1))
        i += 1
        found = _array_next.match(text, node.end)
        if found is None:
            raise json.JSONDecodeError("Expecting ',' delimiter", text, node.end)
        closed, idx = found[1] is not None, found.end()
    kids.size = i
    return Node(value, start, idx, kids)


def common_prefix(a: str, b: str) -> int:
    """How many leading characters a and b share: compared a slice at a time at C speed, then the first
    differing slice by halves."""
    step, n, lo = 1 << 20, min(len(a), len(b)), 0
    while lo < n:
        hi = min(lo + step, n)
        if a[lo:hi] != b[lo:hi]:
            break
        lo = hi
    else:
        return n
    while hi - lo > 1:  # a[:lo] == b[:lo]; they differ before hi
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


# JSON pointers (RFC 6901): how findings, causes and fixes name a place in a request body.
def split_pointer(pointer: str) -> list[str]:
    """RFC 6901 tokens of a pointer ("" is the whole document)."""
    if not pointer:
        return []
    if not pointer.startswith("/"):
        raise ValueError(f"not a JSON pointer: {pointer!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def join_pointer(base: str, *tokens: str | int) -> str:
    return base + "".join("/" + str(t).replace("~", "~0").replace("/", "~1") for t in tokens)
