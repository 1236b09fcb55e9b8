"""The server under pressure: a full queue answers 429 with retry-after (not a crash, not unbounded
memory), and a client that leaves mid-stream frees its request, its pages and its tree locks."""
from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from prefixguard.engine.llm_engine import LLMEngine
from prefixguard.engine.server import create_app, serve_in_thread

pytestmark = pytest.mark.slow

MESSAGES = [{"role": "user", "content": "Tell me a long story about ledgers."}]


def wait_until(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def test_a_full_queue_answers_429_in_each_providers_shape():
    engine = LLMEngine("tiny", page_size=1)
    app = create_app(engine, max_queue=2)
    anthropic_body = {"model": "claude-sonnet-4-5", "max_tokens": 400, "messages": MESSAGES}
    chat_body = {"model": "gpt-4o", "max_tokens": 400, "messages": MESSAGES}

    async def burst(url: str) -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=60) as client:
            calls = [client.post(url + "/v1/messages", json=anthropic_body) for _ in range(4)]
            calls += [client.post(url + "/v1/chat/completions", json=chat_body) for _ in range(4)]
            return await asyncio.gather(*calls)

    with serve_in_thread(app) as url:
        replies = asyncio.run(burst(url))
        statuses = [r.status_code for r in replies]
        assert set(statuses) == {200, 429} and statuses.count(200) >= 2
        for r in replies:
            if r.status_code == 429:
                assert float(r.headers["retry-after"]) > 0
                shape = r.json()
                if r.request.url.path == "/v1/messages":
                    assert shape["error"]["type"] == "rate_limit_error"
                else:
                    assert shape["error"]["code"] == "rate_limit_exceeded"
        assert wait_until(lambda: app.state.served.runner.in_flight == 0)
        again = httpx.post(url + "/v1/messages", json={**anthropic_body, "max_tokens": 2}, timeout=30)
        assert again.status_code == 200


def test_a_client_that_leaves_mid_stream_frees_its_request_and_locks():
    engine = LLMEngine("tiny", page_size=1)
    app = create_app(engine)
    body = {"model": "claude-sonnet-4-5", "max_tokens": 8000, "stream": True, "messages": MESSAGES}
    with serve_in_thread(app) as url:
        with httpx.stream("POST", url + "/v1/messages", json=body, timeout=30) as r:
            for line in r.iter_lines():
                if "content_block_delta" in line:
                    break                                   # leave after the first token
        runner, tree = app.state.served.runner, engine.scheduler.tree
        assert wait_until(lambda: runner.in_flight == 0 and not engine.scheduler.running)
        assert engine.stats["decode_tokens"] < 8000 - 1       # it stopped generating
        assert tree.evictable_pages == tree.total_pages       # no node still locked
        assert engine.stats["pool_pages_used"] == engine.stats["tree_pages"]   # its own pages are back


def test_a_client_that_leaves_before_a_whole_answer_frees_its_request():
    engine = LLMEngine("tiny", page_size=1)
    app = create_app(engine)
    body = {"model": "gpt-4o", "max_tokens": 8000, "messages": MESSAGES}
    with serve_in_thread(app) as url:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(url + "/v1/chat/completions", json=body, timeout=httpx.Timeout(30, read=0.5))
        runner, tree = app.state.served.runner, engine.scheduler.tree
        assert wait_until(lambda: runner.in_flight == 0 and not engine.scheduler.running)
        assert engine.stats["decode_tokens"] < 8000 - 1
        assert tree.evictable_pages == tree.total_pages
