"""What a check reports (Hit: a rule, a JSON pointer, a message) and what lint prints (Finding: a Hit
placed in a file, with line, column and a fingerprint that survives edits elsewhere in the file)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from prefixguard.lint.catalog import Rule


class Hit(NamedTuple):
    rule: str  # rule name (see rules/catalog.toml)
    pointer: str  # JSON pointer into the request body
    message: str
    key: str = ""  # what identifies this hit besides its pointer (a pattern name,
    # a cause): part of the fingerprint, so never a volatile value
    inner: tuple[int, int] | None = None  # character span inside the string at pointer
    offset: int | None = None  # exact character offset in the body, when known (a first difference)
    variant: str | None = None  # a named case with its own severity (catalog `variants`)
    fix: str | None = None  # a fix more precise than the catalog's
    data: Mapping[str, Any] = MappingProxyType({})  # numbers for machine output (tokens, cost)


class Finding(NamedTuple):
    rule: Rule
    severity: str
    message: str
    fix: str
    path: str  # the file as named on the command line ("-" for stdin)
    pointer: str
    line: int
    column: int
    end_line: int
    end_column: int
    record: int | None = None  # JSONL: the line of the request this finding is about
    fingerprint: str = ""
    data: Mapping[str, Any] = MappingProxyType({})
    snippet: tuple[str, int, int] | None = None  # (excerpt of the line, caret offset in it, caret width)

    @property
    def code(self) -> str:
        return self.rule.code

    @property
    def name(self) -> str:
        return self.rule.name

    def sort_key(self) -> tuple[str, int, int, str]:
        return self.path, self.line, self.column, self.rule.code


def fingerprint(code: str, relpath: str, pointer: str, key: str) -> str:
    """Stable across edits that move a finding: no line numbers, no matched values, only where it is
    in the request (the pointer) and what it is (the key). Equal findings in several JSONL records
    share a fingerprint; baselines count them."""
    from hashlib import sha256  # a lint that finds nothing never loads OpenSSL's hashes (a cost at start)

    return sha256("\x00".join((code, relpath, pointer, key)).encode("utf-8")).hexdigest()[:20]


def tokens_text(n: int, estimated: bool) -> str:
    """'N tokens' for a message, said to be an estimate when no tokenizer counted them."""
    return f"{'about ' if estimated else ''}{n:,} token{'s' * (n != 1)}"
