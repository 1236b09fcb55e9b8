"""Wire adapters, request side: real recorded requests -> Prompt, fingerprints, settings, bad input."""
from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixguard.model.fingerprint import common_prefix
from prefixguard.model.prompt import LEVELS
from prefixguard.utils.errors import InputError, NotARequest
from prefixguard.wire import analysable, detect_api, jsonspan, parse_request, routes

RECORDED = ("pydantic-ai", "openllmetry")


def recorded_requests(shared_data: Path) -> list[tuple[Path, str]]:
    """(request file, URL path) of every recorded call with a JSON request body."""
    calls = []
    for name in RECORDED:
        for meta in sorted((shared_data / "recorded" / name).glob("*/meta.json")):
            for call in json.loads(meta.read_text())["interactions"]:
                body = meta.parent / f"{call['n']:04d}.request.json"
                if body.exists():
                    calls.append((body, urlsplit(call["uri"]).path))
    return calls


def resolve(doc, pointer: str):
    for part in pointer.split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def test_every_recorded_request_parses(shared_data):
    calls = recorded_requests(shared_data)
    assert len(calls) > 200
    apis = set()
    for path, url in calls:
        raw = path.read_bytes()
        try:
            api = detect_api(None, url)
        except InputError:  # /v1/responses/compact, /v1/messages/count_tokens: shape from the body
            api = None
        prompt = parse_request(raw, path=url, source=str(path), count_tokens=False)
        apis.add(prompt.api)
        assert api in (None, prompt.api)
        # the body alone tells the same shape as the URL
        assert detect_api(json.loads(raw)) == prompt.api, path
        doc = json.loads(raw)
        assert prompt.segments or doc.get("previous_response_id"), path  # a chained call may send no input
        assert len(prompt.chain) == len(prompt.segments)
        order = [LEVELS.index(s.level) for s in prompt.segments]
        assert order == sorted(order), path
        for seg in prompt.segments:
            assert resolve(doc, seg.pointer) == seg.value, (path, seg.pointer)
            assert json.loads(prompt.text[seg.start:seg.end]) == seg.value
    assert apis == {"anthropic", "openai-chat", "openai-responses"}


def test_pretty_and_compact_bodies_fingerprint_alike(shared_data):
    for path, url in recorded_requests(shared_data):
        doc = json.loads(path.read_bytes())
        compact = parse_request(json.dumps(doc, separators=(",", ":"), ensure_ascii=False), path=url,
                                count_tokens=False)
        pretty = parse_request(json.dumps(doc, indent=3).encode(), path=url, count_tokens=False)
        assert compact.chain == pretty.chain, path
        assert [s.pointer for s in compact.segments] == [s.pointer for s in pretty.segments]


def test_segment_spans_are_the_parts_as_written():
    raw = ('{"model": "claude-sonnet-4-5", "system": "Sé brief.",\n "messages": [{"role": "user", '
           '"content": [ {"type": "text", "text": "héllo"} ,{"type":"text","text":"x"}]}]}')
    prompt = parse_request(raw.encode(), count_tokens=False)
    first, second = prompt.segments[1:]
    assert raw[first.start:first.end] == '{"type": "text", "text": "héllo"}'
    assert raw[second.start:second.end] == '{"type":"text","text":"x"}'
    assert prompt.byte_offset(first.start) == raw.encode().index(b'{"type": "text", "text": "h')


