"""TypeScript and JavaScript expressions (tree-sitter nodes) as the Python ast expressions that mean the
same to the flow analysis, so flow.py, sinks.py and verdict.py judge both languages alike:
a template literal is an f-string, an object literal a dict, `Object.values(o)` is `o.values()`,
`xs.map(x => f(x))` a list comprehension, `xs.sort()` is `sorted(xs)`, `a.join(s)` is `s.join(a)`,
`new Set(x)` is `set(x)`, `this` is `self`, and the single options object of an SDK call its keywords.
Each node keeps the source position (tree-sitter columns count bytes, as ast's do)."""

from __future__ import annotations

import ast
from typing import Any

Node = Any  # a tree_sitter.Node (the package ships no stubs mypy can use everywhere)

# calls whose one object argument names the request's parts (client.messages.create({system, messages}))
SINK_CALLS = frozenset(
    {"create", "stream", "parse", "generateText", "streamText", "generateObject", "streamObject", "SystemMessage"}
)
_WRAPPERS = frozenset(
    {"parenthesized_expression", "as_expression", "satisfies_expression", "non_null_expression", "type_assertion"}
)
_TYPES = frozenset({"type_annotation", "type_arguments", "type_identifier", "predefined_type", "generic_type"})
_ARITHMETIC = frozenset({"+", "-", "*", "/", "%", "**"})
_EITHER = frozenset({"||", "??"})


def at[A: ast.AST](node: A, ts: Node) -> A:
    """node placed where ts is written."""
    node.lineno, node.col_offset = ts.start_point[0] + 1, ts.start_point[1]  # type: ignore[attr-defined]
    node.end_lineno, node.end_col_offset = ts.end_point[0] + 1, ts.end_point[1]  # type: ignore[attr-defined]
    return node


def text(ts: Node) -> str:
    return ts.text.decode("utf-8", "replace")


def name(ts: Node, ident: str) -> ast.Name:
    return at(ast.Name(id=ident, ctx=ast.Load()), ts)


def nothing(ts: Node) -> ast.expr:
    return at(ast.Constant(value=None), ts)


def string_value(ts: Node) -> str:
    return "".join(text(c) for c in ts.named_children)


def expr(ts: Node) -> ast.expr:
    kind = ts.type
    if kind in ("identifier", "shorthand_property_identifier", "property_identifier"):
        return name(ts, text(ts))
    if kind == "this":
        return name(ts, "self")
    if kind in _WRAPPERS:
        inner = [c for c in ts.named_children if c.type not in _TYPES and not c.type.endswith("_type")]
        return expr(inner[0]) if inner else nothing(ts)
    if kind == "string":
        return at(ast.Constant(value=string_value(ts)), ts)
    if kind == "template_string":
        return _template(ts)
    if kind == "number":
        return at(ast.Constant(value=0), ts)
    if kind in ("true", "false", "null", "undefined"):
        return at(ast.Constant(value={"true": True, "false": False}.get(kind)), ts)
    if kind == "member_expression":
        return _member(ts)
    if kind == "subscript_expression":
        index = ts.child_by_field_name("index")
        return at(
            ast.Subscript(
                value=expr(ts.child_by_field_name("object")),
                slice=expr(index) if index is not None else nothing(ts),
                ctx=ast.Load(),
            ),
            ts,
        )
    if kind == "call_expression":
        return call(ts)
    if kind == "new_expression":
        return _new(ts)
    if kind == "await_expression":
        return at(ast.Await(value=expr(ts.named_children[0])), ts) if ts.named_children else nothing(ts)
    if kind == "object":
        return _object(ts)
    if kind == "array":
        return _array(ts)
    if kind == "binary_expression":
        return _binary(ts)
    if kind == "ternary_expression":
        return at(
            ast.IfExp(
                test=expr(ts.child_by_field_name("condition")),
                body=expr(ts.child_by_field_name("consequence")),
                orelse=expr(ts.child_by_field_name("alternative")),
            ),
            ts,
        )
    if kind in (
        "arrow_function",
        "function_expression",
        "function",
        "class",
        "regex",
        "unary_expression",
        "update_expression",
    ) or kind.startswith("jsx"):
        return nothing(ts)  # a function is a value, not a call; a negation or a count is no text
    if kind in ("assignment_expression", "augmented_assignment_expression"):
        return expr(ts.child_by_field_name("right"))
    if kind == "sequence_expression":
        return expr(ts.named_children[-1])
    if kind == "spread_element":
        return at(ast.Starred(value=expr(ts.named_children[0]), ctx=ast.Load()), ts)
    if kind in _TYPES or kind.endswith("_type"):
        return nothing(ts)
    parts = [expr(c) for c in ts.named_children if c.type != "comment"]
    return at(ast.List(elts=parts, ctx=ast.Load()), ts) if parts else nothing(ts)


