"""Bedrock Converse and Gemini generateContent: recorded requests -> Prompt, recorded responses (JSON,
Gemini SSE) and AWS EventStream frames -> Usage, path routing, unknown shapes."""
from __future__ import annotations

import base64
import json
import struct
import zlib
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from botocore.eventstream import EventStreamBuffer
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixguard.model.usage import Usage
from prefixguard.utils.errors import InputError
from prefixguard.wire import UsageStream, detect_api, gemini_thoughts, parse_request, parse_response, routes
from prefixguard.proxy.analysis import Analyzer, FlowState, Response
from prefixguard.replay.sources import cassette_uris
from prefixguard.wire.eventstream import EventStreamDecoder, encode

SOURCES = ("pydantic-ai-bedrock", "pydantic-ai-gemini")


def calls(shared_data: Path) -> list[tuple[Path, dict, str, str]]:
    """(cassette folder, interaction, path with query, API) of every recorded Converse / Gemini generation."""
    out = []
    for name in SOURCES:
        for meta in sorted((shared_data / "recorded" / name).glob("*/meta.json")):
            for call in json.loads(meta.read_text())["interactions"]:
                url = urlsplit(call["uri"])
                path = url.path + (f"?{url.query}" if url.query else "")
                api = routes.route(path)
                if api and api[0] in ("bedrock-converse", "gemini") and call["request"] == "json":
                    out.append((meta.parent, call, path, api[0]))
    return out


def test_every_recorded_request_parses_with_exact_spans(shared_data):
    found = calls(shared_data)
    by_api = {api: sum(a == api for *_, a in found) for api in ("bedrock-converse", "gemini")}
    assert by_api["bedrock-converse"] >= 60 and by_api["gemini"] >= 75, by_api
    for folder, call, path, api in found:
        body = (folder / f"{call['n']:04d}.request.json").read_text()
        prompt = parse_request(body, path=path, count_tokens=False)
        assert prompt.api == api and prompt.model, (folder.name, prompt.model)
        assert "%3A" not in prompt.model and "/" not in prompt.model  # unquoted, the id alone
        assert prompt.segments, folder.name
        for seg in prompt.segments:  # each span holds exactly the JSON of its part
            assert json.loads(body[seg.start:seg.end]) == seg.value, (folder.name, seg.pointer)
        assert [s.level for s in prompt.segments] == sorted((s.level for s in prompt.segments),
                                                            key=("tools", "system", "messages").index)


def test_every_recorded_response_gives_consistent_usage(shared_data):
    reported = total = 0
    for folder, call, _path, api in calls(shared_data):
        if call["status"] != 200 or call["response"] not in ("json", "sse"):
            continue
        usage = parse_response((folder / f"{call['n']:04d}.response.{call['response']}").read_bytes(), api)
        total += 1
        assert usage.prompt_total == usage.cache_read + usage.cache_write + usage.uncached
        assert usage.prompt_total > 0 and usage.output > 0, (folder.name, call["n"])
        reported += usage.reported
    # every Gemini answer reports (zero counts are left out); Bedrock's non-Claude, non-Nova models send no cache field
    assert total >= 125 and reported >= 105, (total, reported)


def recorded(shared_data: Path, cassette: str, n: int, kind: str) -> Path:
    return next((shared_data / "recorded").glob(f"pydantic-ai-*/{cassette}")) / f"{n:04d}.{kind}"


@pytest.mark.parametrize("cassette,n,api,expected", [
    # read off the files: inputTokens + cacheRead + cacheWrite; outputTokens
    ("test_bedrock_test_bedrock_cache_write_and_read", 1, "bedrock-converse", Usage(1324, 0, 1322, 0, 2, 5, True)),
    ("test_bedrock_test_bedrock_cache_write_and_read", 2, "bedrock-converse", Usage(1324, 1322, 0, 0, 2, 5, True)),
    ("test_bedrock_test_bedrock_cache_messages_with_image_as_last_content", 2, "bedrock-converse",
     Usage(2374, 2074, 297, 0, 3, 61, True)),
    # cachedContentTokenCount inside promptTokenCount (3,520 = 3,512 cached + 8); thoughtsTokenCount 42 of the output
    ("test_cache_test_google_model_cached_content", 2, "gemini", Usage(3520, 3512, 0, 0, 8, None, True, 42)),
])
def test_known_usages(shared_data, cassette, n, api, expected):
    usage = parse_response(recorded(shared_data, cassette, n, "response.json").read_bytes(), api)
    if expected.output is None:  # not the point here: whatever the answer generated
        expected = expected._replace(output=usage.output)
    assert usage == expected


