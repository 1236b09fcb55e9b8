"""Issue 28 item 6: the engine answers every request it cannot parse with a 4xx in the API's own error
shape (Anthropic's `{"type": "error", "error": {...}}`, OpenAI's `{"error": {"message", "type", ...}}`),
never a 500 or a traceback, and counts it on /metrics. A fuzz table of malformed bodies through the real
server on loopback (tiny model), on each endpoint."""
from __future__ import annotations

import json
import random
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from prefixguard.engine.llm_engine import LLMEngine
from prefixguard.engine.server import create_app, serve_in_thread

BIG_INT = "9" * 5000      # over Python's 4,300-digit limit for int <-> str
DEEP = 5_000              # nesting deeper than the recursion limit (1,000)

ANTHROPIC = {"model": "claude-sonnet-4-5", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}
CHAT = {"model": "gpt-4o", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}
RESPONSES = {"model": "gpt-4o", "max_output_tokens": 4, "input": "hi"}
ENDPOINTS = {"/v1/messages": ANTHROPIC, "/v1/chat/completions": CHAT, "/v1/responses": RESPONSES}


# Each API's own fields (a field another API has is ignored, as the SDKs' extra fields are)
FIELDS = {"/v1/messages": ("messages", "system", "tools", "tool_choice", "metadata", "thinking", "stop_sequences",
                           "temperature", "stream", "cache_control"),
          "/v1/chat/completions": ("messages", "tools", "tool_choice", "metadata", "stream_options", "stop", "seed",
                                   "temperature", "stream", "n", "max_completion_tokens"),
          "/v1/responses": ("input", "instructions", "tools", "tool_choice", "metadata", "reasoning", "temperature",
                            "stream", "text")}


def _malformed(path: str) -> list[bytes]:
    """Malformed bodies: broken JSON, wrong types at the top and in each of the API's fields, huge numbers
    anywhere, deep nesting, odd roles and contents."""
    valid = ENDPOINTS[path]
    listed = "input" if path == "/v1/responses" else "messages"
    dumps = lambda v: json.dumps(v).encode()  # noqa: E731
    out = [b"", b"{", b"null", b"[]", b'"x"', b"1", b"true", b"\xff\xfe\x00", b'{"model": }', b"{}" * 3,
           b'{"a": NaN}', b'{"max_tokens": Infinity}', b"[" * DEEP + b"]" * DEEP, b'{"x":' * DEEP + b"1" + b"}" * DEEP,
           BIG_INT.encode(), json.dumps(valid)[:-1].encode() + b', "x": ' + BIG_INT.encode() + b"}",
           json.dumps(valid)[:-1].encode() + b', "x": "\\ud800"}', dumps({**valid, "model": [None]}),
           dumps({**valid, "model": ""}), dumps({k: v for k, v in valid.items() if k != "model"})]
    for message in ({"role": [None], "content": "hi"}, {"role": None, "content": "hi"},
                    {"role": {"a": 1}, "content": "hi"}, {"role": "robot", "content": "hi"},
                    {"role": "user", "content": [None]},
                    {"role": "user", "content": [{"type": None}]}, {"role": "user", "content": 7},
                    {"role": "user", "content": [{"type": "text", "text": [1]}]},
                    {"role": "user", "content": [{"type": "image", "source": 7}]}, None, 5, [None]):
        out.append(dumps({**valid, listed: [message]}))
    out += [dumps({**valid, listed: {}}), dumps({**valid, listed: 5})]
    for key in FIELDS[path]:  # each field: a wrong type, a big integer, a deep list, a lone surrogate
        for bad in ("[null]", BIG_INT, "[" * 2000 + "]" * 2000, '"\\ud800"' if key != "stream" else "-1", "-1"):
            if bad == "-1" and key in ("stop", "stop_sequences", "instructions", "system", "seed"):
                bad = "{}"
            out.append(json.dumps(valid)[:-1].encode() + f', "{key}": {bad}}}'.encode())
    return out


def _mutated(valid: dict) -> list[bytes]:
    """The valid body cut short or with one character changed: malformed, or valid after all (a changed
    letter in a string); never a 500."""
    out = []
    rng = random.Random(28)
    text = json.dumps(valid)
    for _ in range(20):  # the valid body, cut or with one byte changed
        i = rng.randrange(len(text))
        out.append(text[:i].encode())
        out.append((text[:i] + rng.choice('{}[],:"\\\x00') + text[i + 1:]).encode())
    return out


@pytest.fixture(scope="module")
def server():
    app = create_app(LLMEngine("tiny", page_size=16, kv_pages=64), cache_policy="radix", default_max_tokens=4)
    with serve_in_thread(app) as url:
        yield url


