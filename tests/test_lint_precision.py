"""Precision of lint on real traffic (issue 12): few findings, each one true, and why.

On every folder of shared/data/recorded/ (real requests with the provider's own usage next to them) lint
runs with its defaults; every warning or error is checked against evidence that does not come from lint:
the provider's reported usage for that very request, or the request body read independently. A rule that
starts to fire here without a reason written below fails this test.

Also: the shapes that made lint noisy on real Claude Code traffic (constants in tool documentation,
unsorted schema keys, breakpoints on the last two messages, count_tokens bodies), and volatile values
as the standard library renders them, matched whole (so `replay --what-if fixed` freezes all of them).
"""
from __future__ import annotations

import copy
import email.utils
import json
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from prefixguard.contracts.providers import model_contract
from prefixguard.lint import catalog, config, linter
from prefixguard.lint.linter import check_prompt
from prefixguard.lint.sequence import SequenceMode
from prefixguard.replay.fixes import Fixer
from prefixguard.replay.sources import Request
from prefixguard.model.volatile import find_volatile
from prefixguard.replay.sources import response_file
from prefixguard.wire import parse_request, parse_response

FOLDERS = ("crewai", "openllmetry", "pydantic-ai", "pydantic-ai-bedrock", "pydantic-ai-gemini")
DEFAULT = catalog.default_codes()
EPH = {"type": "ephemeral"}


def _usage(request: Path, api: str):
    """The provider's usage for a recorded request (its response, JSON or SSE), or None."""
    path = response_file(request.parent, request.name.removesuffix(".request.json"))
    return parse_response(path.read_bytes(), api) if path else None


def _names(tool: dict) -> list[str]:
    """The function names a tool entry declares: Anthropic / Chat / Converse one each, a Gemini Tool many."""
    if "functionDeclarations" in tool:
        return [d["name"] for d in tool["functionDeclarations"]]
    name = tool.get("name") or tool.get("function", {}).get("name") or tool.get("toolSpec", {}).get("name")
    return [name] if name else []


def _why_true(f, body: dict, request: Path) -> str | None:
    """Why a finding on a recorded request is true, from evidence outside lint; None when there is none."""
    prompt = parse_request(json.dumps(body))
    usage = _usage(request, prompt.api)
    if f.code == "PG201":
        # the tool list as sent is not in name order: its order is how the app built it (a dict, an MCP
        # listing), not a property of the tools, and any other build order is another prefix
        tools = body.get("tools") or body.get("toolConfig", {}).get("tools") or []
        names = [n for t in tools for n in _names(t)]
        return "tools out of name order" if names != sorted(names) else None
    if f.code == "PG402" and usage is not None and usage.reported:
        # the provider itself cached nothing: no read, no write
        return "provider cached nothing" if usage.cache_read == 0 and usage.cache_write == 0 else None
    if f.code == "PG303" and usage is not None and usage.reported:
        # long enough to cache by the provider's own count, and nothing was cached
        minimum = model_contract(prompt.api, prompt.model).min_cacheable_tokens
        if usage.prompt_total >= minimum and usage.cache_read == 0 and usage.cache_write == 0:
            return "provider billed over the minimum with no cache"
    return None


def test_recorded_traffic_few_findings_each_true(shared_data: Path):
    roots = [str(shared_data / "recorded" / name) for name in FOLDERS]
    settings = config.load(None, config.Layer(), cwd=shared_data)
    result = linter.lint(roots, settings)
    assert result.errors == []                      # exit 0 or 1, never 2: other shapes are skipped
    assert result.requests >= 400 and len(result.skipped) > 0
    loud = [f for f in result.findings if f.severity in ("error", "warning")]
    assert len(loud) / result.requests <= 2.0
    assert not [f for f in result.findings if f.code == "PG101" and f.pointer.startswith("/tools")]
    reasons: Counter[str] = Counter()
    for f in loud:
        body = json.loads(Path(f.path).read_text("utf-8"))
        why = _why_true(f, body, Path(f.path))
        assert why, (f.code, f.path, f.message)
        reasons[f"{f.code}: {why}"] += 1
    # measured on the recorded data (issue 12's figures): at most these many, all with a reason
    assert sum(reasons.values()) == len(loud) and len(loud) < result.requests / 3


# --------------------------------------------------------------- the shapes of real Claude Code traffic

