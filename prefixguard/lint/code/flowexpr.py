"""The expressions of one scope (a function or a module body): the taint of each (names, calls,
collections, f-strings, json.dumps, the helpers of the module and what they return), the order taint of
what a loop iterates, and the names bound so far with the literal each was (for sinks.regions to look
through names). flow.py reads the statements in order on top of this."""

from __future__ import annotations

import ast
from typing import Any

from prefixguard.lint.code import sources as src
from prefixguard.lint.code.taint import EMPTY, Taint, Taints, as_text, kinds, literal, markers, to_day, written
from prefixguard.lint.code.taint import order as order_of


class Expressions:
    """The names of one scope (-> taint and -> last literal) and the taint of its expressions."""

    def __init__(
        self,
        module: Any,
        owner: ast.AST,
        collect: bool,
        bound: dict[str, Taints] | None = None,
        report: Any = None,
        only: frozenset[Taint] | None = None,
    ) -> None:
        self.m, self.owner, self.collect = module, owner, collect
        # a helper of another file read for a call's arguments: only they are reported, in the caller's file
        self.report, self.only = report, only
        is_module = isinstance(owner, ast.Module)
        self.env: dict[str, Taints] = {} if is_module else dict(module.globals)
        self.defs: dict[str, ast.expr] = {} if is_module else dict(module.global_defs)
        self.loop_order: list[Taints] = []
        self.memo: dict[int, Taints] = {}  # node id -> taint, for the statement being read
        self.returned: set[Taint] = set()
        self.name = getattr(owner, "name", "<module>")
        self.bound = bound or {}  # volatile arguments of the call this reading follows (module.rerun)
        if not is_module:
            self._params(owner)  # type: ignore[arg-type]

    def _params(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        a = fn.args
        for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
            taints = {Taint(kind=src.PARAM, label=arg.arg, node=arg)}
            if src.request_id_name(arg.arg):
                taints.add(Taint(kind=src.REQUEST_ID, label=f"the parameter {arg.arg}", node=arg))
            if arg.annotation is not None and src.SET_ANNOTATIONS.match(ast.unparse(arg.annotation)):
                taints.add(Taint(kind=src.SET_VALUE, label=arg.arg, node=arg))
            taints |= self.bound.get(arg.arg, EMPTY)
            self.env[arg.arg] = frozenset(taints)

    def _loop(self) -> Taints:
        out: Taints = EMPTY
        for order in self.loop_order:
            out |= order
        return out

    def bind(self, target: ast.expr, value: Taints, node: ast.expr | None) -> None:
        if isinstance(target, ast.Name):
            self.env[target.id] = value
            if node is not None:
                self.defs[target.id] = node
            else:
                self.defs.pop(target.id, None)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self.bind(t.value if isinstance(t, ast.Starred) else t, value - markers(value), None)

    # ---------------------------------------------------------------- expressions

    def expr(self, e: ast.expr | None) -> Taints:
        """The taint of an expression; each node once per statement (a call judges its receiver and its
        arguments more than once, which nested calls would make exponential)."""
        if e is None or isinstance(e, ast.Constant):
            return EMPTY
        known = self.memo.get(id(e))
        if known is None:
            known = self.memo[id(e)] = self._expr(e)
        return known

    def _expr(self, e: ast.expr) -> Taints:
        if isinstance(e, ast.Name):
            return self.env.get(e.id, EMPTY) or self._free_name(e)
        if isinstance(e, ast.Call):
            return self.call(e)
        if isinstance(e, ast.JoinedStr):
            out: Taints = EMPTY
            for v in e.values:
                if isinstance(v, ast.FormattedValue):
                    value = as_text(self.expr(v.value), v.value)
                    out |= to_day(value) if src.day_format(v.format_spec) else value  # {today:%d %B %Y}
            return out
        if isinstance(e, ast.BinOp):
            left, right = self.expr(e.left), self.expr(e.right)
            if isinstance(e.op, (ast.BitOr, ast.Sub, ast.BitAnd, ast.BitXor)) and kinds(left | right) & {src.SET_VALUE}:
                return (left | right) - markers(left | right) | {Taint(kind=src.SET_VALUE, label="a set", node=e)}
            if isinstance(e.op, ast.Mod):
                right = as_text(right, e.right)
            return (left | right) - markers(left | right)
        if isinstance(e, ast.Attribute):
            if src.request_id_attribute(e):
                return frozenset({Taint(kind=src.REQUEST_ID, label=ast.unparse(e), node=e)})
            return self.expr(e.value) - markers(self.expr(e.value))
        if isinstance(e, ast.Subscript):
            if src.env_subscript(self.m.qualified(e.value), e.slice):
                return frozenset({Taint(kind=src.ENV, label=written(e, ast.unparse(e)), node=e)})
            base = self.expr(e.value)
            index = frozenset(t for t in self.expr(e.slice) if t.kind in src.PICKS)  # PERSONAS[random index]
            return (base - markers(base)) | index
        if isinstance(e, (ast.Set, ast.SetComp)):
            inner = self._collection(e)
            return inner | {Taint(kind=src.SET_VALUE, label="a set", node=e)}
        if isinstance(e, (ast.Dict, ast.DictComp)):
            return self._collection(e) | {Taint(kind=src.DICT_VALUE, label="a dict", node=e)}
        if isinstance(e, (ast.List, ast.Tuple, ast.ListComp, ast.GeneratorExp)):
            return self._collection(e)
        if isinstance(e, ast.IfExp):
            return self.expr(e.body) | self.expr(e.orelse)
        if isinstance(e, (ast.Await, ast.Starred)):
            return self.expr(e.value)
        if isinstance(e, ast.NamedExpr):
            value = self.expr(e.value)
            self.env[e.target.id] = value
            return value
        if isinstance(e, (ast.Compare, ast.BoolOp, ast.UnaryOp, ast.Lambda)):
            return EMPTY
        return EMPTY

    def _free_name(self, e: ast.Name) -> Taints:
        if e.id in self.m.aliases or e.id in self.m.functions:  # an imported or defined name, not a value
            return EMPTY
        if src.request_id_name(e.id):
            return frozenset({Taint(kind=src.REQUEST_ID, label=e.id, node=e)})
        return EMPTY

    def _collection(self, e: ast.expr) -> Taints:
        if isinstance(e, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            saved = dict(self.env)
            order: Taints = EMPTY
            for gen in e.generators:
                element, gen_order = self.iterate(gen.iter)
                order |= gen_order
                self.bind(gen.target, element | gen_order, None)
            parts = [e.key, e.value] if isinstance(e, ast.DictComp) else [e.elt]
            out: Taints = order
            for p in parts:
                t = self.expr(p)
                out |= t - markers(t)
            self.env = saved
            return out
        out = EMPTY
        items: list[ast.expr | None] = [*e.keys, *e.values] if isinstance(e, ast.Dict) else list(e.elts)  # type: ignore[attr-defined]
        for item in items:
            if isinstance(item, ast.Starred):  # [*d.values(), *names]: iterated in place
                element, order = self.iterate(item.value)
                out |= element | order
                continue
            t = self.expr(item)
            out |= t - markers(t)
        return out

    def iterate(self, it: ast.expr) -> tuple[Taints, Taints]:
        """(the taint of each element, the order taint of iterating it)."""
        taint = self.expr(it)
        order = order_of(it, taint, self.defs, self.m.registries)
        return taint - markers(taint), order

    def call(self, e: ast.Call) -> Taints:
        qualified = self.m.qualified(e.func)
        kind = src.call_kind(qualified, e)
        if kind is not None:
            return frozenset({Taint(kind=kind, label=written(e, ast.unparse(e.func) + "()"), node=e)})
        args = [*e.args, *(k.value for k in e.keywords)]
        inner: Taints
        if qualified in ("json.loads", "JSON.parse"):  # parsed back into data: the text's key order is gone
            inner = EMPTY
            for a in args:
                inner |= self.expr(a)
            return frozenset(t for t in inner if t.kind not in src.MARKERS and t.kind != src.JSON_UNSORTED)
        if src.is_json_dumps(qualified):
            inner = self.expr(e.args[0]) if e.args else EMPTY
            inner -= markers(inner)
            if src.sorts_keys(e) or (e.args and literal(e.args[0])):
                return inner  # a literal's key order is the order written in the code
            what = (
                "JSON.stringify() without a sorted replacer"
                if qualified == "JSON.stringify"
                else "json.dumps() without sort_keys"
            )
            return inner | {Taint(kind=src.JSON_UNSORTED, label=what, node=e)}
        short = qualified.rsplit(".", 1)[-1]
        if qualified in ("sorted", "len", "min", "max", "sum", "any", "all", "bool", "isinstance", "hash"):
            inner = EMPTY
            for a in args:
                inner |= self.expr(a)
            inner -= markers(inner)
            return EMPTY if qualified != "sorted" else frozenset(t for t in inner if t.kind not in src.ORDER)
        if qualified in ("set", "frozenset"):
            inner = self.expr(e.args[0]) if e.args else EMPTY
            return (inner - markers(inner)) | {Taint(kind=src.SET_VALUE, label="a set", node=e)}
        if qualified in ("dict",) and not e.args:
            return self._collection(ast.Dict(keys=[], values=[])) | {Taint(kind=src.DICT_VALUE, label="a dict", node=e)}
        if qualified in ("list", "tuple", "str", "repr", "enumerate", "reversed", "iter") and e.args:
            element, order = (
                self.iterate(e.args[0]) if qualified != "str" and qualified != "repr" else (self.expr(e.args[0]), EMPTY)
            )
            return as_text(element, e.args[0]) | order if qualified in ("str", "repr") else element | order
        if isinstance(e.func, ast.Attribute):
            receiver = self.expr(e.func.value)
            arg_taint: Taints = EMPTY
            for a in args:
                arg_taint |= self.expr(a)
            if e.func.attr == "join" and e.args:
                element, order = self.iterate(e.args[0])
                return receiver - markers(receiver) | element | order
            if e.func.attr in src.DICT_VIEWS and not e.args:
                return receiver - {t for t in receiver if t.kind == src.PARAM}
            if e.func.attr == "format":
                arg_taint = as_text(arg_taint, e)
            if e.func.attr in src.DAY_METHODS or (e.func.attr == "strftime" and e.args and src.day_format(e.args[0])):
                receiver = to_day(receiver)
            local = self._local_call(e, short)
            kept = e.func.attr in src.TEXT_METHODS or local or self._namespace(e.func)
            if short[:1].isupper() or not kept:
                # a constructor (see below), or an object's method that does something with its arguments
                # (http.post(..., headers=token)): what it returns is not their text; receiver.strip() is the
                # receiver's; a module's function (textwrap.dedent(x), Math.floor(x)) keeps them
                arg_taint = EMPTY
            return (receiver | arg_taint | local) - markers(receiver | arg_taint | local)
        local = self._local_call(e, short)
        if local:
            return local
        arg_taint = EMPTY
        for a in args:
            arg_taint |= self.expr(a)
        if short[:1].isupper():
            # Event(timestamp=time.time(), tools=tools): an object whose fields are read later one by one;
            # the time in one field is not in the others (praisonaiagents' hook input carried its tools)
            return EMPTY
        return arg_taint - markers(arg_taint)

    def _namespace(self, func: ast.Attribute) -> bool:
        """module.function: an imported module (or a dotted path into one), or a JavaScript global."""
        head: ast.expr = func.value
        while isinstance(head, ast.Attribute):
            head = head.value
        if not isinstance(head, ast.Name) or head.id in self.env:
            return False  # Handler.process(..., trace_id=...) is a class's method, not a module's function
        return head.id in src.JS_NAMESPACES or (head.id in self.m.aliases and not head.id[:1].isupper())

    def _local_call(self, e: ast.Call, name: str) -> Taints:
        """A helper (of this module or imported from the linted tree): what it returns, its parameters
        replaced by this call's arguments. A helper of this module that sends a prompt is read again
        with the volatile ones bound (module.rerun)."""
        found = self.m.helper(e, name)
        if found is None:
            return EMPTY
        owner, fn = found
        returned = owner.returns(fn.name)
        params = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
        if params and params[0] in ("self", "cls") and isinstance(e.func, ast.Attribute):
            params = params[1:]
        bound = {p: self.expr(a) for p, a in zip(params, e.args, strict=False)}
        bound.update({k.arg: self.expr(k.value) for k in e.keywords if k.arg})
        if self.collect:
            passed = {
                p: frozenset(t for t in ts if t.kind not in (src.PARAM, src.DICT_VALUE))
                for p, ts in bound.items()
                if not src.request_id_name(p)
            }  # such a name is a source itself
            into = self.report or self.m
            if owner is not into and self.only is None:  # the values this file passes, none of the helper's own
                only: frozenset[Taint] | None = frozenset().union(*passed.values())
            else:
                only = self.only
            if any(passed.values()):
                owner.rerun(fn, {p: ts for p, ts in passed.items() if ts}, into, only)
        out: set[Taint] = set()
        for t in returned:
            if t.kind == src.PARAM:
                out |= bound.get(t.label, EMPTY)
            elif owner is not self.m:  # written in another file: the finding is placed at this call
                out.add(Taint(kind=t.kind, label=f"{t.label} via {fn.name}()", node=e))
            else:
                out.add(t)
        return frozenset(out)

    def resolve(self, e: ast.expr) -> ast.expr:
        seen = 0
        while isinstance(e, ast.Name) and e.id in self.defs and seen < 8:
            e, seen = self.defs[e.id], seen + 1
        return e
