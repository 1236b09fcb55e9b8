"""Compare an earlier request A with a later request B: does B reuse A's cached prefix, and if not,
where does it first diverge, why, what must be prefilled again and what that costs.

Content is compared by the fingerprint chain (segment keys leave breakpoint markers out); breakpoints,
the model and the cache-keying settings are compared on their own, each against the provider contract
in rules/providers.toml (which level a setting change invalidates).
"""
from __future__ import annotations

import json
import re
from bisect import bisect_left
from collections import Counter
from dataclasses import asdict, dataclass, field
from collections.abc import Callable
from itertools import accumulate
from typing import Any


from prefixguard.causes import FIXES
from prefixguard.contracts import model_contract, provider_for, providers
from prefixguard.fingerprint import chain as make_chain
from prefixguard.fingerprint import common_prefix
from prefixguard.policy import breakpoints, make_policy, policy_name
from prefixguard.prompt import LEVELS, MARKER_KEYS, Prompt, Segment, compact_json
from prefixguard.volatile import find_volatile

COMPACTION_KINDS = {"compaction", "compaction_summary"}  # provider-side compaction items
# How apps introduce a summary that replaces the history (a new conversation is a rewrite, not this).
SUMMARY_WORDS = re.compile(r"(?i)\bsummar(?:y|ies|ized|ised)\b|continued from|previous conversation|"
                           r"earlier conversation|conversation so far|compacted")
FALLBACK = {"tools": "tool_schema_changed", "system": "system_changed", "messages": "history_rewritten"}
WINDOW = 200          # characters around a difference searched for volatile content
EXCERPT = 72          # characters of an excerpt


@dataclass(slots=True)
class Divergence:
    level: str          # "tools" | "system" | "messages"
    pointer: str        # JSON pointer in B of the first diverging segment
    byte_offset: int    # first differing byte in B's body
    token_offset: int   # B's tokens before the divergence (= reused tokens)
    segment_index: int  # index of that segment in B's segments


@dataclass(slots=True)
class Comparison:
    broken: bool
    causes: list[str]
    divergence: Divergence | None
    reused_tokens: int
    reprefill_tokens: int
    cost_usd: float       # extra cost of the re-prefill at B's model prices (written or uncached vs read)
    before: str = ""      # excerpt of A at the divergence
    after: str = ""       # excerpt of B at the divergence
    detail: str = ""      # what changed inside the diverging segment
    fix: str = ""
    setting: str | None = None   # which setting changed, for setting_changed
    api: str = ""
    model: str | None = None
    tokens_estimated: bool = False
    extra: list[str] = field(default_factory=list)  # later, secondary findings (one line each)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class _Finding:
    index: int            # segment index in B where it invalidates
    cause: str
    detail: str = ""
    before: str = ""
    after: str = ""
    setting: str | None = None
    offset: int = 0       # character offset of the first difference inside B's segment
    subject: str = ""     # what the fix talks about ("the iso-timestamp '...'", a setting's name)
    byte_extra: int = 0   # bytes the first differing characters share (UTF-8 sequences with a common lead)