def anthropic(messages, **extra) -> dict:
    return {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": messages, **extra}


def chain_of(doc: dict, **kwargs) -> list[bytes]:
    return parse_request(json.dumps(doc), count_tokens=False, **kwargs).chain


def test_key_order_change_breaks_the_chain(shared_data):
    doc = json.loads(recorded(shared_data, "test_prefect_test_multiple_agents", 2))
    assert len(doc["tools"]) >= 2
    reordered = json.loads(json.dumps(doc))
    reordered["tools"][1] = dict(reversed(doc["tools"][1].items()))
    assert reordered == doc  # same data ...
    a, b = chain_of(doc), chain_of(reordered)
    assert common_prefix(a, b) == 1  # ... yet the second tool renders differently


def test_whitespace_inside_strings_matters():
    a = anthropic([{"role": "user", "content": "hello"}])
    b = anthropic([{"role": "user", "content": "hello "}])
    assert chain_of(a) != chain_of(b)


def test_moving_a_block_to_another_message_changes_the_fingerprint():
    one = anthropic([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}])
    two = anthropic([{"role": "user", "content": [{"type": "text", "text": "a"}]},
                     {"role": "user", "content": [{"type": "text", "text": "b"}]}])
    a, b = chain_of(one), chain_of(two)
    assert len(a) == len(b) == 2
    assert a[0] == b[0] and a[1] != b[1]


