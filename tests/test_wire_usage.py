"""Wire adapters, response side: recorded JSON and SSE responses -> Usage, whole or chunk by chunk."""
from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixguard.model.usage import Usage
from prefixguard.utils.errors import InputError
from prefixguard.wire import UsageStream, detect_api, parse_response

RECORDED = ("pydantic-ai", "openllmetry")


def recorded_responses(shared_data: Path) -> list[tuple[Path, str]]:
    """(response file, API) of every recorded LLM call with a JSON or SSE response."""
    calls = []
    for name in RECORDED:
        for meta in sorted((shared_data / "recorded" / name).glob("*/meta.json")):
            for call in json.loads(meta.read_text())["interactions"]:
                if call["response"] not in ("json", "sse"):
                    continue
                try:
                    api = detect_api(None, urlsplit(call["uri"]).path)
                except InputError:  # files, compaction, token counting: not a generation
                    continue
                calls.append((meta.parent / f"{call['n']:04d}.response.{call['response']}", api))
    return calls


def usage_of(shared_data: Path, cassette: str, n: int, api: str) -> Usage:
    folder = next((shared_data / "recorded").glob(f"*/{cassette}"))
    path = next(folder.glob(f"{n:04d}.response.*"))
    return parse_response(path.read_bytes(), api)


def test_every_recorded_response_gives_consistent_usage(shared_data):
    calls = recorded_responses(shared_data)
    assert sum(p.suffix == ".sse" for p, _ in calls) >= 40 and len(calls) >= 200
    reported = 0
    for path, api in calls:
        usage = parse_response(path.read_bytes(), api)
        assert usage.prompt_total == usage.cache_read + usage.cache_write + usage.uncached, path
        assert min(usage.cache_read, usage.cache_write_5m, usage.cache_write_1h, usage.uncached, usage.output) >= 0
        reported += usage.reported
        if usage.reported:
            assert usage.prompt_total > 0 and usage.output > 0, path
    assert reported >= 200


# (cassette, call, api, prompt_total, cache_read, cache_write_5m, uncached, output), read off the files
KNOWN = [
    ("test_anthropic_test_anthropic_cache_real_api", 1, "anthropic", 1114, 1111, 0, 3, 406),
    ("test_anthropic_test_anthropic_cache_real_api", 2, "anthropic", 1532, 1111, 418, 3, 33),
    ("test_anthropic_mid_conversation_system_test_inline_system_prompt_cache_prefix_is_reused", 1, "anthropic",
     1592, 0, 1590, 2, 4),
    ("test_prompt_caching_test_anthropic_prompt_caching_stream_legacy", 1, "anthropic", 1169, 0, 1165, 4, 201),
    ("test_prompt_caching_test_anthropic_prompt_caching_stream_legacy", 2, "anthropic", 1169, 1165, 0, 4, 221),
    ("test_openai_prompt_cache_test_openai_chat_prompt_cache_e2e", 1, "openai-chat", 4020, 0, 4012, 8, 4),
    ("test_openai_prompt_cache_test_openai_chat_prompt_cache_e2e", 2, "openai-chat", 4020, 4012, 0, 8, 4),
    ("test_openai_prompt_cache_test_openai_responses_prompt_cache_e2e", 1, "openai-responses", 4020, 0, 4012, 8, 5),
    ("test_openai_prompt_cache_test_openai_responses_prompt_cache_e2e", 2, "openai-responses", 4020, 4012, 0, 8, 5),
    ("test_openai_responses_test_openai_responses_model_web_search_tool_stream", 1, "openai-responses",
     9463, 8320, 0, 1143, 582),  # 512 of the 582 output tokens reasoning
    ("test_cache_test_openrouter_cache_all_settings_real_api", 2, "openai-chat", 2649, 2569, 79, 1, 100),
    # OpenRouter/Gemini reports a fresh explicit cache as both written (2161) and read (2161) of 2168
    ("test_cache_test_openrouter_cache_instructions_gemini_real_api", 1, "openai-chat", 2168, 0, 2161, 7, 100),
    ("test_cache_test_openrouter_cache_instructions_gemini_real_api", 2, "openai-chat", 2167, 2161, 0, 6, 99),
]