def _invalid_counted(url: str) -> dict[str, float]:
    text = httpx.get(url + "/metrics").text
    return {s.labels["api"]: s.value for f in text_string_to_metric_families(text)
            for s in f.samples if s.name == "prefixguard_engine_invalid_requests_total"}


def _shape_ok(path: str, doc: object) -> bool:
    if path == "/v1/messages":
        return (isinstance(doc, dict) and doc.get("type") == "error" and isinstance(doc.get("error"), dict)
                and isinstance(doc["error"].get("type"), str) and isinstance(doc["error"].get("message"), str))
    return (isinstance(doc, dict) and isinstance(doc.get("error"), dict)
            and isinstance(doc["error"].get("message"), str)
            and isinstance(doc["error"].get("type"), str) and "param" in doc["error"])


API = {"/v1/messages": "anthropic", "/v1/chat/completions": "openai-chat", "/v1/responses": "openai-responses"}


@pytest.mark.parametrize("path", list(ENDPOINTS))
def test_every_malformed_body_is_a_4xx_in_the_api_shape_and_counted(server: str, path: str) -> None:
    malformed, mutated = _malformed(path), _mutated(ENDPOINTS[path])
    before = _invalid_counted(server).get(API[path], 0.0)
    wrong, refused = [], 0
    with httpx.Client(base_url=server, timeout=30) as client:
        for i, body in enumerate(malformed + mutated):
            r = client.post(path, content=body, headers={"content-type": "application/json"})
            must_refuse = i < len(malformed)
            if r.status_code == 200 and not must_refuse:
                continue
            if not (400 <= r.status_code < 500 and _shape_ok(path, _json(r))) or "Traceback" in r.text:
                wrong.append((body[:90], r.status_code, r.text[:160]))
            refused += 1
    assert not wrong, wrong[:6]
    assert refused >= len(malformed) + len(mutated) // 2
    assert _invalid_counted(server).get(API[path], 0.0) - before == refused  # each one counted, once


def test_count_tokens_answers_malformed_bodies_in_anthropic_shape(server: str) -> None:
    before = _invalid_counted(server).get("anthropic", 0.0)
    # count_tokens takes no generation settings: a body malformed only in one of those counts as sent
    settings = tuple(f', "{k}": '.encode() for k in ("temperature", "stream", "stop_sequences", "metadata"))
    bodies = [b for b in _malformed("/v1/messages") if not any(s in b[-6000:] for s in settings)]
    with httpx.Client(base_url=server, timeout=30) as client:
        for body in bodies:
            r = client.post("/v1/messages/count_tokens", content=body)
            assert 400 <= r.status_code < 500 and _shape_ok("/v1/messages", _json(r)), (body[:90], r.text[:160])
    assert _invalid_counted(server).get("anthropic", 0.0) - before == len(bodies)


@pytest.mark.parametrize("path", list(ENDPOINTS))
def test_a_wrong_method_answers_in_the_api_shape(server: str, path: str) -> None:
    r = httpx.get(server + path, timeout=10)
    assert r.status_code == 405 and _shape_ok(path, _json(r)), r.text


def test_a_valid_request_still_answers(server: str) -> None:
    for path, body in ENDPOINTS.items():
        r = httpx.post(server + path, json=body, timeout=60)
        assert r.status_code == 200, r.text


def _json(r: httpx.Response) -> object:
    try:
        return r.json()
    except ValueError:
        return None


def test_every_recorded_request_passes_the_checks(shared_data: Path) -> None:
    """Precision: the checks refuse nothing a provider answered (each recorded request of the three APIs,
    by its body and its recorded answer), bar the two refusals the server documents."""
    from prefixguard.engine import api_anthropic, api_openai
    from prefixguard.utils.errors import InputError

    shapes = {"anthropic": api_anthropic.Messages, "openai-chat": api_openai.Chat,
              "openai-responses": api_openai.Responses}
    checked, refused = 0, []
    for path in sorted((shared_data / "recorded").rglob("*.request.json")):
        answer = next((path.with_name(path.name.replace(".request.json", ext))
                       for ext in (".response.json", ".response.sse")
                       if path.with_name(path.name.replace(".request.json", ext)).exists()), None)
        text = answer.read_text()[:3000].replace(" ", "") if answer else ""
        try:
            body = json.loads(path.read_text())
        except ValueError:
            continue
        if not isinstance(body, dict):
            continue
        api = ("openai-responses" if isinstance(body.get("input"), (str, list))
               else "openai-chat" if '"chat.completion' in text
               else "anthropic" if "messages" in body and ('"type":"message"' in text or "message_start" in text)
               else None)
        if api is None:
            continue
        checked += 1
        try:
            shapes[api].options(body, 64)
        except InputError as err:
            if "previous_response_id" not in str(err) and "'max_tokens' is required" not in str(err):
                refused.append((path.parent.name, str(err)))
    assert checked > 400 and refused == []