def test_bedrock_cache_points_mark_the_block_before_them(shared_data):
    path = "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse"
    body = recorded(shared_data, "test_bedrock_test_bedrock_cache_write_and_read", 1, "request.json").read_text()
    prompt = parse_request(body, path=path)
    assert prompt.model == "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    marked = [(s.pointer, s.breakpoint) for s in prompt.segments if s.breakpoint]
    # content: text, document, text, cachePoint, text, cachePoint -> the blocks at 2 and 4 carry them
    assert marked[-2:] == [("/messages/0/content/2", "5m"), ("/messages/0/content/4", "5m")]
    assert not any(p.endswith(("/3", "/5")) for p, _ in marked if p.startswith("/messages/0/"))
    # a cachePoint is no prefix byte: removing one changes no fingerprint
    plain = json.loads(body)
    plain["messages"][0]["content"] = [b for b in plain["messages"][0]["content"] if "cachePoint" not in b]
    assert parse_request(json.dumps(plain), path=path).chain == \
        parse_request(json.dumps(json.loads(body)), path=path).chain


def test_converse_reasoning_renders_its_text_not_its_signature(shared_data):
    """A reasoningContent block is read as the Messages API reads a thinking block: its reasoning text, not the
    signature beside it. pydantic-ai's Claude 3.7 tool loop on Converse sends its turn's reasoning back with the
    tool result: 539 billed, counted 745 with the signature's base64 as text."""
    cassette = "test_bedrock_test_bedrock_anthropic_tool_with_thinking"
    path = "/model/us.anthropic.claude-3-7-sonnet-20250219-v1:0/converse"
    body = json.loads(recorded(shared_data, cassette, 2, "request.json").read_text())
    prompt = parse_request(json.dumps(body), path=path)
    billed = parse_response(recorded(shared_data, cassette, 2, "response.json").read_bytes(), prompt.api).prompt_total
    assert billed == 539 and abs(prompt.total_tokens - billed) <= 0.05 * billed, prompt.total_tokens
    [said] = [b["reasoningContent"]["reasoningText"] for m in body["messages"] for b in m["content"]
              if "reasoningContent" in b]
    said["signature"] = said["signature"][:8]
    assert parse_request(json.dumps(body), path=path).total_tokens == prompt.total_tokens

def test_converse_body_without_path_is_not_taken_for_anthropic():
    body = {"system": [{"text": "You are terse."}, {"cachePoint": {"type": "default", "ttl": "1h"}}],
            "messages": [{"role": "user", "content": [{"text": "hi"}]}]}
    prompt = parse_request(json.dumps(body))
    assert prompt.api == "bedrock-converse" and prompt.segments[0].breakpoint == "1h"
    with pytest.raises(InputError, match="cachePoint.ttl must be a string"):
        parse_request(json.dumps({**body, "system": [{"text": "x"}, {"cachePoint": {"ttl": 5}}]}))


def test_routes_take_the_model_from_the_path():
    anthropic_body = json.dumps({"anthropic_version": "bedrock-2023-05-31", "max_tokens": 10,
                                 "messages": [{"role": "user", "content": "hi"}]})
    for path, model in (("/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/invoke",
                         "anthropic.claude-3-5-haiku-20241022-v1:0"),
                        ("/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict",
                         "claude-sonnet-4-5@20250929")):
        prompt = parse_request(anthropic_body, path=path)
        assert (prompt.api, prompt.model) == ("anthropic", model)
    assert routes.route("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse") == \
        ("gemini", "gemini-2.5-flash")
    assert routes.route("/v1/projects/p/locations/global/publishers/google/models/gemini-3-pro:generateContent") == \
        ("gemini", "gemini-3-pro")
    assert routes.route("/model/meta.llama3-8b-instruct-v1%3A0/invoke") is None  # not an Anthropic body
    assert routes.route("/v1beta/models/gemini-2.5-flash:countTokens") is None


