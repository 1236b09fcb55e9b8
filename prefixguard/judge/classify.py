"""Why a segment of a later request differs from the earlier one's: the compare cause (tools reordered,
volatile content, history rewritten...) and a one-line detail. compare.py calls `classify` at the first
divergence; the taxonomy's words are in rules/catalog.toml (prefixguard/judge/causes.py)."""

from __future__ import annotations

import re
from collections import Counter
from itertools import islice
from typing import Any

from prefixguard.judge.jsondiff import explain_change, json_data, key_orders, short, spaceless, text_of, unmarked
from prefixguard.model import templates
from prefixguard.model.prompt import Prompt, Segment, compact_json
from prefixguard.model.volatile import find_volatile
from prefixguard.wire.fields import COMPACTION_KINDS
from prefixguard.wire.segments import tool_name

# How apps introduce a summary that replaces the history (a new conversation is a rewrite, not this).
SUMMARY_WORDS = re.compile(
    r"(?i)\bsummar(?:y|ies|ized|ised)\b|continued from|previous conversation|"
    r"earlier conversation|conversation so far|compacted"
)


FALLBACK = {"tools": "tool_schema_changed", "system": "system_changed", "messages": "history_rewritten"}


WINDOW = 200  # characters around a difference searched for volatile content


MAX_EXPLAIN_DEPTH = 100  # JSON nesting the classifiers walk recursively; deeper parts are not explained


def too_deep(value: Any, limit: int = MAX_EXPLAIN_DEPTH) -> bool:
    """Nesting deeper than limit, found without recursion."""
    stack = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(v, dict):
            stack.extend((x, depth + 1) for x in v.values() if isinstance(x, (dict, list)))
        elif isinstance(v, list):
            stack.extend((x, depth + 1) for x in v if isinstance(x, (dict, list)))
    return False


def classify(
    a: Prompt, b: Prompt, sa: Segment, sb: Segment, ta: str, tb: str, p: int, level: str, at: int = 0
) -> tuple[str, str]:
    """at: the index of sa in A and sb in B, the first segment they differ in."""
    if level == "tools":
        return _tools_cause(a, b, sa, sb, ta, tb, p)
    if level == "system":
        cause, detail = _within(sa, sb, ta, tb, p) if sa.pointer == sb.pointer else (None, "")
        return (cause, detail) if cause is not None else ("system_changed", explain_change(sa, sb))
    if "image" in (sa.kind, sb.kind):
        return "images_changed", _image_detail(sa, sb)
    cause, detail = _history_cause(a, b, at)
    if cause is None and sa.pointer == sb.pointer:
        cause, detail = _within(sa, sb, ta, tb, p)
    return (cause, detail) if cause is not None else ("history_rewritten", explain_change(sa, sb))


def _image_detail(sa: Segment, sb: Segment) -> str:
    if sa.kind == sb.kind:
        return f"the image at {sb.pointer} changed"
    return f"image {sa.pointer} removed" if sa.kind == "image" else f"image {sb.pointer} added"


def _tools_cause(a: Prompt, b: Prompt, sa: Segment, sb: Segment, ta: str, tb: str, p: int) -> tuple[str, str]:
    wa, wb = _tools_written(a), _tools_written(b)
    if wa != wb and templates.tools_at(b.api, b.model) is not None:
        return "tools_moved", f"{b.model}'s chat template wrote them {_written(wa)} in A, {_written(wb)} in B"
    na, nb = _tool_names(a), _tool_names(b)
    ca, cb = Counter(na), Counter(nb)
    if na != nb and ca == cb:
        return "tools_reordered", f"same {len(na)} tools in another order: {_moved(na, nb)}"
    if ca != cb:
        added = list((cb - ca).elements())
        removed = list((ca - cb).elements())
        parts = [f"added {', '.join(added)}" if added else "", f"removed {', '.join(removed)}" if removed else ""]
        return "tools_changed", "; ".join(x for x in parts if x)
    cause, detail = _within(sa, sb, ta, tb, p)
    return (cause, detail) if cause else ("tool_schema_changed", f"{_tool_name(sb.value)}: {explain_change(sa, sb)}")


def _tools_written(p: Prompt) -> int | None:
    """The index of the message the tools are written into (the first message after them); None where the
    prompt holds none."""
    at = next((i for i, s in enumerate(p.segments) if s.level == "tools"), None)
    if at is None:
        return None
    return next((s.message_index for s in islice(p.segments, at, None) if s.level != "tools"), None)


def _written(message: int | None) -> str:
    return "into no message" if message is None else f"into message {message}"


def _tool_names(p: Prompt) -> list[str]:
    return [_tool_name(s.value) for s in p.segments if s.level == "tools" and s.kind == "tool"]


def _tool_name(value: Any) -> str:
    return str(tool_name(value, server_type=True)) if isinstance(value, dict) else "?"


def _moved(na: list[str], nb: list[str]) -> str:
    i = next(k for k, (x, y) in enumerate(zip(na, nb, strict=False)) if x != y)
    return f"position {i} was {na[i]}, is {nb[i]}"