@pytest.mark.parametrize(("cassette", "n", "api", "total", "read", "write", "uncached", "output"), KNOWN)
def test_recorded_cache_numbers(shared_data, cassette, n, api, total, read, write, uncached, output):
    usage = usage_of(shared_data, cassette, n, api)
    reasoning = 512 if "web_search_tool_stream" in cassette else 0  # output_tokens_details.reasoning_tokens
    assert usage == Usage(prompt_total=total, cache_read=read, cache_write_5m=write, cache_write_1h=0,
                          uncached=uncached, output=output, reported=True, reasoning=reasoning)


def test_anthropic_ttl_split_and_additive_total():
    raw = {"usage": {"input_tokens": 10, "cache_creation_input_tokens": 300, "cache_read_input_tokens": 2000,
                     "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 200},
                     "output_tokens": 7}}
    assert parse_response(json.dumps(raw), "anthropic") == Usage(2310, 2000, 100, 200, 10, 7, True)
    # no split: every write is a 5m write
    del raw["usage"]["cache_creation"]
    assert parse_response(json.dumps(raw), "anthropic").cache_write_5m == 300


def test_compatible_servers():
    deepseek = {"usage": {"prompt_tokens": 1000, "completion_tokens": 5, "prompt_cache_hit_tokens": 768,
                          "prompt_cache_miss_tokens": 232}}
    assert parse_response(json.dumps(deepseek), "openai-chat") == Usage(1000, 768, 0, 0, 232, 5, True)
    vllm = {"usage": {"prompt_tokens": 600, "completion_tokens": 9, "prompt_tokens_details": {"cached_tokens": 512}}}
    assert parse_response(json.dumps(vllm), "openai-chat") == Usage(600, 512, 0, 0, 88, 9, True)
    # vLLM without --enable-prompt-tokens-details, Ollama, llama.cpp: no cache field, never a miss
    for usage in ({"prompt_tokens": 600, "completion_tokens": 9, "prompt_tokens_details": None},
                  {"prompt_tokens": 600, "completion_tokens": 9}):
        got = parse_response(json.dumps({"usage": usage}), "openai-chat")
        assert got == Usage(600, 0, 0, 0, 600, 9, reported=False)
    assert parse_response(b'{"type": "error", "error": {"type": "overloaded_error"}}', "anthropic").reported is False


def test_a_read_outside_prompt_tokens_is_told_by_the_usage_own_total():
    """charmbracelet/crush's recording of GLM-5.1 behind Charm's gateway (hyper.charm.land): prompt_tokens
    leaves the cached tokens out, and total_tokens adds them (195 + 8,229 + 29 = 8,453). It was read as a
    195-token prompt that read all of itself."""
    glm = {"prompt_tokens": 195, "completion_tokens": 29, "total_tokens": 8453,
           "prompt_tokens_details": {"cached_tokens": 8229}, "cost": {"usd": 0.0004, "hypercredits": 0.008}}
    assert parse_response(json.dumps({"usage": glm}), "openai-chat") == Usage(8424, 8229, 0, 0, 195, 29, True)
    # OpenAI's own: the read inside the prompt, and the total says so
    openai = {"prompt_tokens": 8424, "completion_tokens": 29, "total_tokens": 8453,
              "prompt_tokens_details": {"cached_tokens": 8229}}
    assert parse_response(json.dumps({"usage": openai}), "openai-chat") == Usage(8424, 8229, 0, 0, 195, 29, True)


