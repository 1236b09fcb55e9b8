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
from array import array
from collections.abc import Iterator, Sequence
from json.decoder import scanstring  # type: ignore[attr-defined]  # the C scanner, not in typeshed
from typing import Any

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

Spec = dict[str, "Spec | None"]


def merged(specs: list[Spec]) -> Spec:
    """One spec that walks every part any of `specs` walks (a leaf in one and walked in another is walked)."""
    out: Spec = {}
    for spec in specs:
        for key, sub in spec.items():
            have = out.get(key)
            out[key] = merged([have, sub]) if have is not None and sub is not None else have or sub
    return out


class Node:
    """A decoded value and its span in the text; kids for the containers the spec walked."""

    __slots__ = ("value", "start", "end", "kids")

    def __init__(
        self, value: Any, start: int, end: int, kids: dict[str, Node] | list[Node] | Elements | None = None
    ) -> None:
        self.value = value
        self.start = start
        self.end = end
        self.kids = kids

    def get(self, key: str) -> Node | None:
        return self.kids.get(key) if isinstance(self.kids, dict) else None

    @property
    def elements(self) -> Sequence[Node]:
        """An array's element nodes, as walked by its spec (none for any other value)."""
        kids = self.kids
        return kids if isinstance(kids, (list, Elements)) else []

    @property
    def members(self) -> dict[str, Node]:
        """An object's member nodes, as walked by its spec (none for any other value)."""
        kids = self.kids
        return kids if type(kids) is dict else {}


ABSENT = Node(None, 0, 0)  # a member the body lacks, where a Node is easier to hold than None


class PlainMessage(Node):
    """A message matched by _plain_message: its one walked member, the content string, becomes a Node
    only when asked for (a million messages then hold no dict of kids and no second node each)."""

    __slots__ = ("content_start",)

    def __init__(self, value: dict[str, Any], start: int, end: int, content_start: int) -> None:
        self.value, self.start, self.end, self.content_start = value, start, end, content_start

    def get(self, key: str) -> Node | None:
        """The content member's node."""
        return Node(self.value["content"], self.content_start, self.content_end) if key == "content" else None

    @property
    def content_end(self) -> int:
        """Where the content string ends: it has no escapes, so its span is its length and two quotes."""
        return self.content_start + len(self.value["content"]) + 2

    @property
    def kids(self) -> dict[str, Node]:  # type: ignore[override]  # made when asked for, never set
        return {"content": Node(self.value["content"], self.content_start, self.content_end)}


class Elements(Sequence[Any]):
    """The element nodes of an array that may hold plain messages: a plain message's node is made when
    read, from its three offsets kept in one array of integers, and only the other elements' nodes are
    kept (a million messages then hold no node, no offset object and no list slot until the adapter
    reaches them, one at a time)."""

    __slots__ = ("values", "spans", "nodes")

    def __init__(self, values: list[Any], size: int) -> None:
        self.values = values  # the array's decoded elements
        # start, end and content start of each element (-1: not a plain message), in 4 bytes where they fit
        self.spans = array("i" if size < 2**31 else "q")
        self.nodes: dict[int, Node] = {}  # the elements that are not plain messages

    def __len__(self) -> int:
        return len(self.spans) // 3

    def __getitem__(self, i: Any) -> Any:
        if type(i) is not int:
            raise TypeError("elements are read one at a time")
        n = len(self)
        if not -n <= i < n:
            raise IndexError(i)
        i %= n
        node = self.nodes.get(i)
        value = self.values[i]
        if node is not None or value is None:  # not a plain message; or one released (segments.release)
            return node
        spans = self.spans
        return PlainMessage(value, spans[3 * i], spans[3 * i + 1], spans[3 * i + 2])

    def __setitem__(self, i: int, node: None) -> None:
        """Only to let go of an element (segments.release)."""
        self.nodes.pop(i, None)

    def __iter__(self) -> Iterator[Any]:
        values, spans, nodes = self.values, self.spans, self.nodes
        for i in range(len(self)):
            node = nodes.get(i)
            if node is None and values[i] is not None:
                j = 3 * i
                node = PlainMessage(values[i], spans[j], spans[j + 1], spans[j + 2])
            yield node


def parse(text: str, spec: Spec | None, known: Iterator[tuple[int, str]] | None = None) -> Node:
    """Decode a whole JSON document; raises json.JSONDecodeError (or RecursionError) on bad input.

    known: (start, string) of strings decoded before from another body (a diff's first), by start: a
    plain message's content equal to the one at the same start is that string, not a copy (a body that
    differs from the other only at its end then holds one content string per message, not two)."""
    try:
        node = _value(text, _ws.match(text).end(), spec, known)  # type: ignore[union-attr]  # _WS matches anywhere
    except StopIteration as err:
        raise json.JSONDecodeError("Expecting value", text, err.value) from None
    tail = _ws.match(text, node.end).end()  # type: ignore[union-attr]
    if tail != len(text):
        raise json.JSONDecodeError("Extra data", text, tail)
    return node


def _value(text: str, idx: int, spec: Spec | None, known: Iterator[tuple[int, str]] | None = None) -> Node:
    if spec is not None:
        char = text[idx : idx + 1]
        if char == "{":
            return _object(text, idx, spec, known)
        if char == "[" and "[]" in spec:
            return _array(text, idx, spec["[]"], known)
    value, end = _scan(text, idx)
    return Node(value, idx, end)


def _object(text: str, start: int, spec: Spec, known: Iterator[tuple[int, str]] | None = None) -> Node:
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
            node = kids[key] = _value(text, idx, spec[key], known)
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


def _array(text: str, start: int, spec: Spec | None, known: Iterator[tuple[int, str]] | None = None) -> Node:
    found = _array_open.match(text, start)
    closed, idx = found[1] is not None, found.end()  # type: ignore[index, union-attr]  # '[' is at start
    if spec is not None and "content" in spec and "role" not in spec:  # elements may be plain messages
        return _messages(text, start, spec, closed, idx, known)
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
    text: str, start: int, spec: Spec, closed: bool, idx: int, known: Iterator[tuple[int, str]] | None
) -> Node:
    """_array's loop for an array whose elements may be plain messages: their nodes left to Elements."""
    value: list[Any] = []
    kids = Elements(value, len(text))
    spans, nodes = kids.spans, kids.nodes
    roles: dict[str, str] = {}  # one string per role, not one per message
    # the next known string at or after this array's start (none known: past the end of the text)
    none = (len(text), "")
    at, was = next(known, none) if known is not None else none
    while not closed:
        message = _plain_message.match(text, idx)
        if message is not None:  # the message and the delimiter after it
            role = message[2]
            quote, close = message.span(3)
            while at < quote:
                at, was = next(known, none)  # type: ignore[arg-type]  # `at` is past the text when known is None
            # equal when the other string stands at the same start, has the same length and the same characters
            if at == quote and len(was) == close - quote - 2 and text.startswith(was, quote + 1):
                content = was
            else:
                content = message[4]
            value.append({"role": roles.setdefault(role, role), "content": content})
            spans.extend((idx, message.end(1), quote))
            closed, idx = message[5] is not None, message.end()
            continue
        node = nodes[len(value)] = _value(text, idx, spec, known)
        value.append(node.value)
        spans.extend((-1, -1, -1))
        found = _array_next.match(text, node.end)
        if found is None:
            raise json.JSONDecodeError("Expecting ',' delimiter", text, node.end)
        closed, idx = found[1] is not None, found.end()
    return Node(value, start, idx, kids)


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
