"""Request and response shapes seen in public recordings prefixguard was not calibrated on (the provider
tests of charmbracelet/fantasy), written here small and synthetic in the same shape: each is one cause
found there. The proxy's analysis (Analyzer, a real SQLite store) reads them as the live proxy would."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from prefixguard.capture.store import open_store
from prefixguard.proxy.analysis import Analyzer, FlowState, Response
from prefixguard.utils.errors import NotARequest
from prefixguard.wire import detect_api, parse_request, parse_response
from prefixguard.wire.eventstream import encode
from prefixguard.wire.routes import resolve

CHAT = {
    "model": "moonshotai/kimi-k2-instruct-0905",
    "max_tokens": 300,
    "messages": [
        {"role": "system", "content": "You answer in one word."},
        {"role": "user", "content": "Name a colour."},
    ],
}


def analysed(
    tmp_path: Path, path: str, request: dict[str, Any], body: bytes | None = None, chunks: bytes | None = None
) -> dict[str, Any]:
    """The capture row of one request through the analysis, with its response as a whole body or a stream."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    store = tmp_path / "rows.db"
    analyzer = Analyzer(store=str(store))
    analyzer.request(FlowState(id="1", ts=1.0, sent=1.0, path=path, body=json.dumps(request).encode()))
    analyzer.finish(
        Response(
            id="1",
            status=200,
            headers_at=1.0,
            ended_at=1.0,
            body=body,
            chunks=None if chunks is None else [(1.0, chunks)],
        )
    )
    analyzer.close()
    with open_store(store) as db:
        (row,) = list(db.rows())
    return row


# ---- Groq: a usage that read nothing has no prompt_tokens_details at all

GROQ_USAGE = {
    "queue_time": 0.04,
    "prompt_tokens": 57,
    "prompt_time": 0.01,
    "completion_tokens": 3,
    "completion_time": 0.01,
    "total_tokens": 60,
    "total_time": 0.02,
}


def test_groq_usage_without_cache_field_reports_a_read_of_zero() -> None:
    usage = parse_response(json.dumps({"object": "chat.completion", "usage": GROQ_USAGE}), "openai-chat")
    assert usage.reported and usage.cache_read == 0 and usage.prompt_total == 57 and usage.uncached == 57


def test_groq_usage_with_a_read_reads_it() -> None:
    raw = {**GROQ_USAGE, "prompt_tokens_details": {"cached_tokens": 40}}
    usage = parse_response(json.dumps({"usage": raw}), "openai-chat")
    assert usage.reported and usage.cache_read == 40 and usage.uncached == 17


def test_other_usage_without_cache_field_stays_unreported() -> None:
    # only Groq's own usage (its timing fields, all of them) says an absent field is a zero
    plain = {"prompt_tokens": 57, "completion_tokens": 3, "total_tokens": 60}
    assert not parse_response(json.dumps({"usage": plain}), "openai-chat").reported
    one_field = {**plain, "queue_time": 0.04}
    assert not parse_response(json.dumps({"usage": one_field}), "openai-chat").reported


def test_groq_stream_usage_is_reported(tmp_path: Path) -> None:
    chunk = {"object": "chat.completion.chunk", "model": CHAT["model"]}
    events = [
        {**chunk, "choices": [{"index": 0, "delta": {"content": "Teal"}, "finish_reason": None}]},
        {**chunk, "choices": [], "usage": GROQ_USAGE, "x_groq": {"id": "req_1", "usage": GROQ_USAGE}},
    ]
    stream = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    row = analysed(tmp_path, "/openai/v1/chat/completions", {**CHAT, "stream": True}, chunks=stream.encode())
    assert row["usage"]["reported"] and row["usage"]["prompt_total"] == 57 and row["usage"]["cache_read"] == 0
    assert row["verdict"] != "not_reported"


# ---- Bedrock InvokeModel of an OpenAI model: an OpenAI Chat body, the model in the path

GPT_OSS = "/model/openai.gpt-oss-120b-1%3A0/invoke"


