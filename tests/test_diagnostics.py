"""Providers' own cache-miss diagnostics beside ours: the wire reads them (Anthropic
diagnostics.cache_miss_reason, OpenAI Responses prompt_cache_diagnostics; JSON and streams, shapes from
the providers' API references), the engine server emits them under its provider policies, and through
the real proxy the console line, the capture row and the report's agreement table set them beside ours."""
from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest
from helpers.cli import CliRunner

from prefixguard.capture.store import open_store
from prefixguard.cli import main
from prefixguard.judge.agreement import agreement
from prefixguard.model.diagnosis import Diagnosis
from prefixguard.proxy.addon import PrefixGuard
from prefixguard.proxy.serve import ProxyThread
from prefixguard.wire import UsageStream, parse_diagnosis


def sse(*events: dict) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


@pytest.mark.parametrize("reason,expected", [
    ({"type": "system_changed", "cache_missed_input_tokens": 1234},
     Diagnosis(status="miss", level="system", label="system_changed", missed_tokens=1234)),
    ({"type": "tools_changed", "cache_missed_input_tokens": 5}, Diagnosis("miss", "tools", "tools_changed", 5)),
    ({"type": "model_changed", "cache_missed_input_tokens": 9}, Diagnosis("miss", "model", "model_changed", 9)),
    ({"type": "messages_changed", "cache_missed_input_tokens": 0},
     Diagnosis(status="miss", level="messages", label="messages_changed", missed_tokens=0)),
    ({"type": "previous_message_not_found"}, Diagnosis("not_found", None, "previous_message_not_found")),
    ({"type": "unavailable"}, Diagnosis("unavailable", None, "unavailable")),
    (None, Diagnosis("no_miss", None, "none")),  # null: no divergence found, or still pending
])
def test_anthropic_diagnostics_json_and_stream(reason, expected):
    message = {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
               "usage": {"input_tokens": 3, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
               "diagnostics": {"cache_miss_reason": reason}}
    assert parse_diagnosis(json.dumps(message), "anthropic") == expected
    stream = sse({"type": "message_start", "message": message},
                 {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}},
                 {"type": "message_stop"})
    reader = UsageStream("anthropic")
    for i in range(0, len(stream), 17):  # cut anywhere
        reader.feed(stream[i:i + 17])
    assert reader.diagnosis == expected
    del message["diagnostics"]  # not asked: nothing, not a "no miss"
    assert parse_diagnosis(json.dumps(message), "anthropic") is None


@pytest.mark.parametrize("found,status,level", [
    ({"type": "cache_miss", "cache_missed_tokens": 900, "reason": "tools_changed", "comparison_reusable_tokens": 2048},
     "miss", "tools"),
    ({"type": "cache_miss", "cache_missed_tokens": 12, "reason": "input_changed"}, "miss", "messages"),
    ({"type": "cache_hit"}, "no_miss", None),
    ({"type": "comparison_response_not_found"}, "not_found", None),
    ({"type": "unavailable"}, "unavailable", None),
])
def test_openai_responses_diagnostics(found, status, level):
    response = {"id": "resp_1", "object": "response", "status": "completed", "output": [],
                "usage": {"input_tokens": 3000, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 2},
                "prompt_cache_diagnostics": found}
    got = parse_diagnosis(json.dumps(response), "openai-responses")
    assert (got.status, got.level, got.missed_tokens) == (status, level, found.get("cache_missed_tokens"))
    assert got.reusable_tokens == found.get("comparison_reusable_tokens")
    stream = sse({"type": "response.output_text.delta", "delta": "ok"},
                 {"type": "response.completed", "response": response})
    assert parse_diagnosis(stream, "openai-responses") == got


