"""`prefixguard lint` as a CI step: exit codes, bad input, selection, config, baselines, statistics,
directories and globs, standard input, and sequence mode on captures built from real requests."""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import CliRunner

from prefixguard.cli import main

STAMP = "2026-12-02T16:11:31Z"
CLEAN = {"model": "claude-sonnet-4-5", "max_tokens": 256, "system": "You are terse.",
         "messages": [{"role": "user", "content": "Hi"}]}
DIRTY = {"model": "claude-sonnet-4-5", "max_tokens": 256,
         "system": [{"type": "text", "text": f"You are terse. Now: {STAMP}", "cache_control": {"type": "ephemeral"}}],
         "messages": [{"role": "user", "content": "Hi"}]}


def run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["lint", *args], input=stdin)
    return result.exit_code, result.stdout, result.stderr


def codes(*args: str) -> list[str]:
    code, out, err = run("--format", "json", *args)
    assert code in (0, 1), err
    return [f["code"] for f in json.loads(out)["findings"]]


def write(path: Path, body: object, indent: int | None = 2) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(body, indent=indent), "utf-8")
    return path


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory of its own, so no pyproject.toml above it is read."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


# ------------------------------------------------------------------------------------------ exit codes

def test_exit_codes(project: Path):
    write(project / "clean.json", CLEAN)
    write(project / "dirty.json", DIRTY)
    assert run("clean.json")[0] == 0
    code, out, _ = run("dirty.json")
    assert code == 1 and "PG101" in out
    assert run("--exit-zero", "dirty.json")[0] == 0
    assert run("--ignore", "PG1,PG402", "dirty.json")[0] == 0


BAD_INPUTS = {
    "not-json.json": b"{'model': 'gpt-4.1'",
    "empty.json": b"",
    "array.json": b"[1, 2, 3]",
    "wrong-types.json": b'{"model": "gpt-4.1", "messages": "Hi"}',
    "binary.json": bytes(range(256)) * 4,
    "nul.json": b'{"model": "gpt-4.1",\x00 "messages": []}',
    "deep.json": b"[" * 200_000 + b"]" * 200_000,
    "deep-object.json": b'{"messages": ' + b"[" * 200_000 + b"]" * 200_000 + b"}",
    "deep-tool.json": (b'{"model": "claude-sonnet-4-5", "max_tokens": 5, "tools": [{"name": "t", "input_schema": '
                       + b'{"a": ' * 990 + b"1" + b"}" * 990 + b'}], "messages": [{"role": "user", "content": "Hi"}]}'),
    "bad-line.jsonl": json.dumps(CLEAN).encode() + b"\n{not json\n",
    "bad-row.jsonl": b'{"id": "x", "request": 42}\n',
}


@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_bad_input_one_line_exit_2(project: Path, name: str):
    (project / name).write_bytes(BAD_INPUTS[name])
    code, out, err = run(name)
    assert code == 2, (out, err)
    lines = err.strip().split("\n")
    assert len(lines) == 1 and lines[0].startswith(f"prefixguard: error: {name}"), err
    assert "Traceback" not in err + out


def test_not_a_request_body_is_skipped_with_one_warning(project: Path):
    """JSON that is not a request body we read (a response, package.json, another provider's body) is
    skipped with one warning line for the whole run: exit 0 or 1 by the findings, never 2."""
    write(project / "reqs" / "package.json", {"name": "app", "version": "1.0.0"})
    write(project / "reqs" / "0001.response.json", {"id": "msg_1", "type": "message", "role": "assistant",
                                                     "content": [], "usage": {"input_tokens": 5}})
    write(project / "reqs" / "count.json", {"input": {"converse": {"messages": [{"role": "user", "content": [{"text": "Hi"}]}]}}})
    code, out, err = run("reqs")
    assert code == 0 and "All checks passed: 0 requests in 3 files" in out, (out, err)
    assert err.count("\n") == 1 and err.startswith("prefixguard: warning: skipped 3 files that are not request bodies")
    write(project / "reqs" / "dirty.json", DIRTY)
    code, out, err = run("reqs")
    assert code == 1 and err.count("\n") == 1
    write(project / "unknown-shape.json", {"inputText": "Hi", "textGenerationConfig": {}})  # Titan's own body
    code, _, err = run("unknown-shape.json")   # named on its own: the same
    assert code == 0 and "skipped 1 file that is not a request body" in err
    assert "or source file prefixguard reads (*.json, " in err and "*.ts" in err   # the kinds it does read


