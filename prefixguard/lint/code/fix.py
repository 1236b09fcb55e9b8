"""`--fix` for the mechanical cases of the code rules, as text edits on the source:
PG602: wrap the iterated set or dict view in sorted(...) (a dict's values in the order of its sorted keys);
PG603: add sort_keys=True to json.dumps;
PG601: move the trailing part of a system prompt f-string (from the last sentence before the volatile
value to the end) to the front of the latest user message, when both are written in the same function
and the call, and nothing but that part holds a volatile value. Anything else is left as it is.
TypeScript and JavaScript get the same PG602 and PG601 fixes in their syntax (tsfix.py)."""

from __future__ import annotations

import ast
import difflib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from prefixguard.lint.code.place import read_source
from prefixguard.lint.code.python import analyze
from prefixguard.lint.code.textedit import Edit, apply, inside, line_starts, span
from prefixguard.lint.code.tsfix import ts_edits
from prefixguard.lint.code.typescript import GRAMMARS
from prefixguard.lint.code.typescript import analyze as analyze_ts
from prefixguard.lint.code.verdict import CodeHit
from prefixguard.utils.errors import InputError, NotARequest


def fix_paths(paths: list[str], write: bool, excluded: Callable[[Path], bool] | None = None) -> str:
    """The fixes for the Python, TypeScript and JavaScript files under paths, as one unified diff (empty:
    nothing to fix). With write, the files are rewritten too. Files that do not parse are left alone; excluded (lint's
    Settings.excluded) leaves out files and folders under a folder. Raises InputError for a path that
    does not exist."""
    out: list[str] = []
    for name in _python_files(paths, excluded or (lambda path: False)):
        try:
            text = read_source(name)
            fixed = fix_text(text, name)
        except (NotARequest, SyntaxError, ValueError, RecursionError):  # TsError is a ValueError
            continue
        if fixed == text:
            continue
        out.extend(
            difflib.unified_diff(
                text.splitlines(keepends=True), fixed.splitlines(keepends=True), f"a/{name}", f"b/{name}"
            )
        )
        if write:
            Path(name).write_text(fixed, "utf-8")
    return "".join(out)


def fix_text(text: str, filename: str = "<string>") -> str:
    """The text with every mechanical fix applied (the same text when there is none). A TypeScript or
    JavaScript file (by its name's suffix) gets the PG602 fix only."""
    grammar = GRAMMARS.get(os.path.splitext(filename)[1])
    hits, _ = analyze(text, filename) if grammar is None else analyze_ts(text, filename, grammar)
    starts = line_starts(text)
    edits = _edits if grammar is None else ts_edits
    return apply(text, [edits(hit, text, starts) for hit in sorted(hits, key=lambda h: (h.line, h.column))])


def _edits(hit: CodeHit, text: str, starts: list[int]) -> list[Edit]:
    if hit.elsewhere:  # the prompt is built in another file: its text is not this one's
        return []
    if hit.code == "PG602":
        return _sorted(hit.node, text, starts)
    if hit.code == "PG603" and isinstance(hit.node, ast.Call):
        return _sort_keys(hit.node, text, starts)
    if hit.code in ("PG601", "PG604") and hit.region.label in ("system prompt", "instructions", "system message"):
        return _move_trailing(hit, text, starts)
    return []


def _sorted(node: ast.AST, text: str, starts: list[int]) -> list[Edit]:
    start, end = span(node, text, starts)
    written = text[start:end]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "values":
        receiver = text.__getitem__(slice(*span(node.func.value, text, starts)))
        return [Edit(start=start, end=end, text=f"dict(sorted({receiver}.items())).values()")]
    return [Edit(start=start, end=end, text=f"sorted({written})")]


def _sort_keys(call: ast.Call, text: str, starts: list[int]) -> list[Edit]:
    start, end = span(call, text, starts)
    close = end - 1
    if text[close] != ")":
        return []
    before = text[start:close].rstrip()
    separator = " " if before.endswith(",") else ", "
    at = start + len(before)
    return [Edit(start=at, end=close, text=f"{separator}sort_keys=True")]


def _move_trailing(hit: CodeHit, text: str, starts: list[int]) -> list[Edit]:
    system, latest = hit.text, hit.latest
    if not isinstance(system, ast.JoinedStr) or latest is None or isinstance(hit.owner, ast.Module):
        return []
    if not (inside(system, hit.owner) and inside(latest, hit.owner)):
        return []
    first = hit.first_volatile
    if system.lineno != system.end_lineno or first is None:
        return []
    s_start, s_end = span(system, text, starts)
    written = text[s_start:s_end]
    if not (written.startswith(('f"', "f'")) and written[1] * 3 != written[1:4]):
        return []
    quote = written[1]
    for later in system.values[first + 1 :]:  # trailing: no further sentence after the volatile value
        written_part = text.__getitem__(slice(*span(later, text, starts))).rstrip()
        if isinstance(later, ast.Constant) and (". " in written_part or "\\n" in written_part):
            return []
    v_start, _ = span(system.values[first], text, starts)
    inner_start = s_start + 2
    static = text[inner_start:v_start]
    cut = max(static.rfind(". ") + 1 if ". " in static else -1, static.rfind("\\n") + 2 if "\\n" in static else -1)
    if cut <= 0:
        return []
    head = static[:cut].rstrip()
    if head.endswith("\\n"):
        head = head[:-2].rstrip()
    moved = text[inner_start + cut : s_end - 1].lstrip()
    if not head or not moved:
        return []
    prefix = "f" if "{" in head.replace("{{", "") else ""
    if not prefix:
        head = head.replace("{{", "{").replace("}}", "}")
    new_latest = _prepend(latest, moved, quote, text, starts)
    if new_latest is None:
        return []
    l_start, l_end = span(latest, text, starts)
    return [
        Edit(start=s_start, end=s_end, text=f"{prefix}{quote}{head}{quote}"),
        Edit(start=l_start, end=l_end, text=new_latest),
    ]


def _prepend(latest: ast.expr, moved: str, quote: str, text: str, starts: list[int]) -> str | None:
    """The latest message's content with the moved part in front of it, as an f-string."""
    start, end = span(latest, text, starts)
    written = text[start:end]
    if isinstance(latest, ast.Name):
        return f"f{quote}{moved}\\n\\n{{{latest.id}}}{quote}"
    if isinstance(latest, ast.JoinedStr) and written.startswith(f"f{quote}") and written[1:4] != quote * 3:
        return f"f{quote}{moved}\\n\\n{written[2:-1]}{quote}"
    if (
        isinstance(latest, ast.Constant)
        and isinstance(latest.value, str)
        and written[:1] == quote
        and written[1:3] != quote * 2
        and "{" not in written
        and "}" not in written
    ):
        return f"f{quote}{moved}\\n\\n{written[1:-1]}{quote}"
    return None


_SUFFIXES = (".py", *GRAMMARS)


def _python_files(paths: list[str], excluded: Callable[[Path], bool]) -> Iterator[str]:
    for arg in paths:
        if os.path.isfile(arg):
            if arg.endswith(_SUFFIXES):
                yield arg
        elif os.path.isdir(arg):
            for folder, dirs, files in os.walk(arg):
                dirs[:] = sorted(
                    d for d in dirs if not d.startswith(".") and d != "node_modules" and not excluded(Path(folder, d))
                )
                yield from (
                    os.path.join(folder, f)
                    for f in sorted(files)
                    if f.endswith(_SUFFIXES) and not excluded(Path(folder, f))
                )
        else:
            raise InputError("no such file or directory", arg)
