"""The engine server through the real anthropic and openai SDKs on loopback: response shapes, SSE event
sequences (compared with recorded provider streams), cached tokens equal to the radix tree's match,
errors in each provider's shape."""
from __future__ import annotations

import json

import anthropic
import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from prefixguard.engine import chat_template
from prefixguard.engine.llm_engine import LLMEngine
from prefixguard.engine.server import create_app, serve_in_thread
from prefixguard.wire import parse_request

pytestmark = pytest.mark.slow

SYSTEM = " ".join(f"Rule {i}: answer about order {i} precisely." for i in range(40))
ANTHROPIC_STREAM = "openllmetry/test_prompt_caching_test_anthropic_prompt_caching_stream_legacy/0001.response.sse"
RESPONSES_STREAM = ("pydantic-ai/test_openai_responses_test_openai_responses_model_web_search_tool_stream/"
                    "0001.response.sse")


@pytest.fixture(scope="module")
def server():
    engine = LLMEngine("tiny", page_size=1)
    app = create_app(engine, cache_policy="radix")
    with serve_in_thread(app) as url:
        yield url, engine


@pytest.fixture(scope="module")
def claude(server):
    return anthropic.Anthropic(base_url=server[0], api_key="test", max_retries=0)


@pytest.fixture(scope="module")
def gpt(server):
    return openai.OpenAI(base_url=server[0] + "/v1", api_key="test", max_retries=0)


def prompt_ids(body: dict, path: str) -> list[int]:
    return chat_template.render(parse_request(json.dumps(body), path=path).segments)


def event_types(sse_text: str) -> list[str]:
    """Event names in order, runs of the same name collapsed (deltas come in runs)."""
    names = []
    for line in sse_text.splitlines():
        if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
            data = json.loads(line[5:])
            name = data.get("type") or ("usage" if not data.get("choices") else "chunk")
            if not names or names[-1] != name:
                names.append(name)
    return names


def is_subsequence(small: list[str], big: list[str]) -> bool:
    it = iter(big)
    return all(name in it for name in small)


def test_anthropic_cached_tokens_equal_the_tree_match(server, claude):
    _, engine = server
    body = {"model": "claude-sonnet-4-5", "max_tokens": 5, "system": SYSTEM,
            "messages": [{"role": "user", "content": "Where is order 7?"}]}
    first = claude.messages.create(**body)
    assert first.type == "message" and first.role == "assistant" and first.content[0].type == "text"
    assert first.usage.output_tokens == 5 and first.stop_reason == "max_tokens"

    body["messages"][0]["content"] = "Where is order 8?"   # same system, other question
    ids = prompt_ids(body, "/v1/messages")
    in_tree = engine.cached_prefix_len(ids)
    assert in_tree > 300
    second = claude.messages.create(**body)
    u = second.usage
    assert u.cache_read_input_tokens == in_tree
    assert u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens == len(ids)


def test_anthropic_stream_follows_the_recorded_event_sequence(server, shared_data):
    url, _ = server
    body = {"model": "claude-sonnet-4-5", "max_tokens": 6, "stream": True, "system": SYSTEM,
            "messages": [{"role": "user", "content": "Stream please"}]}
    with httpx.stream("POST", url + "/v1/messages", json=body, timeout=30) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        text = r.read().decode()
    recorded = (shared_data / "recorded" / ANTHROPIC_STREAM).read_text()
    assert event_types(text) == event_types(recorded)
    frames = [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]
    start, delta = frames[0]["message"]["usage"], frames[-2]["usage"]
    assert set(start) >= {"input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"}
    assert delta["output_tokens"] == 6 and delta["cache_read_input_tokens"] == start["cache_read_input_tokens"]


def test_anthropic_sdk_stream_helper_gets_the_final_message(claude):
    with claude.messages.stream(model="claude-sonnet-4-5", max_tokens=4,
                                messages=[{"role": "user", "content": "hi"}]) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert final.content[0].text == text
    assert final.usage.output_tokens == 4


