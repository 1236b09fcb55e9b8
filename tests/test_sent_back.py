"""What a provider bills of an answer a later request sends back: the keys an answer carries (its reasoning's
signature, its tool calls' ids: prefixguard/wire/sent_back.py), and the reasoning it generated counted where the
request sends the answer back (prefixguard/judge/stored.py): Claude's summarized thinking as generated, xAI's
reasoning put back though Chat never sends it, OpenRouter's `reasoning_details` read as the reasoning it is."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.bench import load_bench

from prefixguard.proxy.analysis import Analyzer, FlowState, Response
from prefixguard.replay import sources
from prefixguard.wire import parse_request, parse_response_meta, sent_back
from prefixguard.wire.eventstream import encode

PUBLIC = Path(__file__).resolve().parent / "data" / "public"


@pytest.fixture(scope="module")
def bench():
    return load_bench("real_traffic")


def _through_the_proxy(folder: Path, trace: sources.Trace, store: Path) -> None:
    """Each recorded request and its answer (a whole body, or a stream) through the proxy's analysis, into `store`."""
    analyzer = Analyzer(store=str(store))
    try:
        for n, req in enumerate(trace.requests, 1):
            answer = next(folder.glob(f"{n:04d}.response.*")).read_bytes()
            whole = answer if answer[:1] == b"{" else None
            analyzer.request(FlowState(id=str(n), ts=float(n), sent=float(n), path=req.path, upstream=req.upstream,
                                       body=json.dumps(req.body).encode()))
            analyzer.finish(Response(id=str(n), status=200, headers_at=float(n), ended_at=float(n), body=whole,
                                     chunks=None if whole else [(float(n), answer)]))
    finally:
        analyzer.close()


def _sse(*events: dict) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def test_an_answer_carries_the_keys_a_request_sends_back() -> None:
    key = sent_back.key
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-5", "content": [
        {"type": "thinking", "thinking": "", "signature": "EuYBsig"},  # omitted thinking: a signature alone
        {"type": "redacted_thinking", "data": "EmwKredacted"},
        {"type": "text", "text": "Hi"}], "stop_reason": "end_turn", "usage": {"input_tokens": 3, "output_tokens": 90}}
    assert parse_response_meta(json.dumps(message), "anthropic").keys == (key("EuYBsig"), key("EmwKredacted"))
    stream = _sse({"type": "message_start", "message": {**message, "content": []}},
                  {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "",
                                                                               "signature": ""}},
                  {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "So"}},
                  {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta",
                                                                        "signature": "EuYBsig"}},
                  {"type": "message_stop"})
    assert parse_response_meta(stream, "anthropic").keys == (key("EuYBsig"),)
    converse = {"output": {"message": {"role": "assistant", "content": [
        {"reasoningContent": {"reasoningText": {"text": "Think", "signature": "EqoBconverse"}}}, {"text": "Hi"}]}},
        "stopReason": "end_turn", "usage": {"inputTokens": 5, "outputTokens": 40, "totalTokens": 45}}
    assert parse_response_meta(json.dumps(converse), "bedrock-converse").keys == (key("EqoBconverse"),)
    frames = b"".join(encode({":event-type": name, ":content-type": "application/json", ":message-type": "event"},
                             json.dumps(payload).encode()) for name, payload in [
        ("messageStart", {"role": "assistant"}),
        ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "Think"}}}),
        ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"signature": "EqoBconverse"}}}),
        ("messageStop", {"stopReason": "end_turn"})])
    assert parse_response_meta(frames, "bedrock-converse").keys == (key("EqoBconverse"),)
    calls = [{"id": "call_1", "type": "function", "function": {"name": "add", "arguments": "{}"}},
             {"id": "call_2", "type": "function", "function": {"name": "mul", "arguments": "{}"}}]
    chat = {"id": "c1", "object": "chat.completion", "model": "grok-4-fast", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "", "tool_calls": calls}, "finish_reason": "tool_calls"}]}
    assert parse_response_meta(json.dumps(chat), "openai-chat").keys == (key("call_1"), key("call_2"))
    chunks = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in [
        {"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, **calls[0], "function": {"name": "add", "arguments": ""}}]}}]},
        {"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": "{}"}}]}}]}]) + b"data: [DONE]\n\n"
    assert parse_response_meta(chunks, "openai-chat").keys == (key("call_1"),)
    assert parse_response_meta(json.dumps({**chat, "choices": []}), "openai-chat").keys == ()


