"""Ollama's own chat endpoint (/api/chat): its answer counts at the top level (prompt_eval_count, eval_count and,
where the server says it, prompt_eval_cached_count), its stream is JSON lines ending with `done: true`. Read from
magentic's recording (tests/data/public/magentic/ollama_api_chat), and through the real proxy in front of a
loopback upstream that streams those lines as Ollama does."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from helpers.proxy import Clock, tenant_rows
from helpers.upstream import Upstream

from prefixguard.proxy.addon import PrefixGuard
from prefixguard.proxy.serve import ProxyThread
from prefixguard.wire import parse_request, parse_response, parse_response_meta

PUBLIC = Path(__file__).resolve().parent / "data" / "public"
CHAT = PUBLIC / "magentic" / "ollama_api_chat"


def test_ollama_counts_are_its_usage() -> None:
    """The stream's last line counts the whole prompt (13: our count of the body to the token) and the output;
    no cache field: nothing said of reads. A server that says what it read from its cache reports it."""
    streamed = (CHAT / "0001.response.sse").read_bytes()
    usage = parse_response(streamed, "openai-chat")
    assert (usage.prompt_total, usage.output, usage.reported) == (13, 23, False)
    assert parse_request((CHAT / "0001.request.json").read_bytes(), path="/api/chat").total_tokens == 13
    meta = parse_response_meta(streamed, "openai-chat")
    assert (meta.model, meta.finish_reasons) == ("llama3.1", ("stop",))
    whole = {"model": "llama3.1", "message": {"role": "assistant", "content": "Hi"}, "done": True,
             "done_reason": "stop", "prompt_eval_count": 1500, "eval_count": 3, "prompt_eval_cached_count": 1400}
    usage = parse_response(json.dumps(whole), "openai-chat")
    assert (usage.prompt_total, usage.cache_read, usage.uncached, usage.output, usage.reported) == (
        1500, 1400, 100, 3, True)


@pytest.fixture()
def proxied(tmp_path: Path):
    db = tmp_path / "capture.db"
    addon = PrefixGuard(clock=Clock(), console=lambda line: None)
    with Upstream(PUBLIC) as up, ProxyThread([up.url], addon=addon, store=str(db)) as px:
        yield up, px, db


def test_the_proxy_passes_ollamas_lines_as_they_come_and_reads_their_counts(proxied) -> None:
    up, px, db = proxied
    body = (CHAT / "0001.request.json").read_bytes()
    headers = {"x-replay": "magentic/ollama_api_chat/0001", "x-test-id": "ollama", "x-api-key": "ollama-local-key"}
    with httpx.Client(timeout=10) as client, client.stream("POST", f"{px.url}/api/chat", content=body,
                                                            headers=headers) as r:
        assert r.headers["content-type"] == "application/x-ndjson"
        lines = list(r.iter_lines())
    recorded = (CHAT / "0001.response.sse").read_text()
    assert lines == [line for line in recorded.split("\n") if line]  # every line, unchanged
    assert json.loads(lines[-1])["done"] is True
    [row] = tenant_rows(db, "ollama-local-key", 1, timeout=30)  # the analysis runs behind the flow
    assert (row["api"], row["model"], row["path"]) == ("openai-chat", "llama3.1", "/api/chat")
    assert row["usage"]["prompt_total"] == 13 and row["usage"]["output"] == 23 and not row["usage"]["reported"]
    assert row["timings"]["ttft_s"] > 0