def test_agreement_rules():
    from prefixguard.judge.compare import compare
    from prefixguard.wire import parse_request
    base = {"model": "claude-sonnet-4-5", "max_tokens": 5, "system": [{"type": "text", "text": "Rules. " * 400}],
            "messages": [{"role": "user", "content": "hi"}]}
    later = {**base, "system": [{"type": "text", "text": "Rules! " * 400}]}
    cmp = compare(parse_request(json.dumps(base)), parse_request(json.dumps(later)))
    assert agreement(Diagnosis("miss", "system", "system_changed", 10), cmp) == "agree"
    assert agreement(Diagnosis("miss", "tools", "tools_changed", 10), cmp) == "disagree"
    assert agreement(Diagnosis("no_miss"), cmp) == "only_us"
    assert agreement(Diagnosis("miss", "messages", "messages_changed", 1), None) == "only_provider"
    assert agreement(Diagnosis("not_found"), cmp) is None and agreement(None, cmp) is None


# ---- end to end: the engine under the anthropic policy, the real proxy, the report

def rows(db: Path, n: int, timeout: float = 30.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        found = []
        with contextlib.suppress(Exception):
            with open_store(db) as store:
                found = list(store.rows())
        if len(found) >= n or time.monotonic() > deadline:
            return found
        time.sleep(0.05)



SYSTEM = " ".join(f"Policy clause {i}: reconcile ledger {i} nightly." for i in range(220))


@contextlib.contextmanager
def engine_behind_proxy(tmp_path: Path, key: str,
                        **proxy: Any) -> Iterator[tuple[anthropic.Anthropic, list[str], Path]]:
    """The engine (Anthropic's policy, so it answers diagnostics) behind the proxy: (an SDK client with
    this key, the proxy's console lines, its capture store)."""
    from prefixguard.engine.llm_engine import LLMEngine
    from prefixguard.engine.server import create_app, serve_in_thread

    lines: list[str] = []
    db = tmp_path / "capture.db"
    with serve_in_thread(create_app(LLMEngine("tiny", page_size=1), cache_policy="anthropic")) as url:
        with ProxyThread([url], addon=PrefixGuard(console=lines.append), store=str(db), **proxy) as px:
            yield anthropic.Anthropic(base_url=px.url, api_key=key, max_retries=0), lines, db


@pytest.mark.slow
def test_engine_diagnostics_through_the_proxy_agree(tmp_path: Path):
    system = SYSTEM
    with engine_behind_proxy(tmp_path, "sk-ant-test-diagnostics") as (client, lines, db):
        def ask(sys_text: str, text: str, previous: str | None) -> dict:
            extra = {"diagnostics": {"previous_message_id": previous}} if previous else {}
            raw = client.messages.with_raw_response.create(
                model="claude-sonnet-4-5", max_tokens=4, extra_body=extra,
                system=[{"type": "text", "text": sys_text, "cache_control": {"type": "ephemeral"}}],
                messages=[{"role": "user", "content": text}])
            return json.loads(raw.http_response.content)

        first = ask(system, "Summarize clause 3.", None)
        same = ask(system, "Summarize clause 3.", first["id"])      # nothing changed: no miss
        changed = ask(system.replace("clause 7:", "clause 7 (amended):"), "Summarize clause 3.", same["id"])
        unknown = ask(system, "Summarize clause 4.", "msg_never_seen")
        assert "diagnostics" not in first
        assert same["diagnostics"] == {"cache_miss_reason": None}
        assert changed["diagnostics"]["cache_miss_reason"]["type"] == "system_changed"
        assert changed["diagnostics"]["cache_miss_reason"]["cache_missed_input_tokens"] > 0
        assert unknown["diagnostics"]["cache_miss_reason"] == {"type": "previous_message_not_found"}
        stored = rows(db, 4)
    assert len(stored) == 4
    by_id = [r["diagnosis"] for r in stored]
    assert by_id[0] is None and by_id[1]["agreement"] == "both_clear" and by_id[3]["agreement"] is None
    assert by_id[2]["label"] == "system_changed" and by_id[2]["agreement"] == "agree"
    line = next(ln for ln in lines if "provider says: system_changed" in ln)
    assert "| prefixguard: " in line and "at /system/0 -- agree" in line
    # the report's agreement table
    res = CliRunner().invoke(main, ["report", str(db), "--format", "json"])
    assert res.exit_code == 0, res.output
    table = json.loads(res.output)["fields"]["agreement"]
    assert table["compared"] == 2 and table["agreed"] == 2 and table["both_clear"] == 1 and table["disagreements"] == []
    assert any(c["both"] == 1 and c["agree"] == 1 for c in table["causes"])
    text = CliRunner().invoke(main, ["report", str(db)]).output
    assert "provider diagnostics" in text and "only the provider" in text


@pytest.mark.slow
def test_engine_responses_diagnostics(tmp_path: Path):
    from prefixguard.engine.llm_engine import LLMEngine
    from prefixguard.engine.server import create_app, serve_in_thread

    instructions = " ".join(f"Rule {i}: answer in one word." for i in range(260))
    with serve_in_thread(create_app(LLMEngine("tiny", page_size=1), cache_policy="openai")) as url:
        def ask(body: dict) -> dict:
            return httpx.post(f"{url}/v1/responses", json=body, timeout=60).json()
        first = ask({"model": "gpt-5.6", "instructions": instructions, "input": "ok?", "max_output_tokens": 2})
        tools = [{"type": "function", "name": "get_date", "parameters": {"type": "object", "properties": {}}}]
        second = ask({"model": "gpt-5.6", "instructions": instructions, "input": "ok?", "max_output_tokens": 2,
                      "tools": tools, "prompt_cache_options": {"comparison_response_id": first["id"]}})
    assert "prompt_cache_diagnostics" not in first
    got = parse_diagnosis(json.dumps(second), "openai-responses")
    assert got.status == "miss" and got.level == "tools" and got.missed_tokens > 0


@pytest.mark.slow
def test_opt_in_adds_the_asking_member_and_nothing_else(shared_data: Path, tmp_path: Path):
    """--ask-diagnostics: the second request of a tenant reaches the upstream as the app sent it plus one
    member after the opening brace; without the flag (the other proxy tests) every byte passes."""
    import hashlib

    from helpers.upstream import Upstream

    legacy = "openllmetry/test_prompt_caching_test_anthropic_prompt_caching_legacy"
    raw = (shared_data / "recorded" / legacy / "0001.request.json").read_bytes()
    answer = json.loads((shared_data / "recorded" / legacy / "0001.response.json").read_bytes())
    headers = {"x-api-key": "sk-ant-api03-optin-test", "content-type": "application/json"}
    with Upstream(shared_data / "recorded") as up:
        with ProxyThread([up.url], addon=PrefixGuard(console=lambda _: None), store=str(tmp_path / "c.db"),
                         diagnostics=True) as px:
            for n in (1, 2):
                r = httpx.post(f"{px.url}/v1/messages", content=raw, headers={**headers, "x-test-id": f"optin-{n}"},
                               timeout=30)
                assert r.status_code == 200
    member = b'"diagnostics":{"previous_message_id":"' + answer["id"].encode() + b'"},'
    start = raw.index(b"{") + 1
    assert up.seen["optin-1"]["request_sha"] == hashlib.sha256(raw).hexdigest()  # nothing to name yet
    assert up.seen["optin-2"]["request_sha"] == hashlib.sha256(raw[:start] + member + raw[start:]).hexdigest()


@pytest.mark.slow
def test_opt_in_against_the_engine_agrees(tmp_path: Path):
    system = SYSTEM
    with engine_behind_proxy(tmp_path, "sk-ant-test-optin", diagnostics=True) as (client, lines, db):
        for text in (system, system.replace("clause 9:", "clause 9 (new):")):  # the app asks for nothing
            client.messages.create(model="claude-sonnet-4-5", max_tokens=4,
                                   messages=[{"role": "user", "content": "Hi"}],
                                   system=[{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}])
        stored = rows(db, 2)
    assert stored[0]["diagnosis"] is None
    assert stored[1]["diagnosis"]["label"] == "system_changed" and stored[1]["diagnosis"]["agreement"] == "agree"
    assert any("provider says: system_changed" in ln and ln.endswith("-- agree") for ln in lines)
