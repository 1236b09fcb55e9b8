"""SARIF 2.1.0 output, for GitHub code scanning and other SARIF viewers.

Every catalog rule is declared in tool.driver.rules (so a viewer can show a rule with no results);
each result points at its region in the file as written, with columns in Unicode code points, and
carries the finding's fingerprint as a partial fingerprint so results keep their identity across runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

from prefixguard.lint import catalog
from prefixguard.lint.finding import Finding
from prefixguard.lint.formats import Run, redacted, redacted_data

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVELS = {"error": "error", "warning": "warning", "info": "note"}
FINGERPRINT = "prefixguard/v1"
ROOT = "%SRCROOT%"


def _rule(r: catalog.Rule) -> dict[str, Any]:
    help_text = f"{r.summary}\n\nWhy: {r.why}\n\nFix: {r.fix}"
    markdown = (
        f"{r.summary}\n\n**Why:** {r.why}\n\n**Fix:** {r.fix}\n\n"
        f"Bad:\n```json\n{r.bad}\n```\n\nGood:\n```json\n{r.good}\n```"
    )
    return {
        "id": r.code,
        "name": r.name,
        "shortDescription": {"text": r.summary},
        "fullDescription": {"text": r.why},
        "helpUri": catalog.help_uri(r.code),
        "help": {"text": help_text, "markdown": markdown},
        "defaultConfiguration": {"level": LEVELS[r.severity]},
        "properties": {"tags": [r.family, *r.providers], "providers": list(r.providers)},
    }


def _artifact(path: str) -> dict[str, str]:
    """Relative paths are resolved against the directory lint ran in (%SRCROOT%: the repository root in CI)."""
    if path == "-":
        return {"uri": "stdin"}
    p = Path(path)
    return {"uri": p.resolve().as_uri()} if p.is_absolute() else {"uri": quote(p.as_posix()), "uriBaseId": ROOT}


def _result(f: Finding, index: dict[str, int]) -> dict[str, Any]:
    region: dict[str, Any] = {
        "startLine": f.line,
        "startColumn": f.column,
        "endLine": f.end_line,
        "endColumn": f.end_column,
    }
    location = {"physicalLocation": {"artifactLocation": _artifact(f.path), "region": region}}
    return {
        "ruleId": f.code,
        "ruleIndex": index[f.code],
        "level": LEVELS[f.severity],
        "message": {"text": redacted(f"{f.message}. Fix: {f.fix}")},
        "locations": [location],
        "partialFingerprints": {FINGERPRINT: f.fingerprint},
        "properties": {
            "name": f.name,
            "severity": f.severity,
            "pointer": f.pointer,
            "record": f.record,
            **({"data": redacted_data(f.data)} if f.data else {}),
        },
    }


def sarif(findings: list[Finding], run: Run) -> str:
    rules = catalog.rules()
    index = {r.code: i for i, r in enumerate(rules)}
    driver = {"name": "prefixguard", "version": run.version, "rules": [_rule(r) for r in rules]}
    notes = [{"level": "error", "message": {"text": e}} for e in run.errors]
    out = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": driver},
                "originalUriBaseIds": {ROOT: {"uri": Path.cwd().resolve().as_uri() + "/"}},
                "columnKind": "unicodeCodePoints",
                "invocations": [{"executionSuccessful": not run.errors, "toolExecutionNotifications": notes}],
                "results": [_result(f, index) for f in findings],
            }
        ],
    }
    return json.dumps(out, indent=2, ensure_ascii=False)