def test_string_content_and_one_text_block_are_one_prefix():
    """rules/equivalences.toml, text-block-is-string: the provider renders them alike."""
    a = anthropic([{"role": "user", "content": "hi"}])
    b = anthropic([{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
    assert chain_of(a) == chain_of(b)
    cited = anthropic([{"role": "user", "content": [{"type": "text", "text": "hi", "citations": []}]}])
    two = anthropic([{"role": "user", "content": [{"type": "text", "text": "h"}, {"type": "text", "text": "i"}]}])
    assert chain_of(cited) != chain_of(a) and chain_of(two) != chain_of(a)


def test_breakpoints_are_not_content():
    block = {"type": "text", "text": "policy " * 50}
    plain = anthropic([{"role": "user", "content": [block]}], system=[block])
    marked = anthropic([{"role": "user", "content": [{**block, "cache_control": {"type": "ephemeral"}}]}],
                       system=[{**block, "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
                       cache_control={"type": "ephemeral"})
    p, m = parse_request(json.dumps(plain)), parse_request(json.dumps(marked))
    assert p.chain == m.chain
    assert [s.breakpoint for s in m.segments] == ["1h", "5m"]
    assert [s.breakpoint for s in p.segments] == [None, None]
    assert (p.auto_breakpoint, m.auto_breakpoint) == (None, "5m")


def test_anthropic_segments_and_settings():
    doc = anthropic(
        [{"role": "user", "content": [{"type": "text", "text": "look"},
                                      {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                   "data": "iVBORw0KGgo="}}]},
         {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "calc", "input": {"x": 1}}]},
         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "2"}]}],
        system=[{"type": "text", "text": "You are terse."}],
        tools=[{"name": "calc", "description": "adds", "input_schema": {"type": "object"}},
               {"type": "web_search_20250305", "name": "web_search"}],
        thinking={"type": "enabled", "budget_tokens": 2048},
        output_config={"effort": "high"},
        tool_choice={"type": "auto", "disable_parallel_tool_use": True},
    )
    prompt = parse_request(json.dumps(doc), headers={"Anthropic-Beta": "b-two, b-one"})
    assert prompt.api == "anthropic" and prompt.model == "claude-sonnet-4-5"
    assert [(s.level, s.pointer, s.kind, s.role, s.message_index) for s in prompt.segments] == [
        ("tools", "/tools/0", "tool", None, None),
        ("tools", "/tools/1", "tool", None, None),
        ("system", "/system/0", "text", "system", None),
        ("messages", "/messages/0/content/0", "text", "user", 0),
        ("messages", "/messages/0/content/1", "image", "user", 0),
        ("messages", "/messages/1/content/0", "tool_use", "assistant", 1),
        ("messages", "/messages/2/content/0", "tool_result", "user", 2),
    ]
    s = prompt.settings
    assert s["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert s["effort"] == "high"
    assert s["tool_choice"] == {"type": "auto"} and s["disable_parallel_tool_use"] is True
    assert s["web_search"] is True and s["web_fetch"] is False
    assert s["images"] is True
    assert s["betas"] == ["b-one", "b-two"]
    assert "max_tokens" not in s
    assert parse_request(json.dumps(doc)).settings["betas"] is None  # headers unknown


def test_openai_chat_segments_and_settings(shared_data):
    doc = {
        "model": "gpt-4.1",
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "out", "schema": {"type": "object"}}},
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "developer", "content": [{"type": "text", "text": "Use tools."}]},
            {"role": "user", "content": [{"type": "text", "text": "hi"},
                                         {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ],
        "prompt_cache_key": "k1", "prompt_cache_retention": "24h", "reasoning_effort": "low",
        "parallel_tool_calls": False, "tool_choice": "auto",
    }
    prompt = parse_request(json.dumps(doc), path="/openai/v1/chat/completions")
    assert [(s.level, s.pointer, s.kind, s.role) for s in prompt.segments] == [
        ("tools", "/tools/0", "tool", None),
        ("tools", "/response_format", "schema", None),
        ("system", "/messages/0/content", "text", "system"),
        ("system", "/messages/1/content/0", "text", "developer"),
        ("messages", "/messages/2/content/0", "text", "user"),
        ("messages", "/messages/2/content/1", "image", "user"),
        ("messages", "/messages/3/tool_calls/0", "tool_use", "assistant"),
        ("messages", "/messages/4/content", "tool_result", "tool"),
    ]
    assert prompt.settings == {"tool_choice": "auto", "parallel_tool_calls": False, "effort": "low",
                               "prompt_cache_key": "k1", "prompt_cache_retention": "24h",
                               "prompt_cache_options": None, "cache_mode": None, "images": True}
    # the tool message's id is part of what the provider renders
    other = json.loads(json.dumps(doc))
    other["messages"][4]["tool_call_id"] = "c2"
    assert common_prefix(prompt.chain, chain_of(other)) == len(prompt.chain) - 1


def recorded(shared_data: Path, cassette: str, n: int = 1) -> bytes:
    return (shared_data / "recorded/pydantic-ai" / cassette / f"{n:04d}.request.json").read_bytes()


def test_chat_reasoning_renders_in_the_turn_under_way_only():
    """An assistant message's `reasoning_content` (DeepSeek, Kimi, GLM, Qwen servers) is a thinking part
    before its answer while the turn goes on (a tool loop); once a later user message comes, the template
    drops it: it is no part of the prompt then, and stripping it, as clients are told to, changes no
    prefix (rules/encodings.toml [chat_reasoning])."""
    call = {"id": "c1", "type": "function", "function": {"name": "view", "arguments": "{}"}}
    said = {"role": "assistant", "content": "Let me look.", "tool_calls": [call],
            "reasoning_content": "The user wants the file read first. " * 20}
    loop = [{"role": "user", "content": "Fix main.go"}, said, {"role": "tool", "tool_call_id": "c1", "content": "x"}]
    within = parse_request(json.dumps({"model": "glm-4.6", "messages": loop}), path="/v1/chat/completions")
    assert [s.kind for s in within.segments] == ["text", "thinking", "text", "tool_use", "tool_result"]
    assert within.segments[1].tokens >= 100
    later = [*loop, {"role": "assistant", "content": "Done."}, {"role": "user", "content": "Thanks"}]
    stripped = [*loop[:1], {k: v for k, v in said.items() if k != "reasoning_content"}, *later[2:]]
    kept, dropped = (parse_request(json.dumps({"model": "glm-4.6", "messages": m}), path="/v1/chat/completions")
                     for m in (later, stripped))
    assert "thinking" not in [s.kind for s in kept.segments]
    assert kept.chain == dropped.chain and kept.total_tokens == dropped.total_tokens


def test_openai_explicit_breakpoints(shared_data):
    raw = recorded(shared_data, "test_openai_prompt_cache_test_openai_chat_prompt_cache_e2e")
    prompt = parse_request(raw, path="/v1/chat/completions")
    assert [s.breakpoint for s in prompt.segments] == ["30m", None]
    assert prompt.settings["prompt_cache_key"] == "pydantic-ai-prompt-cache-e2e-chat"
    assert prompt.segments[0].tokens > 3000


def test_cache_control_through_an_openai_compatible_gateway(shared_data):
    raw = recorded(shared_data, "test_cache_test_openrouter_cache_point_multiple_markers_e2e")
    prompt = parse_request(raw, path="/api/v1/chat/completions")
    assert [s.breakpoint for s in prompt.segments] == ["1h", "5m", None]
    raw = recorded(shared_data, "test_cache_test_openrouter_cache_tool_definitions_e2e")
    assert [s.breakpoint for s in parse_request(raw).segments] == ["5m", None]


def test_openai_responses_segments(shared_data):
    doc = {
        "model": "gpt-5", "instructions": "Be brief.",
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
        "text": {"format": {"type": "json_schema", "name": "o", "schema": {"type": "object"}}},
        "input": [
            {"role": "developer", "content": "Rules."},
            {"role": "user", "content": [{"type": "input_text", "text": "hi"},
                                         {"type": "input_image", "image_url": "data:image/png;base64,AA=="}]},
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        ],
        "reasoning": {"effort": "minimal"},
    }
    prompt = parse_request(json.dumps(doc))
    assert prompt.api == "openai-responses"
    assert [(s.level, s.pointer, s.kind, s.role) for s in prompt.segments] == [
        ("tools", "/tools/0", "tool", None),
        ("tools", "/text/format", "schema", None),
        ("system", "/instructions", "text", "system"),
        ("system", "/input/0/content", "text", "developer"),
        ("messages", "/input/1/content/0", "text", "user"),
        ("messages", "/input/1/content/1", "image", "user"),
        ("messages", "/input/2", "thinking", "assistant"),
        ("messages", "/input/3", "tool_use", "assistant"),
        ("messages", "/input/4", "tool_result", "tool"),
    ]
    assert prompt.settings["effort"] == "minimal" and prompt.settings["images"] is True
    plain = parse_request(json.dumps({"model": "gpt-5", "input": "hello"}))
    assert [(s.pointer, s.role) for s in plain.segments] == [("/input", "user")]


def test_detect_api_from_path_then_body():
    assert detect_api(None, "https://gw.example/anthropic/v1/messages?beta=true") == "anthropic"
    assert detect_api({}, "/api/v1/chat/completions") == "openai-chat"
    assert detect_api({}, "/v1/responses") == "openai-responses"
    assert detect_api({"model": "x", "input": "hi"}, "/v2/other") == "openai-responses"
    assert detect_api({"model": "claude-sonnet-4-5", "messages": []}) == "anthropic"
    assert detect_api({"model": "llama3", "messages": [{"role": "user", "content": "hi"}]}) == "openai-chat"
    # the header every Anthropic client sends settles an ambiguous body
    ambiguous = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert parse_request(ambiguous).api == "openai-chat"
    assert parse_request(ambiguous, headers={"anthropic-version": "2023-06-01"}).api == "anthropic"
    with pytest.raises(InputError, match="unknown API shape"):
        detect_api({"prompt": "hi"})
    with pytest.raises(InputError):
        detect_api(None)


# Endpoints outside /v1/ that real clients call (issue 27): the path's tail names the shape, the body confirms it.
TAIL_PATHS = [
    ("/api/coding/paas/v4/chat/completions", "openai-chat"),                         # z.ai GLM coding plan
    ("/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21", "openai-chat"),   # Azure
    ("/openai/deployments/gpt-5-mini/responses?api-version=2025-04-01-preview", "openai-responses"),
    ("/v1/0123456789abcdef0123456789abcdef/team-gw/openai/chat/completions", "openai-chat"),  # Cloudflare
    ("/compatible-mode/v3/chat/completions", "openai-chat"),
    ("/proxy/anthropic/messages", "anthropic"),
    ("/v1/responses/compact", "openai-responses"),                                   # compaction: billed as a turn
]
CHAT_BODY = {"model": "glm-4.6",
             "messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hi"}]}