def test_unknown_shape_names_the_known_ones():
    with pytest.raises(InputError) as err:
        detect_api({"prompt": "hello"})
    text = str(err.value)
    assert "\n" not in text and all(s in text for s in ("Anthropic", "Chat Completions", "Responses",
                                                         "Bedrock Converse", "Gemini"))


# ---- streams

def test_a_gemini_thought_signature_is_no_prompt_text():
    """lmnr-ai/lmnr-python's recorded gemini-3.5-flash-lite tool loop: the turn that adds two calls (one with a
    128-character thoughtSignature, 92 cl100k tokens) and their results bills 78 more tokens; counting the
    signature's characters, prefixguard's count ran 34% over the bill (353 for 263). Gemini 3 bills a signature as
    the thoughts it holds, by its size (rules/providers.toml): (128 - 80) / 5.2, 9 tokens, not 92."""
    signature = "El4KXAERTTIPkAVVPJ10j9NxewtCtcRmcrP2kjH-kq-3AhNz0HPRPcO3E0w0oZiuie9-FM1NmkXHw8NRqA14Mq2d5SqL8EZlrh_" \
                "Bad5A10ygM5LIOjXub506wobG6946"
    call = {"functionCall": {"id": "call_608362", "args": {"city": "Almaty"}, "name": "get_weather"}}

    def body(part: dict) -> str:
        return json.dumps({"contents": [{"role": "user", "parts": [{"text": "Weather in Almaty?"}]},
                                        {"role": "model", "parts": [part]}]})

    for model, thoughts in (("gemini-3.5-flash-lite", 9), ("gemini-2.5-flash", 0)):  # 2.5 bills most of them none
        path = f"/v1beta/models/{model}:generateContent"
        signed = parse_request(body({**call, "thoughtSignature": signature}), path=path)
        plain = parse_request(body(call), path=path)
        assert signed.segments[-1].tokens - plain.segments[-1].tokens == thoughts
        assert signed.segments[-1].media_tokens == thoughts  # the provider's tokens by its rule: never scaled
        assert signed.chain[-1] != plain.chain[-1]  # still part of what was sent: another signature is another prefix


@pytest.mark.parametrize(("cassette", "billed", "within"), [
    # gemini-3-flash-preview's tool loop: each request sends back the signatures of the calls before it
    ("test_google_test_google_instructions_only_with_tool_calls", [None, 348, 415, 546, 679], 0.05),
    # gemini-3-pro-preview: a turn whose thoughts are sent as text, its answer signed: the text holds them
    ("test_google_test_google_model_thinking_part", [None, 1280], 0.05),
])
def test_a_gemini_3_signature_is_billed_as_its_thoughts(shared_data, cassette: str, billed: list, within: float):
    """Gemini 3 reads a signature sent back as the thoughts it holds, and bills them: pydantic-ai's recorded tool
    loop bills the thoughtsTokenCount of each answer whose signature it sends back beyond its text (+177 for 190,
    +213 for 230, +314 for 335, +416 for 441), 51-61% over our count of the rest; counted by the signatures'
    sizes (or as those answers billed, where seen), each within 5%. A turn that sends its thoughts as text is
    billed them once."""
    folder = shared_data / "recorded" / "pydantic-ai-gemini" / cassette
    uris = cassette_uris(folder)
    for n, bill in enumerate(billed, 1):
        if bill is None:
            continue
        prompt = parse_request((folder / f"{n:04d}.request.json").read_bytes(), path=uris[f"{n:04d}"])
        assert parse_response(next(folder.glob(f"{n:04d}.response.*")).read_bytes(), "gemini").prompt_total == bill
        assert abs(prompt.total_tokens - bill) <= within * bill, (n, prompt.total_tokens, bill)