def _template(ts: Node) -> ast.expr:
    values: list[ast.expr] = []
    for child in ts.named_children:
        if child.type == "template_substitution":
            inner = child.named_children
            value = expr(inner[0]) if inner else nothing(child)
            values.append(at(ast.FormattedValue(value=value, conversion=-1, format_spec=None), child))
        else:
            values.append(at(ast.Constant(value=text(child)), child))
    return at(ast.JoinedStr(values=values), ts)


def _member(ts: Node) -> ast.expr:
    obj, prop = ts.child_by_field_name("object"), ts.child_by_field_name("property")
    attr = text(prop).lstrip("#") if prop is not None else ""
    if text(obj) == "process.env":  # process.env.TRACE_ID reads like os.environ["TRACE_ID"]
        env = at(ast.Subscript(value=expr(obj), slice=at(ast.Constant(value=attr), prop), ctx=ast.Load()), ts)
        env.written = text(ts)  # type: ignore[attr-defined]
        return env
    return at(ast.Attribute(value=expr(obj), attr=attr, ctx=ast.Load()), ts)


def _args(ts: Node | None) -> list[Node]:
    if ts is None:
        return []
    if ts.type == "template_string":  # a tagged template: tag`...`
        return [ts]
    return [c for c in ts.named_children if c.type != "comment"]


def call(ts: Node) -> ast.expr:
    func, args = ts.child_by_field_name("function"), _args(ts.child_by_field_name("arguments"))
    if func.type == "member_expression":
        receiver, method = func.child_by_field_name("object"), text(func.child_by_field_name("property"))
        head = text(receiver)
        if head == "Object" and method in ("keys", "values", "entries") and args:
            view = {"entries": "items"}.get(method, method)
            return _call(ts, at(ast.Attribute(value=expr(args[0]), attr=view, ctx=ast.Load()), func), [])
        if head == "Array" and method == "from" and args:
            return _call(ts, name(func, "list"), [expr(args[0])])
        if method in ("sort", "toSorted"):
            return _call(ts, name(func, "sorted"), [expr(receiver)])
        if method == "join":
            sep = expr(args[0]) if args else at(ast.Constant(value=","), func)
            return _call(ts, at(ast.Attribute(value=sep, attr="join", ctx=ast.Load()), func), [expr(receiver)])
        if method in ("map", "flatMap", "filter") and args and args[0].type in ("arrow_function", "function"):
            return _comprehension(ts, receiver, args[0], method == "filter")
        if method in ("push", "unshift"):
            return _call(
                ts,
                at(
                    ast.Attribute(value=expr(receiver), attr="extend" if len(args) > 1 else "append", ctx=ast.Load()),
                    func,
                ),
                [at(ast.List(elts=[expr(a) for a in args], ctx=ast.Load()), ts)]
                if len(args) > 1
                else [expr(a) for a in args],
            )
        if head == "JSON" and method == "stringify":
            return _stringify(ts, func, args)
    if _options_call(func, args):
        return _call(ts, expr(func), [], options(args[0]))
    if text(func) == "String" and args:
        return _call(ts, name(func, "str"), [expr(args[0])])
    return _call(ts, expr(func), [expr(a) for a in args])


def _new(ts: Node) -> ast.expr:
    ctor, args = ts.child_by_field_name("constructor"), _args(ts.child_by_field_name("arguments"))
    written = text(ctor)
    if written == "Date":
        return _call(ts, name(ctor, "Date"), [expr(a) for a in args])  # sources: Date() with no argument
    if written in ("Set", "Map"):
        return _call(
            ts,
            name(ctor, "set" if written == "Set" else "dict"),
            [expr(a) for a in args[:1]] if written == "Set" else [],
        )
    if _options_call(ctor, args):
        return _call(ts, expr(ctor), [], options(args[0]))
    return _call(ts, expr(ctor), [expr(a) for a in args])


def _options_call(func: Node, args: list[Node]) -> bool:
    """An SDK-like call with one options object (or a name bound to one, looked through by sinks.py)."""
    last = func.child_by_field_name("property") if func.type == "member_expression" else func
    return last is not None and text(last) in SINK_CALLS and len(args) == 1 and args[0].type in ("object", "identifier")


def _call(ts: Node, func: ast.expr, args: list[ast.expr], keywords: list[ast.keyword] | None = None) -> ast.Call:
    node = at(ast.Call(func=func, args=args, keywords=keywords or []), ts)
    callee = ts.child_by_field_name("constructor") or ts.child_by_field_name("function")
    if callee is not None:  # a finding names the call as written: new Date(), crypto.randomUUID()
        node.written = ("new " if ts.type == "new_expression" else "") + text(callee) + "()"  # type: ignore[attr-defined]
    return node


def options(ts: Node) -> list[ast.keyword]:
    """An options object as keywords; a spread (...params), or a name for the whole object, as **params."""
    if ts.type == "identifier":
        return [at(ast.keyword(arg=None, value=expr(ts)), ts)]
    out = []
    for key, value in _pairs(ts):
        arg = key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None
        out.append(at(ast.keyword(arg=arg, value=value), ts))
    return out