def test_chat_completions_plain_and_streamed_with_usage(server, gpt):
    _, engine = server
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Order 3?"}]
    plain = gpt.chat.completions.create(model="gpt-4o", messages=messages, max_tokens=4)
    assert plain.object == "chat.completion" and plain.choices[0].finish_reason == "length"
    assert plain.usage.completion_tokens == 4

    messages[1]["content"] = "Order 4?"
    ids = prompt_ids({"model": "gpt-4o", "messages": messages}, "/v1/chat/completions")
    in_tree = engine.cached_prefix_len(ids)
    chunks = list(gpt.chat.completions.create(model="gpt-4o", messages=messages, max_tokens=4, stream=True,
                                              stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-2].choices[0].finish_reason == "length"
    last = chunks[-1]
    assert last.choices == [] and last.usage.prompt_tokens == len(ids)
    assert last.usage.prompt_tokens_details.cached_tokens == in_tree > 300
    assert all(c.usage is None for c in chunks[:-1])


def test_chat_stream_without_include_usage_has_no_usage_chunk(gpt):
    chunks = list(gpt.chat.completions.create(model="gpt-4o", max_tokens=3, stream=True,
                                              messages=[{"role": "user", "content": "hi"}]))
    assert chunks[-1].choices[0].finish_reason == "length"
    assert all(c.usage is None for c in chunks)


def test_text_completions_continue_the_prompt_plain_and_streamed(server, gpt):
    """A text prompt is continued as it is: its ids are the whole text's (read in pieces, each tokenized on its
    own), and a prompt that extends it reads the tree's match."""
    _, engine = server
    text = SYSTEM.replace("Rule", "Clause")  # cached by no other test
    plain = gpt.completions.create(model="Qwen/Qwen3-0.6B", prompt=text, max_tokens=4)
    assert plain.object == "text_completion" and plain.choices[0].finish_reason == "length"
    assert plain.usage.prompt_tokens == len(chat_template.encoding().encode_ordinary(text))
    longer = text + " Now answer about order 7."
    ids = chat_template.text(parse_request(json.dumps({"model": "m", "prompt": longer}),
                                           path="/v1/completions").segments, chat_template.encoding().encode_ordinary)
    assert ids == chat_template.encoding().encode_ordinary(longer)
    in_tree = engine.cached_prefix_len(ids)
    chunks = list(gpt.completions.create(model="Qwen/Qwen3-0.6B", prompt=longer, max_tokens=4, stream=True,
                                         stream_options={"include_usage": True}))
    assert "".join(c.choices[0].text for c in chunks[:-1]) and chunks[-2].choices[0].finish_reason == "length"
    last = chunks[-1]
    assert last.choices == [] and last.usage.prompt_tokens == len(ids)
    assert last.usage.prompt_tokens_details.cached_tokens == in_tree > 300
    with pytest.raises(openai.BadRequestError, match="a batch of 2 prompts"):
        gpt.completions.create(model="Qwen/Qwen3-0.6B", prompt=["one", "two"], max_tokens=2)


def test_responses_plain_and_streamed(server, gpt, shared_data):
    url, engine = server
    plain = gpt.responses.create(model="gpt-4o", instructions=SYSTEM, input="Order 5?", max_output_tokens=4)
    assert plain.status == "incomplete" and plain.incomplete_details.reason == "max_output_tokens"
    assert plain.output[0].type == "message" and plain.output_text == plain.output[0].content[0].text

    body = {"model": "gpt-4o", "instructions": SYSTEM, "input": "Order 6?", "max_output_tokens": 4}
    in_tree = engine.cached_prefix_len(prompt_ids(body, "/v1/responses"))
    events = list(gpt.responses.create(**body, stream=True))
    names = [e.type for e in events]
    assert names[0] == "response.created" and names[-1] == "response.incomplete"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    final = events[-1].response
    assert final.usage.input_tokens_details.cached_tokens == in_tree > 300
    assert final.output_text == "".join(e.delta for e in events if e.type == "response.output_text.delta")

    recorded = event_types((shared_data / "recorded" / RESPONSES_STREAM).read_text())
    ours = [n for n in event_types(_sse(url + "/v1/responses", {**body, "stream": True}))
            if n != "response.incomplete"]
    assert is_subsequence(ours, recorded)


def _sse(url: str, body: dict) -> str:
    with httpx.stream("POST", url, json=body, timeout=30) as r:
        return r.read().decode()


def test_errors_come_in_each_providers_shape(server, claude, gpt):
    url, _ = server
    with pytest.raises(anthropic.BadRequestError) as bad:
        claude.messages.create(model="claude-sonnet-4-5", max_tokens=-1,
                               messages=[{"role": "user", "content": "hi"}])
    assert bad.value.body["error"]["type"] == "invalid_request_error"
    marked = [{"type": "text", "text": f"part {i}", "cache_control": {"type": "ephemeral"}} for i in range(5)]
    with pytest.raises(anthropic.BadRequestError, match="A maximum of 4 blocks with cache_control"):
        claude.messages.create(model="claude-sonnet-4-5", max_tokens=2, messages=[{"role": "user", "content": marked}])
    with pytest.raises(openai.BadRequestError, match="previous_response_id"):
        gpt.responses.create(model="gpt-4o", input="hi", previous_response_id="resp_1")
    with pytest.raises(openai.BadRequestError) as bad_chat:
        gpt.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}], n=2)
    assert bad_chat.value.code is None and "'n' must be 1" in bad_chat.value.message

    r = httpx.post(url + "/v1/messages", content=b"{not json", timeout=10)
    assert r.status_code == 400 and r.json()["type"] == "error"
    huge = " ".join(f"w{i}" for i in range(17000))           # over the server's 16k-token KV pool
    with pytest.raises(openai.APIStatusError) as over:
        gpt.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": huge}])
    assert over.value.status_code == 413 and over.value.code == "context_length_exceeded"


