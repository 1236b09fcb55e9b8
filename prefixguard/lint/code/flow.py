"""One function (or a module body) read in statement order: names carry the taint of the value last
bound to them (taint.py) and the literal it was (for sinks.regions to look through names), loops carry
the order of what they iterate, helpers of the module give the taint they return, and each SDK call met
is judged (verdict.py). Language-neutral: it reads Python's ast, which the TypeScript reader builds too.

The expressions (and the names bound) are read by flowexpr.Expressions, which Scope extends."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from prefixguard.lint.code import sinks
from prefixguard.lint.code import sources as src
from prefixguard.lint.code.flowexpr import Expressions
from prefixguard.lint.code.taint import EMPTY, Taint, Taints, markers
from prefixguard.lint.code.verdict import judge


class Scope(Expressions):
    """One function (or the module body): statements in order, names -> taint and -> last literal."""

    def run(self) -> Taints:
        body = self.owner.body  # type: ignore[attr-defined]
        self.block(body)
        if isinstance(self.owner, ast.Module):
            self.m.globals, self.m.global_defs = self.env, self.defs
        return frozenset(self.returned)

    # ---------------------------------------------------------------- statements

    def block(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.stmt(stmt)

    def stmt(self, s: ast.stmt) -> None:
        self.memo.clear()
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if isinstance(s, ast.ClassDef) and isinstance(self.owner, ast.Module):
                for item in s.body:
                    if not isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        self.stmt(item)
            return
        self.sinks_in(s)
        if isinstance(s, ast.Assign):
            value = self.expr(s.value)
            for target in s.targets:
                self.bind(target, value, s.value)
        elif isinstance(s, ast.AnnAssign) and s.value is not None:
            value = self.expr(s.value)
            if isinstance(s.target, ast.Name) and src.SET_ANNOTATIONS.match(ast.unparse(s.annotation)):
                value |= {Taint(kind=src.SET_VALUE, label=s.target.id, node=s.target)}
            self.bind(s.target, value, s.value)
        elif isinstance(s, ast.AugAssign):
            if isinstance(s.target, ast.Name):
                extra = self.expr(s.value) | self._loop()
                self.env[s.target.id] = self.env.get(s.target.id, EMPTY) | extra
        elif isinstance(s, (ast.For, ast.AsyncFor)):
            element, order = self.iterate(s.iter)
            self.bind(s.target, element | order, None)
            self.loop_order.append(order)
            self.block(s.body)
            self.loop_order.pop()
            self.block(s.orelse)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            for with_item in s.items:
                value = self.expr(with_item.context_expr)
                if with_item.optional_vars is not None:
                    self.bind(with_item.optional_vars, value, None)
            self.block(s.body)
        elif isinstance(s, ast.Return) and s.value is not None:
            self.returned |= self.expr(s.value)
        elif isinstance(s, ast.Expr):
            self.effect(s.value)
        elif isinstance(s, (ast.If, ast.While)):
            self.block(s.body)
            self.block(s.orelse)
        elif isinstance(s, ast.Try) or type(s).__name__ == "TryStar":
            self.block(s.body)  # type: ignore[attr-defined]
            for handler in s.handlers:  # type: ignore[attr-defined]
                self.block(handler.body)
            self.block(s.orelse)  # type: ignore[attr-defined]
            self.block(s.finalbody)  # type: ignore[attr-defined]
        elif isinstance(s, ast.Match):
            for case in s.cases:
                self.block(case.body)
        if isinstance(s, (ast.Assign, ast.AugAssign)):
            for target in s.targets if isinstance(s, ast.Assign) else [s.target]:
                if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):  # d[k] = v
                    name = target.value.id
                    self.env[name] = self.env.get(name, EMPTY) | self.expr(s.value) | self._loop()

    def effect(self, e: ast.expr) -> None:
        """A call for its side effect: lst.append(v), lst.extend(v), random.shuffle(lst)."""
        if not isinstance(e, ast.Call):
            self.expr(e)
            return
        func = e.func
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.attr in ("append", "extend", "insert", "add", "update", "setdefault")
        ):
            name = func.value.id
            added: Taints = EMPTY
            for arg in e.args:
                added |= self.expr(arg) - markers(self.expr(arg))
            self.env[name] = self.env.get(name, EMPTY) | added | self._loop()
            return
        qualified = self.m.qualified(func)
        if qualified in ("random.shuffle", "random.Random.shuffle") and e.args and isinstance(e.args[0], ast.Name):
            self.env[e.args[0].id] = self.env.get(e.args[0].id, EMPTY) | {
                Taint(kind=src.RANDOM, label="random.shuffle()", node=e)
            }
            return
        self.expr(e)

    # ---------------------------------------------------------------- sinks

    def sinks_in(self, s: ast.stmt) -> None:
        if not self.collect:
            return
        for node in _walk_no_defs(s):
            if isinstance(node, ast.Call):
                sink = sinks.find(node, self.m.qualified(node.func))
                if sink is not None:
                    judge(self, sink)


def _walk_no_defs(node: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a statement, without nested functions, classes and lambdas (their own scopes)."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        for child in ast.iter_child_nodes(n):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.stmt)):
                todo.append(child)
