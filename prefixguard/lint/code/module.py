"""One parsed file: its imports (aliases resolved to dotted names), its functions, the taint each
helper returns (its own, or one imported from another file of the linted tree through a Helpers
finder, project.py), and the hits of every function's flows, including those of a helper that holds
an SDK call and is called with a volatile argument (read again with that argument bound)."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from typing import Protocol

from prefixguard.lint.code import sinks
from prefixguard.lint.code.flow import Scope
from prefixguard.lint.code.taint import EMPTY, Taints, registry_name
from prefixguard.lint.code.verdict import CodeHit

Function = ast.FunctionDef | ast.AsyncFunctionDef
_RERUNS = 64  # helpers read again per file for their arguments: a bound on the work, not on correctness


class Helpers(Protocol):
    def parse(self, path: str, text: str) -> ast.Module:
        """The file's tree (parsed once for the lint of the file and for the files that import it)."""

    def imports_a_sender(self, importer: str, text: str) -> bool:
        """The file imports from a file of the linted tree that makes SDK calls (read from its text)."""

    def function(self, importer: str, module: str, name: str, level: int) -> tuple[Module, Function] | None:
        """The function `name` of the module imported as `module` (relative at `level`) by the file
        `importer`, when that module is a file of the linted tree."""


class Module:
    """One parsed file: its imports, its functions, and the taint of each helper's return."""

    def __init__(self, tree: ast.Module, text: str, path: str = "<string>", helpers: Helpers | None = None) -> None:
        self.tree, self.lines, self.path, self.helpers = tree, text.splitlines(), path, helpers
        self.aliases: dict[str, str] = {}
        self.imported: dict[str, tuple[str, str, int]] = {}  # local name -> (module, name, level)
        classes: set[str] = set()
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.aliases[(a.asname or a.name).split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom):
                for a in node.names:
                    if node.module:
                        self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
                    self.imported[a.asname or a.name] = (node.module or "", a.name, node.level)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.setdefault(node.name, node)
            elif isinstance(node, ast.ClassDef):
                classes.add(node.name)
        self.classes = frozenset(classes)
        self._returns: dict[str, Taints] = {}
        self.hits: list[CodeHit] = []
        self.calls = 0  # SDK calls judged
        self.globals: dict[str, Taints] = {}
        self.global_defs: dict[str, ast.expr] = {}
        self._reruns: set[tuple[int, frozenset]] = set()
        self._sends: dict[int, bool] = {}

    def qualified(self, func: ast.expr) -> str:
        """The dotted name of a callee with its import alias resolved ("" when not a dotted name)."""
        parts: list[str] = []
        while isinstance(func, ast.Attribute):
            parts.append(func.attr)
            func = func.value
        if isinstance(func, ast.Call):  # client().messages.create, OpenAI().chat...
            parts.append("()")
            inner = self.qualified(func.func)
            return ".".join([inner, *reversed(parts[:-1])]) if inner else ".".join(reversed(parts[:-1]))
        if not isinstance(func, ast.Name):
            return ".".join(reversed(parts))
        head = self.aliases.get(func.id, func.id)
        return ".".join([head, *reversed(parts)])

    def returns(self, name: str) -> Taints:
        """What a helper of this module returns (parameters appear as PARAM markers)."""
        if name not in self._returns:
            self._returns[name] = EMPTY  # a recursive helper adds nothing to itself
            fn = self.functions[name]
            self._returns[name] = Scope(self, fn, collect=False).run()
        return self._returns[name]

    @functools.cached_property
    def registries(self) -> frozenset[str]:
        """Dicts filled at run time by the code's functions: a global that starts empty, an attribute
        self.x filled outside __init__ (d[k] = v, d.update(...), d.setdefault(...), map.set(k, v))."""
        empty = {registry_name(t) for s in self.tree.body for t, v in _assignments(s) if _empty_dict(v)}
        filled: set[str] = set()
        for fn in ast.walk(self.tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                target: ast.expr | None = None
                if isinstance(node, (ast.Assign, ast.AugAssign)):
                    for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                        if isinstance(t, ast.Subscript):
                            target = t.value
                elif (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("update", "setdefault", "set")
                ):
                    target = node.func.value
                name = registry_name(target) if target is not None else ""
                if name and (name in empty or (name.startswith("self.") and fn.name != "__init__")):
                    filled.add(name)
        return frozenset(filled)

    def helper(self, call: ast.Call, name: str) -> tuple[Module, Function] | None:
        """The function a call runs, when it is a helper of this module (name(...), self.name(...),
        Class.name(...)) or a function imported from another file of the linted tree."""
        func = call.func
        if isinstance(func, ast.Name) and func.id in self.imported and func.id not in self.functions:
            if self.helpers is None:
                return None
            module, imported, level = self.imported[func.id]
            return self.helpers.function(self.path, module, imported, level)
        fn = self.functions.get(name)
        if fn is None or (
            isinstance(func, ast.Attribute)
            and not (isinstance(func.value, ast.Name) and func.value.id in ("self", "cls", *self.classes))
        ):
            return None
        return self, fn

    def sends(self, fn: Function) -> bool:
        """fn makes an SDK call, itself or through a helper of this module."""
        key = id(fn)
        if key not in self._sends:
            self._sends[key] = False  # a recursive helper sends nothing through itself
            self._sends[key] = any(
                isinstance(n, ast.Call)
                and (
                    sinks.find(n, self.qualified(n.func)) is not None
                    or (isinstance(n.func, (ast.Name, ast.Attribute)) and self._local_sends(n))
                )
                for n in ast.walk(fn)
            )
        return self._sends[key]

    def _local_sends(self, call: ast.Call) -> bool:
        name = call.func.id if isinstance(call.func, ast.Name) else call.func.attr  # type: ignore[attr-defined]
        found = self.helper(call, name)
        return found is not None and found[0] is self and self.sends(found[1])

    def rerun(self, fn: Function, bound: dict[str, Taints], into: Module, only: frozenset | None) -> None:
        """Read fn (of this file) again with volatile arguments bound to its parameters: its SDK calls
        report them into the file being linted (`into`; the budget is that file's). A function of another
        file reports only the caller's values (`only`), at the caller's lines."""
        key = (id(fn), frozenset((p, t) for p, ts in bound.items() for t in ts))
        if key in into._reruns or len(into._reruns) >= _RERUNS or not self.sends(fn):
            return
        into._reruns.add(key)
        if into is self:
            Scope(self, fn, collect=True, bound=bound).run()
        else:
            Scope(self, fn, collect=True, bound=bound, report=into, only=only).run()

    def run(self) -> list[CodeHit]:
        Scope(self, self.tree, collect=True).run()
        for fn in self.functions.values():
            Scope(self, fn, collect=True).run()
        for node in ast.walk(self.tree):  # methods and nested functions not reached by name above
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and self.functions.get(node.name) is not node:
                Scope(self, node, collect=True).run()
        return self.hits


def _assignments(s: ast.stmt) -> Iterator[tuple[ast.expr, ast.expr]]:
    if isinstance(s, ast.Assign):
        yield from ((t, s.value) for t in s.targets)
    elif isinstance(s, ast.AnnAssign) and s.value is not None:
        yield s.target, s.value


def _empty_dict(value: ast.expr) -> bool:
    """{}, dict(), OrderedDict(), defaultdict(list), new Map()."""
    if isinstance(value, ast.Dict):
        return not value.keys
    return (
        isinstance(value, ast.Call)
        and not value.keywords
        and registry_name(value.func) in ("dict", "OrderedDict", "defaultdict")
        and (len(value.args) <= (1 if registry_name(value.func) == "defaultdict" else 0))
    )