def test_a_compacting_request_is_judged_by_its_first_pass():
    """Claude's server-side compaction samples twice: a first pass summarizes the prompt as sent, the next
    answers on the compacted context, and the top-level counts are that last pass's (braintrust-sdk-python's
    recording of claude-opus-5 paused after compaction: top level all 0, its one iteration 82 input tokens).
    The prompt the request sent is the first pass's."""
    zero = {"input_tokens": 0, "output_tokens": 0, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
    paused = {**zero, "iterations": [{"type": "compaction", "input_tokens": 82, "output_tokens": 512,
                                      "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}]}
    assert parse_response(json.dumps({"usage": paused}), "anthropic") == Usage(82, 0, 0, 0, 82, 512, True)
    message = {"input_tokens": 3000, "output_tokens": 1000, "cache_read_input_tokens": 0,
               "cache_creation_input_tokens": 20000}
    compaction = {"type": "compaction", "input_tokens": 4000, "output_tokens": 3500,
                  "cache_read_input_tokens": 176000, "cache_creation_input_tokens": 0}
    went_on = {**message, "iterations": [compaction, {**message, "type": "message"}]}
    assert parse_response(json.dumps({"usage": went_on}), "anthropic") == Usage(180000, 176000, 0, 0, 4000, 3500, True)
    assert parse_response(json.dumps({"usage": message}), "anthropic") == Usage(23000, 0, 20000, 0, 3000, 1000, True)


def test_a_server_tools_calls_are_counted_whole_or_streamed(shared_data: Path) -> None:
    """Claude's code execution runs between passes of the model, each server_tool_use block a pass more:
    counted the same from the recorded message and from it as a stream's events, whose first event counts the
    first pass alone (here as the whole message's counts put it) and whose last the passes together. OpenAI's
    hosted tools are not counted (what they add to the prompt is in no output item: the counts stay one
    prompt's)."""
    folder = shared_data / "recorded" / "pydantic-ai" / (
        "test_code_execution_files_vcr_test_anthropic_code_execution_files_cache_prefix_stable_automatic-sonnet-5_")
    message = json.loads((folder / "0002.response.json").read_text())
    whole = parse_response(json.dumps(message), "anthropic")
    assert whole.server_calls == 2 and whole.passes == 3 and whole.prompt_total == 21023
    assert 0 < whole.server_added < 1000 and 6000 < whole.first_pass < 7000
    first = {"input_tokens": 6, "cache_read_input_tokens": whole.first_pass - 6, "cache_creation_input_tokens": 0}
    events = [{"type": "message_start", "message": {**message, "content": [], "usage": first}}]
    events += [{"type": "content_block_start", "index": i, "content_block": b} for i, b in enumerate(message["content"])]
    events += [{"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": message["usage"]},
               {"type": "message_stop"}]
    stream = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    streamed = parse_response(stream, "anthropic")
    assert streamed._replace(server_added=0) == whole._replace(server_added=0)
    assert abs(streamed.server_added - whole.server_added) <= 2  # set by the bill there, by our counts here
    web = shared_data / "recorded" / "pydantic-ai" / "test_openai_responses_test_openai_responses_model_web_search_tool"
    assert parse_response((web / "0001.response.json").read_bytes(), "openai-responses").server_calls == 0


def test_a_gemini_interaction_streamed_says_its_usage_when_it_completes() -> None:
    """The Interactions API's stream (ai.google.dev/gemini-api/docs/interactions/streaming): the interaction
    created in progress, its steps' deltas, then the completed interaction with its usage; the same usage as
    the interaction answered whole."""
    usage = {"total_tokens": 275, "total_input_tokens": 183, "total_cached_tokens": 0, "total_output_tokens": 14,
             "total_thought_tokens": 78}
    whole = {"id": "v1_abc", "object": "interaction", "model": "gemini-3.7-flash", "status": "completed",
             "created": "2026-09-25T13:31:16Z", "steps": [{"type": "model_output", "content": [
                 {"type": "text", "text": "It is 2024-01-01."}]}], "usage": usage}
    events = [("interaction.created", {"interaction": {"id": "v1_abc", "status": "in_progress",
                                                       "object": "interaction", "model": "gemini-3.7-flash"}}),
              ("step.start", {"index": 0, "step": {"type": "model_output"}}),
              ("step.delta", {"index": 0, "delta": {"type": "text", "text": "It is 2024-01-01."}}),
              ("step.stop", {"index": 0}),
              ("interaction.status_update", {"interaction_id": "v1_abc", "status": "completed"}),
              ("interaction.completed", {"interaction": {**whole, "steps": []}})]
    stream = "".join(f"event: {name}\ndata: {json.dumps({**data, 'event_type': name})}\n\n" for name, data in events)
    got = parse_response(stream, "gemini-interactions")
    assert got == parse_response(json.dumps(whole), "gemini-interactions") == Usage(183, 0, 0, 0, 183, 92, True, 78)
    feed = UsageStream("gemini-interactions")
    feed.feed(stream.encode())
    assert feed.finished and feed.output_chunks == 1 and feed.meta.id == "v1_abc"
    assert feed.meta.finish_reasons == ("completed",) and feed.meta.created == 1790343076.0


def sse_files(shared_data: Path) -> list[tuple[Path, str]]:
    return [(p, api) for p, api in recorded_responses(shared_data) if p.suffix == ".sse"]


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_stream_fed_in_random_chunks_equals_whole_stream(shared_data, data):
    path, api = data.draw(st.sampled_from(sse_files(shared_data)))
    raw = path.read_bytes()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=60)))
    stream = UsageStream(api)
    for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True):
        stream.feed(raw[a:b])
    stream.feed(b"\n")
    whole = UsageStream(api)
    whole.feed(raw + b"\n")
    assert stream.usage() == whole.usage() == parse_response(raw, api)
    assert stream.output_chunks == whole.output_chunks
    assert (stream.first_content_at is None) == (stream.output_chunks == 0)