@pytest.mark.parametrize(
    "path, model",
    [
        (GPT_OSS, "openai.gpt-oss-120b-1:0"),
        ("/model/us.openai.gpt-oss-20b-1:0/invoke-with-response-stream", "us.openai.gpt-oss-20b-1:0"),
    ],
)
def test_bedrock_invoke_of_an_openai_model_is_chat(path: str, model: str) -> None:
    found = resolve(path)
    assert (found.api, found.model, found.exact) == ("openai-chat", model, True)


def test_bedrock_invoke_of_other_makers_is_unchanged() -> None:
    assert resolve("/model/us.anthropic.claude-3-haiku-20240307-v1%3A0/invoke").api == "anthropic"
    assert resolve("/model/meta.llama3-70b-instruct-v1:0/invoke").api is None  # its own prompt body


def test_bedrock_invoke_of_an_openai_model_is_analysed(tmp_path: Path) -> None:
    body = {"messages": CHAT["messages"], "max_completion_tokens": 300}  # no model: the path names it
    answer = {
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Teal"}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": 31,
            "completion_tokens": 2,
            "total_tokens": 33,
            "prompt_tokens_details": {"cached_tokens": 0},
        },
    }
    row = analysed(tmp_path, GPT_OSS, body, body=json.dumps(answer).encode())
    assert row["api"] == "openai-chat" and row["model"] == "openai.gpt-oss-120b-1:0"
    assert row["usage"]["reported"] and row["usage"]["prompt_total"] == 31


def test_bedrock_invoke_stream_of_an_openai_model_is_read(tmp_path: Path) -> None:
    # InvokeModelWithResponseStream: EventStream frames whose payload carries a Chat chunk, base64 in "bytes"
    chunks = [
        {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "Teal"}}]},
        {
            "object": "chat.completion.chunk",
            "choices": [],
            "usage": {"prompt_tokens": 31, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 0}},
        },
    ]
    frames = b"".join(
        encode(
            {":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"},
            json.dumps({"bytes": base64.b64encode(json.dumps(c).encode()).decode()}).encode(),
        )
        for c in chunks
    )
    row = analysed(
        tmp_path,
        "/model/openai.gpt-oss-20b-1:0/invoke-with-response-stream",
        {"messages": CHAT["messages"], "stream": True},
        chunks=frames,
    )
    assert row["api"] == "openai-chat" and row["usage"]["reported"] and row["usage"]["prompt_total"] == 31


# ---- Ollama's own chat endpoint (/api/chat): role messages, answered as JSON lines


def test_ollama_chat_path_is_a_chat_candidate() -> None:
    found = resolve("/api/chat")
    assert (found.api, found.exact) == ("openai-chat", False)
    assert (
        detect_api({"model": "llama3.2", "messages": CHAT["messages"], "stream": False}, "/api/chat") == "openai-chat"
    )
    with pytest.raises(NotARequest):  # the tail alone is no proof: an app's own /api/chat with another body
        detect_api({"question": "hi", "session": 3}, "/api/chat")


def test_ollama_chat_json_lines_answer_is_analysed(tmp_path: Path) -> None:
    lines = [
        {"model": "llama3.2", "message": {"role": "assistant", "content": "Te"}, "done": False},
        {"model": "llama3.2", "message": {"role": "assistant", "content": "al"}, "done": False},
        {
            "model": "llama3.2",
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "prompt_eval_count": 30,
            "eval_count": 2,
        },
    ]
    ndjson = "".join(json.dumps(line) + "\n" for line in lines).encode()
    request = {"model": "llama3.2", "messages": CHAT["messages"], "stream": True, "options": {"num_ctx": 4096}}
    for kind in ("body", "chunks"):  # buffered (application/x-ndjson is no stream type of the tap) or streamed
        row = analysed(tmp_path / kind, "/api/chat", request, **{kind: ndjson})
        assert row["api"] == "openai-chat" and row["model"] == "llama3.2"
        assert row["verdict"] == "not_reported"  # Ollama reports no cache read: never judged a miss


# ---- paths with a query, as a proxy sees them


@pytest.mark.parametrize(
    "path, api, model",
    [
        ("/openai/deployments/gpt-5-mini/chat/completions?api-version=2025-01-01-preview", "openai-chat", "gpt-5-mini"),
        ("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", "gemini", "gemini-2.5-flash"),
        ("/api/coding/paas/v4/chat/completions", "openai-chat", None),
    ],
)
def test_paths_with_a_query_or_a_gateway_prefix(path: str, api: str, model: str | None) -> None:
    found = resolve(path)
    assert (found.api, found.model) == (api, model)