def compare(a: Prompt, b: Prompt, elapsed: float | None = None) -> Comparison:
    """How B (the later request) reuses A's prefix: the first divergence, its causes, tokens and cost.

    Tokens follow B's provider contract, A alone having written the cache (`elapsed` seconds before B,
    where known, so the TTL applies): reused_tokens is what B can read of what A wrote (breakpoints,
    lookback, minimum, token steps); reprefill_tokens is what A had cached past that point, as B renders
    it, which B must write again."""
    a_chain = a.chain or make_chain(a.segments)
    b_chain = b.chain or make_chain(b.segments)
    shared = common_prefix(a_chain, b_chain)
    findings = _setting_findings(a, b)
    bp = _breakpoint_finding(a, b, shared)
    if bp is not None:
        findings.append(bp)
    if shared < min(len(a.segments), len(b.segments)) and a.api == b.api:  # another API: nothing to align
        findings.append(_content_finding(a, b, shared))
    findings.sort(key=lambda f: f.index)
    # A finding at or past A's end leaves all of A's prefix in place: B still reuses it whole.
    breaking = [f for f in findings if f.index < len(a.segments)]
    reused, cached = contract_reads(a, b, elapsed)
    if not breaking:
        return Comparison(False, ["append_only"], None, reused, 0, 0.0, detail=_append_detail(a, b),
                          fix=FIXES["append_only"], api=b.api, model=b.model,
                          tokens_estimated=a.estimated or b.estimated,
                          extra=[f"{f.cause}: {f.detail}" for f in findings])
    first = breaking[0]
    at = [f for f in breaking if f.index == first.index]
    causes = list(dict.fromkeys(f.cause for f in at))
    d = first.index
    reprefill = _rewritten(a, b, d, reused, cached)
    seg = b.segments[d] if d < len(b.segments) else None
    char = (seg.start + first.offset) if seg else len(b.text)
    level = _level_at(a, b, d)
    before_divergence = sum(s.tokens for s in b.segments[:d])
    if seg is not None:  # and the part of the diverging segment before its first differing character
        before_divergence += seg.tokens * first.offset // max(1, seg.end - seg.start)
    divergence = Divergence(level, _pointer_at(b, a, d, level), b.byte_offset(char) + first.byte_extra,
                            before_divergence, d)
    setting = next((f.setting for f in at if f.setting), None)
    return Comparison(
        True, causes, divergence, reused, reprefill, _extra_cost(b, d, reprefill),
        before=first.before, after=first.after,
        detail="; ".join(dict.fromkeys(f.detail for f in at if f.detail)),
        fix=" ".join(_fix(f, level) for f in at[:2]), setting=setting, api=b.api, model=b.model,
        tokens_estimated=a.estimated or b.estimated,
        extra=[f"{f.cause} at {_pointer_of(b, f.index)}: {f.detail}" for f in breaking
               if f.index > d and f.cause not in causes])


# ---- what the contract lets B reuse

def contract_reads(a: Prompt, b: Prompt, elapsed: float | None = None) -> tuple[int, int]:
    """(tokens B can read of what A wrote, tokens A had cached) under B's provider contract, with A the
    only request the cache has seen. The policy module is the one place that knows the contracts."""
    policy = make_policy(policy_name(b.api, b.model))
    policy.commit(a, 0.0)
    cached = policy.lookup(a, 0.0).read_tokens
    return (policy.lookup(b, elapsed or 0.0).read_tokens if cached else 0), cached


def _rewritten(a: Prompt, b: Prompt, d: int, reused: int, cached: int) -> int:
    """B's tokens past what it reuses, up to where A's cached prefix ends as B renders it: found by the
    block A's cache ended on, where B still has it after the divergence; else A's own count."""
    if cached <= reused:
        return 0
    ends = list(accumulate(s.tokens for s in a.segments))
    w = min(bisect_left(ends, cached), len(a.segments) - 1)
    key = a.segments[w].key
    j = next((j for j in range(len(b.segments) - 1, d - 1, -1) if b.segments[j].key == key), None)
    if j is None:
        return cached - reused
    return max(0, sum(s.tokens for s in b.segments[:j + 1]) - reused)


# ---- model and settings

def _contract_table(p: Prompt) -> dict[str, Any]:
    return providers()[provider_for(p.api, p.model)]


def _setting_findings(a: Prompt, b: Prompt) -> list[_Finding]:
    invalidates: dict[str, str] = _contract_table(b).get("invalidates", {})
    out = []
    if a.api != b.api or a.model != b.model:
        out.append(_Finding(_first_at_level(b, invalidates.get("model", LEVELS[0])), "model_changed",
                            f"model {a.model} -> {b.model}" + (f" ({a.api} -> {b.api})" if a.api != b.api else ""),
                            before=f"model: {a.model}", after=f"model: {b.model}"))
    if a.api != b.api:  # settings of two API shapes do not compare
        return out
    for key in dict.fromkeys([*a.settings, *b.settings]):
        old, new = a.settings.get(key), b.settings.get(key)
        level = invalidates.get(key)
        if old == new or level is None:  # a setting the contract does not key the cache on
            continue
        cause = "images_changed" if key == "images" else "setting_changed"
        detail = (f"images {'added to' if new else 'removed from'} the request" if key == "images"
                  else f"{key}: {_short(old)} -> {_short(new)}")
        out.append(_Finding(_first_at_level(b, level), cause, f"{detail} (invalidates the {level} level)",
                            before=f"{key}: {_short(old)}", after=f"{key}: {_short(new)}",
                            setting=None if key == "images" else key))
    return out


