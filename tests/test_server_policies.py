"""--cache-policy anthropic and openai: the server reproduces each provider's documented contract on
crafted request sequences (breakpoints, minimum, lookback, TTL class; 1024 minimum and 128-token steps),
with the engine's radix tree holding more than the contract lets a request read."""
from __future__ import annotations

import json
from itertools import accumulate

import anthropic
import openai
import pytest

from prefixguard.engine import chat_template
from prefixguard.engine.llm_engine import LLMEngine
from prefixguard.engine.server import create_app, serve_in_thread
from prefixguard.contracts.providers import model_contract, providers
from prefixguard.wire import parse_request

pytestmark = pytest.mark.slow

CLAUDE = "claude-sonnet-4-5"


def long_text(tag: str, n: int = 160) -> str:
    return " ".join(f"{tag} clause {i}: keep the ledger of account {i} balanced." for i in range(n))


def cumulative(body: dict, path: str) -> tuple[list[int], int]:
    """Template tokens through each segment, and the whole prompt's length."""
    segments = parse_request(json.dumps(body), path=path).segments
    ids = chat_template.render(segments)
    return list(accumulate(s.tokens for s in segments)), len(ids)


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


CLOCK = Clock()


@pytest.fixture(scope="module")
def anthropic_server():
    engine = LLMEngine("tiny", page_size=1)
    with serve_in_thread(create_app(engine, cache_policy="anthropic", clock=CLOCK)) as url:
        yield anthropic.Anthropic(base_url=url, api_key="test", max_retries=0), engine


@pytest.fixture(scope="module")
def openai_server():
    engine = LLMEngine("tiny", page_size=1)
    with serve_in_thread(create_app(engine, cache_policy="openai")) as url:
        yield openai.OpenAI(base_url=url + "/v1", api_key="test", max_retries=0), engine


def ask(client: anthropic.Anthropic, body: dict):
    return client.messages.create(max_tokens=2, **body).usage