def test_a_gemini_3_signature_counts_what_its_answer_billed_once_that_answer_is_seen(shared_data, tmp_path):
    """The proxy reads each Gemini answer's thought signature and the thoughts it billed (thoughtsTokenCount); the
    request that sends the signature back (in base64 or its URL-safe form) is judged with exactly those, not the
    estimate by its size (prefixguard/judge/stored.py). An answer with several signatures says nothing of each one's
    share: they stay estimates."""
    from prefixguard.capture.store import open_store
    from prefixguard.judge.policies import make_policy
    from prefixguard.judge.stored import StoredResponses
    from prefixguard.model.usage import ResponseMeta
    from prefixguard.wire import sent_back

    folder = shared_data / "recorded" / "pydantic-ai-gemini" / "test_google_test_google_instructions_only_with_tool_calls"
    path = cassette_uris(folder)["0001"]
    answer = (folder / "0001.response.json").read_bytes()
    sign = json.loads(answer)["candidates"][0]["content"]["parts"][0]["thoughtSignature"]
    second = (folder / "0002.request.json").read_bytes()
    prompt = parse_request(second, path=path)
    signed = next(i for i, s in enumerate(prompt.segments) if isinstance(s.value, dict) and "thoughtSignature" in s.value)
    estimate = prompt.segments[signed].media_tokens
    assert prompt.segments[signed].estimated and estimate == gemini_thoughts.held(sign, "gemini-3-flash-preview") > 0
    analyzer = Analyzer(store=str(tmp_path / "rows.db"))
    try:
        for n, body in ((1, (folder / "0001.request.json").read_bytes()), (2, second)):
            analyzer.request(FlowState(id=str(n), ts=float(n), sent=float(n), path=path, body=body))
            analyzer.finish(Response(id=str(n), status=200, headers_at=float(n), ended_at=float(n),
                                     body=(folder / f"{n:04d}.response.json").read_bytes()))
    finally:
        analyzer.close()
    with open_store(tmp_path / "rows.db") as db:
        judged = {r.id: r for r in db.records()}["2"].segments[signed][2]
    assert judged - prompt.segments[signed].tokens == 190 - estimate  # the answer's thoughtsTokenCount
    urlsafe = sign.replace("+", "-").replace("/", "_")
    assert sent_back.key(urlsafe) == sent_back.key(sign)
    other = "Q" * 600  # never seen: by its size, (600 - 80) / 5.2
    assert gemini_thoughts.held(other, "gemini-3-flash-preview") == 100
    stored, policy = StoredResponses(), make_policy("gemini")
    body = {"contents": [{"role": "model", "parts": [{"text": "a", "thoughtSignature": other}]}]}
    sent = parse_request(json.dumps(body), path=path)
    stored.answered(ResponseMeta(keys=(sent_back.key(other), sent_back.key(other[::-1] + "A"))), sent,
                    Usage(prompt_total=10, output=60, reasoning=50, reported=True), policy, 0.0)
    assert stored.filled(sent).segments[0].tokens == sent.segments[0].tokens  # several: each one's share untold


def test_a_gemini_call_id_is_no_prompt_text(shared_data):
    """A functionCall's and a functionResponse's `id` pairs them for the client; the model is not shown it, nor
    billed for it: pydantic-ai's gemini-2.5-flash tool loop (37-character ids) bills 122 and 162, counted 175 and
    262 with the ids."""
    cassette = "test_output_test_google_default_tools_use_validated_mode"
    folder = shared_data / "recorded" / "pydantic-ai-gemini" / cassette
    path = "/v1beta/models/gemini-2.5-flash:generateContent"
    for n, billed in ((2, 122), (3, 162)):
        prompt = parse_request((folder / f"{n:04d}.request.json").read_bytes(), path=path)
        answer = next(folder.glob(f"{n:04d}.response.*")).read_bytes()
        assert parse_response(answer, "gemini").prompt_total == billed
        assert abs(prompt.total_tokens - billed) <= 2, (n, prompt.total_tokens, billed)  # its digits one by one: 24C


def test_gemini_sse_chunk_by_chunk(shared_data):
    sse = recorded(shared_data, "test_code_execution_test_code_execution_stream", 1, "response.sse").read_bytes()
    last = [json.loads(line[6:]) for line in sse.decode().splitlines() if line.startswith("data: ")][-1]
    whole = parse_response(sse, "gemini")
    assert whole.prompt_total == last["usageMetadata"]["promptTokenCount"] and whole.reported
    for size in (1, 7, 64, 4096):
        stream = UsageStream("gemini")
        for i in range(0, len(sse), size):
            stream.feed(sse[i:i + size])
        assert stream.usage() == whole and stream.finished and stream.first_content_at is not None


