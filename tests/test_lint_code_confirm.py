"""Confirming code findings with recorded bodies (prefixguard.lint.code.confirm): the example apps run
through the real SDKs with a prefixguard.testing.Recorder under their HTTP client (responses from a mock
transport, no network); a finding whose predicted body rule fires on what was sent is "confirmed", one
whose code path did not produce the break is "not reproduced"."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from prefixguard.lint.code.confirm import CONFIRMED, NOT_REPRODUCED, confirm
from prefixguard.testing import Recorder

APPS = Path(__file__).resolve().parents[1] / "examples" / "code" / "python"
ANTHROPIC_REPLY = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn",
                   "stop_sequence": None, "content": [{"type": "text", "text": "ok"}],
                   "usage": {"input_tokens": 1, "output_tokens": 1}}
OPENAI_REPLY = {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}


def _answer(request: httpx2.Request) -> httpx2.Response:
    return httpx2.Response(200, json=ANTHROPIC_REPLY if request.url.path.endswith("/messages") else OPENAI_REPLY)


def _app(name: str, recorder: Recorder, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    spec = importlib.util.spec_from_file_location(name.removesuffix(".py"), APPS / name)
    assert spec is not None and spec.loader is not None
    module: Any = importlib.util.module_from_spec(spec)   # an example app: its client is replaced
    spec.loader.exec_module(module)
    http = recorder.http_client(transport=httpx2.MockTransport(_answer))
    sdk = anthropic.Anthropic if isinstance(module.client, anthropic.Anthropic) else openai.OpenAI
    module.client = sdk(api_key="test", base_url="http://llm.test", max_retries=0, http_client=http)
    return module


def test_a_timestamp_in_the_system_prompt_is_confirmed(monkeypatch: pytest.MonkeyPatch):
    recorder = Recorder()
    app = _app("timestamp_in_system.py", recorder, monkeypatch)
    app.answer("Where is my order?")
    app.answer("And my refund?")
    [c] = confirm(recorder, [str(APPS / "timestamp_in_system.py")])
    assert (c.finding.code, c.status) == ("PG601", CONFIRMED), c.evidence
    assert c.evidence.startswith("request 1: PG101 ")


def test_unsorted_json_is_confirmed_when_the_keys_came_in_another_order(monkeypatch: pytest.MonkeyPatch):
    recorder = Recorder()
    app = _app("json_dumps_in_system.py", recorder, monkeypatch)
    app.answer({"name": "Ada", "city": "Paris"}, "A table for two?")
    app.answer({"city": "Paris", "name": "Ada"}, "And for three?")
    [c] = confirm(recorder, [str(APPS / "json_dumps_in_system.py")])
    assert (c.finding.code, c.status) == ("PG603", CONFIRMED), c.evidence


def test_a_set_of_one_tool_does_not_reproduce_the_order_break(monkeypatch: pytest.MonkeyPatch):
    recorder = Recorder()
    app = _app("tools_from_set.py", recorder, monkeypatch)
    app.run({"get_weather"}, "Rain today?")
    app.run({"get_weather"}, "And tomorrow?")
    [c] = confirm(recorder, [str(APPS / "tools_from_set.py")])
    assert (c.finding.code, c.status) == ("PG602", NOT_REPRODUCED)
    assert "PG201 did not fire on 2 recorded requests" in c.evidence
    assert [json.loads(r.body)["tools"][0]["function"]["name"] for r in recorder.requests] == ["get_weather"] * 2


def test_nothing_recorded_is_not_reproduced():
    [c] = confirm(Recorder(), [str(APPS / "uuid_on_breakpoint.py")])
    assert (c.finding.code, c.status, c.evidence) == ("PG604", NOT_REPRODUCED, "no request was recorded")
