"""Follow volatile values through Python source to the SDK calls that send a prompt (stdlib ast; the
code is never run). One pass per function, in statement order: names carry the set of volatile sources
their value was built from (Taint), helpers in the same module return theirs, and each sink call's
parts (sinks.regions) are judged by where they sit in the prompt."""
from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import NamedTuple

from prefixguard.lint.code import sinks
from prefixguard.lint.code import sources as src

# A file that names none of these cannot hold a sink: it is not parsed at all.
_SINK_WORDS = re.compile(r"\.create|\.stream|converse|generate_content|completion|SystemMessage|ChatPromptTemplate"
                         r"|\.parse\b")
_SUPPRESS = re.compile(r"#\s*prefixguard:\s*ignore(?:\[([A-Za-z0-9_,\s-]+)\])?")


class Taint(NamedTuple):
    kind: str          # sources.CLOCK ... (or a marker: a set, a dict, a parameter)
    label: str         # the source as written: "datetime.now()", "iteration over a set"
    node: ast.AST      # where it is (for the finding's region and for fixes)


Taints = frozenset[Taint]
EMPTY: Taints = frozenset()


class CodeHit(NamedTuple):
    """One flow from a source to a cached part of a prompt, placed at the source."""
    code: str
    variant: str | None
    message: str
    line: int
    column: int        # 1-based, in characters
    end_line: int
    end_column: int
    pointer: str       # where in the code's prompts: "function/part of the prompt" (no line numbers)
    key: str           # what it is: the source as written and the API (stable across edits elsewhere)
    node: ast.AST      # the source node
    sink: ast.Call
    region: sinks.Region
    provider: str
    text: ast.expr     # the region's value with names resolved to what was assigned (for fixes)
    latest: ast.expr | None   # the content of the call's latest message, written in the call (for fixes)
    owner: ast.AST     # the function (or module) holding the call
    first_volatile: int | None   # text is an f-string: the index of its first part with a volatile value


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