def test_count_tokens_models_health_metrics(server, claude):
    url, _ = server
    body = {"model": "claude-sonnet-4-5", "system": SYSTEM, "messages": [{"role": "user", "content": "hi"}]}
    counted = claude.messages.count_tokens(**body)
    assert counted.input_tokens == len(prompt_ids(body, "/v1/messages"))
    assert httpx.get(url + "/v1/models").json()["data"][0]["id"] == "tiny"
    assert httpx.get(url + "/health").json()["status"] == "ok"
    text = httpx.get(url + "/metrics").text
    found = {s.name: s.value for family in text_string_to_metric_families(text) for s in family.samples
             if not s.labels or set(s.labels) <= {"api", "code"}}
    for name in ("prefixguard_engine_prefix_cache_queries_total", "prefixguard_engine_prefix_cache_hits_total",
                 "prefixguard_engine_time_to_first_token_seconds_count", "prefixguard_engine_decode_tokens_per_second_count",
                 "prefixguard_engine_kv_pool_used_ratio", "prefixguard_engine_num_requests_waiting",
                 "prefixguard_engine_requests_total", "prefixguard_engine_kv_evicted_pages_total"):
        assert name in found, name
    # the hit rate is derived from two counters (rate() over a window in PromQL), no since-start gauge
    assert 0 < found["prefixguard_engine_prefix_cache_hits_total"] < found["prefixguard_engine_prefix_cache_queries_total"]
    assert not any(name.endswith("hit_rate") for name in found)
    assert "status=" not in text and 'code="200"' in text


def test_stop_sequences_cut_the_text_plain_and_streamed(claude, gpt):
    ask = {"model": "gpt-4o", "max_tokens": 24, "seed": 7, "messages": [{"role": "user", "content": "hi"}]}
    full = gpt.chat.completions.create(**ask).choices[0].message.content
    stop = full[10:14]
    cut = gpt.chat.completions.create(**ask, stop=[stop]).choices[0]
    assert cut.message.content == full[:full.index(stop)] and cut.finish_reason == "stop"
    chunks = list(gpt.chat.completions.create(**ask, stop=stop, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == cut.message.content

    with claude.messages.stream(model="claude-sonnet-4-5", max_tokens=24, stop_sequences=[" "],
                                messages=[{"role": "user", "content": "hi"}]) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "stop_sequence" and final.stop_sequence == " "
    assert " " not in final.content[0].text


def test_tool_schemas_render_from_the_bytes_as_received(server, claude):
    """As at the providers, a tool schema with its keys in another order is another prefix: the
    request reads the cache only up to that tool. The same data re-sent in the same order reads it all."""
    def body(schema: dict) -> dict:
        tools = [{"name": "lookup_order", "description": "Find an order by id.", "input_schema": schema},
                 {"name": "refund", "description": "Refund an order.",
                  "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}}}]
        return {"model": "claude-sonnet-4-5", "max_tokens": 2, "tools": tools, "system": SYSTEM,
                "messages": [{"role": "user", "content": "Where is order 7?"}]}

    schema = {"type": "object", "properties": {"id": {"type": "string"}, "carrier": {"type": "string"}},
              "required": ["id"]}
    reordered = {"required": ["id"], "properties": {"carrier": {"type": "string"}, "id": {"type": "string"}},
                 "type": "object"}
    first = claude.messages.create(**body(schema)).usage
    same = claude.messages.create(**body(json.loads(json.dumps(schema)))).usage
    moved = claude.messages.create(**body(reordered)).usage
    whole = first.input_tokens + first.cache_read_input_tokens + first.cache_creation_input_tokens
    assert same.cache_read_input_tokens >= whole - 1            # all but the token that starts the answer
    segments = parse_request(json.dumps(body(reordered)), path="/v1/messages").segments
    chat_template.render(segments)                              # sets each segment's template token count
    assert 0 < moved.cache_read_input_tokens < segments[0].tokens   # stops inside the reordered tool
