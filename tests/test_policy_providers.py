"""The contracts added with Bedrock and Gemini, and OpenAI's explicit mode, as policies: data from
rules/providers.toml, judged on parsed requests."""
from __future__ import annotations

import json

from prefixguard.contracts import model_contract, providers
from prefixguard.policy import make_policy, policy_name
from prefixguard.wire import parse_request

SYSTEM = "Ledger policy: reconcile every account nightly. " * 220


def responses(user: str, *, mode: str | None, system_point: bool) -> dict:
    developer = {"type": "input_text", "text": SYSTEM}
    if system_point:
        developer["prompt_cache_breakpoint"] = {}
    body = {"model": "gpt-5.6", "input": [
        {"role": "developer", "content": [developer]},
        {"role": "user", "content": [{"type": "input_text", "text": user, "prompt_cache_breakpoint": {}}]}]}
    if mode:
        body["prompt_cache_options"] = {"mode": mode}
    return body


def test_explicit_mode_reads_only_exactly_at_a_breakpoint():
    rules = providers()["openai"]["breakpoint_caching"]
    policy = make_policy("openai")
    first = parse_request(json.dumps(responses("What failed last night? " * 5, mode="explicit", system_point=True)))
    assert policy.commit(first, 0.0).reason == "cold"
    later = parse_request(json.dumps(responses("And the night before? " * 5, mode="explicit", system_point=True)))
    got = policy.lookup(later, 60.0)
    assert got.reason == "hit" and got.cache_read == later.segments[0].tokens  # at the system breakpoint
    # no breakpoint where the shared prefix ends: no fallback to it (the implicit mode reads it)
    moved = parse_request(json.dumps(responses("And the night before? " * 5, mode="explicit", system_point=False)))
    assert policy.lookup(moved, 60.0).cache_read == 0
    # GPT-5.6's implicit (default) mode has no fallback either: a marked part is a breakpoint there too, an
    # unmarked shared prefix is none
    implicit = make_policy("openai")
    implicit.commit(parse_request(json.dumps(responses("What failed last night? " * 5, mode=None, system_point=True))), 0.0)
    assert implicit.lookup(parse_request(json.dumps(responses("x " * 5, mode=None, system_point=True))), 60.0).cache_read \
        == later.segments[0].tokens
    assert implicit.lookup(parse_request(json.dumps(responses("x " * 5, mode=None, system_point=False))), 60.0).cache_read == 0
    # the modes' own TTL
    assert policy.lookup(later, rules["ttl_seconds"][rules["default_ttl"]] + 1).reason == "ttl_expired"


def test_bedrock_converse_is_judged_by_bedrock_numbers():
    body = {"system": [{"text": SYSTEM}, {"cachePoint": {"type": "default"}}],
            "messages": [{"role": "user", "content": [{"text": "hi"}]}]}
    path = "/model/us.anthropic.claude-haiku-4-5-20251001-v1%3A0/converse"
    prompt = parse_request(json.dumps(body), path=path)
    assert policy_name(prompt.api, prompt.model) == "bedrock"
    minimum = model_contract(prompt.api, prompt.model).min_cacheable_tokens
    assert minimum == next(m["min_cacheable_tokens"] for m in providers()["bedrock"]["models"]
                           if m["prefix"] == "claude-haiku-4-5")
    policy = make_policy("bedrock")
    first = policy.commit(prompt, 0.0)
    expected = "below_minimum" if prompt.segments[0].tokens < minimum else "cold"
    assert first.reason == expected
    short = parse_request(json.dumps(body), path="/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse")
    sonnet = make_policy("bedrock")
    sonnet.commit(short, 0.0)
    assert sonnet.lookup(short, 10.0).cache_read == short.segments[0].tokens  # Sonnet's lower minimum
    assert sonnet.lookup(short, 10.0 + providers()["bedrock"]["ttl_seconds"]["5m"] + 1).reason == "ttl_expired"


def test_gemini_minimum_is_the_models():
    body = {"systemInstruction": {"parts": [{"text": SYSTEM[:7000]}]}, "contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    flash = parse_request(json.dumps(body), path="/v1beta/models/gemini-2.5-flash:generateContent")
    three = parse_request(json.dumps(body), path="/v1beta/models/gemini-3-pro-preview:generateContent")
    assert policy_name("gemini", flash.model) == "gemini"
    lo, hi = (model_contract("gemini", m).min_cacheable_tokens for m in (flash.model, three.model))
    assert lo < flash.total_tokens < hi  # the same prompt: cacheable on 2.5 Flash, below 3.x's minimum
    policy = make_policy("gemini")
    policy.commit(flash, 0.0)
    policy.commit(three, 0.0)
    assert policy.lookup(flash, 5.0).cache_read > 0
    assert policy.lookup(three, 5.0).reason == "below_minimum"