BODIES = {"openai-chat": CHAT_BODY,
          "openai-responses": {"model": "gpt-5-mini", "input": "hi", "instructions": "Be terse."},
          "anthropic": {"model": "claude-sonnet-4-5", "max_tokens": 64,
                        "messages": [{"role": "user", "content": "hi"}]}}


@pytest.mark.parametrize(("path", "api"), TAIL_PATHS)
def test_a_known_shape_is_read_on_any_path_whose_tail_names_it(path, api):
    assert analysable("POST", path) and not analysable("GET", path)
    prompt = parse_request(json.dumps(BODIES[api]), path=path)
    assert prompt.api == api and prompt.segments


def test_azure_names_the_model_by_its_deployment_when_the_body_does_not():
    body = json.dumps({"messages": CHAT_BODY["messages"]})
    assert parse_request(body, path=TAIL_PATHS[1][0]).model == "gpt-4o-prod"
    assert parse_request(json.dumps(CHAT_BODY), path=TAIL_PATHS[1][0]).model == "glm-4.6"


@pytest.mark.parametrize("body", [{"text": "lunch at noon?", "author": 7}, {"messages": []}, {"messages": "hi"},
                                  {"messages": [{"role": "user", "content": "hi"}]}, [1, 2]])
def test_a_tail_alone_is_no_proof(body):
    """An app's own /messages endpoint (no max_tokens, nothing only Anthropic sends) is not read as one."""
    with pytest.raises(NotARequest,
                       match=r"POST /api/rooms/\{id\}/messages ends like anthropic, but its body is not one"):
        detect_api(body, "/api/rooms/7f3a9c2e11/messages")