# ---- Bedrock's own ids for gpt-oss: Bedrock's contract (cachePoint, listed models only), never "any prefix"

SYSTEM = "You are a careful librarian. Answer from the catalogue only. " * 90  # ~1,200 tokens


@pytest.mark.parametrize(
    ("path", "model"),
    [
        ("/openai/v1/chat/completions", "openai.gpt-oss-20b-1:0"),  # Bedrock's OpenAI-compatible endpoint
        (GPT_OSS, None),  # InvokeModel: the path names the model
    ],
)
def test_bedrock_gpt_oss_is_judged_by_bedrocks_contract(tmp_path: Path, path: str, model: str | None) -> None:
    """Mirascope's public caching cassettes: Bedrock gpt-oss read 32-48 of 3.7-5.2k tokens, nothing that
    a prefix cache would read. Judged as a server that caches any prefix, the repeated prompt was expected
    to read ~3,700; Bedrock caches only its listed models, at cachePoints."""
    body = {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "A book?"}]}
    if model:
        body["model"] = model
    answer = {"object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": "No"}}],
              "usage": {"prompt_tokens": 1300, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 0}}}
    store = tmp_path / "rows.db"
    analyzer = Analyzer(store=str(store))
    for i in (1, 2):
        analyzer.request(FlowState(id=str(i), ts=float(i), sent=float(i), path=path, body=json.dumps(body).encode()))
        analyzer.finish(Response(id=str(i), status=200, headers_at=float(i), ended_at=float(i),
                                 body=json.dumps(answer).encode()))
    analyzer.close()
    with open_store(store) as db:
        rows = list(db.rows())
    assert [r["model"] for r in rows] == ["openai.gpt-oss-20b-1:0" if model else "openai.gpt-oss-120b-1:0"] * 2
    assert [r["expected_cached"] for r in rows] == [0, 0] and rows[1]["verdict"] != "miss_server_side"


def test_responses_items_referenced_by_id() -> None:
    """The AI SDK (mastra-ai/mastra's recordings) sends earlier output items as {"type": "item_reference",
    "id": ...}: the API puts the stored item there. A reasoning item's reference before the new user message
    costs nothing, as the item itself would (dropped); a function call's is the assistant's tool call."""
    body = {"model": "gpt-5", "input": [
        {"role": "user", "content": "Plan the trip. " * 50},
        {"type": "item_reference", "id": "rs_0a1"},
        {"type": "item_reference", "id": "fc_0a2"},
        {"type": "function_call_output", "call_id": "call_1", "output": "booked"},
        {"role": "user", "content": "And back?"}]}
    segments = parse_request(json.dumps(body), path="/v1/responses").segments
    assert [(s.kind, s.role) for s in segments[1:3]] == [("thinking", "assistant"), ("tool_use", "assistant")]
    assert segments[1].tokens == 0


def test_reasoning_outside_completion_tokens_is_part_of_the_output() -> None:
    """xAI's grok-4 leaves its reasoning out of completion_tokens: total_tokens 523 = 214 prompt + 24 completion
    + 285 reasoning (oysterhr/llm.rb spec/fixtures/cassettes/xai/chat/llm_function_block.yml). The output is
    309, of it 285 reasoning; it was taken as 24, of it 24 reasoning. OpenAI's own counts reasoning inside."""
    xai = {"prompt_tokens": 214, "completion_tokens": 24, "total_tokens": 523,
           "prompt_tokens_details": {"text_tokens": 214, "cached_tokens": 159},
           "completion_tokens_details": {"reasoning_tokens": 285}}
    usage = parse_response(json.dumps({"usage": xai}), "openai-chat")
    assert (usage.prompt_total, usage.cache_read, usage.output, usage.reasoning) == (214, 159, 309, 285)
    inside = {**xai, "completion_tokens": 309, "total_tokens": 523}
    assert parse_response(json.dumps({"usage": inside}), "openai-chat") == usage