class Scope:
    """One function (or the module body): statements in order, names -> taint and -> last literal."""

    def __init__(self, module: Module, owner: ast.AST, collect: bool) -> None:
        self.m, self.owner, self.collect = module, owner, collect
        is_module = isinstance(owner, ast.Module)
        self.env: dict[str, Taints] = {} if is_module else dict(module.globals)
        self.defs: dict[str, ast.expr] = {} if is_module else dict(module.global_defs)
        self.loop_order: list[Taints] = []
        self.memo: dict[int, Taints] = {}   # node id -> taint, for the statement being read
        self.returned: set[Taint] = set()
        self.name = getattr(owner, "name", "<module>")
        if not is_module:
            self._params(owner)  # type: ignore[arg-type]

    def _params(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        a = fn.args
        for i, arg in enumerate([*a.posonlyargs, *a.args, *a.kwonlyargs]):
            taints = {Taint(src.PARAM, arg.arg, arg)}
            if src.request_id_name(arg.arg):
                taints.add(Taint(src.REQUEST_ID, f"the parameter {arg.arg}", arg))
            if arg.annotation is not None and src.SET_ANNOTATIONS.match(ast.unparse(arg.annotation)):
                taints.add(Taint(src.SET_VALUE, arg.arg, arg))
            self.env[arg.arg] = frozenset(taints)

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
                value |= {Taint(src.SET_VALUE, s.target.id, s.target)}
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
            for item in s.items:
                value = self.expr(item.context_expr)
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, value, None)
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
            for target in (s.targets if isinstance(s, ast.Assign) else [s.target]):
                if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):   # d[k] = v
                    name = target.value.id
                    self.env[name] = self.env.get(name, EMPTY) | self.expr(s.value) | self._loop()

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
                self.bind(t.value if isinstance(t, ast.Starred) else t, value - _markers(value), None)

    def effect(self, e: ast.expr) -> None:
        """A call for its side effect: lst.append(v), lst.extend(v), random.shuffle(lst)."""
        if not isinstance(e, ast.Call):
            self.expr(e)
            return
        func = e.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.attr in (
                "append", "extend", "insert", "add", "update", "setdefault"):
            name = func.value.id
            added: Taints = EMPTY
            for arg in e.args:
                added |= self.expr(arg) - _markers(self.expr(arg))
            self.env[name] = self.env.get(name, EMPTY) | added | self._loop()
            return
        qualified = self.m.qualified(func)
        if qualified in ("random.shuffle", "random.Random.shuffle") and e.args and isinstance(e.args[0], ast.Name):
            self.env[e.args[0].id] = self.env.get(e.args[0].id, EMPTY) | {Taint(src.RANDOM, "random.shuffle()", e)}
            return
        self.expr(e)

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
                    out |= _as_text(self.expr(v.value), v.value)
            return out
        if isinstance(e, ast.BinOp):
            left, right = self.expr(e.left), self.expr(e.right)
            if isinstance(e.op, (ast.BitOr, ast.Sub, ast.BitAnd, ast.BitXor)) and _kinds(left | right) & {src.SET_VALUE}:
                return (left | right) - _markers(left | right) | {Taint(src.SET_VALUE, "a set", e)}
            if isinstance(e.op, ast.Mod):
                right = _as_text(right, e.right)
            return (left | right) - _markers(left | right)
        if isinstance(e, ast.Attribute):
            if src.request_id_attribute(e):
                return frozenset({Taint(src.REQUEST_ID, ast.unparse(e), e)})
            return self.expr(e.value) - _markers(self.expr(e.value))
        if isinstance(e, ast.Subscript):
            if src.env_subscript(self.m.qualified(e.value), e.slice):
                return frozenset({Taint(src.ENV, ast.unparse(e), e)})
            base = self.expr(e.value)
            return base - _markers(base)
        if isinstance(e, (ast.Set, ast.SetComp)):
            inner = self._collection(e)
            return inner | {Taint(src.SET_VALUE, "a set", e)}
        if isinstance(e, (ast.Dict, ast.DictComp)):
            return self._collection(e) | {Taint(src.DICT_VALUE, "a dict", e)}
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
        if e.id in self.m.aliases or e.id in self.m.functions:   # an imported or defined name, not a value
            return EMPTY
        if src.request_id_name(e.id):
            return frozenset({Taint(src.REQUEST_ID, e.id, e)})
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
                out |= t - _markers(t)
            self.env = saved
            return out
        out = EMPTY
        items: list[ast.expr | None] = [*e.keys, *e.values] if isinstance(e, ast.Dict) else list(e.elts)  # type: ignore[attr-defined]
        for item in items:
            t = self.expr(item)
            out |= t - _markers(t)
        return out

    def iterate(self, it: ast.expr) -> tuple[Taints, Taints]:
        """(the taint of each element, the order taint of iterating it)."""
        taint = self.expr(it)
        order = _order(it, taint, self.defs)
        return taint - _markers(taint), order

    def call(self, e: ast.Call) -> Taints:
        qualified = self.m.qualified(e.func)
        kind = src.call_kind(qualified, e)
        if kind is not None:
            return frozenset({Taint(kind, ast.unparse(e.func) + "()", e)})
        args = [*e.args, *(k.value for k in e.keywords)]
        if src.is_json_dumps(qualified):
            inner = self.expr(e.args[0]) if e.args else EMPTY
            inner -= _markers(inner)
            if src.sorts_keys(e) or (e.args and _literal(e.args[0])):
                return inner   # a literal's key order is the order written in the code
            return inner | {Taint(src.JSON_UNSORTED, "json.dumps() without sort_keys", e)}
        short = qualified.rsplit(".", 1)[-1]
        if qualified in ("sorted", "len", "min", "max", "sum", "any", "all", "bool", "isinstance", "hash"):
            inner: Taints = EMPTY
            for a in args:
                inner |= self.expr(a)
            inner -= _markers(inner)
            return EMPTY if qualified != "sorted" else frozenset(t for t in inner if t.kind not in src.ORDER)
        if qualified in ("set", "frozenset"):
            inner = self.expr(e.args[0]) if e.args else EMPTY
            return (inner - _markers(inner)) | {Taint(src.SET_VALUE, "a set", e)}
        if qualified in ("dict",) and not e.args:
            return self._collection(ast.Dict(keys=[], values=[])) | {Taint(src.DICT_VALUE, "a dict", e)}
        if qualified in ("list", "tuple", "str", "repr", "enumerate", "reversed", "iter") and e.args:
            element, order = self.iterate(e.args[0]) if qualified != "str" and qualified != "repr" else (
                self.expr(e.args[0]), EMPTY)
            return _as_text(element, e.args[0]) | order if qualified in ("str", "repr") else element | order
        if isinstance(e.func, ast.Attribute):
            receiver = self.expr(e.func.value)
            arg_taint: Taints = EMPTY
            for a in args:
                arg_taint |= self.expr(a)
            if e.func.attr == "join" and e.args:
                element, order = self.iterate(e.args[0])
                return receiver - _markers(receiver) | element | order
            if e.func.attr in src.DICT_VIEWS and not e.args:
                return receiver - {t for t in receiver if t.kind == src.PARAM}
            if e.func.attr == "format":
                arg_taint = _as_text(arg_taint, e)
            local = self._local_call(e, short)
            return (receiver | arg_taint | local) - _markers(receiver | arg_taint | local)
        local = self._local_call(e, short)
        if local:
            return local
        arg_taint = EMPTY
        for a in args:
            arg_taint |= self.expr(a)
        return arg_taint - _markers(arg_taint)

    def _local_call(self, e: ast.Call, name: str) -> Taints:
        """A helper of this module: what it returns, its parameters replaced by this call's arguments."""
        fn = self.m.functions.get(name)
        if fn is None or (isinstance(e.func, ast.Attribute) and not (
                isinstance(e.func.value, ast.Name) and e.func.value.id in ("self", "cls", *self.m.classes))):
            return EMPTY
        returned = self.m.returns(name)
        params = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
        if params and params[0] in ("self", "cls") and isinstance(e.func, ast.Attribute):
            params = params[1:]
        bound = {p: self.expr(a) for p, a in zip(params, e.args)}
        bound.update({k.arg: self.expr(k.value) for k in e.keywords if k.arg})
        out: set[Taint] = set()
        for t in returned:
            if t.kind == src.PARAM:
                out |= bound.get(t.label, EMPTY)
            else:
                out.add(t)
        return frozenset(out)

    # ---------------------------------------------------------------- sinks

    def sinks_in(self, s: ast.stmt) -> None:
        if not self.collect:
            return
        for node in _walk_no_defs(s):
            if isinstance(node, ast.Call):
                sink = sinks.find(node, self.m.qualified(node.func))
                if sink is not None:
                    self.judge(sink)

    def _first_volatile(self, text: ast.expr) -> int | None:
        return _first_volatile_part(self, text)

    def resolve(self, e: ast.expr) -> ast.expr:
        seen = 0
        while isinstance(e, ast.Name) and e.id in self.defs and seen < 8:
            e, seen = self.defs[e.id], seen + 1
        return e

    def judge(self, sink: sinks.Sink) -> None:
        self.m.calls += 1
        parts = sinks.regions(sink, self.resolve)
        explicit = sink.provider in sinks.EXPLICIT
        auto = sinks.automatic(sink)
        for i, region in enumerate(parts):
            if not region.cached:
                continue
            taints = self.expr(region.node)
            for t in sorted(taints, key=lambda t: (t.kind, _pos(t.node))):
                if t.kind in src.MARKERS:
                    continue
                code, variant = self._rule(t, region, parts, i, explicit, auto)
                if code is None:
                    continue
                self._report(code, variant, t, sink, region, parts)

    def _rule(self, t: Taint, region: sinks.Region, parts: list[sinks.Region], i: int, explicit: bool,
              auto: bool) -> tuple[str | None, str | None]:
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
            return None, None   # after the last breakpoint: not cached
        return "PG601", "uncached"

    def _report(self, code: str, variant: str | None, t: Taint, sink: sinks.Sink, region: sinks.Region,
                parts: list[sinks.Region]) -> None:
        node = t.node
        line, col = _pos(node)
        end_line = getattr(node, "end_lineno", None) or line
        end_col = getattr(node, "end_col_offset", None)
        text_line = self.m.lines[line - 1] if line - 1 < len(self.m.lines) else ""
        column = _chars(text_line, col) + 1
        end_text = self.m.lines[end_line - 1] if end_line - 1 < len(self.m.lines) else ""
        end_column = _chars(end_text, end_col) + 1 if end_col is not None else column + 1
        if _suppressed(self.m.lines, line, code) or _suppressed(self.m.lines, sink.call.lineno, code):
            return
        where = f"the {region.label} of {sink.api} (line {sink.call.lineno})"
        if code == "PG602":
            message = f"{t.label} decides the order of the tools sent to {sink.api} (line {sink.call.lineno})"
        elif code == "PG603":
            message = f"{t.label} writes text that goes into {where}"
        else:
            what = {"set-order": "the order of " + t.label}.get(t.kind, f"{t.label} ({t.kind})")
            consequence = {None: "every request misses the cached block", "partial": "the cached prefix ends "
                           "there: a partial hit at best", "uncached": "nothing is cached yet, but no breakpoint "
                           "could ever cache it", }.get(variant, "")
            if code == "PG604":
                consequence = "the breakpoint on that block writes an entry no request reads"
            message = f"{what} goes into {where}: {consequence}"
        hit = CodeHit(code=code, variant=variant, message=message, line=line, column=column, end_line=end_line,
                      end_column=max(end_column, column + 1) if end_line == line else end_column,
                      pointer=f"{self.name}/{region.label}", key=f"{t.kind}:{t.label}:{sink.api}", node=node,
                      sink=sink.call, region=region, provider=sink.provider, text=self.resolve(region.node),
                      latest=parts[-1].node if parts and not parts[-1].cached else None, owner=self.owner,
                      first_volatile=self._first_volatile(self.resolve(region.node)))
        if all((h.code, h.line, h.column, h.pointer) != (hit.code, hit.line, hit.column, hit.pointer)
               for h in self.m.hits):
            self.m.hits.append(hit)