def test_anthropic_writes_at_the_breakpoint_then_reads_it(anthropic_server):
    client, _ = anthropic_server
    system = [{"type": "text", "text": long_text("A"), "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    body = {"model": CLAUDE, "system": system, "messages": [{"role": "user", "content": "first"}]}
    cum, total = cumulative(body, "/v1/messages")
    assert cum[0] >= model_contract("anthropic", CLAUDE).min_cacheable_tokens

    first = ask(client, body)
    assert (first.cache_read_input_tokens, first.cache_creation_input_tokens) == (0, cum[0])
    assert first.cache_creation.ephemeral_1h_input_tokens == cum[0]
    assert first.input_tokens == total - cum[0]

    body["messages"][0]["content"] = "second question"
    second = ask(client, body)
    assert (second.cache_read_input_tokens, second.cache_creation_input_tokens) == (cum[0], 0)


def test_anthropic_entries_expire_after_their_ttl_and_hits_refresh_it(anthropic_server):
    client, engine = anthropic_server
    ttl = providers()["anthropic"].ttl_seconds["5m"]
    system = [{"type": "text", "text": long_text("T"), "cache_control": {"type": "ephemeral"}}]
    body = {"model": CLAUDE, "system": system, "messages": [{"role": "user", "content": "hi"}]}
    cum, _ = cumulative(body, "/v1/messages")
    assert ask(client, body).cache_creation_input_tokens == cum[0]
    CLOCK.now += ttl - 10
    assert ask(client, body).cache_read_input_tokens == cum[0]        # a hit refreshes the TTL ...
    CLOCK.now += ttl - 10
    assert ask(client, body).cache_read_input_tokens == cum[0]        # ... so this one still reads
    CLOCK.now += ttl + 1
    ids = chat_template.render(parse_request(json.dumps(body), path="/v1/messages").segments)
    assert engine.cached_prefix_len(ids) > cum[0]                     # the tree still holds it, but
    expired = ask(client, body)                                       # the contract's entry is gone
    assert (expired.cache_read_input_tokens, expired.cache_creation_input_tokens) == (0, cum[0])


def test_anthropic_max_tokens_zero_prewarms_the_cache(anthropic_server):
    client, _ = anthropic_server
    system = [{"type": "text", "text": long_text("W"), "cache_control": {"type": "ephemeral"}}]
    body = {"model": CLAUDE, "system": system, "messages": [{"role": "user", "content": "warm"}]}
    cum, _ = cumulative(body, "/v1/messages")
    warm = client.messages.create(max_tokens=0, **body)
    assert warm.content == [] and warm.usage.output_tokens == 0
    assert warm.usage.cache_creation_input_tokens == cum[0]
    body["messages"][0]["content"] = "the real question"
    assert ask(client, body).cache_read_input_tokens == cum[0]


def test_anthropic_below_the_minimum_neither_reads_nor_writes(anthropic_server):
    client, _ = anthropic_server
    system = [{"type": "text", "text": long_text("B", 20), "cache_control": {"type": "ephemeral"}}]
    body = {"model": CLAUDE, "system": system, "messages": [{"role": "user", "content": "hi"}]}
    cum, total = cumulative(body, "/v1/messages")
    assert cum[0] < model_contract("anthropic", CLAUDE).min_cacheable_tokens
    for _ in range(2):
        usage = ask(client, body)
        assert (usage.cache_read_input_tokens, usage.cache_creation_input_tokens, usage.input_tokens) == (0, 0, total)


def test_anthropic_without_a_breakpoint_reads_nothing_the_tree_holds(anthropic_server):
    client, engine = anthropic_server
    body = {"model": CLAUDE, "system": long_text("C"), "messages": [{"role": "user", "content": "hi"}]}
    ask(client, body)
    _, total = cumulative(body, "/v1/messages")
    ids = chat_template.render(parse_request(json.dumps(body), path="/v1/messages").segments)
    assert engine.cached_prefix_len(ids) > 1000          # the engine has it ...
    usage = ask(client, body)
    assert usage.cache_read_input_tokens == 0 and usage.input_tokens == total   # ... the contract reads none


def test_anthropic_lookback_stops_after_twenty_blocks(anthropic_server):
    client, _ = anthropic_server
    lookback = providers()["anthropic"].lookback_blocks
    text = long_text("D")
    marked = {"type": "ephemeral"}
    ask(client, {"model": CLAUDE, "system": [{"type": "text", "text": text, "cache_control": marked}],
                 "messages": [{"role": "user", "content": "warm up"}]})

    blocks = [{"type": "text", "text": f"note {i}"} for i in range(lookback + 5)]
    blocks[-1]["cache_control"] = marked
    far = {"model": CLAUDE, "system": [{"type": "text", "text": text}],
           "messages": [{"role": "user", "content": blocks}]}
    cum, _ = cumulative(far, "/v1/messages")
    usage = ask(client, far)
    assert usage.cache_read_input_tokens == 0 and usage.cache_creation_input_tokens == cum[-1]

    far["system"][0]["cache_control"] = marked                      # a second breakpoint within reach
    far["messages"][0]["content"] = [*blocks[:-1], {"type": "text", "text": "other", "cache_control": marked}]
    cum, _ = cumulative(far, "/v1/messages")
    usage = ask(client, far)
    assert usage.cache_read_input_tokens == cum[0]
    assert usage.cache_creation_input_tokens == cum[-1] - cum[0]


def test_openai_reads_from_1024_tokens_in_128_token_steps(openai_server):
    client, engine = openai_server
    table = providers()["openai"]
    minimum, step = table.min_cacheable_tokens, table.token_step

    short = [{"role": "user", "content": long_text("E", 10)}]
    for _ in range(2):
        usage = client.chat.completions.create(model="gpt-4o", messages=short, max_tokens=2).usage
        assert usage.prompt_tokens_details.cached_tokens == 0

    messages = [{"role": "system", "content": long_text("F")}, {"role": "user", "content": "one"}]
    assert client.chat.completions.create(model="gpt-4o", messages=messages,
                                          max_tokens=2).usage.prompt_tokens_details.cached_tokens == 0
    messages[1]["content"] = "two"
    body = {"model": "gpt-4o", "messages": messages}
    cum, total = cumulative(body, "/v1/chat/completions")
    shared = cum[0]                                              # the system message is the common prefix
    ids = chat_template.render(parse_request(json.dumps(body), path="/v1/chat/completions").segments)
    assert engine.cached_prefix_len(ids) > shared                # the tree matches into the user message
    usage = client.chat.completions.create(model="gpt-4o", messages=messages, max_tokens=2).usage
    assert usage.prompt_tokens == total
    assert usage.prompt_tokens_details.cached_tokens == shared - (shared - minimum) % step


def test_openai_responses_report_the_same_contract(openai_server):
    client, _ = openai_server
    table = providers()["openai"]
    body = {"model": "gpt-4o", "instructions": long_text("G"), "input": "one", "max_output_tokens": 2}
    assert client.responses.create(**body).usage.input_tokens_details.cached_tokens == 0
    body["input"] = "two"
    cum, _ = cumulative(body, "/v1/responses")
    usage = client.responses.create(**body).usage
    minimum, step = table.min_cacheable_tokens, table.token_step
    assert usage.input_tokens_details.cached_tokens == cum[0] - (cum[0] - minimum) % step
