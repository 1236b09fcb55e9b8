"""Every JSON output validates against its JSON Schema (prefixguard/schemas/*.schema.json): real outputs of
the real commands, on the repository's examples and, for the capture-based ones, on the capture that
`prefixguard demo` writes through the real proxy."""
from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

import jsonschema
import pytest
from helpers.cli import CliRunner

from prefixguard.cli import main
from prefixguard.schemas import SCHEMA_VERSION, schema
from prefixguard.judge.verdict import VerdictName

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
CHECKED: set[str] = set()


def valid(name: str, doc: object) -> None:
    jsonschema.validate(doc, schema(name), cls=jsonschema.Draft202012Validator)
    CHECKED.add(name)


def out(*args: str) -> object:
    res = CliRunner().invoke(main, list(args))
    assert res.exit_code in (0, 1), res.output
    return json.loads(res.output)


def test_every_schema_is_a_valid_schema_and_versioned() -> None:
    names = sorted(p.name.removesuffix(".schema.json") for p in files("prefixguard.schemas").iterdir()
                   if p.name.endswith(".schema.json"))
    assert len(names) >= 12
    for name in names:
        s = schema(name)
        jsonschema.Draft202012Validator.check_schema(s)
        if name != "capture-row":   # one JSON line per request: its version is the store's
            assert s["properties"]["schema_version"] == {"const": SCHEMA_VERSION}, name


@pytest.mark.parametrize("pair", sorted(p for p in (EXAMPLES / "requests").glob("*/*") if (p / "a.json").exists())[::4],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_diff(pair: Path) -> None:
    valid("diff", out("diff", "-o", "json", str(pair / "a.json"), str(pair / "b.json")))


def test_kv_rules_rule_and_lint() -> None:
    valid("kv", out("kv", "--model", "llama-3-8b", "--memory", "80GiB", "-o", "json"))
    valid("kv-models", out("kv", "--list", "-o", "json"))
    valid("rule", out("rule", "PG502", "-o", "json"))
    valid("rules", out("rules", "-o", "json"))
    lint = [str(EXAMPLES / "lint")]
    valid("lint", out("lint", "-o", "json", *lint))
    valid("lint-statistics", out("lint", "--statistics", "-o", "json", *lint))


def test_the_schemas_know_every_final_verdict() -> None:
    final = {v.value for v in VerdictName} - {"expect_hit", "expect_partial", "pending", "unknown"}
    assert set(schema("capture-row")["properties"]["verdict"]["enum"]) - {None} == final


@pytest.mark.slow
def test_capture_outputs(demo_run, tmp_path: Path) -> None:
    """demo (its capture through the real proxy), then report, replay, replay --output-file, capture export."""
    store = demo_run.store
    valid("demo", demo_run.result)
    valid("report", out("report", str(store), "-o", "json"))
    valid("replay", out("replay", str(store), "-o", "json", "--no-progress", "--what-if", "fixed"))
    results = tmp_path / "results.json"
    out("replay", str(store), "-o", "json", "--no-progress", "--output-file", str(results))
    valid("replay-results", json.loads(results.read_text()))
    export = CliRunner().invoke(main, ["capture", "export", str(store)])
    rows = [json.loads(line) for line in export.output.splitlines()]
    assert export.exit_code == 0 and len(rows) >= 16
    for row in rows:
        valid("capture-row", row)
    assert CHECKED >= {"demo", "report", "replay", "replay-results", "capture-row"}