@pytest.mark.parametrize("target", ["/dev/zero", "/dev/null"])
def test_special_files_are_named_for_what_they_are(project: Path, target: str):
    code, _, err = run(target)
    assert code == 2 and err == f"prefixguard: error: {target}: not a regular file (a character device)\n"


def test_symlink_loop_in_a_directory_is_bad_input(project: Path):
    (project / "reqs" / "sub").mkdir(parents=True)
    write(project / "reqs" / "sub" / "ok.json", CLEAN)
    (project / "reqs" / "sub" / "up").symlink_to("..")             # a folder loop: not followed
    assert run("reqs")[0] == 0
    (project / "reqs" / "a.json").symlink_to("b.json")
    (project / "reqs" / "b.json").symlink_to("a.json")               # a file loop
    for arg in ("reqs", "reqs/a.json", "reqs/**/*.json"):
        code, out, err = run(arg)
        assert code == 2 and err.count("\n") == 1 and err.startswith("prefixguard: error: ") \
            and "symbolic link loop" in err, (arg, err)


def test_huge_file_is_refused_without_reading_it(project: Path):
    with open(project / "huge.json", "wb") as f:
        f.truncate(100 * 2**20)  # sparse: 100 MiB on paper
    code, _, err = run("huge.json")
    assert code == 2 and err.count("\n") == 1 and "huge.json" in err and "limit" in err


@pytest.mark.parametrize("args, message", [
    (["missing.json"], "missing.json: no such file or directory"),
    (["--select", "PG999", "ok.json"], "unknown rule selector 'PG999' on the command line"),
    (["--ignore", "no-such-rule", "ok.json"], "unknown rule selector 'no-such-rule'"),
    (["--format", "xml", "ok.json"], "'xml' is not one of 'text', 'concise', 'json', 'github', 'sarif'"),
    ([], "Missing argument 'PATH...'"),
    (["--write-baseline", "ok.json"], "--write-baseline needs --baseline"),
])
def test_usage_errors_one_line_exit_2(project: Path, args: list[str], message: str):
    write(project / "ok.json", CLEAN)
    code, _, err = run(*args)
    assert code == 2 and err.count("\n") == 1 and message in err, err


