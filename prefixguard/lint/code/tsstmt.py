"""TypeScript and JavaScript statements (tree-sitter nodes) read as the Python statements that mean the
same to the flow analysis: declarations, assignments, loops and branches, functions and classes, and
imports (an npm package named as a dotted module: module_name). tsexpr.py does the expressions."""

from __future__ import annotations

import ast

from prefixguard.lint.code import tsexpr as tx
from prefixguard.lint.code.tsexpr import Node, at, expr, name, pattern, text

_PACKAGES = {
    "@anthropic-ai/sdk": "anthropic",
    "@anthropic-ai/bedrock-sdk": "anthropic",
    "@anthropic-ai/vertex-sdk": "anthropic",
}
_FUNCTIONS = frozenset(
    {"function_declaration", "generator_function_declaration", "method_definition", "function_signature"}
)
_SKIPPED = frozenset(
    {
        "comment",
        "empty_statement",
        "type_alias_declaration",
        "interface_declaration",
        "enum_declaration",
        "ambient_declaration",
        "abstract_method_signature",
        "debugger_statement",
        "break_statement",
        "continue_statement",
        "throw_statement",
        "import",
        "module",
        "hash_bang_line",
    }
)


def block(ts: Node | None) -> list[ast.stmt]:
    if ts is None:
        return []
    if ts.type not in ("program", "statement_block", "class_body", "switch_body"):
        return stmt(ts)
    out: list[ast.stmt] = []
    for child in ts.named_children:
        out.extend(stmt(child))
    return out


def stmt(ts: Node) -> list[ast.stmt]:
    kind = ts.type
    if kind in _SKIPPED or kind.endswith("_type"):
        return []
    if kind in ("statement_block", "switch_body"):
        return block(ts)
    if kind == "import_statement":
        return _import(ts)
    if kind in ("lexical_declaration", "variable_declaration"):
        return [s for d in ts.named_children if d.type == "variable_declarator" for s in _declare(d)]
    if kind == "expression_statement":
        return _expression_statement(ts.named_children[0]) if ts.named_children else []
    if kind == "return_statement":
        value = ts.named_children[0] if ts.named_children else None
        return [at(ast.Return(value=expr(value) if value is not None else None), ts)]
    if kind == "if_statement":
        alternative = ts.child_by_field_name("alternative")
        orelse = block(alternative.named_children[0]) if alternative is not None and alternative.named_children else []
        return [
            at(
                ast.If(
                    test=expr(ts.child_by_field_name("condition")),
                    body=block(ts.child_by_field_name("consequence")) or [_pass(ts)],
                    orelse=orelse,
                ),
                ts,
            )
        ]
    if kind == "for_in_statement":
        return [_for(ts)]
    if kind in (
        "for_statement",
        "while_statement",
        "do_statement",
        "labeled_statement",
        "with_statement",
        "else_clause",
        "finally_clause",
        "switch_case",
        "switch_default",
        "catch_clause",
    ):
        body = ts.child_by_field_name("body")
        inner = (
            block(body)
            if body is not None
            else [
                s for c in ts.named_children if c.type.endswith(("statement", "declaration", "block")) for s in stmt(c)
            ]
        )
        return [at(ast.If(test=at(ast.Constant(value=True), ts), body=inner or [_pass(ts)], orelse=[]), ts)]
    if kind == "try_statement":
        return [s for c in ts.named_children for s in stmt(c)]
    if kind == "switch_statement":
        return block(ts.child_by_field_name("body"))
    if kind in _FUNCTIONS:
        fn = function(ts, text(ts.child_by_field_name("name") or ts).lstrip("#"))
        return [fn] if fn is not None else []
    if kind in ("class_declaration", "abstract_class_declaration", "class"):
        return [_class(ts)]
    if kind in ("public_field_definition", "field_definition"):
        value = ts.child_by_field_name("value")
        return _expression_statement(value) if value is not None else []
    if kind == "export_statement":
        declaration = ts.child_by_field_name("declaration")
        if declaration is not None:
            return stmt(declaration)
        value = ts.child_by_field_name("value")
        return [at(ast.Expr(value=expr(value)), ts)] if value is not None else []
    return [at(ast.Expr(value=expr(ts)), ts)]


def _pass(ts: Node) -> ast.stmt:
    return at(ast.Pass(), ts)


def _expression_statement(ts: Node) -> list[ast.stmt]:
    if ts.type == "assignment_expression":
        return [
            at(
                ast.Assign(
                    targets=[_target(ts.child_by_field_name("left"))], value=expr(ts.child_by_field_name("right"))
                ),
                ts,
            )
        ]
    if ts.type == "augmented_assignment_expression":
        target = _target(ts.child_by_field_name("left"))
        if not isinstance(target, (ast.Name, ast.Attribute, ast.Subscript)):
            return []
        return [at(ast.AugAssign(target=target, op=ast.Add(), value=expr(ts.child_by_field_name("right"))), ts)]
    return [at(ast.Expr(value=expr(ts)), ts)]


def _target(ts: Node) -> ast.expr:
    if ts.type == "subscript_expression":
        return at(
            ast.Subscript(
                value=expr(ts.child_by_field_name("object")),
                slice=expr(ts.child_by_field_name("index")),
                ctx=ast.Store(),
            ),
            ts,
        )
    if ts.type == "member_expression":
        return expr(ts)
    return pattern(ts)


