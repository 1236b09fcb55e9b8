"""The verdict's rules on real requests through the proxy's analysis (a real SQLite store): a change whose
write dwarfs a foreign read is a miss naming the change; a change that cost nothing is a hit with a note and
no re-prefill anywhere; and for every example pair, the proxy answered with the contract's usage judges B
as `diff` does, with the same reused and re-prefilled tokens."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from prefixguard.contracts.providers import verdict_rules
from prefixguard.judge.policies import Expected, make_policy, policy_name
from prefixguard.proxy.analysis import Analyzer, FlowState, Response
from prefixguard.report.diagnose import diagnose
from prefixguard.capture.store import open_store
from prefixguard.judge.verdict import judge_pair
from prefixguard.wire import parse_request

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "requests"
T0 = 1_800_000_000.0


def _anthropic_answer(read: int, write: int, uncached: int, **extra: Any) -> bytes:
    return json.dumps({"id": "msg", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                       "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "stop_sequence": None,
                       "usage": {"input_tokens": uncached, "cache_read_input_tokens": read,
                                 "cache_creation_input_tokens": write, "output_tokens": 3}, **extra}).encode()


def _openai_answer(read: int, total: int) -> bytes:
    return json.dumps({"id": "chatcmpl", "object": "chat.completion", "model": "gpt-4.1",
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                                    "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": total, "completion_tokens": 3, "total_tokens": total + 3,
                                 "prompt_tokens_details": {"cached_tokens": read}}}).encode()


def _through_proxy(tmp_path: Path, path: str,
                   exchanges: list[tuple[bytes, bytes]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Each (request, response) through the proxy's analysis in order, 10 s apart: the stored rows and the
    console lines."""
    db = tmp_path / f"capture-{len(list(tmp_path.iterdir()))}.db"
    analyzer, lines = Analyzer(store=str(db)), []
    for i, (body, answer) in enumerate(exchanges):
        analyzer.request(FlowState(id=f"r{i}", ts=T0 + 10 * i, sent=0.0, path=path, fields=((b"x-api-key", b"sk-ant-api03-rules"),),
                                   body=body))
        lines.append(analyzer.finish(Response(id=f"r{i}", status=200, headers_at=0.1, ended_at=0.2, body=answer)))
    analyzer.close()
    with open_store(db) as store:
        return list(store.rows()), lines


def _tools_body(tools: list[str]) -> bytes:
    """A coding agent's request: many long tool schemas, a cached system prompt, one question."""
    def tool(name: str) -> dict[str, Any]:
        return {"name": name, "description": f"{name}: runs the {name} step of the build and reports each file "
                                             "it touched, with its path, size and checksum. " * 105,
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}
    return json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 64, "tools": [tool(t) for t in tools],
                       "system": [{"type": "text", "text": "You are a careful coding agent. " * 400,
                                   "cache_control": {"type": "ephemeral"}}],
                       "messages": [{"role": "user", "content": "Fix the failing test."}]}).encode()


TOOLS = [f"tool_{i:02d}" for i in range(36)]


def test_a_tool_change_whose_write_dwarfs_a_foreign_read_is_a_miss(tmp_path: Path) -> None:
    """The recorded case: the tool list changes, the provider writes 102,787 tokens and reads 9,794 that an
    earlier request not seen here wrote. That is a miss naming the change, not a hit."""
    a, b = _tools_body(TOOLS), _tools_body(TOOLS[:4] + ["web_fetch"] + TOOLS[4:])
    total_a, total_b = parse_request(a).total_tokens, parse_request(b).total_tokens
    assert 100_000 < total_b < 130_000
    read, written = 9_794, 102_787
    rows, lines = _through_proxy(tmp_path, "/v1/messages", [
        (a, _anthropic_answer(0, total_a - 10, 10)), (b, _anthropic_answer(read, written, total_b - read - written))])
    row = rows[1]
    assert written > verdict_rules()["rewrite_over_read"] * read
    assert row["verdict"] == "miss_prefix_changed" and row["cause"].startswith("tools_changed at /tools/4")
    # what the change cost: what A had cached past the change that B did not read, priced
    assert written * 0.9 < row["reprefill_tokens"] < total_a and row["cost_usd"] > 0
    assert "miss_prefix_changed (tools_changed at /tools/4)" in lines[1]
    assert f"re-prefill {row['reprefill_tokens']} tok" in lines[1]


def test_a_change_answered_from_a_foreign_cache_is_still_a_hit(tmp_path: Path) -> None:
    """The same change, but the provider read most of the prompt (an entry written by traffic not seen
    here) and wrote less than it read: a hit that says so, not a miss."""
    a, b = _tools_body(TOOLS), _tools_body(TOOLS[:4] + ["web_fetch"] + TOOLS[4:])
    total_a, total_b = parse_request(a).total_tokens, parse_request(b).total_tokens
    read, written = total_b - 12_000, 11_990
    rows, lines = _through_proxy(tmp_path, "/v1/messages", [
        (a, _anthropic_answer(0, total_a - 10, 10)), (b, _anthropic_answer(read, written, total_b - read - written))])
    assert rows[1]["verdict"] == "hit" and "not seen here" in rows[1]["cause"]
    assert not rows[1]["reprefill_tokens"] and "re-prefill" not in lines[1]


def _stamped(stamp: str) -> bytes:
    return json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 64,
                       "system": [{"type": "text", "text": f"Now: {stamp}. " + "You answer briefly. " * 400,
                                   "cache_control": {"type": "ephemeral"}}],
                       "messages": [{"role": "user", "content": "Hello"}]}).encode()


