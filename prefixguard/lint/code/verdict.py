"""The verdict on one SDK call: each part of the prompt it builds (sinks.regions) judged by where it
sits (cached or not, before or on a breakpoint) and by the provider's caching, each volatile flow into a
cached part reported as a CodeHit under its PG6 rule, unless a suppression comment says otherwise."""

from __future__ import annotations

import ast
import os
import re
from typing import Any, NamedTuple

from prefixguard.lint.code import sinks
from prefixguard.lint.code import sources as src
from prefixguard.lint.code.taint import Taint, as_text, kinds

_SUPPRESS = re.compile(r"(?:#|//|/\*)\s*prefixguard:\s*ignore(?:\[([A-Za-z0-9_,\s-]+)\])?")


class CodeHit(NamedTuple):
    """One flow from a source to a cached part of a prompt, placed at the source."""

    code: str
    variant: str | None
    message: str
    line: int
    column: int  # 1-based, in characters
    end_line: int
    end_column: int
    pointer: str  # where in the code's prompts: "function/part of the prompt" (no line numbers)
    key: str  # what it is: the source as written and the API (stable across edits elsewhere)
    node: ast.AST  # the source node
    sink: ast.Call
    region: sinks.Region
    provider: str
    text: ast.expr  # the region's value with names resolved to what was assigned (for fixes)
    latest: ast.expr | None  # the content of the call's latest message, written in the call (for fixes)
    owner: ast.AST  # the function (or module) holding the call
    first_volatile: int | None  # text is an f-string: the index of its first part with a volatile value
    elsewhere: str | None = None  # the sink is in this other file (a helper it imports): no fix here


def judge(scope: Any, sink: sinks.Sink) -> None:
    """Judge one sink call found in scope (a flow.Scope: its taints, its resolved names, its module's hits)."""
    if not scope.bound:  # a helper read again for its arguments: the call is counted once
        scope.m.calls += 1
    parts = sinks.regions(sink, scope.resolve)
    explicit = sink.provider in sinks.EXPLICIT
    auto = sinks.automatic(sink, scope.resolve)
    for i, region in enumerate(parts):
        if not region.cached:
            continue
        taints = scope.expr(region.node)
        for t in sorted(taints, key=lambda t: (t.kind, _pos(t.node))):
            if t.kind in src.MARKERS or (scope.only is not None and t not in scope.only):
                continue
            code, variant = _rule(t, region, parts, i, explicit, auto)
            if code is not None:
                _report(scope, code, variant, t, sink, region, parts)


def _rule(
    t: Taint, region: sinks.Region, parts: list[sinks.Region], i: int, explicit: bool, auto: bool
) -> tuple[str | None, str | None]:
    code, variant = _rule_of(t, region, parts, i, explicit, auto)
    if t.kind == src.DATE and code in ("PG601", "PG604"):
        return "PG601", "daily"  # the first request of each day writes the cache again: the fix advised
    return code, variant


def _rule_of(
    t: Taint, region: sinks.Region, parts: list[sinks.Region], i: int, explicit: bool, auto: bool
) -> tuple[str | None, str | None]:
    if t.kind == src.JSON_UNSORTED:
        return "PG603", None
    if region.tools and t.kind in src.ORDER:
        return "PG602", None
    if t.kind not in src.TEXT_VOLATILE:
        return None, None
    if not explicit:
        return "PG601", "partial"
    if region.breakpoint:
        return "PG604", None
    if auto or any(p.breakpoint for p in parts[i:]):
        return "PG601", None
    if any(p.breakpoint for p in parts[:i]):
        return None, None  # after the last breakpoint: not cached
    return "PG601", "uncached"


def _report(
    scope: Any,
    code: str,
    variant: str | None,
    t: Taint,
    sink: sinks.Sink,
    region: sinks.Region,
    parts: list[sinks.Region],
) -> None:
    node, home = t.node, scope.report or scope.m  # home: the file the source is in (where it is reported)
    line, col = _pos(node)
    end_line = getattr(node, "end_lineno", None) or line
    end_col = getattr(node, "end_col_offset", None)
    text_line = home.lines[line - 1] if line - 1 < len(home.lines) else ""
    column = _chars(text_line, col) + 1
    end_text = home.lines[end_line - 1] if end_line - 1 < len(home.lines) else ""
    end_column = _chars(end_text, end_col) + 1 if end_col is not None else column + 1
    if _suppressed(home.lines, line, code) or _suppressed(scope.m.lines, sink.call.lineno, code):
        return
    elsewhere = scope.m.path if home is not scope.m else None
    at = f"line {sink.call.lineno}" + (f" of {os.path.basename(elsewhere)}" if elsewhere else "")
    where = f"the {region.label} of {sink.api} ({at})"
    if code == "PG602":
        message = f"{t.label} decides the order of the tools sent to {sink.api} ({at})"
    elif code == "PG603":
        message = f"{t.label} writes text that goes into {where}"
    else:
        what = {"set-order": "the order of " + t.label}.get(t.kind, f"{t.label} ({t.kind})")
        consequence = {
            None: "every request misses the cached block",
            "partial": "the cached prefix ends there: a partial hit at best",
            "uncached": "nothing is cached yet, but no breakpoint could ever cache it",
            "daily": "it changes once a day, so the first request of each day writes the cache again",
        }.get(variant, "")
        if code == "PG604":
            consequence = "the breakpoint on that block writes an entry no request reads"
        message = f"{what} goes into {where}: {consequence}"
    hit = CodeHit(
        code=code,
        variant=variant,
        message=message,
        line=line,
        column=column,
        end_line=end_line,
        end_column=max(end_column, column + 1) if end_line == line else end_column,
        pointer=f"{scope.name}/{region.label}",
        key=f"{t.kind}:{t.label}:{sink.api}",
        node=node,
        sink=sink.call,
        region=region,
        provider=sink.provider,
        text=scope.resolve(region.node),
        latest=parts[-1].node if parts and not parts[-1].cached else None,
        owner=scope.owner,
        first_volatile=_first_volatile_part(scope, scope.resolve(region.node)),
        elsewhere=elsewhere,
    )
    if all((h.code, h.line, h.column, h.pointer) != (hit.code, hit.line, hit.column, hit.pointer) for h in home.hits):
        home.hits.append(hit)


def _first_volatile_part(scope: Any, text: ast.expr) -> int | None:
    if not isinstance(text, ast.JoinedStr):
        return None
    for i, v in enumerate(text.values):
        if isinstance(v, ast.FormattedValue) and kinds(as_text(scope.expr(v.value), v.value)) & src.TEXT_VOLATILE:
            return i
    return None


def _pos(node: ast.AST) -> tuple[int, int]:
    return getattr(node, "lineno", 1), getattr(node, "col_offset", 0)


def _chars(line: str, byte_col: int) -> int:
    """ast columns count UTF-8 bytes."""
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", "replace"))


def _suppressed(lines: list[str], line: int, code: str) -> bool:
    if not 0 < line <= len(lines) or "prefixguard" not in lines[line - 1]:
        return False
    m = _SUPPRESS.search(lines[line - 1])
    if m is None:
        return False
    return m.group(1) is None or code in {c.strip().upper() for c in m.group(1).split(",")}