def _first_at_level(p: Prompt, level: str) -> int:
    rank = LEVELS.index(level)
    return next((i for i, s in enumerate(p.segments) if LEVELS.index(s.level) >= rank), len(p.segments))


# ---- breakpoints

def _breakpoints(p: Prompt) -> dict[int, str]:
    """Block index -> TTL of each breakpoint, the automatic one on the last block that can hold one."""
    return breakpoints(p, _contract_table(p).get("breakpoint_ineligible_kinds", ()))


def _breakpoint_finding(a: Prompt, b: Prompt, shared: int) -> _Finding | None:
    """B loses part of A's cache when it cannot read the longest entry A wrote inside the shared content.

    A writes an entry at each of its breakpoints. B reads an entry through a later breakpoint (looking
    back), or through one on the same block with the same TTL. Moving the newest breakpoint forward
    each turn is the normal pattern and breaks nothing.
    """
    writes, reads = _breakpoints(a), _breakpoints(b)
    ours = sorted(q for q in writes if q < shared)
    if not ours:
        return None

    def readable(q: int) -> bool:
        return any(p > q for p in reads) or reads.get(q) == writes[q]
    best = max((q for q in ours if readable(q)), default=-1)
    if best == ours[-1]:
        return None
    first = next(i for i in range(best + 1, ours[-1] + 1) if writes.get(i) != reads.get(i))
    old, new = writes.get(first), reads.get(first)
    what = "TTL changed" if old and new else "breakpoint removed" if old else "breakpoint added"
    detail = f"{what} at {b.segments[first].pointer} ({_ttl_text(old)} -> {_ttl_text(new)}): B cannot read "
    last = a.segments[ours[-1]].pointer
    detail += "the entry A wrote there" if first == ours[-1] else f"the entry A wrote at {last}"
    return _Finding(best + 1, "breakpoint_changed", detail, before=f"cache_control: {_ttl_text(old)}",
                    after=f"cache_control: {_ttl_text(new)}")


def _ttl_text(ttl: str | None) -> str:
    return f"ttl {ttl}" if ttl else "none"


# ---- content

def _content_finding(a: Prompt, b: Prompt, i: int) -> _Finding:
    sa, sb = a.segments[i], b.segments[i]
    ta, tb = a.text[sa.start:sa.end], b.text[sb.start:sb.end]
    p = _common_prefix(ta, tb)
    before, after = _excerpts(ta, tb, p)
    level = min(sa.level, sb.level, key=LEVELS.index)
    try:
        if _too_deep(sa.value) or _too_deep(sb.value):  # checked first: a RecursionError deep in deepdiff
            raise RecursionError                         # can also fire in finalizers and print noise
        cause, detail = _classify(a, b, sa, sb, ta, tb, p, level)
    except RecursionError:  # a part nested too deeply to walk: still a break, at this level
        cause, detail = FALLBACK[level], "nested too deeply to explain"
    subject = f"the {detail.split(' ', 1)[0]} ({detail.split(' -> ')[-1]})" if cause == "volatile_content" else ""
    shared_bytes = _common_prefix(ta[p].encode("utf-8", "surrogatepass"), tb[p].encode("utf-8", "surrogatepass")) \
        if p < min(len(ta), len(tb)) else 0
    return _Finding(i, cause, detail, before, after, offset=p, subject=subject, byte_extra=shared_bytes)


MAX_EXPLAIN_DEPTH = 100  # JSON nesting the classifiers walk recursively; deeper parts are not explained


def _too_deep(value: Any, limit: int = MAX_EXPLAIN_DEPTH) -> bool:
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


def _classify(a: Prompt, b: Prompt, sa: Segment, sb: Segment, ta: str, tb: str, p: int,
              level: str) -> tuple[str, str]:
    if level == "tools":
        cause, detail = _tools_cause(a, b, sa, sb, ta, tb, p)
    elif level == "system":
        cause, detail = _within(sa, sb, ta, tb, p) if sa.pointer == sb.pointer else (None, "")
        if cause is None:
            cause, detail = "system_changed", _explain(sa, sb)
    elif "image" in (sa.kind, sb.kind):
        cause, detail = "images_changed", _image_detail(sa, sb)
    else:
        cause, detail = _history_cause(a, b)
        if cause is None and sa.pointer == sb.pointer:
            cause, detail = _within(sa, sb, ta, tb, p)
        if cause is None:
            cause, detail = "history_rewritten", _explain(sa, sb)
    return cause, detail


