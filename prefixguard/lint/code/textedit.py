"""Text edits on a source file, placed by the positions of ast nodes (which count UTF-8 bytes in a
line): a fix is a group of edits, applied all or none."""

from __future__ import annotations

import ast
from typing import NamedTuple


class Edit(NamedTuple):
    start: int  # character offsets in the file's text
    end: int
    text: str


def inside(node: ast.AST, outer: ast.AST) -> bool:
    a = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
    b = (getattr(node, "end_lineno", 0), getattr(node, "end_col_offset", 0))
    lo = (getattr(outer, "lineno", 0), getattr(outer, "col_offset", 0))
    hi = (getattr(outer, "end_lineno", 0), getattr(outer, "end_col_offset", 0))
    return lo <= a and b <= hi


def apply(text: str, groups: list[list[Edit]]) -> str:
    """Groups of edits (a fix is one group: all of it or nothing), applied from the end of the text; a
    group that overlaps one already taken is dropped (one fix per place)."""
    taken: list[Edit] = []
    for group in groups:
        if any(e.start < t.end and t.start < e.end or e.start == t.start for e in group for t in taken):
            continue
        taken.extend(group)
    for edit in sorted(taken, key=lambda e: e.start, reverse=True):
        text = text[: edit.start] + edit.text + text[edit.end :]
    return text


def line_starts(text: str) -> list[int]:
    out, at = [0], 0
    for line in text.splitlines(keepends=True):
        at += len(line)
        out.append(at)
    return out


def span(node: ast.AST, text: str, starts: list[int]) -> tuple[int, int]:
    line, col = node.lineno, node.col_offset  # type: ignore[attr-defined]
    end_line, end_col = node.end_lineno, node.end_col_offset  # type: ignore[attr-defined]
    return offset(text, starts, line, col), offset(text, starts, end_line, end_col)


def offset(text: str, starts: list[int], line: int, byte_col: int) -> int:
    begin = starts[line - 1]
    end = starts[line] if line < len(starts) else len(text)
    return begin + len(text[begin:end].encode("utf-8")[:byte_col].decode("utf-8", "replace"))