def _first_volatile_part(scope: Scope, text: ast.expr) -> int | None:
    if not isinstance(text, ast.JoinedStr):
        return None
    for i, v in enumerate(text.values):
        if isinstance(v, ast.FormattedValue) and _kinds(_as_text(scope.expr(v.value), v.value)) & src.TEXT_VOLATILE:
            return i
    return None


def _literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _pos(node: ast.AST) -> tuple[int, int]:
    return getattr(node, "lineno", 1), getattr(node, "col_offset", 0)


def _chars(line: str, byte_col: int) -> int:
    """ast columns count UTF-8 bytes."""
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", "replace"))


def _markers(t: Taints) -> Taints:
    return frozenset(x for x in t if x.kind in src.MARKERS)


def _kinds(t: Taints) -> set[str]:
    return {x.kind for x in t}


def _as_text(t: Taints, node: ast.expr | ast.Call) -> Taints:
    """A value written as text: a set's items come out in its iteration order."""
    if any(x.kind == src.SET_VALUE for x in t):
        return (t - _markers(t)) | {Taint(src.SET_ORDER, "iteration over a set", node)}
    return t - {x for x in t if x.kind in (src.SET_VALUE, src.DICT_VALUE)}


def _order(it: ast.expr, taint: Taints, defs: dict[str, ast.expr]) -> Taints:
    """The order taint of iterating `it`: a set (any time), a dict view (unless of a dict literal)."""
    if any(x.kind == src.SET_VALUE for x in taint):
        return frozenset({Taint(src.SET_ORDER, "iteration over a set", it)})
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr in src.DICT_VIEWS \
            and not it.args:
        receiver = it.func.value
        if isinstance(receiver, ast.Call) and receiver.args and isinstance(receiver.args[0], ast.Call) \
                and isinstance(receiver.args[0].func, ast.Name) and receiver.args[0].func.id == "sorted":
            return EMPTY   # dict(sorted(d.items())).values(): ordered by key
        for _ in range(8):   # x = y; y = x: a cycle of names ends here
            if not (isinstance(receiver, ast.Name) and receiver.id in defs):
                break
            receiver = defs[receiver.id]
        if isinstance(receiver, ast.Dict) and receiver.keys:
            return EMPTY   # a literal's order is the order written in the code (an empty one is filled at run time)
        return frozenset({Taint(src.DICT_ORDER, f"iteration over .{it.func.attr}()", it)})
    return EMPTY


def _walk_no_defs(node: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a statement, without nested functions, classes and lambdas (their own scopes)."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        for child in ast.iter_child_nodes(n):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.stmt)):
                todo.append(child)


def _suppressed(lines: list[str], line: int, code: str) -> bool:
    if not 0 < line <= len(lines) or "prefixguard" not in lines[line - 1]:
        return False
    m = _SUPPRESS.search(lines[line - 1])
    if m is None:
        return False
    return m.group(1) is None or code in {c.strip().upper() for c in m.group(1).split(",")}


def analyze(text: str, filename: str = "<string>") -> tuple[list[CodeHit], int]:
    """(the flows in one Python file, the number of SDK calls judged). Raises SyntaxError (or
    ValueError) when it does not parse."""
    if not _SINK_WORDS.search(text):
        return [], 0
    module = Module(ast.parse(text, filename=filename), text)
    return module.run(), module.calls