def test_streams_show_their_content(shared_data):
    streams = sse_files(shared_data)
    with_content = 0
    for path, api in streams:
        stream = UsageStream(api)
        stream.feed(path.read_bytes())
        with_content += stream.output_chunks > 0
    # all but one stream content: a Responses stream whose only output is a server tool call (no deltas)
    assert with_content == len(streams) - 1


def test_stream_byte_by_byte_and_timing(shared_data):
    cassette = shared_data / "recorded/openllmetry/test_prompt_caching_test_anthropic_prompt_caching_stream_legacy"
    raw = (cassette / "0002.response.sse").read_bytes()
    stream = UsageStream("anthropic")
    first_delta = raw.index(b"content_block_delta")
    for i in range(first_delta):
        stream.feed(raw[i:i + 1])
    assert stream.first_content_at is None and stream.output_chunks == 0
    assert stream.usage().cache_read == 1165 and stream.usage().output == 1  # message_start so far
    for i in range(first_delta, len(raw)):
        stream.feed(raw[i:i + 1])
    assert stream.first_content_at is not None
    assert stream.output_chunks == raw.count(b'"type":"content_block_delta"')
    assert stream.usage().output == 221  # message_delta's cumulative count


def test_chat_stream_without_usage_is_not_reported():
    chunks = [{"choices": [{"index": 0, "delta": {"content": "Hel"}}]},
              {"choices": [{"index": 0, "delta": {"content": "lo"}}]}]
    raw = "".join(f"data: {json.dumps(c)}\r\n\r\n" for c in chunks) + "data: [DONE]\r\n\r\n"
    stream = UsageStream("openai-chat")
    stream.feed(raw.encode())
    assert stream.output_chunks == 2 and stream.usage() == Usage()


def test_json_lines_stream():
    """A stream without SSE framing (one JSON object a line), as some compatible servers send it."""
    lines = [{"choices": [{"delta": {"content": "hi"}}]},
             {"choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 1,
                                       "prompt_tokens_details": {"cached_tokens": 32}}}]
    raw = "\n".join(json.dumps(line) for line in lines).encode()
    assert parse_response(raw, "openai-chat") == Usage(50, 32, 0, 0, 18, 1, True)


def test_bad_responses():
    with pytest.raises(InputError):
        parse_response(b'{"usage": ', "anthropic")
    with pytest.raises(InputError, match="unknown API"):
        parse_response(b"{}", "cohere")
    with pytest.raises(InputError):
        UsageStream("cohere")


def test_what_a_server_tools_passes_added_follows_the_bill_where_the_first_pass_is_counted() -> None:
    """chatlas's Haiku 4.5 web search: one search, billed 19,523 over two passes. Its stream's first event counts
    the first pass (2,247), so the search added 19,523 - 2 x 2,247 = 15,029 whatever we estimated (12,404); a
    whole message says no first pass, so our estimate sets it instead. A stream cut before any result keeps the
    first pass it was told; one pass (no server call) has no first of several."""
    told = Usage(prompt_total=19523, first_pass=2247)
    assert told.with_passes(1, [12404])[-2:] == (15029, 2247)
    assert Usage(prompt_total=19523).with_passes(1, [12404])[-2:] == (12404, (19523 - 12404) // 2)
    assert told.with_passes(1, [])[-2:] == (0, 2247)
    assert told.with_passes(0, []) == told._replace(first_pass=0)