def _within(sa: Segment, sb: Segment, ta: str, tb: str, p: int) -> tuple[str | None, str]:
    """The cause of a change inside one part that is in the same place in both requests."""
    va, vb = unmarked(sa.value), unmarked(sb.value)
    da, db = json_data(va), json_data(vb)
    if da == db and compact_json(va) != compact_json(vb):
        return "key_order_changed", f"same data, keys in another order: {key_orders(da, db)}"
    hit = _volatile_at(ta, tb, p)
    if hit:
        return "volatile_content", f"{hit[0]} '{hit[1]}' -> '{hit[2]}'"
    if spaceless(da) == spaceless(db) and da != db:
        return "whitespace_changed", explain_change(sa, sb)
    return None, ""


def _volatile_at(ta: str, tb: str, p: int) -> tuple[str, str, str] | None:
    """(pattern, old, new) when the first difference lies inside volatile content in both."""

    def at(text: str) -> Any:
        lo = max(0, p - WINDOW)
        return next(
            (m for m in find_volatile(text[lo : p + WINDOW]) if m.start <= p - lo < max(m.end, m.start + 1)), None
        )

    ma, mb = at(ta), at(tb)
    if ma is None or mb is None:
        return None
    return mb.name, ma.text, mb.text


def _history_cause(a: Prompt, b: Prompt, at: int) -> tuple[str | None, str]:
    """Truncated (B's history resumes at a later message of A) or compacted (a summary replaced it).
    at: the first segment the two differ in (the ones before it are the same in both, so the messages
    made only of them are skipped: a million-message history is not keyed again to find its last one)."""
    start = _message_start(a, b, at)
    ma, mb = messages(a, start=start), messages(b, start=start)
    # the first differing message
    ia = next((k for k, ((_, x), (_, y)) in enumerate(zip(ma, mb, strict=False)) if x != y), None)
    if ia is None:
        return None, ""
    rest_a = [key for _, key in ma[ia:]]
    rest_b = [key for _, key in mb[ia:]]
    if rest_b[0] in rest_a[1:]:
        dropped = rest_a.index(rest_b[0])
        first, last = ma[ia][0], ma[ia + dropped - 1][0]
        span = f"message {first}" if dropped == 1 else f"messages {first}..{last}"
        return "history_truncated", (
            f"{dropped} message{'s' * (dropped > 1)} dropped from the window (A's {span}); "
            f"B resumes at A's message {ma[ia + dropped][0]}"
        )
    parts = [s for s in islice(b.segments, start, None) if s.level == "messages" and s.message_index == mb[ia][0]]
    summary = any(s.kind in COMPACTION_KINDS or SUMMARY_WORDS.search(text_of(s.value)[:400]) for s in parts)
    if rest_b[0] in rest_a or not summary or len(rest_b) >= len(rest_a):
        return None, ""
    in_b = set(key for _, key in messages(b))  # all of B's: A's later messages may be in its shared ones
    gone = sum(1 for key in rest_a if key not in in_b)
    if gone < 1:
        return None, ""
    item = next(
        (f"a {s.kind} item" for s in parts if s.kind in COMPACTION_KINDS), f"'{short(text_of(parts[0].value), 60)}'"
    )
    return "history_compacted", f"{gone} of A's messages from {ma[ia][0]} on are gone, replaced by {item}"


def _message_start(a: Prompt, b: Prompt, at: int) -> int:
    """The first segment of the message that holds segment `at` of A, when B's message starts there
    too (the segments before `at` are the same in both); else 0, every message."""
    sa, sb = a.segments, b.segments
    if at >= min(len(sa), len(sb)):
        return 0
    index = sa[at].message_index
    start = at
    while start > 0 and sa[start - 1].message_index == index and sa[start - 1].level == "messages":
        start -= 1
    opens = start == 0 or sb[start - 1].message_index != sb[start].message_index or sb[start - 1].level != "messages"
    return start if opens and sa[start].level == sb[start].level == "messages" else 0


def messages(
    p: Prompt, attr: str = "key", start: int = 0, count: int | None = None
) -> list[tuple[int, tuple[bytes, ...]]]:
    """(message index, the `attr` of each of its parts: fingerprint key or canon) for each message of
    the messages level, in order; from segment `start` on (the first of a message); the first `count`
    only, where given (read no further: a body can hold millions)."""
    out: list[tuple[int, list[bytes]]] = []
    for s in islice(p.segments, start, None):
        index = s.message_index
        if s.level != "messages" or index is None:  # every part of the messages level has its message
            continue
        if out and out[-1][0] == index:
            out[-1][1].append(getattr(s, attr))
        elif len(out) == count:
            break
        else:
            out.append((index, [getattr(s, attr)]))
    return [(idx, tuple(parts)) for idx, parts in out]


def same_message(x: tuple[bytes, ...], y: tuple[bytes, ...]) -> bool:
    """Two messages' canon parts are one message, re-rendered at most with new volatile values."""
    return _masked(x) == _masked(y)


def another_conversation(a: Prompt, b: Prompt) -> bool:
    """B's first message is not A's (nor A's with a new timestamp): its messages are a conversation of
    their own, which nothing A cached holds."""
    ma, mb = messages(a, "canon", count=1), messages(b, "canon", count=1)
    return bool(ma and mb) and not same_message(ma[0][1], mb[0][1])


def _masked(parts: tuple[bytes, ...]) -> str:
    """A message's canon with its volatile values blanked: equal for the same message re-rendered."""
    text = b"".join(parts).decode("utf-8", "replace")
    for m in reversed(find_volatile(text)):
        text = text[: m.start] + "\x00" + text[m.end :]
    return text
