"""Follow volatile values through TypeScript and JavaScript source (tree-sitter grammars; the code is
never run): each statement is read as the Python statement that means the same to the flow analysis
(tsstmt.py does the statements, tsexpr.py the expressions), and the resulting module is judged by the
same Module, flows and verdicts as Python. Imports name the npm package as a dotted module
(@anthropic-ai/sdk: anthropic, @langchain/core/messages: langchain_core.messages), so the sinks and
sources tables hold both languages."""

from __future__ import annotations

import ast
import re
from functools import cache
from typing import Any

from prefixguard.lint.code.module import Module
from prefixguard.lint.code.tsexpr import Node, text
from prefixguard.lint.code.tsstmt import block, function
from prefixguard.lint.code.verdict import CodeHit

# file suffix -> grammar
GRAMMARS = {
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".js": "javascript",
    ".jsx": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
}
_SINK_WORDS = re.compile(
    r"\.create|\.stream|generateText|streamText|generateObject|streamObject|SystemMessage"
    r"|ChatPromptTemplate|\.parse\b"
)
_BUNDLE_CHARS = 2 * 2**20
_INLINE = frozenset({"arrow_function", "function_expression", "function"})


class TsError(ValueError):
    """The file's syntax could not be read (tree-sitter found errors in most of it)."""


@cache
def _parser(grammar: str) -> Any:
    # loaded only when a TypeScript or JavaScript file is linted
    import tree_sitter_javascript
    import tree_sitter_typescript
    from tree_sitter import Language, Parser

    if grammar == "javascript":
        return Parser(Language(tree_sitter_javascript.language()))
    if grammar == "tsx":
        return Parser(Language(tree_sitter_typescript.language_tsx()))
    return Parser(Language(tree_sitter_typescript.language_typescript()))


def analyze(source: str, filename: str = "<string>", grammar: str = "typescript") -> tuple[list[CodeHit], int]:
    """(the flows in one TypeScript or JavaScript file, the number of SDK calls judged). Raises TsError
    when the file is mostly not that language."""
    if filename.endswith(".d.ts") or not _SINK_WORDS.search(source) or _bundled(filename, source):
        return [], 0
    data = source.encode("utf-8")
    root = _parser(grammar).parse(data).root_node
    if root.has_error and _error_share(root) > 0.5:
        raise TsError(f"{grammar} that does not parse")
    tree = ast.Module(body=block(root) + _callbacks(root), type_ignores=[])
    module = Module(tree, source)
    return module.run(), module.calls


def _callbacks(root: Node) -> list[ast.stmt]:
    """Functions written inline with a body of statements (app.post("/chat", async (req, res) => {...}),
    a .then(function () {...})), each read as a function of its own. Named ones (const f = () => ...)
    are read where they are bound, and .map/.filter callbacks as comprehensions."""
    out: list[ast.stmt] = []
    todo = [root]
    while todo:
        node = todo.pop()
        todo.extend(node.named_children)
        if node.type not in _INLINE or node.parent is None or node.parent.type == "variable_declarator":
            continue
        body = node.child_by_field_name("body")
        if body is None or body.type != "statement_block" or _comprehended(node):
            continue
        fn = function(node, f"<callback line {node.start_point[0] + 1}>")
        if fn is not None:
            out.append(fn)
    return out


def _comprehended(fn: Node) -> bool:
    """The callback of xs.map(...), xs.flatMap(...) or xs.filter(...) (tsexpr reads it as a comprehension)."""
    args = fn.parent
    call = args.parent if args is not None and args.type == "arguments" else None
    callee = call.child_by_field_name("function") if call is not None and call.type == "call_expression" else None
    prop = callee.child_by_field_name("property") if callee is not None and callee.type == "member_expression" else None
    return prop is not None and text(prop) in ("map", "flatMap", "filter") and args.named_children[0] == fn


def _bundled(filename: str, source: str) -> bool:
    """A bundle (vendored, generated): *.min.js, over 2 MiB (letta ships a 24 MB CLI bundle), or lines
    of over 1,000 characters on average (minified)."""
    if filename.endswith((".min.js", ".min.mjs", ".bundle.js")) or len(source) > _BUNDLE_CHARS:
        return True
    head = source[:65536]
    return len(head) > 4096 and len(head) / (head.count("\n") + 1) > 1000


def _error_share(root: Node) -> float:
    bad = sum(c.end_byte - c.start_byte for c in root.children if c.type == "ERROR" or c.is_missing)
    return bad / max(1, root.end_byte - root.start_byte)