def _claude_code_like() -> dict:
    """The layout of a Claude Code request: tools whose documentation holds constants that look
    volatile, schemas with "type" before "properties", breakpoints on the system prompt and on the last
    two user messages, today's date (no time) in the system prompt, a long agent history."""
    doc = ("Run a shell command. Example: `sleep 00:01:30`. Use model gpt-4.1-2025-04-14 or "
           "claude-sonnet-4-5-20250929 when asked. Today's date: 2025-07-01 is only an example. "
           "IDs look like 123e4567-e89b-12d3-a456-426614174000 (RFC 4122). ") * 10
    tools = [{"name": name, "description": doc,
              "input_schema": {"type": "object", "properties": {"command": {"type": "string", "description": doc[:200]},
                                                               "timeout": {"type": "number"}},
                               "required": ["command"]}}
             for name in ("Bash", "Edit", "Glob", "Grep", "Read", "Write")]
    system = [{"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."},
              {"type": "text", "text": "You are an interactive CLI tool that helps users. " * 200
               + "<env>Working directory: /repo\nToday's date: 2025-07-01</env>", "cache_control": EPH}]
    messages = [{"role": "user", "content": [
        {"type": "text", "text": "<system-reminder>As you answer, this context may help.</system-reminder>"},
        {"type": "text", "text": "Fix the failing test in tests/test_api.py"}]}]
    for i in range(6):
        messages.append({"role": "assistant", "content": [
            {"type": "text", "text": f"Running step {i}."},
            {"type": "tool_use", "id": f"toolu_{i:02d}", "name": "Bash",
             "input": {"command": f"pytest -k case_{i}", "timeout": 120}}]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{i:02d}", "content": f"step {i} at 16:0{i}:31: ok"}]})
    messages[-3]["content"][-1]["cache_control"] = EPH      # the last two user messages carry breakpoints
    messages[-1]["content"][-1]["cache_control"] = EPH
    return {"model": "claude-sonnet-4-5", "max_tokens": 32000, "tools": tools, "system": system,
            "messages": messages}


def _codes(body: dict, path: str | None = None) -> list[str]:
    prompt = parse_request(json.dumps(body), path=path)
    return sorted(h.rule for h in check_prompt(prompt, DEFAULT))


def test_claude_code_layout_is_clean():
    body = _claude_code_like()
    assert _codes(body) == []
    # the same request as a session (each request the next turn): still nothing
    seq, earlier = SequenceMode(DEFAULT), copy.deepcopy(body)
    earlier["messages"] = earlier["messages"][:-2]
    earlier["messages"][-3]["content"][-1]["cache_control"] = EPH
    for line, b in enumerate((earlier, body), start=1):
        prompt = parse_request(json.dumps(b))
        match, hits = seq.add(prompt, line)
        assert [h.rule for h in check_prompt(prompt, DEFAULT, None, match) + hits] == []


def test_count_tokens_body_is_not_a_cacheable_request():
    body = _claude_code_like()
    for m in body["messages"]:
        for block in m["content"]:
            block.pop("cache_control", None)
    body["system"][1].pop("cache_control")
    assert _codes(body) == ["no-breakpoint"]                             # a Messages request: worth a warning
    counting = {k: v for k, v in body.items() if k != "max_tokens"}   # what count_tokens takes
    assert _codes(counting) == [] and _codes(counting, "/v1/messages/count_tokens") == []
    assert _codes(body, "/v1/messages/count_tokens?beta=true") == []


def test_tool_definitions_count_for_more_under_a_minimum():
    """docker/cagent's tool loop (tests/data/public/cagent): breakpoints on Claude's tools, system prompt and
    last message, 687 tokens by our count, was flagged below the 1,024 minimum ("nothing is cached") at each
    of the first two; Claude read 1,112 of it from cache. Tool definitions take a wider margin under a minimum
    (rules/catalog.toml `count_margin_tools`): no finding; the same request stripped of its tools still has."""
    folder = Path(__file__).resolve().parent / "data" / "public" / "cagent" / "TestExec_Anthropic_ToolCall"
    body = json.loads((folder / "0001.request.json").read_text())
    usage = parse_response((folder / "0001.response.sse").read_bytes(), "anthropic")
    assert usage.cache_read == 1112 and "below-minimum" not in _codes(body)
    assert catalog.count_margin(tools=True) > catalog.count_margin()
    prose = [{"type": "text", "text": "Answer briefly and check your work. " * 80, "cache_control": EPH}]
    assert "below-minimum" in _codes({**body, "tools": [], "system": prose})   # as many tokens of prose: flagged


def test_byte_identical_block_is_not_called_volatile():
    """A clock value that stayed the same over the whole session: said once (first request), not again."""
    body = _claude_code_like()
    body["system"][1]["text"] += " Session started 2026-12-02T16:11:31.101462Z."
    assert "breakpoint-on-volatile" in _codes(body)
    seq, per_line = SequenceMode(DEFAULT), []
    later = copy.deepcopy(body)
    later["messages"] += [{"role": "assistant", "content": "Done."}, {"role": "user", "content": "Thanks"}]
    for line, b in enumerate((body, later), start=1):
        prompt = parse_request(json.dumps(b))
        match, hits = seq.add(prompt, line)
        per_line.append(sorted(h.rule for h in check_prompt(prompt, DEFAULT, None, match) + hits))
    assert "breakpoint-on-volatile" in per_line[0] and per_line[1] == []


# ------------------------------------------------------------------- volatile values matched whole

def _now_values() -> list[str]:
    now = datetime.now()
    return [now.isoformat(), datetime.now(timezone.utc).isoformat(),
            now.astimezone(timezone(timedelta(hours=2))).isoformat(),
            datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ"), str(now), now.time().isoformat(),
            str(time.time()), str(int(time.time())), str(int(time.time() * 1000)), str(time.time_ns()),
            email.utils.formatdate(), email.utils.formatdate(localtime=True), email.utils.formatdate(usegmt=True),
            time.ctime()]


@pytest.mark.parametrize("index", range(14))
def test_standard_library_time_values_are_matched_whole(index: int):
    value = _now_values()[index]
    text = f"You are a helpful agent. Rendered at {value}. Be brief."
    (m,) = find_volatile(text)
    assert m.text == value and m.varies == "clock", (value, m)


def test_what_if_fixed_freezes_the_whole_value():
    """`replay --what-if fixed` keeps the first value of each volatile occurrence: with fractional
    seconds matched whole, two requests rendered a moment apart become the same request."""
    def body(stamp: str) -> dict:
        return {"model": "gpt-4.1", "messages": [{"role": "system", "content": f"Current time: {stamp}. Answer briefly."},
                                                 {"role": "user", "content": "Hi"}]}
    fixer = Fixer()
    first = datetime(2026, 12, 2, 16, 11, 31, 101462)
    out = [fixer.apply(Request(index=i, ts=float(i), body=body(stamp), path="/v1/chat/completions"))
           for i, stamp in enumerate((first.isoformat(), (first + timedelta(microseconds=250_000)).isoformat()))]
    assert out[0].body == out[1].body == body(first.isoformat())


# ------------------------------------------------------------------------- recall: ids in the cached prefix

SESSION = "3f0c9a52-7d1e-4b8a-9e2f-5c6d7e8f9a01"


def _with_system_note(note: str) -> dict:
    body = _claude_code_like()
    body["system"][1]["text"] = body["system"][1]["text"].replace("</env>", f"\n{note}</env>")
    return body


@pytest.mark.parametrize("note", [f"Session: {SESSION}", "session_id: 7fa3c9e1b2d4", f"run {SESSION.replace('-', '')}"])
def test_an_id_in_the_cached_system_prompt_warns_by_default(note: str):
    """A session id inside the block the system breakpoint caches: each session writes its own prefix."""
    body = _with_system_note(note)
    assert "PG104" in DEFAULT and _codes(body) == ["id-in-cached-prefix"]
    f = next(h for h in check_prompt(parse_request(json.dumps(body)), DEFAULT))
    assert f.pointer == "/system/1/text" and catalog.get(f.rule).severity == "warning"


def test_ids_outside_the_cached_system_prompt_are_not_reported():
    # after the last breakpoint: not cached, nothing to warn about
    body = _with_system_note(f"Session: {SESSION}")
    body["system"][1].pop("cache_control")
    for m in body["messages"]:
        for block in m["content"]:
            block.pop("cache_control", None)
    assert "id-in-cached-prefix" not in _codes(body)
    # in the history (said once, re-sent as written) and in tool documentation (example UUIDs): constants
    body = _claude_code_like()
    body["messages"][0]["content"][1]["text"] += f" (ticket {SESSION})"
    assert _codes(body) == []


def test_a_session_id_is_said_once_per_session_and_a_changed_one_is_volatile():
    seq, per_line = SequenceMode(DEFAULT), []
    first = _with_system_note(f"Session: {SESSION}")
    later = copy.deepcopy(first)
    later["messages"] += [{"role": "assistant", "content": "Done."}, {"role": "user", "content": "Thanks"}]
    other = _with_system_note("Session: 0b1c2d3e-4f50-4617-8a9b-0c1d2e3f4a5b")   # the next session's first turn
    for line, b in enumerate((first, later, other), start=1):
        prompt = parse_request(json.dumps(b))
        match, hits = seq.add(prompt, line)
        per_line.append(sorted({h.rule for h in check_prompt(prompt, DEFAULT, None, match) + hits}))
    assert per_line[0] == ["id-in-cached-prefix"] and per_line[1] == []
    assert "id-in-cached-prefix" not in per_line[2] and "volatile-in-prefix" in per_line[2]
