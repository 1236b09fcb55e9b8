"""End to end: the real SDKs -> the prefixguard proxy (real mitmproxy) -> the engine server, which
caches like the providers (--cache-policy auto). The proxy's verdicts are checked against an upstream
whose cache numbers come from a real radix tree."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from helpers.proxy import tenant_rows

from prefixguard.engine.llm_engine import LLMEngine
from prefixguard.engine.server import create_app, serve_in_thread
from prefixguard.proxy.addon import PrefixGuard
from prefixguard.proxy.serve import ProxyThread

pytestmark = pytest.mark.slow

HANDBOOK = "\n".join(f"{i}. Quote the carrier status of order {i} word for word, then offer help." for i in range(90))


class Env:
    def __init__(self, url: str, db: Path, engine: LLMEngine) -> None:
        self.url, self.db, self.engine = url, db, engine
        self._n = 0

    def key(self) -> str:
        self._n += 1
        return f"sk-test-{self._n:04d}-{'x' * 20}"

    def rows(self, key: str, n: int, timeout: float = 15.0) -> list[dict[str, Any]]:
        return tenant_rows(self.db, key, n, timeout)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory):
    db = tmp_path_factory.mktemp("e2e") / "capture.db"
    engine = LLMEngine("tiny", page_size=1)
    addon = PrefixGuard(console=lambda line: None)
    with serve_in_thread(create_app(engine, cache_policy="auto")) as upstream, \
            ProxyThread([upstream], addon=addon, store=str(db)) as proxy:
        yield Env(proxy.url, db, engine)


def claude_body(system_text: str, *turns: str) -> dict[str, Any]:
    """A conversation: user, assistant, user, ... (each request appends to the one before)."""
    roles = ("user", "assistant")
    return {"model": "claude-sonnet-4-5", "max_tokens": 4,
            "system": [{"type": "text", "text": system_text, "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": roles[i % 2], "content": t} for i, t in enumerate(turns)]}


def test_stable_prefix_is_a_hit_with_the_trees_numbers(env: Env) -> None:
    key = env.key()
    client = anthropic.Anthropic(base_url=env.url, api_key=key, max_retries=0)
    reported = [client.messages.create(**claude_body(HANDBOOK, *turns)).usage
                for turns in (["Order 3?"], ["Order 3?", "Shipped.", "And order 4?"])]
    rows = env.rows(key, 2)
    assert [r["verdict"] for r in rows] == ["cold", "hit"]
    assert rows[0]["usage"]["cache_write_5m"] == reported[0].cache_creation_input_tokens > 1000
    written = reported[0].cache_creation_input_tokens
    assert rows[1]["usage"]["cache_read"] == reported[1].cache_read_input_tokens == written


def test_new_conversation_over_the_same_system_prompt_is_a_hit(env: Env) -> None:
    """B differs from A only in its newest (first) message: new content, not a cache break."""
    key = env.key()
    client = anthropic.Anthropic(base_url=env.url, api_key=key, max_retries=0)
    system = "You answer for the returns desk.\n" + HANDBOOK   # not cached by the other tests
    for question in ("Order 11?", "Where is order 12 right now?"):
        client.messages.create(**claude_body(system, question))
    rows = env.rows(key, 2)
    assert [r["verdict"] for r in rows] == ["cold", "hit"]
    assert rows[1]["cause"] is None and rows[1]["usage"]["cache_read"] == rows[0]["usage"]["cache_write_5m"] > 1000


def test_timestamped_system_prompt_is_a_volatile_miss(env: Env) -> None:
    key = env.key()
    client = anthropic.Anthropic(base_url=env.url, api_key=key, max_retries=0)
    for stamp in ("2026-12-02T16:00:00.120031", "2026-12-02T16:00:07.884512"):
        body = claude_body(f"Current time: {stamp}\n{HANDBOOK}", "Order 5?")
        with client.messages.stream(**body) as stream:
            stream.get_final_message()
    rows = env.rows(key, 2)
    assert [r["verdict"] for r in rows] == ["cold", "miss_prefix_changed"]
    assert rows[1]["cause"].startswith("volatile_content") and "/system/0" in rows[1]["cause"]
    assert rows[1]["usage"]["cache_read"] == 0 and rows[1]["timings"]["ttft_s"] is not None


def test_openai_chat_and_responses_hit_through_the_proxy(env: Env) -> None:
    key = env.key()
    client = openai.OpenAI(base_url=env.url + "/v1", api_key=key, max_retries=0)
    cached = []
    messages = [{"role": "system", "content": HANDBOOK}, {"role": "user", "content": "Order 6?"}]
    for _ in range(2):
        chunks = list(client.chat.completions.create(model="gpt-4o", max_tokens=4, messages=messages, stream=True,
                                                     stream_options={"include_usage": True}))
        cached.append(chunks[-1].usage.prompt_tokens_details.cached_tokens)
        messages += [{"role": "assistant", "content": "Shipped."}, {"role": "user", "content": "And the next?"}]
    chat_rows = env.rows(key, 2)
    assert [r["verdict"] for r in chat_rows] == ["cold", "hit"]
    assert cached[0] == 0 and chat_rows[1]["usage"]["cache_read"] == cached[1] >= 1024

    key = env.key()   # the Responses shape renders other bytes: its own conversation
    client = openai.OpenAI(base_url=env.url + "/v1", api_key=key, max_retries=0)
    turn = [{"role": "user", "content": "Order 8?"}]
    response = client.responses.create(model="gpt-4o", instructions=HANDBOOK, input=turn, max_output_tokens=4)
    turn += [{"role": "assistant", "content": "Shipped."}, {"role": "user", "content": "And order 9?"}]
    again = client.responses.create(model="gpt-4o", instructions=HANDBOOK, input=turn, max_output_tokens=4,
                                    stream=True)
    final = [e for e in again if e.type in ("response.completed", "response.incomplete")][-1]
    rows = env.rows(key, 2)
    assert [r["verdict"] for r in rows] == ["cold", "hit"]
    assert response.usage.input_tokens_details.cached_tokens == 0
    assert rows[1]["usage"]["cache_read"] == final.response.usage.input_tokens_details.cached_tokens >= 1024



def test_text_completions_through_the_proxy_with_the_trees_numbers(env: Env) -> None:
    """A text prompt (vLLM's and SGLang's /v1/completions): extended, it reads what the tree matched and the proxy
    expects it within 5%; a timestamp changed in front is a break naming it, though the tree reads the few tokens
    before the change."""
    key = env.key()
    client = openai.OpenAI(base_url=env.url + "/v1", api_key=key, max_retries=0)
    text = HANDBOOK.replace("carrier", "warehouse")  # cached by no other test
    prompts = [text, text + "\nQ: where is order 7?\nA:", "Now: 2026-12-06T17:00:01\n" + text,
               "Now: 2026-12-06T17:05:09\n" + text]
    reads = [client.completions.create(model="Qwen/Qwen3-0.6B", prompt=p, max_tokens=4).usage
             .prompt_tokens_details.cached_tokens for p in prompts]
    rows = env.rows(key, 4)
    assert [r["verdict"] for r in rows] == ["cold", "hit", "miss_prefix_changed", "miss_prefix_changed"]
    assert rows[1]["usage"]["cache_read"] == reads[1] > 1000
    assert abs(rows[1]["expected_cached"] - reads[1]) <= 0.05 * reads[1]
    assert rows[3]["cause"].startswith("volatile_content at /prompt") and 0 < reads[3] < 20

