"""`--fix` for TypeScript and JavaScript: the tools sorted (PG602), and the trailing part of a system
prompt template literal moved to the front of the latest user message (PG601, PG604), on the same
terms as Python's (fix.py)."""

from __future__ import annotations

import ast
import re

from prefixguard.lint.code.textedit import Edit, inside, span
from prefixguard.lint.code.verdict import CodeHit

_NAME = re.compile(r"\$\{([A-Za-z_$][\w$]*)\}")


_BY_KEY = ".sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))"  # entries by key, as sorted() orders them


def ts_edits(hit: CodeHit, text: str, starts: list[int]) -> list[Edit]:
    """PG602: Object.keys(o).sort(), Object.entries(o) sorted by key, Object.values(o) in the order of
    the sorted keys, anything else iterated as [...it].sort(). PG601/PG604: _move_trailing."""
    if hit.elsewhere:
        return []
    if hit.code in ("PG601", "PG604") and hit.region.label in ("system prompt", "instructions", "system message"):
        return _move_trailing(hit, text, starts)
    if hit.code != "PG602":
        return []
    start, end = span(hit.node, text, starts)
    written = text[start:end]
    if written.startswith("Object.keys("):
        return [Edit(start=end, end=end, text=".sort()")]
    if written.startswith("Object.entries("):
        return [Edit(start=end, end=end, text=_BY_KEY)]
    if written.startswith("Object.values("):
        inner = written.removeprefix("Object.values")
        return [Edit(start=start, end=end, text=f"Object.entries{inner}{_BY_KEY}.map(([, v]) => v)")]
    return [Edit(start=start, end=end, text=f"[...{written}].sort()")]


def _move_trailing(hit: CodeHit, text: str, starts: list[int]) -> list[Edit]:
    """`Rules. Now: ${now}` + question -> "Rules." + `Now: ${now}\n\n${question}`, when the template is
    one line, the volatile part is its last sentence, and both are written in the same function."""
    system, latest = hit.text, hit.latest
    if not isinstance(system, ast.JoinedStr) or latest is None or isinstance(hit.owner, ast.Module):
        return []
    first = hit.first_volatile
    if (
        first is None
        or system.lineno != system.end_lineno
        or not (inside(system, hit.owner) and inside(latest, hit.owner))
    ):
        return []
    s_start, s_end = span(system, text, starts)
    if text[s_start] != "`" or text[s_end - 1] != "`":
        return []
    for later in system.values[first + 1 :]:  # trailing: no further sentence after the volatile value
        part = text.__getitem__(slice(*span(later, text, starts))).rstrip()
        if isinstance(later, ast.Constant) and (". " in part or "\\n" in part):
            return []
    v_start, _ = span(system.values[first], text, starts)
    static = text[s_start + 1 : v_start]
    cut = max(static.rfind(". ") + 1 if ". " in static else -1, static.rfind("\\n") + 2 if "\\n" in static else -1)
    if cut <= 0:
        return []
    head = static[:cut].rstrip().removesuffix("\\n").rstrip()
    moved = text[s_start + 1 + cut : s_end - 1].lstrip()
    new_latest = _prepend(latest, moved, text, starts)
    if not head or not moved or new_latest is None:
        return []
    whole = _NAME.fullmatch(head)
    if whole is not None:
        new_system = whole.group(1)  # `${RULES}` is RULES
    elif "${" not in head and '"' not in head and "\\" not in head:
        new_system = f'"{head}"'
    else:
        new_system = f"`{head}`"
    l_start, l_end = span(latest, text, starts)
    return [Edit(start=s_start, end=s_end, text=new_system), Edit(start=l_start, end=l_end, text=new_latest)]


def _prepend(latest: ast.expr, moved: str, text: str, starts: list[int]) -> str | None:
    start, end = span(latest, text, starts)
    written = text[start:end]
    if isinstance(latest, ast.Name) and re.fullmatch(r"[A-Za-z_$][\w$]*", written):
        return f"`{moved}\\n\\n${{{written}}}`"
    if isinstance(latest, ast.JoinedStr) and written[:1] == "`" and written[-1:] == "`":
        return f"`{moved}\\n\\n{written[1:-1]}`"
    if (
        isinstance(latest, ast.Constant)
        and isinstance(latest.value, str)
        and written[:1] in "\"'"
        and "`" not in written
        and "${" not in written
        and "\\" not in written
    ):
        return f"`{moved}\\n\\n{written[1:-1]}`"
    return None
