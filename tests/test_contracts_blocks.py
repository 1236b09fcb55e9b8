"""The compatible contract's block rule against the project's own engine run with the same block (page)
size: prefixguard's prediction is exactly the cached tokens the engine reports, request by request.

The engine renders each segment on its own (engine/chat_template.py), so the token counts the policy
measures prefixes in are the engine's, and a read is whole pages of the segments both prompts share.
With one-token blocks (what `compatible` assumed before: any prefix) a short shared prefix is predicted
as a read the engine never makes."""
from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from prefixguard.contracts.providers import Compatible, compatible_settings, configure_compatible
from prefixguard.engine import chat_template
from prefixguard.judge.policies import make_policy
from prefixguard.model.prompt import Prompt
from prefixguard.wire import parse_request

SYSTEM = "You reconcile the billing ledger of a small shop. Keep every answer to one line. " * 12


@pytest.fixture
def blocks() -> Iterator[None]:
    before = compatible_settings()
    yield
    configure_compatible(before)


def rendered(messages: list[dict]) -> tuple[Prompt, list[int]]:
    body = {"model": "local-tiny", "messages": messages}
    prompt = parse_request(json.dumps(body), path="/v1/chat/completions", count_tokens=False)
    ids = chat_template.CL100K.render(prompt.segments)   # counts each segment as the engine does
    return prompt, ids


def conversation() -> list[list[dict]]:
    """An agent's requests: a short first one (under one block), a repeat of it, then a long system prompt
    and turns that each append a user message (a tool's output) to the one before, one repeated."""
    short = [{"role": "user", "content": "Hi."}]
    turns = [[{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Total for March?"}]]
    for k, note in enumerate(("Tool output: 41 invoices, 3 refunds, 2 credit notes.",
                              "Tool output: refunds total 120.50 EUR; " * 5, "Tool output: done.")):
        turns.append(turns[-1] + [{"role": "user", "content": f"{note} (step {k})"}])
    return [short, short + [{"role": "user", "content": "And April?"}], *turns, turns[-1]]


@pytest.mark.parametrize("page_size", [16, 32])
def test_block_rule_predicts_what_the_engine_caches(page_size: int, blocks: None) -> None:
    from prefixguard.engine.llm_engine import LLMEngine

    configure_compatible(Compatible(block_tokens=page_size, source="test"))
    engine = LLMEngine("tiny", page_size=page_size)
    policy = make_policy("radix")
    predicted, served = [], []
    for now, messages in enumerate(conversation()):
        prompt, ids = rendered(messages)
        predicted.append(policy.commit(prompt, float(now)).cache_read)
        seq = engine.add_request(ids, max_tokens=1)
        while not seq.finished:
            engine.step()
        served.append(seq.cached_tokens or 0)
    assert predicted == served
    assert served[1] == 0 and served[-1] > 0 and all(n % page_size == 0 for n in served)
    assert any(0 < n < p for n, p in zip(served[2:], (len(rendered(m)[1]) for m in conversation()[2:]), strict=True))


def test_one_token_blocks_promise_a_short_read_the_engine_never_makes(blocks: None) -> None:
    short, longer = conversation()[:2]
    configure_compatible(Compatible(block_tokens=1, source="test"))
    anyprefix = make_policy("radix")
    anyprefix.commit(rendered(short)[0], 0.0)
    assert anyprefix.lookup(rendered(longer)[0], 1.0).cache_read == len(rendered(short)[1]) - 1   # "Hi." read
    configure_compatible(Compatible(block_tokens=16, source="test"))
    paged = make_policy("radix")
    paged.commit(rendered(short)[0], 0.0)
    assert paged.lookup(rendered(longer)[0], 1.0).cache_read == 0


def test_a_server_without_prefix_caching_expects_no_read(blocks: None) -> None:
    configure_compatible(Compatible(prefix_caching=False, source="test"))
    policy = make_policy("radix")
    prompt = rendered(conversation()[2])[0]
    policy.commit(prompt, 0.0)
    got = policy.lookup(prompt, 1.0)
    assert (got.cache_read, got.reason) == (0, "no_prefix_caching")


def test_bad_settings_are_one_clear_error() -> None:
    from prefixguard.utils.errors import InputError

    with pytest.raises(InputError, match="block size must be at least 1"):
        configure_compatible(Compatible(block_tokens=0))
