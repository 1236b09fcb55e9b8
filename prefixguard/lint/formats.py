"""Output formats of `prefixguard lint`: text, concise, json, github (and sarif, in sarif.py).

Every format is a function (findings, context) -> str, so the command picks one by name. What a finding
quotes of the linted files (a path, a message, a line of the file) is shown with its secrets redacted and
its control characters escaped (`shown`): lint output lands in terminals and CI logs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from prefixguard.lint.finding import Finding
from prefixguard.utils.styled import printable

JSON_SCHEMA_VERSION = 1  # bump when a field of the json format changes meaning or goes away


class Run:
    """What a format may say besides the findings. (Plain classes here and in linter.py: a lint never
    imports `dataclasses`, nor `inspect` with it.)"""

    __slots__ = ("version", "files", "requests", "errors", "tokenizer", "baselined")

    def __init__(
        self,
        version: str,
        files: int = 0,
        requests: int = 0,
        errors: list[str] | None = None,
        tokenizer: str = "",
        baselined: int = 0,
    ) -> None:
        self.version, self.files, self.requests, self.tokenizer = version, files, requests, tokenizer
        self.errors = [] if errors is None else errors
        self.baselined = baselined


Formatter = Callable[[list[Finding], Run], str]


def shown(text: str) -> str:
    """Text from the linted files as printed: secrets redacted (random-looking values too: a finding
    quotes what changed, as the proxy's detail column does), control characters escaped."""
    from prefixguard.utils.random_tokens import redact_random  # ~10 ms to compile: only when one is shown
    from prefixguard.utils.redaction import redact_text

    return printable(redact_random(redact_text(text)))


def _location(f: Finding) -> str:
    return f"{shown(f.path)}:{f.line}:{f.column}: {f.code} [{f.name}] {shown(f.message)}"


def concise(findings: list[Finding], run: Run) -> str:
    return "\n".join(_location(f) for f in findings)


def _snippet(excerpt: str, caret: int, width: int) -> tuple[str, int, int]:
    """The excerpt as shown, the caret moved with what redaction and escaping did before and under it."""
    before, under = shown(excerpt[:caret]), shown(excerpt[caret : caret + width])
    whole = shown(excerpt)
    if not whole.startswith(before):  # a secret across the caret: point at where it starts
        return whole, min(len(before), len(whole)), 1
    return whole, len(before), max(1, min(len(under), len(whole) - len(before)))


def text(findings: list[Finding], run: Run) -> str:
    """Like ruff's full output: the location line, the source line with a caret, the fix."""
    blocks = []
    for f in findings:
        lines = [_location(f)]
        if f.snippet is not None:
            excerpt, caret, width = _snippet(*f.snippet)
            gutter = " " * len(str(f.line))
            lines += [f"{gutter} |", f"{f.line} | {excerpt}", f"{gutter} | {' ' * caret}{'^' * width} {f.severity}"]
            lines.append(f"{gutter} = fix: {shown(f.fix)}")
        else:
            lines.append(f"  = fix: {shown(f.fix)}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'s' * (n != 1)}"


def summary(findings: list[Finding], run: Run) -> str:
    """The closing line of the human formats. It claims success only when every file was read, and is
    left out when no file was (the warning or the errors on stderr say why)."""
    if run.files == len(run.errors) and not findings:
        return ""
    base = f" ({run.baselined} more in the baseline)" if run.baselined else ""
    checked = f"{_count(run.requests, 'request')}{base}"
    if run.errors:
        found = f"Found {_count(len(findings), 'finding')}" if findings else "No findings"
        return f"{found} in {checked}; {_count(len(run.errors), 'file')} could not be linted."
    if not findings:
        return f"All checks passed: {_count(run.requests, 'request')} in {_count(run.files, 'file')}{base}."
    return f"Found {_count(len(findings), 'finding')} in {checked}."


def as_dict(f: Finding) -> dict[str, Any]:
    return {
        "code": f.code,
        "name": f.name,
        "severity": f.severity,
        "path": f.path,
        "pointer": f.pointer,
        "line": f.line,
        "column": f.column,
        "end_line": f.end_line,
        "end_column": f.end_column,
        "record": f.record,
        "message": redacted(f.message),
        "fix": redacted(f.fix),
        "fingerprint": f.fingerprint,
        "data": redacted_data(f.data),
    }


def redacted(text: str) -> str:
    """A finding's text for the machine formats (json, sarif): secrets redacted, nothing escaped."""
    from prefixguard.utils.random_tokens import redact_random
    from prefixguard.utils.redaction import redact_text

    return redact_random(redact_text(text))


def redacted_data(data: Any) -> dict[str, Any]:
    """A finding's data as the machine formats show it: its strings (excerpts of the files) redacted."""
    return {k: _redacted_value(v) for k, v in data.items()}


def _redacted_value(value: Any) -> Any:
    """A finding's data as shown: its strings (excerpts of the linted files) redacted."""
    if isinstance(value, str):
        return redacted(value)
    if isinstance(value, list):
        return [_redacted_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _redacted_value(v) for k, v in value.items()}
    return value


def json_format(findings: list[Finding], run: Run) -> str:
    """Versioned: see prefixguard/schemas/lint.schema.json for the fields."""
    doc = {
        "schema_version": JSON_SCHEMA_VERSION,
        "tool": {"name": "prefixguard", "version": run.version},
        "tokenizer": run.tokenizer,
        "files": run.files,
        "requests": run.requests,
        "baselined": run.baselined,
        "findings": [as_dict(f) for f in findings],
        "errors": run.errors,
    }
    return json.dumps(doc, indent=2, ensure_ascii=False)


GITHUB_LEVELS = {"error": "error", "warning": "warning", "info": "notice"}


def _escape_data(s: str) -> str:
    return shown(s).replace("%", "%25")  # shown: no CR or LF is left to escape as %0D / %0A


def _escape_property(s: str) -> str:
    return _escape_data(s).replace(":", "%3A").replace(",", "%2C")


def github(findings: list[Finding], run: Run) -> str:
    """GitHub Actions workflow commands: each finding becomes an annotation on the file and line."""
    out = []
    for f in findings:
        props = (
            f"file={_escape_property(f.path)},line={f.line},col={f.column},endLine={f.end_line},"
            f"endColumn={f.end_column},title={_escape_property(f'{f.code} {f.name}')}"
        )
        out.append(f"::{GITHUB_LEVELS[f.severity]} {props}::{_escape_data(f'{f.message} (fix: {f.fix})')}")
    return "\n".join(out)


def statistics_text(rows: list[dict[str, Any]]) -> str:
    width = max((len(str(r["count"])) for r in rows), default=1)
    return "\n".join(f"{r['count']:>{width}}\t{r['code']}\t[{r['name']}]" for r in rows)
