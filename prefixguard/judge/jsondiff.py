"""What changed between two JSON values or texts, in words: keys and items added or removed, values
changed, key orders, whitespace, one string; and excerpts around a first difference. Used by compare and
its classifiers."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from typing import Any

from prefixguard.model.fingerprint import prefix_length
from prefixguard.model.prompt import LEVELS, MARKER_KEYS, Segment, compact_json
from prefixguard.wire.fields import TEXT_KEYS

EXCERPT = 72  # characters of an excerpt


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
            stack += [(f"{path}/{k}", u, v) for k, (u, v) in enumerate(zip(x, y, strict=False))]
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
_KINDS = (
    "type_changes",
    "dictionary_item_added",
    "dictionary_item_removed",
    "values_changed",
    "iterable_item_added",
    "iterable_item_removed",
)


def changes(va: Any, vb: Any) -> list[str]:
    """One line per change from va to vb, as deepdiff finds them: an object's keys added or removed, a
    list's items added or removed (deepdiff aligns lists as difflib aligns lines), values changed;
    types changed first. Key order is not a change here: key_orders names it."""
    one = _one_string_changed(va, vb)
    if one is not None:
        return [one]
    tree = _deepdiff()(va, vb, view="tree", verbose_level=2)
    found = [
        (kind, _pointer(item.path(output_format="list")), item.t1, item.t2)
        for kind in _KINDS
        for item in tree.get(kind, ())
    ]
    told = {path for _, path, _, _ in found}
    # deepdiff takes Python's equality inside lists, where True == 1: such a swap is told here
    swaps = [("type_changes", path, old, new) for path, old, new in _equal_but_retyped(va, vb, "") if path not in told]
    return [_change(kind, path, old, new) for kind, path, old, new in swaps + found]


def _equal_but_retyped(x: Any, y: Any, path: str) -> list[tuple[str, Any, Any]]:
    """The leaves where x and y hold equal numbers of different JSON types (true and 1, 1 and 1.0), in
    parts whose shape they share."""
    if isinstance(x, dict) and isinstance(y, dict):
        return [found for k in x if k in y for found in _equal_but_retyped(x[k], y[k], f"{path}/{k}")]
    if isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
        return [
            found
            for i, (u, v) in enumerate(zip(x, y, strict=True))
            for found in _equal_but_retyped(u, v, f"{path}/{i}")
        ]
    if type(x) is not type(y) and isinstance(x, (bool, int, float)) and isinstance(y, (bool, int, float)) and x == y:
        return [(path or "text", x, y)]
    return []


def _deepdiff() -> Any:
    """deepdiff's DeepDiff, imported on first use without numpy and pydantic: it imports them only to
    compare their own types, which JSON values never are, and they are most of its import time (a `diff`
    that needs it stays within the startup budget: bench/RESULTS.md)."""
    blocked = [name for name in ("numpy", "pydantic") if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]   # `import name` raises ImportError
    try:
        from deepdiff import DeepDiff
    finally:
        for name in blocked:
            if sys.modules.get(name, False) is None:
                del sys.modules[name]
    return DeepDiff


def _pointer(path: list[Any]) -> str:
    return "".join(f"/{k}" for k in path) or "text"


def _one_string_changed(va: Any, vb: Any) -> str | None:
    """The line deepdiff gives when two values differ in one string only (a text, a system prompt, one
    field of a block: most edits), without importing it; None for anything else."""
    if isinstance(va, str) and isinstance(vb, str):
        return _change("values_changed", "text", va, vb) if va != vb else None
    if not isinstance(va, dict) or not isinstance(vb, dict) or list(va) != list(vb):
        return None
    changed = [
        k for k in va if va[k] != vb[k] or type(va[k]) is not type(vb[k]) or _equal_but_retyped(va[k], vb[k], "")
    ]
    if len(changed) != 1 or not isinstance(va[changed[0]], str) or not isinstance(vb[changed[0]], str):
        return None
    return _change("values_changed", f"/{changed[0]}", va[changed[0]], vb[changed[0]])


def _change(report: str, path: str, old: Any, new: Any) -> str:
    if report.endswith("_added"):
        return f"added {path} = {short(new)}"
    if report.endswith("_removed"):
        return f"removed {path} (was {short(old)})"
    if report == "type_changes":  # as JSON, so 1 -> "1" shows what changed
        return f"{path}: {short(json.dumps(old, ensure_ascii=False))} -> {short(json.dumps(new, ensure_ascii=False))}"
    if isinstance(old, str) and isinstance(new, str):
        p = common_start(old, new)
        before, after = excerpts(old, new, p, 40, raw=False)
        return f"{path}: '{before}' -> '{after}'"
    return f"{path}: {short(old)} -> {short(new)}"


def _json_kind(value: Any) -> str:
    kinds: dict[type, str] = {str: "a string", list: "a list of blocks", dict: "an object"}
    return kinds.get(type(value), type(value).__name__)


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
    return text if len(text) <= limit else text[: limit - 1] + "…"


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
    piece = text[start : min(end, start + width)]
    piece = " ".join(piece.split()) if raw else piece.encode("unicode_escape").decode("ascii")
    return ("…" if start > 0 else "") + piece + ("…" if min(end, start + width) < len(text) else "")