def _image_detail(sa: Segment, sb: Segment) -> str:
    if sa.kind == sb.kind:
        return f"the image at {sb.pointer} changed"
    return f"image {sa.pointer} removed" if sa.kind == "image" else f"image {sb.pointer} added"


def _tools_cause(a: Prompt, b: Prompt, sa: Segment, sb: Segment, ta: str, tb: str, p: int) -> tuple[str, str]:
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
    return (cause, detail) if cause else ("tool_schema_changed", f"{_tool_name(sb.value)}: {_explain(sa, sb)}")


def _tool_names(p: Prompt) -> list[str]:
    return [_tool_name(s.value) for s in p.segments if s.level == "tools" and s.kind == "tool"]


def _tool_name(value: Any) -> str:
    if not isinstance(value, dict):
        return "?"
    fn = value.get("function")
    name = value.get("name") or (fn.get("name") if isinstance(fn, dict) else None) or value.get("type")
    return str(name)


def _moved(na: list[str], nb: list[str]) -> str:
    i = next(k for k, (x, y) in enumerate(zip(na, nb)) if x != y)
    return f"position {i} was {na[i]}, is {nb[i]}"


def _within(sa: Segment, sb: Segment, ta: str, tb: str, p: int) -> tuple[str | None, str]:
    """The cause of a change inside one part that is in the same place in both requests."""
    va, vb = _unmarked(sa.value), _unmarked(sb.value)
    da, db = _data(va), _data(vb)
    if da == db and compact_json(va) != compact_json(vb):
        return "key_order_changed", f"same data, keys in another order: {_key_orders(da, db)}"
    hit = _volatile_at(ta, tb, p)
    if hit:
        return "volatile_content", f"{hit[0]} '{hit[1]}' -> '{hit[2]}'"
    if _spaceless(da) == _spaceless(db) and da != db:
        return "whitespace_changed", _explain(sa, sb)
    return None, ""


def _volatile_at(ta: str, tb: str, p: int) -> tuple[str, str, str] | None:
    """(pattern, old, new) when the first difference lies inside volatile content in both."""
    def at(text: str) -> Any:
        lo = max(0, p - WINDOW)
        return next((m for m in find_volatile(text[lo:p + WINDOW]) if m.start <= p - lo < max(m.end, m.start + 1)),
                    None)
    ma, mb = at(ta), at(tb)
    if ma is None or mb is None:
        return None
    return mb.name, ma.text, mb.text


def _history_cause(a: Prompt, b: Prompt) -> tuple[str | None, str]:
    """Truncated (B's history resumes at a later message of A) or compacted (a summary replaced it)."""
    ma, mb = messages(a), messages(b)
    ia = next((k for k, ((_, x), (_, y)) in enumerate(zip(ma, mb)) if x != y), None)  # first differing message
    if ia is None:
        return None, ""
    rest_a = [key for _, key in ma[ia:]]
    rest_b = [key for _, key in mb[ia:]]
    if rest_b[0] in rest_a[1:]:
        dropped = rest_a.index(rest_b[0])
        first, last = ma[ia][0], ma[ia + dropped - 1][0]
        span = f"message {first}" if dropped == 1 else f"messages {first}..{last}"
        return "history_truncated", (f"{dropped} message{'s' * (dropped > 1)} dropped from the window (A's {span}); "
                                     f"B resumes at A's message {ma[ia + dropped][0]}")
    in_b = set(key for _, key in mb)
    gone = sum(1 for key in rest_a if key not in in_b)
    parts = [s for s in b.segments if s.level == "messages" and s.message_index == mb[ia][0]]
    summary = any(s.kind in COMPACTION_KINDS or SUMMARY_WORDS.search(_text_of(s.value)[:400]) for s in parts)
    if rest_b[0] not in rest_a and summary and gone >= 1 and len(rest_b) < len(rest_a):
        item = next((f"a {s.kind} item" for s in parts if s.kind in COMPACTION_KINDS),
                    f"'{_short(_text_of(parts[0].value), 60)}'")
        return "history_compacted", f"{gone} of A's messages from {ma[ia][0]} on are gone, replaced by {item}"
    return None, ""


