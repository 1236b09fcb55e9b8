"""Taint: the set of volatile sources a value was built from, and the rules that combine them (a set
written as text, the order of iterating a set or a dict view). Language-neutral: the parsers give
Python's ast, whatever the source language."""

from __future__ import annotations

import ast
from typing import NamedTuple

from prefixguard.lint.code import sources as src


class Taint(NamedTuple):
    kind: str  # sources.CLOCK ... (or a marker: a set, a dict, a parameter)
    label: str  # the source as written: "datetime.now()", "iteration over a set"
    node: ast.AST  # where it is (for the finding's region and for fixes)


Taints = frozenset[Taint]
EMPTY: Taints = frozenset()


def literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def markers(t: Taints) -> Taints:
    return frozenset(x for x in t if x.kind in src.MARKERS)


def kinds(t: Taints) -> set[str]:
    return {x.kind for x in t}


def as_text(t: Taints, node: ast.expr | ast.Call) -> Taints:
    """A value written as text: a set's items come out in its iteration order."""
    if any(x.kind == src.SET_VALUE for x in t):
        return (t - markers(t)) | {Taint(kind=src.SET_ORDER, label="iteration over a set", node=node)}
    return t - {x for x in t if x.kind in (src.SET_VALUE, src.DICT_VALUE)}


def order(it: ast.expr, taint: Taints, defs: dict[str, ast.expr], registries: frozenset[str]) -> Taints:
    """The order taint of iterating `it`: a set (any time); a dict view of a registry (registries: a
    global dict, or an attribute self.x, that starts empty and is filled by the code's functions at run
    time, in the order they happen to be called). Any other dict holds its keys in the order the code
    inserted them, which is the same on every request."""
    if any(x.kind == src.SET_VALUE for x in taint):
        return frozenset({Taint(kind=src.SET_ORDER, label="iteration over a set", node=it)})
    if (
        isinstance(it, ast.Call)
        and isinstance(it.func, ast.Attribute)
        and it.func.attr in src.DICT_VIEWS
        and not it.args
    ):
        receiver = it.func.value
        for _ in range(8):  # x = y; y = x: a cycle of names ends here
            if not (isinstance(receiver, ast.Name) and receiver.id in defs) or receiver.id in registries:
                break
            receiver = defs[receiver.id]
        if registry_name(receiver) in registries:
            return frozenset(
                {Taint(kind=src.DICT_ORDER, label="iteration over " + written(it, f".{it.func.attr}()"), node=it)}
            )
    return EMPTY


def to_day(t: Taints) -> Taints:
    """Clock values written to the day only."""
    return frozenset(Taint(kind=src.DATE, label=x.label, node=x.node) if x.kind == src.CLOCK else x for x in t)


def registry_name(node: ast.expr) -> str:
    """REGISTRY, self._tools (this._tools); "" for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
        return f"self.{node.attr}"
    return ""


def written(node: ast.AST, default: str) -> str:
    """The source as written, where the reader kept it (TypeScript: `new Date()`, `process.env.X`)."""
    return getattr(node, "written", None) or default
