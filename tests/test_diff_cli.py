"""`prefixguard diff` on every example pair, its JSON output, and bad input (exit 2, one line)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import make_examples
from helpers.cli import CliRunner

from prefixguard.cli import main
from prefixguard.contracts.providers import model_contract
from prefixguard.judge.causes import CAUSES
from prefixguard.wire import MAX_BYTES

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "requests"
PAIRS = sorted(p.parent for p in EXAMPLES.glob("*/*/expected.json"))


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["diff", *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("pair", PAIRS, ids=[f"{p.parent.name}/{p.name}" for p in PAIRS])
def test_every_example_pair(pair: Path) -> None:
    expected = json.loads((pair / "expected.json").read_text())
    code, out, err = run(str(pair / "a.json"), str(pair / "b.json"), "--format", "json")
    assert err == ""
    got = json.loads(out)
    assert code == (1 if expected["broken"] else 0)
    assert got["broken"] is expected["broken"]
    assert got["causes"][0] == expected["cause"]
    if expected["broken"]:
        assert (got["divergence"]["level"], got["divergence"]["pointer"]) == (expected["level"], expected["pointer"])
        priced = model_contract(got["api"], got["model"]).input_per_mtok > 0  # a server one runs costs nothing
        assert got["reprefill_tokens"] > 0 and (got["cost_usd"] > 0) is priced
    else:
        assert got["divergence"] is None and got["reprefill_tokens"] == 0


def test_examples_cover_every_cause_for_every_shape() -> None:
    found = {(p.parent.name, p.name) for p in PAIRS}
    for shape in ("anthropic", "openai-chat", "openai-responses", "bedrock-converse", "gemini"):
        missing = {c for c in CAUSES if (shape, c) not in found}
        # breakpoint_changed: only Anthropic's and Converse's blocks carry breakpoints; tools_moved: a chat template
        elsewhere = {c for c, shapes in make_examples.ONLY.items() if shape not in shapes}
        assert missing <= elsewhere, (shape, missing)


def test_committed_examples_match_their_generator() -> None:
    gen = make_examples
    for pair in PAIRS:
        a, b, _, _ = gen.PAIRS[pair.name](pair.parent.name)
        assert json.loads((pair / "a.json").read_text()) == a, pair
        assert json.loads((pair / "b.json").read_text()) == b, pair


def test_json_output_shape() -> None:
    pair = EXAMPLES / "openai-chat" / "volatile_content"
    code, out, _ = run(str(pair / "a.json"), str(pair / "b.json"), "--format", "json")
    got = json.loads(out)
    assert code == 1
    assert set(got["divergence"]) >= {"level", "pointer", "byte_offset", "token_offset"}
    assert got["divergence"]["token_offset"] >= got["reused_tokens"]  # the contract reads no further than that
    for key, kind in {"broken": bool, "causes": list, "reused_tokens": int, "reprefill_tokens": int,
                      "cost_usd": float, "fix": str, "tokens_estimated": bool, "api": str, "model": str}.items():
        assert isinstance(got[key], kind), key
    # the byte offset points at the first differing byte of B's body
    body_a = (pair / "a.json").read_bytes()
    body_b = (pair / "b.json").read_bytes()
    at = got["divergence"]["byte_offset"]
    assert body_a[:at] == body_b[:at] and body_a[at] != body_b[at]


def test_human_output_explains_the_timestamp_break() -> None:
    pair = EXAMPLES / "anthropic" / "volatile_content"
    code, out, _ = run(str(pair / "a.json"), str(pair / "b.json"))
    assert code == 1
    assert "BREAK" in out and "volatile_content" in out and "/system/0" in out
    assert "2026-12-02T16:11:31Z" in out and "2026-12-02T16:14:02Z" in out
    assert "fix" in out and "cl100k_base" in out and "\x1b[" not in out  # no colour codes in a log


def test_estimated_tokens_are_said_so() -> None:
    pair = EXAMPLES / "anthropic" / "append_only"
    code, out, _ = run(str(pair / "a.json"), str(pair / "b.json"), "--no-tokens")
    assert code == 0 and "estimated" in out
    code, out, _ = run(str(pair / "a.json"), str(pair / "b.json"), "--no-tokens", "--format", "json")
    assert json.loads(out)["tokens_estimated"] is True


def test_request_compared_with_itself_exits_0() -> None:
    a = EXAMPLES / "openai-responses" / "tools_changed" / "b.json"
    code, out, _ = run(str(a), str(a))
    assert code == 0 and "append_only" in out


BAD = {
    "not_json.json": (b'{"model": "claude-sonnet-4-5", "messages": [', "not valid JSON"),
    "empty.json": (b"", "empty"),
    "blank.json": (b"  \n\t\n", "empty"),
    "array.json": (b"[1, 2, 3]", "JSON object"),
    "unknown.json": (b'{"model": "x", "inputText": "hello"}', "unknown API shape"),
    "wrong_type.json": (b'{"model": "claude-sonnet-4-5", "system": "s", "messages": "hi"}', "list"),
    "binary.json": (bytes(range(256)) * 4, "binary"),
    "nul.json": (b'{"messages": []}\x00\x00', "binary"),
    "deep.json": (b'{"messages": [{"role": "user", "content": ' + b"[" * 100_000 + b"]" * 100_000 + b"}]}",
                  "nested"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_is_one_line_exit_2(tmp_path: Path, name: str) -> None:
    data, words = BAD[name]
    bad = tmp_path / name
    bad.write_bytes(data)
    good = EXAMPLES / "anthropic" / "append_only" / "a.json"
    for args in ((str(bad), str(good)), (str(good), str(bad))):
        code, out, err = run(*args)
        assert code == 2, (name, out, err)
        assert out == ""
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"prefixguard: error: {bad}: "), err
        assert words.lower() in lines[0].lower(), lines[0]


def test_missing_directory_and_huge_files(tmp_path: Path) -> None:
    good = str(EXAMPLES / "anthropic" / "append_only" / "a.json")
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as f:  # a sparse 100 MB file: refused by its size, before reading it
        f.truncate(100 * 2**20)
    assert os.path.getsize(huge) > MAX_BYTES
    for path, words in ((tmp_path / "missing.json", "no such file"), (tmp_path, "directory"), (huge, "MiB")):
        code, _, err = run(good, str(path))
        assert code == 2 and len(err.splitlines()) == 1
        assert err.startswith(f"prefixguard: error: {path}: ") and words in err, err


def test_console_script_exit_codes_and_no_traceback(tmp_path: Path) -> None:
    """The installed entry point, in a real process: 1 on a break, 2 on bad input, never a traceback."""
    pair = EXAMPLES / "anthropic" / "volatile_content"
    script = Path(sys.executable).parent / "prefixguard"
    cmd = [str(script)] if script.exists() else [sys.executable, "-c", "from prefixguard.cli import main; main()"]
    broke = subprocess.run([*cmd, "diff", str(pair / "a.json"), str(pair / "b.json")],
                           capture_output=True, text=True, timeout=60)
    assert broke.returncode == 1 and "volatile_content" in broke.stdout
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    failed = subprocess.run([*cmd, "diff", str(bad), str(pair / "b.json")], capture_output=True, text=True,
                            timeout=60)
    assert failed.returncode == 2 and "Traceback" not in failed.stderr
    assert failed.stderr.count("\n") == 1 and failed.stderr.startswith("prefixguard: error:")


def test_deep_but_valid_requests_still_compare(tmp_path: Path) -> None:
    """JSON that parses but is too deep to walk again (a 900-level tool schema) is still a break, explained
    as such, never a traceback."""
    def body(leaf: int) -> dict:
        schema: dict = {"type": leaf}
        for _ in range(900):
            schema = {"items": schema}
        return {"model": "claude-sonnet-4-5", "max_tokens": 16, "tools": [{"name": "t", "input_schema": schema,
                                                                  "cache_control": {"type": "ephemeral"}}],
                "messages": [{"role": "user", "content": "hi"}]}
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(body(1)))
    b.write_text(json.dumps(body(2)))
    code, out, err = run(str(a), str(b), "--format", "json")
    assert code == 1 and err == ""
    assert json.loads(out)["divergence"]["pointer"] == "/tools/0"

