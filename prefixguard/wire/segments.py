"""Shared by the adapters: turn a part of the body into a Segment (canon bytes, tokens, breakpoint)."""
from __future__ import annotations

import json
from json.encoder import c_make_encoder, encode_basestring_ascii
from typing import Any

from prefixguard import tokens
from prefixguard.errors import InputError
from prefixguard.prompt import Segment
from prefixguard.wire.jsonspan import Node

# Breakpoint markers tell the provider where to write the cache; they are not part of the rendered
# prompt, so they stay out of the canon (moving one is a breakpoint change, not a content change).
MARKER_KEYS = ("cache_control", "prompt_cache_breakpoint")

# The JSON the provider parses, re-serialized compactly with key order as sent.
_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _no_default(value: Any) -> Any:
    raise TypeError(f"not JSON: {type(value).__name__}")


# For hashing: the same compact JSON with non-ASCII as \u escapes, an equally exact encoding of the
# value that json's C encoder writes about twice as fast. Built once (JSONEncoder.encode builds one per
# call, which costs more than encoding a typical block); decoded JSON has no cycles, so no markers.
_ascii_chunks = c_make_encoder(None, _no_default, encode_basestring_ascii, None, ":", ",", False, False, True)


def _compact_ascii(value: Any) -> str:
    return "".join(_ascii_chunks(value, 0))


def without_markers(value: Any) -> Any:
    if isinstance(value, dict) and ("cache_control" in value or "prompt_cache_breakpoint" in value):
        return {k: v for k, v in value.items() if k not in MARKER_KEYS}
    return value


class Builder:
    """Collects segments in prefix order; counts tokens with the tokenizer or, if told not to, estimates."""

    def __init__(self, count_tokens: bool = True) -> None:
        self.segments: list[Segment] = []
        self.estimated = not count_tokens or tokens.is_estimated()
        self._count = tokens.estimate if self.estimated else tokens.count

    def add(self, level: str, pointer: str, kind: str, node: Node, *, role: str | None = None,
            message_index: int | None = None, header: dict[str, Any] | None = None,
            breakpoint: str | None = None, text: str | None = None) -> Segment:
        """header: the message's own fields (role, name, ids...) when this part starts a message."""
        value = without_markers(node.value)
        body = _compact_ascii(value)
        # The marker puts level, role and message boundaries into the fingerprint: the same block moved
        # into another message, or under another role, renders differently.
        opener = "" if header is None else "\x1d" + _compact_ascii(header)
        canon = f"\x1e{level}\x1f{role or ''}{opener}\x1f{body}".encode("utf-8", "surrogatepass")
        if not isinstance(text, str):  # count the JSON as the provider sees it, non-ASCII unescaped
            text = _compact(value) if "\\u" in body else body
        seg = Segment(level, pointer, kind, role, node.value, node.start, node.end, canon,
                      self._count(text), breakpoint, message_index)
        self.segments.append(seg)
        return seg


def expect(node: Node | None, kind: type | tuple[type, ...], where: str) -> Node | None:
    """The node if it has the expected JSON type, None if absent or null; else a one-line InputError."""
    if node is None or node.value is None:
        return None
    if isinstance(node.value, kind):
        return node
    raise InputError(f"{where} must be {_json_type(kind)}, got {_json_type(type(node.value))}")


def _json_type(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
             float: "a number", type(None): "null"}
    return " or ".join(dict.fromkeys(names.get(k, k.__name__) for k in kinds))


def message_header(message: dict[str, Any], *content_keys: str) -> dict[str, Any]:
    """A message's fields other than its content parts: role, name, tool_call_id, ..."""
    return {k: v for k, v in message.items() if k not in content_keys and k not in MARKER_KEYS}
