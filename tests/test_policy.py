"""Cache policies on real request shapes (parsed by the wire adapters) and on recorded requests."""
from __future__ import annotations

import json
from itertools import accumulate
from pathlib import Path
from typing import Any

import pytest

from prefixguard.contracts.providers import model_contract, providers
from prefixguard.judge.policies import make_policy, policy_name
from prefixguard.model import tokens
from prefixguard.model.prompt import Prompt
from prefixguard.wire import parse_request

ANTHROPIC = providers()["anthropic"]
OPENAI = providers()["openai"]
TTL_5M, TTL_1H = ANTHROPIC.ttl_seconds["5m"], ANTHROPIC.ttl_seconds["1h"]


def text(n: int, seed: str = "a") -> str:
    """About n tokens of text that differs by seed."""
    return " ".join(f"{seed}{i}" for i in range(n // 2))


def mark(ttl: str | None = None) -> dict[str, Any]:
    return {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}


def anthropic_body(turns: int = 1, *, model: str = "claude-sonnet-4-5", system: int = 3000, bp_system: bool = False,
                   bp_last: bool = True, auto: bool = False, ttl: str | None = None, **extra: Any) -> Prompt:
    sys_block: dict[str, Any] = {"type": "text", "text": text(system, "s")}
    if bp_system:
        sys_block["cache_control"] = mark(ttl)
    messages = []
    for t in range(turns):
        messages.append({"role": "user", "content": [{"type": "text", "text": f"question {t}"}]})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": f"answer {t}"}]})
    messages.append({"role": "user", "content": [{"type": "text", "text": "last question"}]})
    if bp_last:
        messages[-1]["content"][-1]["cache_control"] = mark(ttl)
    body = {"model": model, "max_tokens": 10, "system": [sys_block], "messages": messages, **extra}
    if auto:
        body["cache_control"] = mark(ttl)
    return parse_request(json.dumps(body), path="/v1/messages")


def cum(p: Prompt) -> list[int]:
    return list(accumulate(s.tokens for s in p.segments))


# ---- anthropic

def test_anthropic_write_then_read_within_ttl_and_expiry() -> None:
    pol = make_policy("anthropic")
    p = anthropic_body()
    first = pol.commit(p, 0.0, "t")
    assert (first.cache_read, first.cache_write, first.reason) == (0, p.total_tokens, "cold")
    assert first.write_by_ttl == {"5m": p.total_tokens}
    assert pol.lookup(p, TTL_5M - 1, "t").reason == "hit"
    assert pol.lookup(p, TTL_5M - 1, "t").cache_read == p.total_tokens
    assert pol.lookup(p, TTL_5M + 1, "t").reason == "ttl_expired"


def test_anthropic_read_refreshes_ttl_and_lookup_changes_nothing() -> None:
    pol = make_policy("anthropic")
    p = anthropic_body()
    pol.commit(p, 0.0)
    pol.lookup(p, 200.0)                     # a lookup is no read
    assert pol.lookup(p, TTL_5M + 50).reason == "ttl_expired"
    pol.commit(p, 200.0)                     # a read refreshes the entry from its own start
    assert pol.lookup(p, TTL_5M + 150).reason == "hit"


def test_anthropic_one_hour_ttl() -> None:
    pol = make_policy("anthropic")
    p = anthropic_body(ttl="1h")
    assert pol.commit(p, 0.0).write_by_ttl == {"1h": p.total_tokens}
    assert pol.lookup(p, TTL_1H - 1).reason == "hit"
    assert pol.lookup(p, TTL_1H + 1).reason == "ttl_expired"


def test_anthropic_automatic_breakpoint_on_the_last_block() -> None:
    pol = make_policy("anthropic")
    p = anthropic_body(bp_last=False, auto=True)
    assert pol.commit(p, 0.0).cache_write == p.total_tokens
    longer = parse_request(json.dumps({**json.loads(p.text), "messages": json.loads(p.text)["messages"] + [
        {"role": "assistant", "content": [{"type": "text", "text": "an answer"}]},
        {"role": "user", "content": [{"type": "text", "text": "a follow-up"}]}]}), path="/v1/messages")
    got = pol.lookup(longer, 1.0)
    assert (got.reason, got.cache_read) == ("hit", p.total_tokens)
    assert got.cache_write == longer.total_tokens - p.total_tokens


def test_anthropic_no_breakpoint_and_minimum_per_model() -> None:
    pol = make_policy("anthropic")
    assert pol.lookup(anthropic_body(bp_last=False), 0.0).reason == "no_breakpoint"
    small = anthropic_body(system=800, model="claude-haiku-4-5")
    big_min = model_contract("anthropic", "claude-haiku-4-5").min_cacheable_tokens
    assert small.total_tokens < big_min
    assert pol.commit(small, 0.0).reason == "below_minimum"
    assert pol.lookup(small, 1.0).cache_read == 0
    # the same prompt clears a smaller model minimum
    opus = anthropic_body(system=800, model="claude-opus-5")
    assert opus.total_tokens >= model_contract("anthropic", "claude-opus-5").min_cacheable_tokens
    pol.commit(opus, 0.0)
    assert pol.lookup(opus, 1.0).reason == "hit"


def test_anthropic_lookback_limit() -> None:
    pol = make_policy("anthropic")
    lookback = ANTHROPIC.lookback_blocks
    base = json.loads(anthropic_body(turns=1, bp_last=True).text)
    pol.commit(parse_request(json.dumps(base), path="/v1/messages"), 0.0)
    grown = json.loads(json.dumps(base))
    del grown["messages"][-1]["content"][-1]["cache_control"]
    # one more user turn with many blocks, the breakpoint only on the last: the entry is out of reach
    blocks = [{"type": "text", "text": f"block {i}"} for i in range(lookback + 2)]
    blocks[-1]["cache_control"] = mark()
    grown["messages"] += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": blocks}]
    far = pol.lookup(parse_request(json.dumps(grown), path="/v1/messages"), 1.0)
    assert (far.cache_read, far.reason) == (0, "no_breakpoint")
    # a few blocks fewer and the same breakpoint reaches it
    near_blocks = blocks[-(lookback - 3):]
    grown["messages"][-1]["content"] = near_blocks
    near = pol.lookup(parse_request(json.dumps(grown), path="/v1/messages"), 1.0)
    assert near.reason == "hit" and near.cache_read > 0


def test_anthropic_partial_when_a_longer_entry_is_out_of_reach() -> None:
    pol = make_policy("anthropic")
    p = anthropic_body(turns=3, bp_system=True, bp_last=True)
    pol.commit(p, 0.0)
    same = json.loads(p.text)
    del same["messages"][-1]["content"][-1]["cache_control"]
    same["messages"][0]["content"][0]["cache_control"] = mark()  # a breakpoint short of the cached end
    got = pol.lookup(parse_request(json.dumps(same), path="/v1/messages"), 1.0)
    assert got.reason == "partial"
    assert got.cache_read == p.segments[0].tokens   # the system entry


def test_anthropic_setting_change_keeps_the_system_entry() -> None:
    pol = make_policy("anthropic")
    p = anthropic_body(bp_system=True)
    pol.commit(p, 0.0)
    thinking = anthropic_body(bp_system=True, thinking={"type": "enabled", "budget_tokens": 2048})
    got = pol.lookup(thinking, 1.0)
    assert got.cache_read == p.segments[0].tokens  # thinking invalidates messages, not system
    tools_changed = anthropic_body(bp_system=True, tools=[{"name": "t", "input_schema": {"type": "object"}}])
    assert pol.lookup(tools_changed, 1.0).cache_read == 0


def test_state_is_per_tenant_and_model() -> None:
    pol = make_policy("anthropic")
    p = anthropic_body()
    pol.commit(p, 0.0, "tenant-a")
    assert pol.lookup(p, 1.0, "tenant-a").reason == "hit"
    assert pol.lookup(p, 1.0, "tenant-b").reason == "cold"
    assert pol.lookup(anthropic_body(model="claude-opus-4-1"), 1.0, "tenant-a").reason == "cold"


# ---- openai and radix

def chat(n_system: int, user: str = "hi", model: str = "gpt-4o", **extra: Any) -> Prompt:
    body = {"model": model, "messages": [{"role": "system", "content": text(n_system, "s")},
                                         {"role": "user", "content": user}], **extra}
    return parse_request(json.dumps(body), path="/v1/chat/completions")


def test_openai_minimum_steps_and_retention() -> None:
    pol = make_policy("openai")
    short = chat(500)
    assert short.total_tokens < OPENAI.min_cacheable_tokens
    assert pol.commit(short, 0.0).reason == "below_minimum"
    p = chat(3000)
    assert pol.commit(p, 0.0).reason == "cold"
    other = chat(3000, user="another question")
    got = pol.lookup(other, 10.0)
    shared = p.segments[0].tokens
    step = OPENAI.token_step
    assert got.reason == "hit" and got.cache_write == 0
    assert got.cache_read % step == 0 and shared - step < got.cache_read <= shared
    assert got.uncached == other.total_tokens - got.cache_read
    retention = OPENAI.retention_seconds
    assert pol.lookup(other, retention["in_memory"] + 1).reason == "ttl_expired"
    long = chat(3000, prompt_cache_retention="24h")
    pol.commit(long, 0.0)
    assert pol.lookup(long, retention["in_memory"] * 3).reason == "hit"


def test_radix_reads_any_shared_prefix_forever() -> None:
    pol = make_policy("radix")
    p = chat(40, model="local-tiny")
    pol.commit(p, 0.0)
    got = pol.lookup(chat(40, user="else", model="local-tiny"), 1e9)
    assert (got.reason, got.cache_read) == ("hit", p.segments[0].tokens)


def test_recorded_openai_requests(shared_data: Path) -> None:
    folder = shared_data / "recorded/openllmetry/test_prompt_caching_test_openai_prompt_caching"
    pol = make_policy(policy_name("openai-chat", "gpt-4o-mini"))
    reasons = []
    for n in range(1, 5):
        p = parse_request((folder / f"{n:04d}.request.json").read_bytes(), path="/v1/chat/completions")
        e = pol.commit(p, float(n))
        reasons.append(e.reason)
        assert e.cache_read <= p.total_tokens
    assert reasons == ["cold", "hit", "hit", "hit"]


def test_policy_names() -> None:
    assert policy_name("anthropic", "claude-sonnet-4-5") == "anthropic"
    assert policy_name("openai-chat", "gpt-4o") == "openai"
    assert policy_name("openai-chat", "my-local-model") == "radix"
    with pytest.raises(ValueError, match="unknown cache policy"):
        make_policy("lru")


def test_automatic_breakpoint_walks_back_past_an_empty_text_block() -> None:
    """The API puts the automatic breakpoint on the last block that can carry one: not an empty text
    block. Policy, compare and lint share that rule (policy.breakpoints)."""
    from prefixguard.model.breakpoints import breakpoints
    body = {"model": "claude-sonnet-4-5", "max_tokens": 8, "cache_control": {"type": "ephemeral"},
            "system": text(50), "messages": [{"role": "user", "content": [
                {"type": "text", "text": text(20, "q")}, {"type": "text", "text": ""}]}]}
    p = parse_request(json.dumps(body), path="/v1/messages")
    assert breakpoints(p, providers()["anthropic"].breakpoint_ineligible_kinds) == {len(p.segments) - 2: "5m"}
    body["messages"][0]["content"][1]["text"] = " "
    p = parse_request(json.dumps(body), path="/v1/messages")
    assert breakpoints(p, providers()["anthropic"].breakpoint_ineligible_kinds) == {len(p.segments) - 1: "5m"}


def test_what_the_provider_reports_reading_is_held() -> None:
    """A first request that reads a prefix nobody we saw wrote (an earlier run, another client): the
    policy holds what the provider reported, so the next request over that prefix is judged by it."""
    first, later = anthropic_body(bp_system=True), anthropic_body(turns=2, bp_system=True)
    pol = make_policy("anthropic")
    pol.observe(first, first.segments[0].tokens, 0.0, "t")  # the provider read the system prompt
    assert pol.lookup(later, 10.0, "t").cache_read == later.segments[0].tokens
    assert make_policy("anthropic").lookup(later, 10.0, "t").cache_read == 0  # not without the report


def test_automatic_caching_reads_into_the_first_differing_part() -> None:
    """OpenAI matches tokens, not parts: two prompts whose one long message differs near its end share
    most of it (recorded: crewAI reads inside a 16,000-character user message)."""
    pol = make_policy("openai")
    body = lambda tail: {"model": "gpt-4o", "messages": [{"role": "user", "content": text(4000, "s") + tail}]}  # noqa: E731
    a, b = (parse_request(json.dumps(body(t)), path="/v1/chat/completions") for t in (" first", " second"))
    pol.commit(a, 0.0)
    got = pol.lookup(b, 1.0).cache_read
    assert got > 0.9 * a.total_tokens - OPENAI.token_step and got <= a.total_tokens


@pytest.mark.parametrize("unit", ["缓存前缀", "k9Qz"])
def test_a_read_inside_dense_text_ends_within_a_step_of_the_shared_prefix(unit: str) -> None:
    """Chinese prose and random ids tokenize at about a character a token: the shared start of a
    differing part is found to within one step, not several (Arize-ai/openinference's public gpt-4o-mini
    cassette reads 1,280 of a 2,000-character random prefix that differs at its end)."""
    pol = make_policy("openai")
    run = lambda start, stop: "".join(f"{unit}{i}" for i in range(start, stop))  # noqa: E731
    shared = run(0, 600)
    body = lambda tail: {"model": "gpt-4o", "messages": [{"role": "user", "content": shared + tail}]}  # noqa: E731
    a, b = (parse_request(json.dumps(body(t), ensure_ascii=False), path="/v1/chat/completions")
            for t in (run(600, 700), run(700, 800)))
    pol.commit(a, 0.0)
    owed = tokens.count(shared, tokens.encoding_for("gpt-4o")) // OPENAI.token_step * OPENAI.token_step
    got = pol.lookup(b, 1.0).cache_read
    assert owed >= 2048 and owed - OPENAI.token_step <= got <= owed, (got, owed)


def test_xai_reads_to_the_token_not_to_a_128_step() -> None:
    """Recorded xAI reads fall on no 128-token step (grok-4: 679, 680, 681, 833, 834; grok-3: 2; grok-3-mini:
    192, 4,800): a prompt sent again is read to where it is shared, not rounded down to 128."""
    pol = make_policy("xai")
    body = lambda tail: {"model": "grok-4", "messages": [{"role": "system", "content": text(700, "s")},  # noqa: E731
                                                         {"role": "user", "content": tail}]}
    a, b = (parse_request(json.dumps(body(t)), path="/v1/chat/completions") for t in ("first", "second"))
    pol.commit(a, 0.0)
    assert pol.lookup(b, 1.0).cache_read == a.segments[0].tokens