def messages(p: Prompt, attr: str = "key") -> list[tuple[int, tuple[bytes, ...]]]:
    """(message index, the `attr` of each of its parts: fingerprint key or canon) for each message of
    the messages level, in order."""
    out: list[tuple[int, list[bytes]]] = []
    for s in p.segments:
        if s.level != "messages":
            continue
        if out and out[-1][0] == s.message_index:
            out[-1][1].append(getattr(s, attr))
        else:
            out.append((s.message_index, [getattr(s, attr)]))
    return [(idx, tuple(parts)) for idx, parts in out]


# ---- values

def _rebuilt(value: Any, text: Callable[[str], Any] = lambda s: s, drop: tuple[str, ...] = ()) -> Any:
    """The JSON value rebuilt with each string replaced by text(string) and the keys in drop left out."""
    if isinstance(value, dict):
        return {k: _rebuilt(v, text, drop) for k, v in value.items() if k not in drop}
    if isinstance(value, list):
        return [_rebuilt(v, text, drop) for v in value]
    return text(value) if isinstance(value, str) else value


def _unmarked(value: Any) -> Any:
    """The value without breakpoint markers (they are not rendered content)."""
    return _rebuilt(value, drop=MARKER_KEYS)


def _data(value: Any) -> Any:
    """Order-free data: JSON carried in strings (tool-call arguments) decoded too."""
    return _rebuilt(value, _decoded_json)


def _decoded_json(text: str) -> Any:
    if text[:1] in ("{", "["):
        try:
            return _data(json.loads(text))
        except (ValueError, RecursionError):
            pass
    return text


def _spaceless(value: Any) -> Any:
    return _rebuilt(value, lambda s: re.sub(r"\s+", "", s))


def _key_orders(da: Any, db: Any) -> str:
    """The first object of two _data values whose keys come in another order, as 'path: a, b -> b, a'."""
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


def _explain(sa: Segment, sb: Segment) -> str:
    """What changed inside a part, by deepdiff, in one line (the first two changes)."""
    if sa.level != sb.level:  # one side has a part the other lacks at this level
        extra, other, side = (sa, sb, "A") if LEVELS.index(sa.level) < LEVELS.index(sb.level) else (sb, sa, "B")
        return f"{side} has {extra.pointer} ({extra.level}) where the other has moved on to {other.level}"
    va, vb = _data(_unmarked(sa.value)), _data(_unmarked(sb.value))
    if type(va) is not type(vb):
        return f"re-serialized: {_json_kind(va)} -> {_json_kind(vb)}"
    one = _one_string_changed(va, vb)
    lines = [one] if one is not None else _deepdiff_changes(va, vb)
    if not lines:
        return "message fields changed (role, name or ids)" if sa.key != sb.key else "no visible change"
    more = f" (+{len(lines) - 2} more)" if len(lines) > 2 else ""
    return "; ".join(lines[:2]) + more


def _deepdiff_changes(va: Any, vb: Any) -> list[str]:
    """One line per change deepdiff finds."""
    from deepdiff import DeepDiff  # imported here: it pulls in numpy and pydantic (0.1 s) for one call
    tree = DeepDiff(va, vb, view="tree", verbose_level=2)
    lines = []
    for report, items in tree.items():
        for item in items:
            path = "/" + "/".join(str(k) for k in item.path(output_format="list")) if item.path() != "root" else "text"
            lines.append(_change(report, path, item.t1, item.t2))
    return lines


def _one_string_changed(va: Any, vb: Any) -> str | None:
    """The line deepdiff would give when the two differ in one string only (a text, a system prompt, one
    field of a block: most edits), at a fortieth of its cost; None for anything else."""
    if isinstance(va, str):
        return _change("values_changed", "text", va, vb)
    if not isinstance(va, dict) or va.keys() != vb.keys():
        return None
    changed = [k for k in va if va[k] != vb[k] or type(va[k]) is not type(vb[k])]
    if len(changed) != 1 or not isinstance(va[changed[0]], str) or not isinstance(vb[changed[0]], str):
        return None
    return _change("values_changed", f"/{changed[0]}", va[changed[0]], vb[changed[0]])