def test_gemini_stream_as_json_array():
    chunks = [{"candidates": [{"content": {"parts": [{"text": "Hel"}], "role": "model"}}],
               "usageMetadata": {"promptTokenCount": 5000, "totalTokenCount": 5000}},
              {"candidates": [{"content": {"parts": [{"text": "lo"}], "role": "model"}, "finishReason": "STOP"}],
               "usageMetadata": {"promptTokenCount": 5000, "cachedContentTokenCount": 4096,
                                 "candidatesTokenCount": 2, "totalTokenCount": 5002}}]
    body = "[" + ",\r\n".join(json.dumps(c) for c in chunks) + "]"
    assert parse_response(body, "gemini") == Usage(5000, 4096, 0, 0, 904, 2, True)


def converse_stream(read: int, write: int) -> list[bytes]:
    """A ConverseStream answer framed as Bedrock frames it (event type and content type headers, JSON
    payloads with the "p" padding field Bedrock adds)."""
    events = [("messageStart", {"role": "assistant"}),
              ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Paris"}}),
              ("contentBlockStop", {"contentBlockIndex": 0}),
              ("messageStop", {"stopReason": "end_turn"}),
              ("metadata", {"usage": {"inputTokens": 12, "outputTokens": 3, "totalTokens": 15 + read + write,
                                      "cacheReadInputTokens": read, "cacheWriteInputTokens": write},
                            "metrics": {"latencyMs": 321}})]
    return [encode({":event-type": name, ":content-type": "application/json", ":message-type": "event"},
                   json.dumps({**payload, "p": "abcdefghij"}).encode()) for name, payload in events]


def test_eventstream_frames_agree_with_botocore():
    frames = b"".join(converse_stream(1322, 0))
    theirs = EventStreamBuffer()
    theirs.add_data(frames)
    ours = EventStreamDecoder().feed(frames)
    mine = [(h, p) for h, p in ours]
    assert [(m.headers, m.payload) for m in theirs] == mine and len(mine) == 5


def test_converse_stream_usage_cut_anywhere():
    frames = b"".join(converse_stream(1322, 7))
    want = Usage(1341, 1322, 7, 0, 12, 3, True)
    assert parse_response(frames, "bedrock-converse") == want
    for size in (1, 3, 11, 12, 13, 100):
        stream = UsageStream("bedrock-converse")
        for i in range(0, len(frames), size):
            stream.feed(frames[i:i + size])
        assert stream.usage() == want and stream.finished and stream.output_chunks == 1, size


def test_eventstream_crc_checked():
    frame = bytearray(converse_stream(5, 0)[-1])
    frame[-10] ^= 0xFF  # a payload byte: the message CRC fails
    decoder = EventStreamDecoder()
    assert decoder.feed(bytes(frame)) == [] and decoder.error == "message CRC mismatch"
    bad_prelude = bytearray(converse_stream(5, 0)[0])
    bad_prelude[9] ^= 1
    decoder = EventStreamDecoder()
    assert decoder.feed(bytes(bad_prelude)) == [] and "prelude CRC" in decoder.error
    # an over-long length with a valid prelude CRC is refused, not waited for
    prelude = struct.pack(">II", 1 << 30, 0)
    decoder = EventStreamDecoder()
    decoder.feed(prelude + struct.pack(">I", zlib.crc32(prelude)))
    assert "bad message length" in decoder.error
    # a broken stream gives no usage rather than a wrong one, and never raises
    stream = UsageStream("bedrock-converse")
    stream.feed(bytes(frame))
    assert stream.usage() == Usage()


def invoke_chunks(events: list[dict]) -> bytes:
    """InvokeModelWithResponseStream's frames: each event of the model's own, base64 in a chunk's "bytes"."""
    return b"".join(encode({":event-type": "chunk", ":message-type": "event"},
                           json.dumps({"bytes": base64.b64encode(json.dumps(e).encode()).decode()}).encode())
                    for e in events)


def test_invoke_with_response_stream_wraps_anthropic_events():
    events = [{"type": "message_start", "message": {"usage": {"input_tokens": 4, "cache_read_input_tokens": 2048,
                                                              "cache_creation_input_tokens": 0, "output_tokens": 1}}},
              {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "hi"}},
              {"type": "message_delta", "usage": {"output_tokens": 9}}, {"type": "message_stop"}]
    frames = invoke_chunks(events)
    stream = UsageStream("anthropic")
    stream.feed(frames)
    assert stream.usage() == Usage(2052, 2048, 0, 0, 4, 9, True) and stream.finished