def test_a_change_that_cost_nothing_is_a_hit_with_a_note_and_no_reprefill(tmp_path: Path) -> None:
    """Our comparison finds the time re-rendered, yet the provider read all it had written: a hit with a
    note, and nothing re-prefilled on the row or the console line (it used to say "re-prefill N tok")."""
    a, b = _stamped("2026-12-04T10:00:00Z"), _stamped("2026-12-04T10:00:07Z")
    n = parse_request(a).total_tokens
    rows, lines = _through_proxy(tmp_path, "/v1/messages", [
        (a, _anthropic_answer(0, n - 5, 5)),
        (b, _anthropic_answer(n - 5, 0, 5, diagnostics={"cache_miss_reason": None}))])  # the provider: no miss
    row = rows[1]
    assert row["verdict"] == "hit" and row["cause"] == "note: volatile_content at /system/0 cost nothing"
    # its own diagnosis set beside the verdict, not beside our comparison: both say no break
    assert row["diagnosis"]["agreement"] == "both_clear" and lines[1].endswith("prefixguard: no break -- both clear")
    assert row["reprefill_tokens"] == 0 and row["cost_usd"] == 0
    assert "re-prefill" not in lines[1] and " hit (note: volatile_content" in lines[1]
    # and the report counts no break (it used to count every change its own comparison found)
    report = diagnose(rows, "capture")
    assert report.causes == [] and report.fields["verdicts"] == {"cold": 1, "hit": 1}


def _served_chat(stamp: str) -> bytes:
    return json.dumps({"model": "Qwen/Qwen3-0.6B",
                       "messages": [{"role": "system", "content": f"Now: {stamp}. " + "You answer briefly. " * 400},
                                    {"role": "user", "content": "Hello"}]}).encode()


@pytest.mark.parametrize("read", [0, 16, 40])
def test_a_few_tokens_read_before_a_change_still_name_it(tmp_path: Path, read: int) -> None:
    """A server one runs (vLLM: any prefix, whole blocks) reads the block or two before a timestamp changed at the
    start of the system prompt: under 5% of the prompt, where nothing was predicted. The change cost the rest, so
    the request is a miss naming it (it was `cold`, "too little to count", with the change unsaid)."""
    a, b = _served_chat("2026-12-04T10:00:00Z"), _served_chat("2026-12-04T10:00:07Z")
    n = parse_request(a, path="/v1/chat/completions").total_tokens
    exchanges = [(a, _openai_answer(0, n)), (b, _openai_answer(read, n))]
    rows, _ = _through_proxy(tmp_path, "/v1/chat/completions", exchanges)
    assert rows[1]["verdict"] == "miss_prefix_changed"
    assert rows[1]["cause"].startswith("volatile_content at /messages/0/content")
    assert rows[1]["reprefill_tokens"] == n - read

def _contracted(prompts: list[Any]) -> list[Expected]:
    policy = make_policy(policy_name(prompts[0].api, prompts[0].model))
    return [policy.commit(p, T0 + 10 * i) for i, p in enumerate(prompts)]


@pytest.mark.parametrize("shape", ["anthropic", "openai-chat"])
def test_the_proxy_judges_every_example_pair_as_diff_does(tmp_path: Path, shape: str) -> None:
    pairs = sorted(d for d in (EXAMPLES / shape).iterdir() if (d / "a.json").exists())
    assert len(pairs) >= 15
    path = "/v1/messages" if shape == "anthropic" else "/v1/chat/completions"
    seen = set()
    for pair in pairs:
        bodies = [(pair / f"{x}.json").read_bytes() for x in "ab"]
        prompts = [parse_request(body, path=path) for body in bodies]
        usage = _contracted(prompts)
        answers = [_anthropic_answer(e.cache_read, e.cache_write, e.uncached) if shape == "anthropic"
                   else _openai_answer(e.cache_read, p.total_tokens) for e, p in zip(usage, prompts)]
        rows, _ = _through_proxy(tmp_path, path, list(zip(bodies, answers)))
        diff = judge_pair(*prompts)[0]
        row = rows[1]
        assert (row["verdict"], row["cause"], row["usage"]["cache_read"], row["reprefill_tokens"] or 0) == \
            (diff.verdict, diff.cause, diff.reused_tokens, diff.reprefill_tokens), pair.name
        seen.add(row["verdict"])
    assert {"hit", "miss_prefix_changed"} <= seen


def test_a_shorter_prompt_prefills_again_no_more_than_it_holds() -> None:
    """A 3,700-token prompt, then one of about 1,500 whose tools changed: it must prefill again what it
    holds, not all the earlier request had cached (wandb/weave's smolagents recording: another agent's
    954-token first request after a 1,754-token turn was to prefill 1,664 again)."""
    tool = lambda name: {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}  # noqa: E731
    def prompt(name: str, words: int):
        return parse_request(json.dumps({"model": "gpt-4.1", "tools": [tool(name)], "messages": [
            {"role": "system", "content": " ".join(f"step {i}." for i in range(words))},
            {"role": "user", "content": "go"}]}), path="/v1/chat/completions")
    a, b = prompt("web_search", 900), prompt("final_answer", 350)
    verdict, cmp = judge_pair(a, b)
    assert verdict.verdict == "miss_prefix_changed" and a.total_tokens > 2 * b.total_tokens
    assert 0 < cmp.reprefill_tokens <= b.total_tokens, (cmp.reprefill_tokens, b.total_tokens)
