"""Follow volatile values through Python source to the SDK calls that send a prompt (stdlib ast; the
code is never run). module.py holds the file, flow.py reads each function in statement order (names
carry the set of volatile sources their value was built from, helpers in the same module return
theirs), and verdict.py judges each sink call's parts by where they sit in the prompt."""

from __future__ import annotations

import ast
import re
import warnings

from prefixguard.lint.code.module import Helpers, Module
from prefixguard.lint.code.verdict import CodeHit

__all__ = ["CodeHit", "analyze"]

# A file that names none of these cannot hold a sink: it is not parsed at all, unless (in a linted tree)
# it names a value source and imports from a file of the tree that names them (it may pass the value to
# a helper there that sends the prompt).
SINK_WORDS = re.compile(
    r"\.create|\.stream|converse|generate_content|completion|SystemMessage|ChatPromptTemplate"
    r"|\.parse\b"
)


_CALLER_WORDS = re.compile(r"datetime|\btime\.time|uuid|\brandom\.|environ|getenv|dumps\(")


def analyze(text: str, filename: str = "<string>", helpers: Helpers | None = None) -> tuple[list[CodeHit], int]:
    """(the flows in one Python file, the number of SDK calls judged); helpers finds the functions it
    imports from other files of the linted tree (project.py). Raises SyntaxError (or ValueError) when
    it does not parse."""
    if not SINK_WORDS.search(text) and (
        helpers is None or not _CALLER_WORDS.search(text) or not helpers.imports_a_sender(filename, text)
    ):
        return [], 0
    with warnings.catch_warnings():  # a SyntaxWarning (an invalid escape) is the file's business, not the lint's
        warnings.simplefilter("ignore")
        tree = helpers.parse(filename, text) if helpers is not None else ast.parse(text, filename=filename)
    module = Module(tree, text, filename, helpers)
    return module.run(), module.calls
