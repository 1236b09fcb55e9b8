"""What changed between two JSON values or texts, in words: keys and items added or removed, values
changed, key orders, whitespace, one string; and excerpts around a first difference. Used by compare and
its classifiers."""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from prefixguard.fingerprint import prefix_length
from prefixguard.prompt import LEVELS, MARKER_KEYS, Segment, compact_json
from prefixguard.wire.fields import TEXT_KEYS

EXCERPT = 72          # characters of an excerpt


def _rebuilt(value: Any, text: Callable[[str], Any] = lambda s: s, drop: tuple[str, ...] = ()) -> Any:
    """The JSON value rebuilt with each string replaced by text(string) and the keys in drop left out."""
    if isinstance(value, dict):
        return {k: _rebuilt(v, text, drop) for k, v in value.items() if k not in drop}
    if isinstance(value, list):
        return [_rebuilt(v, text, drop) for v in value]
    return text(value) if isinstance(value, str) else value


def unmarked(value: Any) -> Any:
    """The value without breakpoint markers (they are not rendered content)."""
    return _rebuilt(value, drop=MARKER_KEYS)


def json_data(value: Any) -> Any:
    """Order-free data: JSON carried in strings (tool-call arguments) decoded too."""
    return _rebuilt(value, _decoded_json)


def _decoded_json(text: str) -> Any:
    if text[:1] in ("{", "["):
        try:
            return json_data(json.loads(text))
        except (ValueError, RecursionError):
            pass
    return text


def spaceless(value: Any) -> Any:
    return _rebuilt(value, lambda s: re.sub(r"\s+", "", s))


def key_orders(da: Any, db: Any) -> str:
    """The first object of two json_data values whose keys come in another order, as 'path: a, b -> b, a'."""
    stack: list[tuple[str, Any, Any]] = [("", da, db)]
    while stack:
        path, x, y = stack.pop(0)
        if isinstance(x, dict) and isinstance(y, dict):
            if list(x) != list(y):
                return f"{path or '/'}: {', '.join(x)} -> {', '.join(y)}"
            stack += [(f"{path}/{k}", x[k], y[k]) for k in x]
        elif isinstance(x, list) and isinstance(y, list):
            stack += [(f"{path}/{k}", u, v) for k, (u, v) in enumerate(zip(x, y))]
    return "keys reordered"


def explain_change(sa: Segment, sb: Segment) -> str:
    """What changed inside a part, in one line (the first two changes)."""
    if sa.level != sb.level:  # one side has a part the other lacks at this level
        extra, other, side = (sa, sb, "A") if LEVELS.index(sa.level) < LEVELS.index(sb.level) else (sb, sa, "B")
        return f"{side} has {extra.pointer} ({extra.level}) where the other has moved on to {other.level}"
    va, vb = json_data(unmarked(sa.value)), json_data(unmarked(sb.value))
    if type(va) is not type(vb):
        return f"re-serialized: {_json_kind(va)} -> {_json_kind(vb)}"
    lines = changes(va, vb)
    if not lines:
        return "message fields changed (role, name or ids)" if sa.key != sb.key else "no visible change"
    more = f" (+{len(lines) - 2} more)" if len(lines) > 2 else ""
    return "; ".join(lines[:2]) + more


# The order changes are told in: by kind (a changed type says most), then in the order of the document.
_KINDS = ("type_changed", "key_added", "key_removed", "value_changed", "item_added", "item_removed")


def changes(va: Any, vb: Any) -> list[str]:
    """One line per change from va to vb: an object's keys added or removed, a list's items added or
    removed (matched in order, as difflib matches lines), values changed; types changed first."""
    found: list[tuple[int, str, Any, Any]] = []
    _walk(va, vb, "", found)
    found.sort(key=lambda f: f[0])  # stable: within a kind, in the order of the document
    return [_change(_KINDS[kind], path or "text", old, new) for kind, path, old, new in found]


