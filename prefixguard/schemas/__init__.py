"""Every JSON output of prefixguard carries `schema_version` and has a JSON Schema here
(`NAME.schema.json`); tests validate real outputs against them. Bump SCHEMA_VERSION (and the schema's
const) when a field changes meaning or goes away; adding a field is not a new version."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1


def versioned(doc: dict[str, Any]) -> dict[str, Any]:
    """The document with `schema_version` first."""
    return {"schema_version": SCHEMA_VERSION, **doc}


def schema(name: str) -> dict[str, Any]:
    """The JSON Schema of one output: diff, kv, kv-models, rule, rules, lint, lint-statistics, replay,
    replay-results, report, demo, capture-row."""
    return json.loads((Path(__file__).parent / f"{name}.schema.json").read_text("utf-8"))