def test_a_gemini_interaction_is_read_as_one_not_as_a_responses_request():
    """Gemini's Interactions API (generally available since June 2026) carries an `input` as Responses does
    (tidyverse/ellmer's recording of gemini-3.7-flash, its second request): it was parsed as a Responses
    request, with a read predicted above its whole prompt and no usage understood. Its path or its own fields
    name it; its parts are its tools, its system instruction, then its steps, a thought's signature no text."""
    body = {"model": "gemini-3.7-flash", "store": False, "stream": False,
            "system_instruction": "Always use a tool to answer. Reply with 'It is ____.'.",
            "input": [{"type": "user_input", "content": [{"type": "text", "text": "What's the current date?"}]},
                      {"type": "thought", "signature": "EpoDCpcDAWkUfRPIM0X8Lo4AdsSLqSle" * 12},
                      {"type": "function_call", "id": "call_1205409", "name": "current_date", "arguments": {}},
                      {"type": "function_result", "call_id": "call_1205409", "name": "current_date",
                       "result": "2024-01-01", "is_error": False}],
            "tools": [{"type": "function", "name": "current_date", "description": "Return the current date"}],
            "generation_config": {"temperature": 0, "seed": 1014}}
    for path in (None, "/v1beta/interactions"):
        assert detect_api(body, path) == "gemini-interactions"
    assert detect_api({"model": "gemini-3.7-flash", "input": [{"type": "user_input", "content": "hi"}]}) == \
        "gemini-interactions"
    assert analysable("POST", "/v1beta/interactions") and analysable("POST", "/v1/interactions")
    prompt = parse_request(json.dumps(body), path="/v1beta/interactions")
    assert (prompt.api, prompt.model) == ("gemini-interactions", "gemini-3.7-flash")
    assert [(s.level, s.kind) for s in prompt.segments] == [
        ("tools", "tool"), ("system", "text"), ("messages", "text"), ("messages", "thinking"),
        ("messages", "tool_use"), ("messages", "tool_result")]
    thought = prompt.segments[3]
    assert thought.tokens < 10  # its 384-character signature is no text
    later = {**body, "previous_interaction_id": "v1_ChdWd0F"}
    assert [s.kind for s in parse_request(json.dumps(later), path="/v1beta/interactions").segments][2] == \
        "stored_context"
    # a Responses request keeps its shape
    assert detect_api({"model": "gpt-5", "input": [{"role": "user", "content": "hi"}], "instructions": "x"}) == \
        "openai-responses"