def _walk(a: Any, b: Any, path: str, found: list[tuple[int, str, Any, Any]]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        found += [(1, f"{path}/{k}", None, b[k]) for k in b if k not in a]
        found += [(2, f"{path}/{k}", a[k], None) for k in a if k not in b]
        for k in a:
            if k in b:
                _walk(a[k], b[k], f"{path}/{k}", found)
    elif isinstance(a, list) and isinstance(b, list):
        for i1, i2, j1, j2 in _aligned(a, b):  # a[i1:i2] became b[j1:j2]
            n = min(i2 - i1, j2 - j1)
            for k in range(n):
                _walk(a[i1 + k], b[j1 + k], f"{path}/{j1 + k}", found)
            found += [(5, f"{path}/{i}", a[i], None) for i in range(i1 + n, i2)]
            found += [(4, f"{path}/{j}", None, b[j]) for j in range(j1 + n, j2)]
    elif type(a) is not type(b):
        found.append((0, path, a, b))
    elif a != b:
        found.append((3, path, a, b))


def _aligned(a: list[Any], b: list[Any]) -> list[tuple[int, int, int, int]]:
    """The stretches where two lists differ, (i1, i2, j1, j2): a[i1:i2] became b[j1:j2]. Lists of one
    length pair item by item; others are matched first (an item inserted in front is not every later
    item changed)."""
    if len(a) == len(b):
        return [(0, len(a), 0, len(b))]
    from difflib import SequenceMatcher
    keys = [[json.dumps(x, sort_keys=True, default=str) for x in side] for side in (a, b)]
    return [(i1, i2, j1, j2) for op, i1, i2, j1, j2 in SequenceMatcher(None, *keys, autojunk=False).get_opcodes()
            if op != "equal"]


def _change(report: str, path: str, old: Any, new: Any) -> str:
    if report.endswith("_added"):
        return f"added {path} = {short(new)}"
    if report.endswith("_removed"):
        return f"removed {path} (was {short(old)})"
    if report == "type_changed":  # as JSON, so 1 -> "1" shows what changed
        return f"{path}: {short(json.dumps(old, ensure_ascii=False))} -> {short(json.dumps(new, ensure_ascii=False))}"
    if isinstance(old, str) and isinstance(new, str):
        p = common_start(old, new)
        before, after = excerpts(old, new, p, 40, raw=False)
        return f"{path}: '{before}' -> '{after}'"
    return f"{path}: {short(old)} -> {short(new)}"


def _json_kind(value: Any) -> str:
    return {str: "a string", list: "a list of blocks", dict: "an object"}.get(type(value), type(value).__name__)


def text_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for key in TEXT_KEYS:
            if isinstance(value.get(key), str):
                return value[key]
    return compact_json(value)


def short(value: Any, limit: int = 48) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def common_start(x: str | bytes, y: str | bytes) -> int:
    n = min(len(x), len(y))
    if x[:n] == y[:n]:
        return n
    return prefix_length(n, lambda k: x[:k] == y[:k])  # slices: C-speed compares, O(n log n) worst case


def excerpts(x: str, y: str, p: int, width: int = EXCERPT, raw: bool = True) -> tuple[str, str]:
    """The differing stretch of x and y from a little before p, trimmed to width, on one line.

    raw: JSON text, where whitespace between tokens means nothing (collapsed); else a decoded string,
    where it does (newlines and tabs shown escaped)."""
    limit = min(len(x), len(y)) - p
    suffix = common_start(x[::-1][:limit], y[::-1][:limit])
    lead = min(p, width // 2)
    return (_trim(x, p - lead, len(x) - suffix, width, raw), _trim(y, p - lead, len(y) - suffix, width, raw))


def _trim(text: str, start: int, end: int, width: int, raw: bool) -> str:
    end = min(len(text), max(end + 12, start + width // 2))  # some context after the change
    piece = text[start:min(end, start + width)]
    piece = " ".join(piece.split()) if raw else piece.encode("unicode_escape").decode("ascii")
    return ("…" if start > 0 else "") + piece + ("…" if min(end, start + width) < len(text) else "")
