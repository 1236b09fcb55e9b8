"""A source file's flows as lint findings (Python, TypeScript, JavaScript): read it, analyze it, keep the
selected rules, place each hit (line, column, snippet, fingerprint) the way body findings are placed."""

from __future__ import annotations

import io
import os
import tokenize

from prefixguard.lint import catalog
from prefixguard.lint.code.project import PROJECT
from prefixguard.lint.code.python import CodeHit, analyze
from prefixguard.lint.code.typescript import GRAMMARS, TsError
from prefixguard.lint.code.typescript import analyze as analyze_ts
from prefixguard.lint.finding import Finding, fingerprint
from prefixguard.utils.errors import InputError, NotARequest
from prefixguard.wire import MAX_BYTES

LANGUAGES = {".py": "Python", **dict.fromkeys(GRAMMARS, "TypeScript/JavaScript")}


def read_source(name: str) -> str:
    """The file's text (a Python coding cookie honoured, else UTF-8). A file that is not text is skipped,
    not an error."""
    language = LANGUAGES.get(os.path.splitext(name)[1], "Python")
    try:
        if os.path.getsize(name) > MAX_BYTES:
            raise NotARequest(f"{language} file over the {MAX_BYTES // 2**20} MiB limit, not linted", name)
        with open(name, "rb") as fh:
            data = fh.read()
    except OSError as err:
        raise InputError((err.strerror or str(err)).lower(), name) from None
    try:
        if language != "Python":
            return data.decode("utf-8").removeprefix("\ufeff")
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding).removeprefix("\ufeff")
    except (SyntaxError, LookupError, UnicodeDecodeError):
        raise NotARequest(f"{language} source that is not text in its declared encoding, not linted", name) from None


def lint_python(name: str, relpath: str, text: str, codes: frozenset[str]) -> tuple[list[Finding], int]:
    """(findings of the selected rules, the number of SDK calls judged) of a source file, Python or, by
    its suffix, TypeScript or JavaScript. A file that does not parse is skipped with its reason
    (NotARequest), never an error: a repository holds templates and fixtures."""
    grammar = GRAMMARS.get(os.path.splitext(name)[1])
    language = "Python" if grammar is None else "TypeScript/JavaScript"
    try:
        hits, calls = analyze(text, name, PROJECT) if grammar is None else analyze_ts(text, name, grammar)
    except SyntaxError as err:
        raise NotARequest(f"Python that does not parse ({err.msg}, line {err.lineno}), not linted", name) from None
    except TsError as err:
        raise NotARequest(f"{err}, not linted", name) from None
    except Exception as err:  # one odd file of a repository is skipped with its reason, never a crash
        raise NotARequest(f"{language} that could not be analyzed ({type(err).__name__}), not linted", name) from None
    return [_finding(h, name, relpath, text) for h in hits if h.code in codes], calls


def _finding(hit: CodeHit, name: str, relpath: str, text: str) -> Finding:
    rule = catalog.get(hit.code)
    assert rule is not None, f"the code analysis reported an unknown rule {hit.code!r}"
    lines = text.splitlines()
    source_line = lines[hit.line - 1] if hit.line - 1 < len(lines) else ""
    caret = hit.column - 1
    width = (hit.end_column - hit.column) if hit.end_line == hit.line else len(source_line) - caret
    return Finding(
        rule=rule,
        severity=rule.severity_of(hit.variant),
        message=hit.message,
        fix=rule.fix,
        path=name,
        pointer=hit.pointer,
        line=hit.line,
        column=hit.column,
        end_line=hit.end_line,
        end_column=hit.end_column,
        record=None,
        fingerprint=fingerprint(rule.code, relpath, hit.pointer, hit.key),
        data={"provider": hit.provider, "predicts": rule.predicts},
        snippet=(source_line, caret, max(1, width)),
    )