def test_openrouters_reasoning_details_are_the_reasoning_sent_back() -> None:
    """OpenRouter's client sends an answer's reasoning back as `reasoning_details`: its text and summaries are the
    reasoning part's text; an encrypted item's data is none of it."""
    def thinking(details: list) -> list:
        body = {"model": "z-ai/glm-4.5", "messages": [
            {"role": "user", "content": "Add 2 and 3"},
            {"role": "assistant", "content": "", "reasoning_details": details, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": "{\"a\":2,\"b\":3}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "5"}]}
        prompt = parse_request(json.dumps(body), path="/api/v1/chat/completions")
        return [s.tokens for s in prompt.segments if s.kind == "thinking"]

    [said] = thinking([{"type": "reasoning.text", "text": "The user wants the sum of two numbers, so I call add.",
                        "format": "unknown", "index": 0}])
    assert said >= 10
    assert thinking([{"type": "reasoning.summary", "summary": "Sum them."}])[0] >= 3
    assert thinking([{"type": "reasoning.encrypted", "data": "gAAAA" * 40}]) == [0]


def test_summarized_thinking_sent_back_is_billed_as_generated(tmp_path: Path) -> None:
    """Claude Sonnet 5 on Bedrock (langchain_aws/thinking_summarized): its answer generated 1,196 tokens, a
    302-character summary of its reasoning and the reply; sent back, the request is billed 1,276, and our count of
    its text was 849. The proxy, having read the answer's stream, counts the message as the answer's output, and so
    does replay's sim: within 2% of the bill, where the scale cannot reach it by a ratio."""
    folder = PUBLIC / "langchain_aws" / "thinking_summarized"
    trace = sources.load(folder)
    first, second = trace.requests
    assert second.reported.prompt_total == 1276 and parse_request(json.dumps(second.body), path=second.path
                                                                  ).total_tokens < 0.7 * 1276
    _through_the_proxy(folder, trace, tmp_path / "rows.db")
    from prefixguard.capture.store import open_store
    with open_store(tmp_path / "rows.db") as db:
        records = {r.id: r for r in db.records()}
    counted = sum(tokens for _, _, tokens in records["2"].segments)
    assert abs(counted - 1276) <= 0.02 * 1276, counted
    from prefixguard.replay.sim_target import SimTarget
    sim = SimTarget("auto")
    outcomes = [sim.run(req, float(req.index)) for req in trace.requests]
    assert abs(outcomes[1].prompt_tokens - 1276) <= 0.02 * 1276, outcomes[1].prompt_tokens


def test_reasoning_an_answer_generated_is_read_where_it_is_sent_back(bench) -> None:
    """charmbracelet/fantasy's recordings (tests/data/public/fantasy): xAI puts back the reasoning of an answer
    Chat sends back without it, and reads it with the answer (grok-4-fast: 561 of 573, predicted 266 before, the
    prompt's read alone); grok-code-fast-1 reads whole 64-token steps (448); OpenRouter's z-ai/glm-4.5 reads the
    reasoning its client sent back as reasoning_details (419, predicted 284 before). Of two calls made at once, xAI's
    cached output holds the first: 546 read after 398 + 114 reasoning + 68 of calls, predicted 579 with both. An
    answer sent back with its reasoning field, even empty (OpenRouter's client, grok-code-fast-1), gets none back:
    billed 433 for a 395-token prompt and its call, read 192 (predicted 433 with the reasoning put back). The proxy
    and the sim alike."""
    f = bench.measure(PUBLIC, ("fantasy",))
    later = {r.cassette: r for r in f.rows if not r.first and "glm_4_6" not in r.cassette}
    assert sorted(later) == ["openrouter_glm_4_5_multi_tool", "openrouter_grok_code_fast_tool", "xai_grok_4_fast_tool",
                             "xai_grok_4_fast_two_calls", "xai_grok_code_fast_tool"]
    assert [later[c].reported_read for c in sorted(later)] == [419, 192, 561, 546, 448]
    for r in later.values():
        assert r.proxy_expected == r.sim_predicted and abs(r.proxy_expected - r.reported_read) <= 0.05 * r.reported_read
    assert later["xai_grok_code_fast_tool"].proxy_expected % 64 == 0
    assert f.false_breaks() == []


def test_glms_tool_preamble_is_read_by_every_request_with_tools(bench) -> None:
    """GLM's chat template writes a preamble in front of the tool list ("# Tools ... <tools>"), the same for every
    request that declares tools: a cache in front of every such request, which a first request reads too (43 of 179
    on z.ai's own API, 43 of 284 through OpenRouter's Z.AI, 42 of 173 on Novita: predicted 0 before). The preamble
    only: what follows it is the request's own. A request that sends the call back then reads all of the earlier
    prompt through OpenRouter (245 of 253); z.ai's own API read the preamble alone (43 of 207, predicted 207: a row
    bench/real_traffic.py shows as a miss)."""
    rows = {(r.cassette, r.n): r for r in bench.measure(PUBLIC, ("fantasy",)).rows if "glm" in r.cassette}
    first = {c: (r.reported_read, r.proxy_expected, r.sim_predicted) for (c, n), r in rows.items() if n == 1}
    assert first == {"openrouter_glm_4_5_multi_tool": (43, 43, 43), "openrouter_glm_4_6_tool": (42, 43, 43),
                     "zai_glm_4_6_tool": (43, 43, 43)}
    later = rows[("openrouter_glm_4_6_tool", 2)]
    assert later.reported_read == 245 and abs(later.proxy_expected - 245) <= 0.05 * 245
    assert rows[("zai_glm_4_6_tool", 2)].reported_read == 43


def test_a_capture_replayed_holds_what_its_answers_said(tmp_path: Path) -> None:
    """The proxy's capture keeps what each response said of itself, the keys that mark it included (the export's
    `response`), and replay reads them back: replaying the capture of langchain_aws/thinking_summarized counts the
    summarized reasoning sent back as its answer generated it, as the proxy did (849 without the keys), and a
    Responses id or a finish reason is no longer lost on the way (replay read none of them from a capture)."""
    from prefixguard.capture.reader import read_capture
    from prefixguard.replay.sim_target import SimTarget

    folder = PUBLIC / "langchain_aws" / "thinking_summarized"
    trace = sources.load(folder)
    store = tmp_path / "rows.db"
    _through_the_proxy(folder, trace, store)
    rows = read_capture(store)
    assert [r["response"]["keys"] for r in rows] == [list(r.said.keys) for r in trace.requests] != [[], []]
    replayed = sources.load(store)
    assert [r.said.finish_reasons for r in replayed.requests] == [("end_turn",), ("end_turn",)]
    sim = SimTarget("auto")
    counted = [sim.run(r, r.ts).prompt_tokens for r in replayed.requests][1]
    assert abs(counted - 1276) <= 0.02 * 1276, counted