def test_no_traceback_from_the_console_script(project: Path):
    script = Path(sys.executable).parent / "prefixguard"
    if not script.exists():
        pytest.skip("the prefixguard console script is not installed")
    (project / "bad.json").write_bytes(b"\xff\xfe\x00garbage")
    proc = subprocess.run([str(script), "lint", "bad.json"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("prefixguard: error: bad.json: not UTF-8")


def test_other_files_are_still_linted_when_one_is_bad(project: Path):
    write(project / "a.json", DIRTY)
    (project / "b.json").write_text("{", "utf-8")
    code, out, err = run("--format", "concise", "a.json", "b.json")
    assert code == 2 and "PG101" in out and err.startswith("prefixguard: error: b.json:")
    assert out.rstrip().endswith("; 1 file could not be linted.")


@pytest.mark.parametrize("fmt", ["text", "concise"])
def test_input_errors_never_claim_success(project: Path, fmt: str):
    (project / "bad.json").write_text("{", "utf-8")
    code, out, err = run("--format", fmt, "bad.json")
    assert (code, out) == (2, "") and err.count("\n") == 1    # the error line alone
    write(project / "clean.json", CLEAN)
    code, out, err = run("--format", fmt, "clean.json", "bad.json")
    assert code == 2 and err.startswith("prefixguard: error: bad.json:")
    assert out == "No findings in 1 request; 1 file could not be linted.\n"
    assert "All checks passed" not in out
    code, out, _ = run("--format", fmt, "--statistics", "clean.json", "bad.json")
    assert code == 2 and "All checks passed" not in out and "could not be linted" in out
    assert run("--format", fmt, "clean.json") == (0, "All checks passed: 1 request in 1 file.\n", "")


@pytest.mark.parametrize("args", [["reqs"], ["reqs/**/*.json"], ["nothing-*.json"]])
def test_no_request_files_is_a_warning_exit_0(project: Path, args: list[str]):
    """As in ruff: a folder or glob with nothing to lint is said on stderr and is not an error."""
    (project / "reqs" / "sub").mkdir(parents=True)
    (project / "reqs" / "notes.txt").write_text("not a request", "utf-8")
    code, out, err = run(*args)
    assert (code, out) == (0, "")
    kinds = "*.json, *.jsonl, *.ndjson, *.py, *.ts, *.tsx, *.mts, *.cts, *.js, *.jsx, *.mjs, *.cjs"
    assert err == f"prefixguard: warning: no request files ({kinds}) found in {args[0]}\n"
    doc = json.loads(run("--format", "json", *args)[1])
    assert (doc["files"], doc["findings"]) == (0, [])
    # the other paths are still linted, and decide the exit status
    write(project / "dirty.json", DIRTY)
    code, out, err = run("--format", "concise", *args, "dirty.json")
    assert code == 1 and "PG101" in out and err.startswith("prefixguard: warning: no request files")
    assert "exit 0" in CliRunner().invoke(main, ["lint", "--help"]).stdout   # the choice is documented


# ------------------------------------------------------------------------------ selection and config

def test_select_ignore_extend_select_by_prefix_and_name(project: Path):
    write(project / "dirty.json", DIRTY)
    everything = set(codes("dirty.json"))
    assert {"PG101", "PG102", "PG402"} <= everything
    assert codes("--select", "PG1", "dirty.json") == ["PG101", "PG102"]
    assert codes("--select", "volatile-in-prefix", "dirty.json") == ["PG101"]
    assert codes("--select", "PG10", "--ignore", "breakpoint-on-volatile", "dirty.json") == ["PG101"]
    assert codes("--select", "PG101", "--extend-select", "below-minimum", "dirty.json") == ["PG402", "PG101"]
    assert set(codes("--ignore", "PG101,PG102", "dirty.json")) == everything - {"PG101", "PG102"}
    assert set(codes("--select", "ALL", "dirty.json")) == everything


def test_pyproject_config_and_cli_override(project: Path):
    write(project / "requests" / "dirty.json", DIRTY)
    write(project / "fixtures" / "short.json", DIRTY)
    (project / "pyproject.toml").write_text(
        '[project]\nname = "app"\n\n[tool.prefixguard]\nignore = ["PG102"]\n'
        'per-file-ignores = { "fixtures/*" = ["below-minimum", "PG1"] }\n'
        "extra-volatile-patterns = { greeting = 'Hi$' }\n", "utf-8")
    assert codes("requests/dirty.json") == ["PG402", "PG101"]       # PG102 ignored by the file
    assert codes("fixtures/short.json") == []                       # per-file ignores
    assert codes("--select", "PG102", "requests/dirty.json") == ["PG102"]  # the CLI overrides the file
    (project / "sub").mkdir()
    os.chdir(project / "sub")                                        # found from a subfolder too
    assert codes("../requests/dirty.json") == ["PG402", "PG101"]
    # extra patterns: a custom pattern in the last message does not count, in the system prompt it does
    os.chdir(project)
    body = copy.deepcopy(CLEAN)
    body["system"] = [{"type": "text", "text": "Hi", "cache_control": {"type": "ephemeral"}}]
    write(project / "requests" / "custom.json", body)
    assert "PG101" in codes("requests/custom.json")


@pytest.mark.parametrize("table, message", [
    ('selec = ["PG1"]', "unknown key 'selec'"),
    ('select = ["PG9"]', "unknown rule selector 'PG9'"),
    ('select = "PG1"\nignore = 3', "ignore must be a list of strings"),
    ("extra-volatile-patterns = { bad = '(' }", "'bad' is not a valid regex"),
    ('per-file-ignores = ["x"]', "per-file-ignores must be a table"),
])
def test_bad_config_one_line_exit_2(project: Path, table: str, message: str):
    write(project / "ok.json", CLEAN)
    (project / "pyproject.toml").write_text(f"[tool.prefixguard]\n{table}\n", "utf-8")
    code, _, err = run("ok.json")
    assert code == 2 and err.count("\n") == 1 and "pyproject.toml" in err and message in err, err


def test_explicit_config_file(project: Path):
    write(project / "dirty.json", DIRTY)
    (project / "lint.toml").write_text('[tool.prefixguard]\nselect = ["PG402"]\n', "utf-8")
    assert codes("--config", "lint.toml", "dirty.json") == ["PG402"]


# --------------------------------------------------------------------------------------------- baselines

def test_baseline_round_trip(project: Path):
    write(project / "dirty.json", DIRTY)
    code, out, err = run("--baseline", "baseline.json", "dirty.json")   # a missing baseline: a typo in CI
    assert code == 2 and err == ("prefixguard: error: baseline.json: baseline file not found (create it with "
                                 "--write-baseline)\n") and not (project / "baseline.json").exists()
    code, out, err = run("--baseline", "baseline.json", "--write-baseline", "dirty.json")
    assert code == 0 and "wrote 3 findings to baseline.json" in err
    saved = json.loads((project / "baseline.json").read_text())
    assert saved["version"] == 1 and {e["code"] for e in saved["findings"]} == {"PG101", "PG102", "PG402"}
    code, out, _ = run("--baseline", "baseline.json", "dirty.json")
    assert code == 0 and "All checks passed" in out and "(3 more in the baseline)" in out
    # the same request written on one line: other lines and columns, the same fingerprints
    write(project / "dirty.json", DIRTY, indent=None)
    assert run("--baseline", "baseline.json", "dirty.json")[0] == 0
    # a new finding is reported, the accepted ones are not
    worse = copy.deepcopy(DIRTY)
    worse["tools"] = [{"name": "b", "input_schema": {}}, {"name": "a", "input_schema": {}}]
    write(project / "dirty.json", worse)
    assert codes("--baseline", "baseline.json", "dirty.json") == ["PG201"]
    # --update-baseline (an alias of --write-baseline) accepts the new state
    assert run("--baseline", "baseline.json", "--update-baseline", "dirty.json")[0] == 0
    assert run("--baseline", "baseline.json", "dirty.json")[0] == 0


def test_baseline_counts_repeated_findings(project: Path):
    def line(minute: int) -> str:   # the app re-renders the time in the system prompt on every request
        return json.dumps(DIRTY).replace(STAMP, STAMP.replace(":11:", f":{minute:02d}:"))
    (project / "cap.jsonl").write_text("\n".join(map(line, range(2))) + "\n", "utf-8")
    assert run("--select", "PG101", "--baseline", "b.json", "--write-baseline", "cap.jsonl")[0] == 0
    (project / "cap.jsonl").write_text("\n".join(map(line, range(4))) + "\n", "utf-8")   # two more of the same
    assert codes("--select", "PG101", "--baseline", "b.json", "cap.jsonl") == ["PG101", "PG101"]


def test_bad_baseline_exit_2(project: Path):
    write(project / "dirty.json", DIRTY)
    (project / "b.json").write_text('{"findings": []}', "utf-8")
    code, _, err = run("--baseline", "b.json", "dirty.json")
    assert code == 2 and "not a prefixguard baseline" in err and err.count("\n") == 1


# ----------------------------------------------------------------------------------- statistics, inputs

def test_statistics(project: Path):
    write(project / "a.json", DIRTY)
    write(project / "b.json", DIRTY)
    code, out, _ = run("--statistics", "a.json", "b.json")
    assert code == 1
    rows = [line.split("\t") for line in out.strip().split("\n")[:-1]]
    assert rows == [["2", "PG101", "[volatile-in-prefix]"], ["2", "PG102", "[breakpoint-on-volatile]"],
                    ["2", "PG402", "[below-minimum]"]]
    _, out, _ = run("--statistics", "--format", "json", "a.json")
    assert json.loads(out)["statistics"][0] == {"code": "PG101", "name": "volatile-in-prefix", "count": 1}


def test_directories_globs_and_excludes(project: Path):
    write(project / "reqs" / "a.json", DIRTY)
    write(project / "reqs" / "deep" / "b.json", DIRTY)
    (project / "reqs" / "deep" / "c.jsonl").write_text(json.dumps(DIRTY) + "\n", "utf-8")
    (project / "reqs" / "notes.txt").write_text("not a request", "utf-8")
    write(project / "reqs" / ".hidden" / "x.json", {"not": "a request"})
    write(project / "reqs" / "resp.response.json", {"not": "a request"})
    doc = json.loads(run("--format", "json", "--select", "PG101", "--exclude", "*.response.json", "reqs")[1])
    assert sorted({f["path"] for f in doc["findings"]}) == ["reqs/a.json", "reqs/deep/b.json", "reqs/deep/c.jsonl"]
    doc = json.loads(run("--format", "json", "--select", "PG101", "reqs/**/*.json")[1])
    assert doc["files"] == 3      # a.json, deep/b.json and resp.response.json (named by the glob, not walked)
    code, _, err = run("--select", "PG101", "reqs")   # the response file is not a request: skipped, warned
    assert code == 1 and "skipped 1 file" in err and "resp.response.json" in err


def test_standard_input(project: Path):
    code, out, _ = run("--format", "concise", "-", stdin=json.dumps(DIRTY))
    assert code == 1 and out.startswith("-:1:")
    capture = "\n".join([json.dumps(CLEAN), json.dumps(CLEAN)]) + "\n"
    assert json.loads(run("--format", "json", "-", stdin=capture)[1])["requests"] == 2


# --------------------------------------------------------------------------------------- sequence mode

def _conversation(base: dict, stamps: list[str]) -> list[dict]:
    """A chat conversation growing one turn per request, from a recorded request: its system prompt and
    long document become the system prompt, ending in a timestamp that the app re-renders."""
    out, messages = [], []
    head = "\n\n".join(m["content"] for m in base["messages"])
    for i, stamp in enumerate(stamps):
        system = {"role": "system", "content": f"Current time: {stamp}\n\n{head}"}
        messages = messages + [{"role": "user", "content": f"Question {chr(65 + i)}?"}]
        out.append({**base, "messages": [system, *messages]})
        messages = messages + [{"role": "assistant", "content": f"Answer {chr(65 + i)}."}]
    return out


def test_sequence_mode_on_a_real_conversation(project: Path, shared_data: Path):
    base = json.loads((shared_data / "recorded/openllmetry/test_prompt_caching_test_openai_prompt_caching"
                       "/0001.request.json").read_text())
    stamps = [STAMP, STAMP, STAMP, "2026-12-02T16:20:00Z", "2026-12-02T16:20:00Z"]
    rows = _conversation(base, stamps)
    (project / "capture.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", "utf-8")
    code, out, _ = run("--format", "json", "--select", "PG5", "capture.jsonl")
    assert code == 1
    (finding,) = json.loads(out)["findings"]
    assert (finding["code"], finding["name"], finding["line"]) == ("PG501", "volatile-content", 4)
    assert finding["pointer"] == "/messages/0/content"
    assert finding["data"]["earlier_line"] == 3
    assert finding["data"]["reprefill_tokens"] > 1000 and finding["data"]["cost_usd"] > 0
    assert "volatile_content" in finding["data"]["causes"]
    # the first difference, in the line as written
    line = (project / "capture.jsonl").read_text().split("\n")[3]
    assert line[finding["column"] - 1:finding["column"] + 4] == "20:00"


def test_sequence_mode_recorded_tools_and_new_conversations(project: Path, shared_data: Path):
    folder = shared_data / "recorded/pydantic-ai/test_dbos_test_complex_agent_run_in_workflow"
    first, second = (json.loads((folder / f"000{i}.request.json").read_text()) for i in (1, 2))
    reordered = copy.deepcopy(second)
    reordered["tools"].reverse()
    fresh = copy.deepcopy(first)   # same tools and settings, another question: a new conversation
    fresh["messages"] = [{"role": "user", "content": "What is the weather in Lima?"}]
    rows = [first, second, fresh, reordered]
    (project / "capture.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", "utf-8")
    doc = json.loads(run("--format", "json", "--select", "PG5", "capture.jsonl")[1])
    assert [(f["code"], f["line"], f["data"]["earlier_line"]) for f in doc["findings"]] == [("PG502", 4, 2)]


def test_sequence_mode_export_rows_and_tenants(project: Path):
    one = copy.deepcopy(DIRTY)
    two = copy.deepcopy(DIRTY)
    two["system"][0]["text"] = two["system"][0]["text"].replace("16:11", "16:15")
    two["messages"] += [{"role": "assistant", "content": "Hello"}, {"role": "user", "content": "More"}]
    rows = [{"id": "1", "ts": 1.0, "path": "/v1/messages", "tenant": "a", "request": one},
            {"id": "2", "ts": 2.0, "path": "/v1/messages", "tenant": "b", "request": two},
            {"id": "3", "ts": 3.0, "path": "/v1/messages", "tenant": "a", "request": None},
            {"id": "4", "ts": 4.0, "path": "/v1/messages", "tenant": "a", "request": json.dumps(two)}]
    (project / "capture.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", "utf-8")
    doc = json.loads(run("--format", "json", "--select", "PG5", "capture.jsonl")[1])
    assert doc["requests"] == 3                            # the row without a body is skipped
    assert [(f["code"], f["line"]) for f in doc["findings"]] == [("PG501", 4)]   # tenant b is its own sequence


@pytest.mark.parametrize("shape", ["anthropic", "openai-chat", "openai-responses"])
def test_sequence_mode_reports_each_cause_under_its_rule(project: Path, shape: str):
    """The example pairs of every compare cause, as two-line captures: the rule of that cause fires."""
    root = Path(__file__).parents[1] / "examples" / "requests" / shape
    if not root.is_dir():
        pytest.skip("examples/requests not present")
    from prefixguard.lint import catalog
    checked = 0
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        a, b = (json.loads((folder / n).read_text()) for n in ("a.json", "b.json"))
        path = project / f"{shape}-{folder.name}.jsonl"
        path.write_text(json.dumps(a) + "\n" + json.dumps(b) + "\n", "utf-8")
        found = codes("--select", "PG5", str(path))
        rule = catalog.by_cause().get(folder.name)  # append_only and the equivalence pairs: no break
        assert found == ([rule.code] if rule and folder.name != "append_only" else []), folder.name
        checked += 1
    assert checked >= 10


def test_no_tokens_says_counts_are_estimates(project: Path):
    write(project / "dirty.json", DIRTY)
    doc = json.loads(run("--format", "json", "--no-tokens", "--select", "below-minimum", "dirty.json")[1])
    assert doc["tokenizer"] == "estimate"
    assert "is about " in doc["findings"][0]["message"]


def test_crlf_files_keep_their_columns(project: Path):
    text = json.dumps(DIRTY, indent=2).replace("\n", "\r\n")
    (project / "crlf.json").write_bytes(text.encode())
    (finding,) = json.loads(run("--format", "json", "--select", "PG101", "crlf.json")[1])["findings"]
    line = text.split("\r\n")[finding["line"] - 1]
    assert line[finding["column"] - 1:finding["end_column"] - 1] == STAMP


def test_sequence_mode_on_a_capture_store_export(project: Path, shared_data: Path):
    """The proxy's real store (a SQLite file) exported to JSONL, as `prefixguard capture export` writes it."""
    from prefixguard.capture.store import Record, Store
    base = json.loads((shared_data / "recorded/openllmetry/test_prompt_caching_test_openai_prompt_caching"
                       "/0001.request.json").read_text())
    rows = _conversation(base, [STAMP, STAMP, "2026-12-02T17:00:00Z"])
    with Store(project / "capture.db") as store:
        for i, body in enumerate(rows):
            store.add(Record(id=f"flow-{i}", ts=1000.0 + i, path="/v1/chat/completions", api="openai-chat",
                             model=body["model"], request=json.dumps(body)))
        with open(project / "capture.jsonl", "w", encoding="utf-8") as out:
            assert store.export(out) == 3
    doc = json.loads(run("--format", "json", "--select", "PG5", "capture.jsonl")[1])
    assert [(f["code"], f["line"], f["data"]["earlier_line"]) for f in doc["findings"]] == [("PG501", 3, 2)]
    line = (project / "capture.jsonl").read_text("utf-8").split("\n")[2]
    column = doc["findings"][0]["column"]
    assert line[column - 1:column + 4] == "7:00:"     # "16:11" -> "17:00": the first differing character


# ------------------------------------------------------------------------------ defaults and thresholds

def test_default_rules_are_errors_and_warnings_and_fail_on(project: Path):
    """ruff-style: by default only error and warning rules report and only they fail the run; info
    findings show for rules named in a selection; --fail-on sets the severity that exits 1."""
    long_chat = {"model": "gpt-4.1", "messages": [{"role": "system", "content": "Answer briefly. " * 700},
                                                   {"role": "user", "content": "Hi"}]}
    write(project / "chat.json", long_chat)           # no prompt_cache_key: PG103's info case
    code, out, _ = run("chat.json")
    assert code == 0 and "All checks passed" in out
    assert codes("--extend-select", "PG103", "chat.json") == ["PG103"]
    assert run("--extend-select", "PG103", "chat.json")[0] == 0          # info does not fail by default
    assert run("--extend-select", "PG103", "--fail-on", "info", "chat.json")[0] == 1
    unsorted = dict(CLEAN, tools=[{"name": "b", "input_schema": {}}, {"name": "a", "input_schema": {}}])
    write(project / "tools.json", unsorted)           # PG201: a warning
    assert run("tools.json")[0] == 1
    code, out, _ = run("--fail-on", "error", "tools.json")
    assert code == 0 and "PG201" in out                                  # reported, not failing
    write(project / "dirty.json", DIRTY)               # PG101 is an error
    assert run("--fail-on", "error", "dirty.json")[0] == 1
    (project / "pyproject.toml").write_text('[tool.prefixguard]\nfail-on = "error"\n', "utf-8")
    assert run("tools.json")[0] == 0
    (project / "pyproject.toml").write_text('[tool.prefixguard]\nfail-on = "never"\n', "utf-8")
    code, _, err = run("tools.json")
    assert code == 2 and "fail-on must be one of error, warning, info" in err


def test_output_format_and_its_alias(project: Path):
    write(project / "dirty.json", DIRTY)
    a = run("--output-format", "json", "dirty.json")
    b = run("--format", "json", "dirty.json")
    assert a[0] == b[0] == 1 and json.loads(a[1])["findings"] == json.loads(b[1])["findings"]