def test_paths_of_no_shape_are_not_analysable_and_templates_hide_ids_and_queries():
    for path in ("/v1/embeddings", "/v1/models", "/v1/messages/count_tokens", "/v1/messages/batches", "/health"):
        assert not analysable("POST", path)
    assert routes.template("/v1/embeddings?key=AIzaSy-secret") == "/v1/embeddings"
    assert routes.template("/openai/deployments/prod-east/chat/completions?api-version=1") == \
        "/openai/deployments/{deployment}/chat/completions"
    assert routes.template("/v1/0123456789abcdef0123456789abcdef/gw/anthropic/v1/messages") == \
        "/v1/{id}/gw/anthropic/v1/messages"
    assert routes.template("/v1/files/file-Abc123XyZ789/content") == "/v1/files/{file}/content"
    assert routes.template("/key/sk-ant-api03-abc123def456/v1/x") == "/key/{id}/v1/x"
    assert routes.template("/v1beta/models/gemini-2.5-flash:generateContent") == \
        "/v1beta/models/{model}:generateContent"
    assert routes.template("/upload/v1beta/fileSearchStores/store-q7prdj5dqu8p:uploadToFileSearchStore") == \
        "/upload/v1beta/fileSearchStores/{id}:uploadToFileSearchStore"


BAD_INPUTS = [
    (b"", "empty"),
    (b"   \n", "empty"),
    (b"{not json", "not valid JSON"),
    (b'{"messages": []} trailing', "not valid JSON"),
    (b"[1, 2]", "must be a JSON object"),
    (b'"just a string"', "must be a JSON object"),
    (b'{"prompt": "hi"}', "unknown API shape"),
    (b'{"model": "claude-x", "system": "s", "messages": {"role": "user"}}', "'messages' must be a list"),
    (b'{"model": "gpt-4o", "messages": ["hi"]}', "/messages/0 must be an object"),
    (b'{"model": 5, "messages": []}', "'model' must be a string"),
    (b'{"model": "claude-x", "system": "s", "messages": [{"role": "user", "content": [{"text": "hi"}]}]}',
     "/messages/0/content/0 must be an object with a 'type'"),
    (b'{"model": "gpt-5", "input": 7}', "'input' must be a string or a list"),
    (b'\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe', "not UTF-8"),
    (b'{"messages": [], "x": "\x00"}', "binary"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b'{"model": "gpt-4o", "messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
]


@pytest.mark.parametrize(("raw", "problem"), BAD_INPUTS)
def test_bad_input_is_one_line_input_error(raw, problem):
    with pytest.raises(InputError) as err:
        parse_request(raw, source="req.json")
    message = str(err.value)
    assert message.startswith("req.json: ") and problem in message
    assert "\n" not in message


def test_size_limit():
    body = json.dumps(anthropic([{"role": "user", "content": "x" * 5000}]))
    assert parse_request(body, max_bytes=10_000).segments
    for form in (body, body.encode()):
        with pytest.raises(InputError, match="limit"):
            parse_request(form, max_bytes=1000)
    wide = json.dumps(anthropic([{"role": "user", "content": "é" * 600}]), ensure_ascii=False)
    assert len(wide) < 1000 < len(wide.encode())  # the limit counts bytes, not characters
    with pytest.raises(InputError, match="limit"):
        parse_request(wide, max_bytes=1000)


# ---- chain property: a request that extends another shares its whole chain

text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
parts = st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": text}), min_size=1, max_size=3)
block = st.one_of(text, parts)
turns = st.lists(st.tuples(st.sampled_from(["user", "assistant"]), block), min_size=1, max_size=6)


def as_request(api: str, history: list) -> dict:
    if api == "anthropic":
        return anthropic([{"role": r, "content": c} for r, c in history], system="sys")
    if api == "openai-chat":
        return {"model": "gpt-4o", "messages": [{"role": "system", "content": "sys"}]
                + [{"role": r, "content": c} for r, c in history]}
    items = [{"role": r, "content": c if isinstance(c, str) else [{"type": "input_text", "text": p["text"]} for p in c]}
             for r, c in history]
    return {"model": "gpt-5", "instructions": "sys", "input": items}


@settings(max_examples=60, deadline=None)
@given(api=st.sampled_from(["anthropic", "openai-chat", "openai-responses"]), history=turns,
       cut=st.integers(min_value=0, max_value=6), indent=st.sampled_from([None, 1]))
def test_prefix_of_a_request_shares_the_prefix_of_its_chain(api, history, cut, indent):
    cut = min(cut, len(history))
    full = parse_request(json.dumps(as_request(api, history), indent=indent), count_tokens=False)
    head = parse_request(json.dumps(as_request(api, history[:cut])), count_tokens=False)
    assert full.api == head.api == api
    assert full.chain[:len(head.chain)] == head.chain
    # and nothing past the shared messages: the next segment starts a message the head lacks
    shared = cut + (api == "openai-chat")  # Chat sends the system prompt as message 0
    assert len(head.chain) == sum(1 for s in full.segments if s.message_index is None or s.message_index < shared)


@pytest.mark.parametrize("doc", [
    {"model": "claude-x", "system": None, "tools": None, "messages": [{"role": "user", "content": "hi"}]},
    {"model": "gpt-4o", "tools": None, "response_format": None, "messages": [{"role": "user", "content": "hi"}]},
    {"model": "gpt-5", "instructions": None, "text": None, "tools": None, "input": "hi"},
])
def test_null_optional_fields_count_as_absent(doc):
    present = {k: v for k, v in doc.items() if v is not None}
    assert chain_of(doc) == chain_of(present) and len(chain_of(doc)) == 1


# ---- the span scanner agrees with json.loads on any document

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(["a", "b", "[]", "é"]), inner,
                                                                 max_size=4),
    max_leaves=20)