def _change(report: str, path: str, old: Any, new: Any) -> str:
    if report.endswith("_added"):
        return f"added {path} = {_short(new)}"
    if report.endswith("_removed"):
        return f"removed {path} (was {_short(old)})"
    if isinstance(old, str) and isinstance(new, str):
        p = _common_prefix(old, new)
        before, after = _excerpts(old, new, p, 40, raw=False)
        return f"{path}: '{before}' -> '{after}'"
    return f"{path}: {_short(old)} -> {_short(new)}"


def _json_kind(value: Any) -> str:
    return {str: "a string", list: "a list of blocks", dict: "an object"}.get(type(value), type(value).__name__)


def _text_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for key in ("text", "content", "output", "summary", "encrypted_content"):
            if isinstance(value.get(key), str):
                return value[key]
    return compact_json(value)


def _short(value: Any, limit: int = 48) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


# ---- offsets, excerpts, cost

def _common_prefix(x: str | bytes, y: str | bytes) -> int:
    n = min(len(x), len(y))
    if x[:n] == y[:n]:
        return n
    lo, hi = 0, n  # binary search on slices: C-speed compares, O(n log n) worst case
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if x[:mid] == y[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _excerpts(x: str, y: str, p: int, width: int = EXCERPT, raw: bool = True) -> tuple[str, str]:
    """The differing stretch of x and y from a little before p, trimmed to width, on one line.

    raw: JSON text, where whitespace between tokens means nothing (collapsed); else a decoded string,
    where it does (newlines and tabs shown escaped)."""
    limit = min(len(x), len(y)) - p
    suffix = _common_prefix(x[::-1][:limit], y[::-1][:limit])
    lead = min(p, width // 2)
    return (_trim(x, p - lead, len(x) - suffix, width, raw), _trim(y, p - lead, len(y) - suffix, width, raw))


def _trim(text: str, start: int, end: int, width: int, raw: bool) -> str:
    end = min(len(text), max(end + 12, start + width // 2))  # some context after the change
    piece = text[start:min(end, start + width)]
    piece = " ".join(piece.split()) if raw else piece.encode("unicode_escape").decode("ascii")
    return ("…" if start > 0 else "") + piece + ("…" if min(end, start + width) < len(text) else "")


def _level_at(a: Prompt, b: Prompt, d: int) -> str:
    segs = [p.segments[d].level for p in (a, b) if d < len(p.segments)]
    return min(segs, key=LEVELS.index) if segs else LEVELS[-1]


def _pointer_at(b: Prompt, a: Prompt, d: int, level: str) -> str:
    seg = b.segments[d] if d < len(b.segments) else None
    if seg is not None and seg.level == level:
        return seg.pointer
    # B's part here belongs to a later level (a tool or system block removed at the end): point at the list
    other = a.segments[d].pointer if d < len(a.segments) else ""
    return other.rsplit("/", 1)[0] or other


def _pointer_of(p: Prompt, i: int) -> str:
    return p.segments[i].pointer if i < len(p.segments) else "(end)"


def _extra_cost(b: Prompt, d: int, tokens: int) -> float:
    """What re-prefilling costs over reading from cache: written where a breakpoint (or automatic caching)
    writes it, else uncached; at B's model prices."""
    contract = model_contract(b.api, b.model)
    marks = _breakpoints(b)
    ttl = next((marks[i] for i in sorted(marks) if i >= d), None)
    if ttl is None and "default" in contract.write_multiplier:  # automatic caching writes every prefix
        ttl = "default"
    if ttl == "1h":
        paid = contract.cost(write_1h=tokens)
    elif ttl is not None:
        paid = contract.cost(write_5m=tokens)
    else:
        paid = contract.cost(uncached=tokens)
    return paid - contract.cost(cache_read=tokens)


def _fix(f: _Finding, level: str) -> str:
    return FIXES[f.cause].format(what=f.subject or f.setting or "it", level=level)


def _append_detail(a: Prompt, b: Prompt) -> str:
    if len(b.segments) < len(a.segments):
        return f"B is a prefix of A ({len(b.segments)} of A's {len(a.segments)} parts): nothing new to prefill"
    added = len(b.segments) - len(a.segments)
    return f"B extends A by {added} part{'s' * (added != 1)}" if added else "B is the same prompt as A"
