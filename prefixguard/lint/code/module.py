"""One parsed file: its imports (aliases resolved to dotted names), its functions, the taint each
helper returns, and the hits of every function's flows."""
from __future__ import annotations

import ast

from prefixguard.lint.code.flow import Scope
from prefixguard.lint.code.taint import EMPTY, Taints
from prefixguard.lint.code.verdict import CodeHit


class Module:
    """One parsed file: its imports, its functions, and the taint of each helper's return."""

    def __init__(self, tree: ast.Module, text: str) -> None:
        self.tree, self.lines = tree, text.splitlines()
        self.aliases: dict[str, str] = {}
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.aliases[(a.asname or a.name).split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module:
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.setdefault(node.name, node)
        self.classes = frozenset(n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef))
        self._returns: dict[str, Taints] = {}
        self.hits: list[CodeHit] = []
        self.calls = 0   # SDK calls judged
        self.globals: dict[str, Taints] = {}
        self.global_defs: dict[str, ast.expr] = {}

    def qualified(self, func: ast.expr) -> str:
        """The dotted name of a callee with its import alias resolved ("" when not a dotted name)."""
        parts: list[str] = []
        while isinstance(func, ast.Attribute):
            parts.append(func.attr)
            func = func.value
        if isinstance(func, ast.Call):   # client().messages.create, OpenAI().chat...
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
            self._returns[name] = EMPTY   # a recursive helper adds nothing to itself
            fn = self.functions[name]
            self._returns[name] = Scope(self, fn, collect=False).run()
        return self._returns[name]

    def run(self) -> list[CodeHit]:
        Scope(self, self.tree, collect=True).run()
        for fn in self.functions.values():
            Scope(self, fn, collect=True).run()
        for node in ast.walk(self.tree):   # methods and nested functions not reached by name above
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and self.functions.get(node.name) is not node:
                Scope(self, node, collect=True).run()
        return self.hits