def test_nova_invoke_model_is_a_converse_body_with_its_cache_point_inside_a_block():
    """Amazon Nova's own InvokeModel body (braintrust-sdk's Nova Lite recording): the Converse shape, with
    the cachePoint a key of the block it closes, its usage named ...InputTokenCount, its stream's events
    wrapped in chunks and named by their first key. One cache serves both APIs (the recording reads
    14,921-14,922 of 14,927 by each), so both forms are the same prefix; before, the InvokeModel call had no
    model, no breakpoint and, streamed, no usage."""
    context = "BRAINTRUST_BEDROCK_CACHE_CONTEXT\n" + " ".join(f"stable-cache-token-{i}" for i in range(1600))
    converse = {"inferenceConfig": {"maxTokens": 16, "temperature": 0, "topP": 0.9},
                "messages": [{"role": "user", "content": [{"text": context}, {"cachePoint": {"type": "default"}},
                                                          {"text": "Reply with exactly OK."}]}]}
    native = {"inferenceConfig": {"maxTokens": 16, "temperature": 0, "topP": 0.9}, "schemaVersion": "messages-v1",
              "messages": [{"role": "user", "content": [{"cachePoint": {"type": "default"}, "text": context},
                                                        {"text": "Reply with exactly RAW."}]}]}
    model = "us.amazon.nova-lite-v1:0"
    a = parse_request(json.dumps(converse), path=f"/model/{model.replace(':', '%3A')}/converse")
    b = parse_request(json.dumps(native), path=f"/model/{model.replace(':', '%3A')}/invoke")
    assert (b.api, b.model) == (a.api, a.model) == ("bedrock-converse", model)
    assert [s.breakpoint for s in a.segments] == [s.breakpoint for s in b.segments] == ["5m", None]
    assert a.chain[0] == b.chain[0] and a.segments[0].kind == b.segments[0].kind == "text"
    assert routes.route(f"/model/{model}/invoke-with-response-stream") == ("bedrock-converse", model)
    assert routes.route("/model/amazon.titan-text-express-v1/invoke") is None  # Titan's body is its own
    assert parse_response(json.dumps({"output": {"message": {"role": "assistant", "content": [{"text": "RAW"}]}},
                                      "stopReason": "end_turn",
                                      "usage": {"cacheReadInputTokenCount": 14921, "cacheWriteInputTokenCount": 0,
                                                "inputTokens": 6, "outputTokens": 2, "totalTokens": 14929}}),
                          "bedrock-converse") == Usage(14927, 14921, 0, 0, 6, 2, True)
    events = [{"messageStart": {"role": "assistant"}},
              {"contentBlockDelta": {"delta": {"text": "RAW"}, "contentBlockIndex": 0}},
              {"messageStop": {"stopReason": "end_turn"}},
              {"metadata": {"usage": {"inputTokens": 6, "outputTokens": 3, "cacheReadInputTokenCount": 14922,
                                      "cacheWriteInputTokenCount": 0}, "metrics": {}, "trace": {}},
               "amazon-bedrock-invocationMetrics": {"inputTokenCount": 6, "outputTokenCount": 3}}]
    frames = invoke_chunks(events)
    stream = UsageStream("bedrock-converse")
    stream.feed(frames)
    assert stream.usage() == Usage(14928, 14922, 0, 0, 6, 3, True) and stream.finished
    assert stream.output_chunks == 1 and stream.meta.finish_reasons == ("end_turn",)


@settings(max_examples=200, deadline=None)
@given(noise=st.binary(max_size=300), cuts=st.lists(st.integers(min_value=1, max_value=60), max_size=12))
def test_eventstream_never_raises_and_cuts_do_not_matter(noise: bytes, cuts: list[int]) -> None:
    frames = b"".join(converse_stream(700, 30))
    for data in (noise, b"\x00" + noise, frames[:len(noise)] + noise, frames):
        stream = UsageStream("bedrock-converse")
        i = 0
        for size in cuts or [len(data) or 1]:
            stream.feed(data[i:i + size])
            i += size
        stream.feed(data[i:])
        usage = stream.usage()
        assert usage.prompt_total == usage.cache_read + usage.cache_write + usage.uncached
    assert usage == Usage(742, 700, 30, 0, 12, 3, True)  # the whole frames, however they were cut