def _for(ts: Node) -> ast.stmt:
    right = ts.child_by_field_name("right")
    iterated = expr(right)
    operator = ts.child_by_field_name("operator")
    if operator is not None and text(operator) == "in":  # for (k in o): the object's keys, in its order
        iterated = at(
            ast.Call(func=at(ast.Attribute(value=iterated, attr="keys", ctx=ast.Load()), right), args=[], keywords=[]),
            right,
        )
    left = ts.child_by_field_name("left")
    return at(
        ast.For(
            target=pattern(left) if left is not None else name(ts, "_"),
            iter=iterated,
            body=block(ts.child_by_field_name("body")) or [_pass(ts)],
            orelse=[],
        ),
        ts,
    )


def _declare(ts: Node) -> list[ast.stmt]:
    target, value = ts.child_by_field_name("name"), ts.child_by_field_name("value")
    if value is None:
        return []
    while value.type in ("parenthesized_expression", "as_expression", "satisfies_expression") and value.named_children:
        value = value.named_children[0]
    if value.type in ("arrow_function", "function_expression", "function") and target.type == "identifier":
        fn = function(value, text(target))
        return [fn] if fn is not None else []
    if value.type == "call_expression" and text(value.child_by_field_name("function")) == "require":
        required = [a for a in value.child_by_field_name("arguments").named_children if a.type == "string"]
        if required:
            return _bind_import(ts, target, module_name(tx.string_value(required[0])))
    return [at(ast.Assign(targets=[pattern(target)], value=expr(value)), ts)]


def function(ts: Node, called: str) -> ast.FunctionDef | None:
    """A function, a method or an arrow function bound to a name, as a def (an expression body is its return)."""
    params = ts.child_by_field_name("parameters") or ts.child_by_field_name("parameter")
    args: list[ast.arg] = []
    unpack: list[ast.stmt] = []
    found = [] if params is None else params.named_children if params.type == "formal_parameters" else [params]
    for i, p in enumerate(c for c in found if c.type != "comment"):
        bound = pattern(p)
        annotation = _annotation(p)
        if isinstance(bound, ast.Name):
            args.append(at(ast.arg(arg=bound.id, annotation=annotation), p))
        else:  # ({ a, b }) => ...: a and b are the parameter's parts
            args.append(at(ast.arg(arg=f"_arg{i}", annotation=annotation), p))
            unpack.append(at(ast.Assign(targets=[bound], value=name(p, f"_arg{i}")), p))
    body = ts.child_by_field_name("body")
    statements = (
        block(body)
        if body is not None and body.type == "statement_block"
        else [at(ast.Return(value=expr(body)), body)]
        if body is not None
        else []
    )
    arguments = ast.arguments(
        posonlyargs=[], args=args, vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]
    )
    return at(
        ast.FunctionDef(
            name=called,
            args=arguments,
            body=[*unpack, *statements] or [_pass(ts)],
            decorator_list=[],
            returns=None,
            type_params=[],
        ),
        ts,
    )


def _annotation(ts: Node) -> ast.expr | None:
    """A parameter typed as a Set reads like one annotated `set`."""
    typed = ts.child_by_field_name("type")
    if typed is None:
        return None
    written = text(typed).lstrip(": ").strip()
    return name(typed, "set") if written.startswith(("Set<", "ReadonlySet<")) else None


def _class(ts: Node) -> ast.stmt:
    called = ts.child_by_field_name("name")
    body = block(ts.child_by_field_name("body"))
    return at(
        ast.ClassDef(
            name=text(called) if called is not None else "_",
            bases=[],
            keywords=[],
            body=body or [_pass(ts)],
            decorator_list=[],
            type_params=[],
        ),
        ts,
    )


def module_name(package: str) -> str:
    """An npm package as a dotted module name: @langchain/core/prompts -> langchain_core.prompts."""
    package = package.removeprefix("node:")
    if package in _PACKAGES:
        return _PACKAGES[package]
    if package.startswith("@"):
        scope, _, rest = package[1:].partition("/")
        package = f"{scope}_{rest}" if rest else scope
    return package.replace("-", "_").replace("/", ".")


def _import(ts: Node) -> list[ast.stmt]:
    source = ts.child_by_field_name("source")
    if source is None:
        return []
    module = module_name(tx.string_value(source))
    clause = next((c for c in ts.named_children if c.type == "import_clause"), None)
    if clause is None:
        return []
    out: list[ast.stmt] = []
    for part in clause.named_children:
        if part.type == "identifier":  # import X from "m": X is the module's default export
            out.append(at(ast.Import(names=[ast.alias(name=module, asname=text(part))]), part))
        elif part.type == "namespace_import" and part.named_children:
            out.append(at(ast.Import(names=[ast.alias(name=module, asname=text(part.named_children[-1]))]), part))
        elif part.type == "named_imports":
            names = []
            for spec in part.named_children:
                if spec.type != "import_specifier":
                    continue
                imported, alias = spec.child_by_field_name("name"), spec.child_by_field_name("alias")
                names.append(ast.alias(name=text(imported), asname=text(alias) if alias is not None else None))
            if names:
                out.append(at(ast.ImportFrom(module=module, names=names, level=0), part))
    return out


def _bind_import(ts: Node, target: Node, module: str) -> list[ast.stmt]:
    """const x = require("m") / const { a, b: c } = require("m")."""
    if target.type == "identifier":
        return [at(ast.Import(names=[ast.alias(name=module, asname=text(target))]), ts)]
    names = []
    for part in target.named_children:
        if part.type == "shorthand_property_identifier_pattern":
            names.append(ast.alias(name=text(part), asname=None))
        elif part.type == "pair_pattern":
            key, value = part.child_by_field_name("key"), part.child_by_field_name("value")
            names.append(ast.alias(name=text(key), asname=text(value)))
    return [at(ast.ImportFrom(module=module, names=names, level=0), ts)] if names else []