walk_all: dict = {}
walk_all.update({"a": walk_all, "b": walk_all, "[]": walk_all, "é": walk_all})  # descend everywhere


@settings(max_examples=200, deadline=None)
@given(doc=json_values, indent=st.sampled_from([None, 0, 2]), ascii_only=st.booleans())
def test_span_scanner_matches_json_loads(doc, indent, ascii_only):
    raw = json.dumps(doc, indent=indent, ensure_ascii=ascii_only)
    root = jsonspan.parse(f" \n{raw}\t", walk_all)
    assert root.value == json.loads(raw)
    stack = [root]
    while stack:
        node = stack.pop()
        assert json.loads(f" \n{raw}\t"[node.start:node.end]) == node.value
        kids = node.kids.values() if isinstance(node.kids, dict) else node.kids or ()
        stack.extend(kids)


@settings(max_examples=200, deadline=None)
@given(doc=json_values, cut=st.integers(0, 200), junk=st.sampled_from(["", ",", "}", "]", ":", "x", '"']))
def test_span_scanner_rejects_what_json_loads_rejects(doc, cut, junk):
    raw = json.dumps(doc, indent=1)
    broken = raw[:cut] + junk
    try:
        expected = json.loads(broken)
    except json.JSONDecodeError:
        with pytest.raises(json.JSONDecodeError):
            jsonspan.parse(broken, walk_all)
    else:
        assert jsonspan.parse(broken, walk_all).value == expected