def _stringify(ts: Node, func: Node, args: list[Node]) -> ast.Call:
    """JSON.stringify(v, replacer): a replacer array lists the keys in the order written; a replacer
    function named for sorting sorts them. Either reads like json.dumps(v, sort_keys=True)."""
    keywords = []
    if len(args) > 1 and (args[1].type == "array" or "sort" in text(args[1]).lower()):
        keywords.append(at(ast.keyword(arg="sort_keys", value=at(ast.Constant(value=True), args[1])), args[1]))
    json_dumps = at(ast.Attribute(value=name(func, "JSON"), attr="stringify", ctx=ast.Load()), func)
    return _call(ts, json_dumps, [expr(a) for a in args[:1]], keywords)


def _comprehension(ts: Node, receiver: Node, fn: Node, keep: bool) -> ast.expr:
    """xs.map(x => body) as [body for x in xs]; xs.filter(x => ...) as [x for x in xs]."""
    params = fn.child_by_field_name("parameters") or fn.child_by_field_name("parameter")
    found = [
        p
        for p in (
            params.named_children
            if params is not None and params.type == "formal_parameters"
            else [params]
            if params is not None
            else []
        )
    ]
    target: ast.expr = pattern(found[0]) if found else name(fn, "_")
    body = fn.child_by_field_name("body")
    element: ast.expr
    if keep:
        element = pattern(found[0]) if found else nothing(fn)
    elif body is None:
        element = nothing(fn)
    elif body.type == "statement_block":
        returned = [c for c in body.named_children if c.type == "return_statement" and c.named_children]
        element = expr(returned[0].named_children[0]) if returned else nothing(body)
    else:
        element = expr(body)
    generator = ast.comprehension(target=target, iter=expr(receiver), ifs=[], is_async=0)
    return at(ast.ListComp(elt=element, generators=[generator]), ts)


def pattern(ts: Node) -> ast.expr:
    """A binding: a name, or a destructuring as a tuple of its names."""
    kind = ts.type
    if kind in ("required_parameter", "optional_parameter"):
        inner = ts.child_by_field_name("pattern")
        return pattern(inner) if inner is not None else name(ts, "_")
    if kind in ("identifier", "shorthand_property_identifier_pattern", "this"):
        return name(ts, "self" if kind == "this" else text(ts))
    if kind in ("assignment_pattern", "object_assignment_pattern"):
        return pattern(ts.child_by_field_name("left") or ts.named_children[0])
    if kind == "rest_pattern" and ts.named_children:
        return pattern(ts.named_children[0])
    if kind == "pair_pattern":
        return pattern(ts.child_by_field_name("value"))
    if kind in ("object_pattern", "array_pattern"):
        return at(ast.Tuple(elts=[pattern(c) for c in ts.named_children if c.type != "comment"], ctx=ast.Store()), ts)
    return name(ts, "_")


def _object(ts: Node) -> ast.expr:
    pairs = _pairs(ts)
    return at(ast.Dict(keys=[k for k, _ in pairs], values=[v for _, v in pairs]), ts)


def _pairs(ts: Node) -> list[tuple[ast.expr | None, ast.expr]]:
    out: list[tuple[ast.expr | None, ast.expr]] = []
    for child in ts.named_children:
        if child.type == "pair":
            key, value = child.child_by_field_name("key"), child.child_by_field_name("value")
            if key.type == "computed_property_name":
                written: ast.expr = expr(key.named_children[0]) if key.named_children else nothing(key)
            else:
                written = at(ast.Constant(value=string_value(key) if key.type == "string" else text(key)), key)
            out.append((written, expr(value)))
        elif child.type == "shorthand_property_identifier":
            out.append((at(ast.Constant(value=text(child)), child), name(child, text(child))))
        elif child.type == "spread_element" and child.named_children:
            out.append((None, expr(child.named_children[0])))
    return out


def _array(ts: Node) -> ast.expr:
    items = [c for c in ts.named_children if c.type != "comment"]
    if len(items) == 1 and items[0].type == "spread_element" and items[0].named_children:
        return _call(ts, name(ts, "list"), [expr(items[0].named_children[0])])  # [...set]: its order
    return at(ast.List(elts=[expr(c) for c in items], ctx=ast.Load()), ts)


def _binary(ts: Node) -> ast.expr:
    operator = text(ts.child_by_field_name("operator"))
    left, right = expr(ts.child_by_field_name("left")), expr(ts.child_by_field_name("right"))
    if operator in _ARITHMETIC:
        return at(ast.BinOp(left=left, op=ast.Add() if operator == "+" else ast.Sub(), right=right), ts)
    if operator in _EITHER:  # a ?? b, a || b: either value
        return at(ast.IfExp(test=at(ast.Constant(value=True), ts), body=left, orelse=right), ts)
    return at(ast.Compare(left=left, ops=[ast.Eq()], comparators=[right]), ts)
