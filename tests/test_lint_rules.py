"""Each single-request rule: a request that triggers it and a close variant that does not, for each API
shape it applies to, built from recorded requests (shared/data/recorded) and from requests written here
the way apps write them."""
from __future__ import annotations

import copy
import json

import pytest

from prefixguard.contracts.providers import model_contract, providers
from prefixguard.lint import catalog
from prefixguard.lint.linter import check_prompt
from prefixguard.lint.sequence import SequenceMode
from prefixguard.wire import parse_request

ALL = frozenset(r.code for r in catalog.rules())
STAMP = "2026-12-02T16:11:31Z"
UUID = "0f8fad5b-d9cb-469f-a165-70867728950e"
# Stable prose of a realistic length (no digits, so nothing in it looks volatile).
CLAUSE = ("Refunds are handled within thirty days of purchase when the customer shows the original receipt, "
          "and store credit is offered otherwise; escalate disputes to a human agent. ")
EPH = {"type": "ephemeral"}


def filler(tokens: int) -> str:
    return CLAUSE * (tokens // 30 + 1)   # one clause is about 30 tokens


def found(body: dict, rule: str | None = None, path: str | None = None) -> list:
    """Hits on a body (only those of `rule` when given)."""
    prompt = parse_request(json.dumps(body, indent=1), path=path)
    hits = check_prompt(prompt, ALL)
    return [h for h in hits if rule is None or h.rule == rule]


def found_in_sequence(bodies: list[dict], rule: str) -> list[list]:
    """Hits of `rule` on each body of a capture, in sequence mode (each against its session's earlier one)."""
    seq, out = SequenceMode(ALL), []
    for line, body in enumerate(bodies, start=1):
        prompt = parse_request(json.dumps(body))
        match, hits = seq.add(prompt, line)
        out.append([h for h in check_prompt(prompt, ALL, None, match) + hits if h.rule == rule])
    return out


def anthropic(system, messages, tools=None, model="claude-sonnet-4-5", **extra):
    body = {"model": model, "max_tokens": 1024, "system": system, "messages": messages, **extra}
    if tools is not None:
        body["tools"] = tools
    return body


def chat(messages, tools=None, model="gpt-4.1", **extra):
    body = {"model": model, "messages": messages, **extra}
    if tools is not None:
        body["tools"] = tools
    return body


def responses(instructions, items, tools=None, model="gpt-5", **extra):
    body = {"model": model, "instructions": instructions, "input": items, **extra}
    if tools is not None:
        body["tools"] = tools
    return body


def text(t, **mark):
    return {"type": "text", "text": t, **mark}


def user(content):
    return {"role": "user", "content": content}


def assistant(content):
    return {"role": "assistant", "content": content}


# ------------------------------------------------------------------------------------------- PG101

def test_volatile_in_prefix_anthropic():
    bad = anthropic([text("You are a support agent. " + filler(200)), text(f"Current time: {STAMP}", cache_control=EPH)],
                    [user("Where is my order?")])
    hits = found(bad, "volatile-in-prefix")
    assert [(h.pointer, h.key) for h in hits] == [("/system/1/text", "today-phrase")]
    # close variant: the time moved into the newest user message, after the cached prefix
    good = anthropic([text("You are a support agent. " + filler(200), cache_control=EPH)],
                     [user(f"Current time: {STAMP}\n\nWhere is my order?")])
    assert found(good, "volatile-in-prefix") == []
    # no breakpoint at all: nothing is cached, so nothing is volatile "in the cached prefix"
    uncached = copy.deepcopy(bad)
    del uncached["system"][1]["cache_control"]
    assert found(uncached, "volatile-in-prefix") == []


def test_volatile_in_prefix_ignores_history_written_by_tools_and_model():
    messages = [user("What time is it?"),
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01", "name": "clock", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": STAMP}]},
                assistant(f"It is {STAMP}."), user("Thanks", )]
    body = anthropic("You tell the time.", messages, cache_control=EPH)
    assert found(body, "volatile-in-prefix") == []
    # a time in a message the app wrote earlier is history, re-sent as it was: no evidence alone ...
    messages[0] = user(f"Sent at {STAMP}: what time is it?")
    assert found(body, "volatile-in-prefix") == []
    # ... unless the app re-renders it: the same message with another time than in the earlier request
    earlier = copy.deepcopy(body)
    earlier["messages"] = [user(f"Sent at {STAMP.replace(':31Z', ':02Z')}: what time is it?"), *messages[1:3]]
    hits = found_in_sequence([earlier, body], "volatile-in-prefix")
    assert [[h.pointer for h in x] for x in hits] == [[], ["/messages/0/content"]]


def test_volatile_in_prefix_openai_chat(shared_data):
    base = json.loads((shared_data / "recorded/openllmetry/test_prompt_caching_test_openai_prompt_caching"
                       "/0001.request.json").read_text())
    assert found(base, "volatile-in-prefix") == []
    bad = copy.deepcopy(base)
    bad["messages"][0]["content"] = f"request_id: {UUID}. " + bad["messages"][0]["content"]
    hits = found(bad, "volatile-in-prefix")
    assert [(h.pointer, h.key, h.inner) for h in hits] == [("/messages/0/content", "request-id", (0, 48))]
    good = copy.deepcopy(base)  # the same id in the last message is not in the prefix
    good["messages"][-1]["content"] += f" request_id: {UUID}."
    assert found(good, "volatile-in-prefix") == []
    # a bare UUID may be a constant (a tenant, a document): no evidence that it varies on its own
    bare = copy.deepcopy(base)
    bare["messages"][0]["content"] = f"Tenant {UUID}. " + bare["messages"][0]["content"]
    assert found(bare, "volatile-in-prefix") == []


def test_volatile_in_prefix_openai_responses():
    bad = responses(f"The time is now 16:11. {filler(100)}", [{"role": "user", "content": "Hi"}])
    assert [h.key for h in found(bad, "volatile-in-prefix")] == ["today-phrase"]
    # the date alone changes once a day: the rounding the rule's own fix recommends, not a finding
    daily = responses(f"Today is Wednesday, December 2. {filler(100)}", [{"role": "user", "content": "Hi"}])
    assert found(daily, "volatile-in-prefix") == []
    good = responses(filler(100), [{"role": "user", "content": "The time is now 16:11. Hi"}])
    assert found(good, "volatile-in-prefix") == []


def test_extra_volatile_patterns_from_config():
    body = chat([{"role": "system", "content": "Order ORD-12345678 is open."}, user("Status?")])
    prompt = parse_request(json.dumps(body))
    assert [h for h in check_prompt(prompt, ALL) if h.rule == "volatile-in-prefix"] == []
    hits = [h for h in check_prompt(prompt, ALL, {"order-number": r"ORD-\d{8}"}) if h.rule == "volatile-in-prefix"]
    assert [h.key for h in hits] == ["order-number"]


# ------------------------------------------------------------------------------------------- PG102

def test_breakpoint_on_volatile_anthropic():
    bad = anthropic([text("You are a coding agent. " + filler(100)), text("request_id: 9f2c41d7aa", cache_control=EPH)],
                    [user("Fix the failing test.")])
    assert [h.pointer for h in found(bad, "breakpoint-on-volatile")] == ["/system/1/text"]
    good = anthropic([text("You are a coding agent. " + filler(100), cache_control=EPH), text("request_id: 9f2c41d7aa")],
                     [user("Fix the failing test.")])
    assert found(good, "breakpoint-on-volatile") == []


def test_breakpoint_on_volatile_automatic():
    """The automatic breakpoint lands on the last block. A time in the newest user message is no
    evidence alone (that message is re-sent as written on the next turn); in the system prompt it is."""
    assert found(anthropic("You are terse.", [user(f"Ping sent at {STAMP}")], cache_control=EPH),
                 "breakpoint-on-volatile") == []
    system_last = anthropic([text("You are terse."), text(f"Current time: {STAMP}")], [], cache_control=EPH)
    hits = found(system_last, "breakpoint-on-volatile")
    assert len(hits) == 1 and hits[0].message.startswith("automatic cache breakpoint lands")
    assert found(anthropic("You are terse.", [user("Ping")], cache_control=EPH), "breakpoint-on-volatile") == []


def test_breakpoint_on_volatile_openai_explicit_marker():
    parts = [{"type": "text", "text": filler(50)}, {"type": "text", "text": f"nonce={UUID[:12]}"}]
    bad = chat([{"role": "system", "content": copy.deepcopy(parts)}, user("Hi")], model="gpt-5.6")
    bad["messages"][0]["content"][1]["prompt_cache_breakpoint"] = {}
    assert [h.pointer for h in found(bad, "breakpoint-on-volatile")] == ["/messages/0/content/1/text"]
    good = chat([{"role": "system", "content": copy.deepcopy(parts)}, user("Hi")], model="gpt-5.6")
    good["messages"][0]["content"][0]["prompt_cache_breakpoint"] = {}
    assert found(good, "breakpoint-on-volatile") == []


MARKS = {"prompt_cache_breakpoint": {"prompt_cache_breakpoint": {}}, "cache_control": {"cache_control": EPH}}


@pytest.mark.parametrize("mark", list(MARKS))
def test_breakpoint_on_volatile_openai_responses(mark):
    """Responses: the marker sits on an input_text part (an OpenRouter-style cache_control reads the same)."""
    def build(marked: int):
        parts = [{"type": "input_text", "text": filler(50)}, {"type": "input_text", "text": f"nonce={UUID[:12]}"}]
        parts[marked].update(MARKS[mark])
        return responses("You are terse.", [{"role": "developer", "content": parts},
                                            {"role": "user", "content": "Hi"}], model="gpt-5.6")
    assert [h.pointer for h in found(build(1), "breakpoint-on-volatile")] == ["/input/0/content/1/text"]
    assert found(build(0), "breakpoint-on-volatile") == []


def test_breakpoint_rules_do_not_run_on_compatible_servers():
    """vLLM, SGLang and the like have no breakpoints: the catalog leaves them out, and so does the run."""
    for name in ("breakpoint-on-volatile", "too-many-breakpoints"):
        assert "compatible" not in catalog.get(name).providers
    limit = providers()["openai"].max_breakpoints
    parts = [{"type": "input_text", "text": f"Part {chr(65 + i)} nonce={UUID[:12]}", "prompt_cache_breakpoint": {}}
             for i in range(limit + 1)]
    body = responses("sys", [{"role": "developer", "content": parts}, {"role": "user", "content": "Hi"}])
    assert {h.rule for h in found(body)} >= {"breakpoint-on-volatile", "too-many-breakpoints"}
    body["model"] = "Qwen/Qwen2.5-0.5B-Instruct"   # a model OpenAI does not sell
    assert {h.rule for h in found(body)} & {"breakpoint-on-volatile", "too-many-breakpoints"} == set()


# ------------------------------------------------------------------------------------------- PG103

@pytest.mark.parametrize("shape", ["chat", "responses"])
def test_volatile_routing_prefix(shape):
    long_rules = filler(1200)
    def build(system: str, last: str, **extra):
        if shape == "chat":
            return chat([{"role": "system", "content": system}, user(last)], **extra)
        return responses(system, [{"role": "user", "content": last}], **extra)
    bad = build(f"Sent {STAMP}. {long_rules}", "Summarize the report.", prompt_cache_key="analyst")
    hits = found(bad, "volatile-routing-prefix")
    assert [(h.key, h.variant) for h in hits] == [("iso-timestamp", None)]
    good = build(long_rules, f"Sent {STAMP}. Summarize the report.", prompt_cache_key="analyst")
    assert found(good, "volatile-routing-prefix") == []
    # a session id is the same for every request of the session: no routing hazard on its own
    assert found(build(f"Session {UUID}. {long_rules}", "Summarize.", prompt_cache_key="analyst"),
                 "volatile-routing-prefix") == []
    # past the routing prefix: not a routing hazard (still in the prefix, a PG101 matter)
    late = build(f"{long_rules} Sent {STAMP}.", "Summarize.", prompt_cache_key="analyst")
    assert found(late, "volatile-routing-prefix") == []
    # a long prompt without prompt_cache_key: the info case
    nokey = build(long_rules, "Summarize the report.")
    assert [(h.key, h.variant) for h in found(nokey, "volatile-routing-prefix")] == [("no-cache-key", "no-cache-key")]
    assert found(build(filler(100), "Summarize."), "volatile-routing-prefix") == []  # too short to be cached


def test_volatile_routing_prefix_recorded(shared_data):
    base = json.loads((shared_data / "recorded/openllmetry/test_prompt_caching_test_openai_prompt_caching"
                       "/0001.request.json").read_text())
    assert [h.key for h in found(base, "volatile-routing-prefix")] == ["no-cache-key"]
    keyed = dict(base, prompt_cache_key="summaries")
    assert found(keyed, "volatile-routing-prefix") == []
    # Anthropic has no routing prefix: the rule does not apply
    assert found(anthropic(f"Session {UUID}. " + filler(1200), [user("Hi")], cache_control=EPH),
                 "volatile-routing-prefix") == []


# ------------------------------------------------------------------------------------------- PG201

def _anthropic_tool(name):
    return {"name": name, "description": f"Tool {name}.", "input_schema": {"properties": {}, "type": "object"}}


def _chat_tool(name):
    return {"type": "function", "function": {"name": name, "description": "", "parameters": {"type": "object"}}}


def _responses_tool(name):
    return {"type": "function", "name": name, "parameters": {"properties": {}, "type": "object"}}


@pytest.mark.parametrize("shape", ["anthropic", "chat", "responses"])
def test_tools_unsorted(shape):
    def build(names):
        if shape == "anthropic":
            return anthropic("sys", [user("Hi")], tools=[_anthropic_tool(n) for n in names])
        if shape == "chat":
            return chat([user("Hi")], tools=[_chat_tool(n) for n in names])
        return responses("sys", [{"role": "user", "content": "Hi"}], tools=[_responses_tool(n) for n in names])
    hits = found(build(["search_docs", "get_weather", "lookup"]), "tools-unsorted")
    assert [h.pointer for h in hits] == ["/tools/0"]
    assert found(build(["get_weather", "lookup", "search_docs"]), "tools-unsorted") == []


def test_tools_unsorted_recorded(shared_data):
    base = json.loads((shared_data / "recorded/pydantic-ai/test_dbos_test_complex_agent_run_in_workflow"
                       "/0002.request.json").read_text())
    assert [h.pointer for h in found(base, "tools-unsorted")] == ["/tools/0"]  # get_weather before get_country
    base["tools"].sort(key=lambda t: t["function"]["name"])
    assert found(base, "tools-unsorted") == []


# ------------------------------------------------------------------------------------------- PG202

def test_unstable_key_order_needs_two_orders_of_the_same_object():
    """Unsorted keys are the usual layout of a hand-written schema ("type" before "properties"): never a
    finding alone. The same schema or tool input sent in another key order later in the session is."""
    tool = {"name": "weather", "input_schema": {"type": "object", "properties": {"unit": {}, "city": {}}}}
    call = {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"unit": "C", "city": "Paris"}}
    first = anthropic("sys", [user("Weather?"), assistant([call]),
                              user([{"type": "tool_result", "tool_use_id": "toolu_1", "content": "Sunny"}])], tools=[tool])
    assert found(first, "unstable-key-order") == []
    later = copy.deepcopy(first)
    later["messages"] += [assistant("Sunny in Paris."), user("And tomorrow?")]
    assert found_in_sequence([first, later], "unstable-key-order") == [[], []]     # same order: nothing
    resorted = copy.deepcopy(later)
    resorted["tools"][0]["input_schema"] = {"properties": {"unit": {}, "city": {}}, "type": "object"}
    resorted["messages"][1]["content"][0]["input"] = {"city": "Paris", "unit": "C"}
    hits = found_in_sequence([first, resorted], "unstable-key-order")[1]
    assert [h.pointer for h in hits] == ["/tools/0/input_schema", "/messages/1/content/0/input"]
    assert 'serialized with its keys in another order: "properties" now comes before "type"' in hits[0].message


def test_unstable_key_order_openai_arguments():
    call = {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"unit":"C","city":"Paris"}'}}
    body = chat([user("Weather?"), {"role": "assistant", "content": None, "tool_calls": [call]},
                 {"role": "tool", "tool_call_id": "call_1", "content": "Sunny"}, user("Thanks")])
    assert found(body, "unstable-key-order") == []
    again = copy.deepcopy(body)
    again["messages"] += [assistant("You are welcome."), user("Bye")]
    again["messages"][1]["tool_calls"][0]["function"]["arguments"] = '{"city":"Paris","unit":"C"}'
    hits = found_in_sequence([body, again], "unstable-key-order")
    assert [[h.pointer for h in x] for x in hits] == [[], ["/messages/1/tool_calls/0/function/arguments"]]
    # other values, not another order of the same ones: not this rule
    other = copy.deepcopy(again)
    other["messages"][1]["tool_calls"][0]["function"]["arguments"] = '{"city":"Lyon","unit":"C"}'
    assert found_in_sequence([body, other], "unstable-key-order") == [[], []]


def test_unstable_key_order_two_orders_in_one_request():
    """A serializer known to be unstable, seen inside one request: two calls of the same tool whose
    arguments come with the same keys in two orders."""
    def call(i: int, args: str) -> dict:
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{i}", "type": "function", "function": {"name": "weather", "arguments": args}}]}
    def result(i: int) -> dict:
        return {"role": "tool", "tool_call_id": f"call_{i}", "content": "Sunny"}
    steady = chat([user("Weather?"), call(1, '{"unit":"C","city":"Paris"}'), result(1),
                   call(2, '{"unit":"C","city":"Lyon"}'), result(2), user("Thanks")])
    assert found(steady, "unstable-key-order") == []        # unsorted, but always the same order
    drift = copy.deepcopy(steady)
    drift["messages"][3]["tool_calls"][0]["function"]["arguments"] = '{"city":"Lyon","unit":"C"}'
    hits = found(drift, "unstable-key-order")
    assert [h.pointer for h in hits] == ["/messages/3/tool_calls/0/function/arguments"]
    assert "at /messages/1/tool_calls/0/function/arguments (city, unit vs unit, city)" in hits[0].message


def test_unstable_key_order_recorded_schemas(shared_data):
    base = json.loads((shared_data / "recorded/pydantic-ai/test_dbos_test_complex_agent_run_in_workflow"
                       "/0002.request.json").read_text())
    base["tools"][0]["function"]["parameters"] = {"type": "object", **base["tools"][0]["function"]["parameters"]}
    assert found(base, "unstable-key-order") == []                     # "type" first: the usual layout
    assert found_in_sequence([base, base], "unstable-key-order") == [[], []]
    flipped = copy.deepcopy(base)
    params = flipped["tools"][0]["function"]["parameters"]
    flipped["tools"][0]["function"]["parameters"] = dict(sorted(params.items()))
    hits = found_in_sequence([base, flipped], "unstable-key-order")[1]
    assert [h.pointer for h in hits] == ["/tools/0/function/parameters"]


# ------------------------------------------------------------------------------------------- PG301

def test_invalid_breakpoint_block_kinds():
    thinking = {"type": "thinking", "thinking": "Let me see.", "signature": "sig", "cache_control": EPH}
    body = anthropic("sys", [user("Hi"), {"role": "assistant", "content": [thinking, text("Hello")]}, user("More")])
    assert [h.key for h in found(body, "invalid-breakpoint")] == ["thinking"]
    del thinking["cache_control"]
    body["messages"][1]["content"][1]["cache_control"] = EPH
    assert found(body, "invalid-breakpoint") == []
    empty = anthropic("sys", [user([text("", cache_control=EPH)])])
    assert [h.key for h in found(empty, "invalid-breakpoint")] == ["empty-text"]
    assert found(anthropic("sys", [user([text("Hello", cache_control=EPH)])]), "invalid-breakpoint") == []


def test_invalid_breakpoint_ttl_and_sub_block():
    bad_ttl = anthropic([text("Rules", cache_control={"type": "ephemeral", "ttl": "10m"})], [user("Hi")])
    assert [h.key for h in found(bad_ttl, "invalid-breakpoint")] == ["ttl"]
    ok_ttl = anthropic([text("Rules", cache_control={"type": "ephemeral", "ttl": "1h"})], [user("Hi")])
    assert found(ok_ttl, "invalid-breakpoint") == []
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": [text("Sunny", cache_control=EPH)]}
    call = {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}}
    body = anthropic("sys", [user("Weather?"), {"role": "assistant", "content": [call]}, user([result])])
    assert [h.pointer for h in found(body, "invalid-breakpoint")] == ["/messages/2/content/0/content/0"]
    result["content"] = [text("Sunny")]
    result["cache_control"] = EPH
    assert found(body, "invalid-breakpoint") == []


def test_invalid_breakpoint_automatic_conflicts():
    limit = providers()["anthropic"].max_breakpoints
    system = [text(f"Part {chr(65 + i)}", cache_control=EPH) for i in range(limit)]
    body = anthropic(system, [user("Hi")], cache_control=EPH)
    assert [h.key for h in found(body, "invalid-breakpoint")] == ["auto-slots"]
    system[0].pop("cache_control")
    assert found(body, "invalid-breakpoint") == []
    last = anthropic("sys", [user([text("Hi", cache_control={"type": "ephemeral", "ttl": "5m"})])],
                     cache_control={"type": "ephemeral", "ttl": "1h"})
    assert [h.key for h in found(last, "invalid-breakpoint")] == ["auto-ttl"]
    last["cache_control"]["ttl"] = "5m"
    assert found(last, "invalid-breakpoint") == []


# ------------------------------------------------------------------------------------------- PG302

def test_ttl_order():
    five, hour = {"type": "ephemeral", "ttl": "5m"}, {"type": "ephemeral", "ttl": "1h"}
    bad = anthropic([text(filler(600), cache_control=five)], [user([text("Hi", cache_control=hour)])])
    assert [h.pointer for h in found(bad, "ttl-order")] == ["/messages/0/content/0"]
    good = anthropic([text(filler(600), cache_control=hour)], [user([text("Hi", cache_control=five)])])
    assert found(good, "ttl-order") == []
    auto = anthropic([text(filler(600), cache_control=five)], [user("Hi")], cache_control=hour)
    assert [h.pointer for h in found(auto, "ttl-order")] == ["/cache_control"]


# ------------------------------------------------------------------------------------------- PG303

def test_no_breakpoint(shared_data):
    base = json.loads((shared_data / "recorded/pydantic-ai/test_anthropic_test_anthropic_cache_real_api"
                       "/0001.request.json").read_text())
    assert found(base, "no-breakpoint") == []        # automatic caching is on
    bare = {k: v for k, v in base.items() if k != "cache_control"}
    hits = found(bare, "no-breakpoint")
    assert [h.pointer for h in hits] == [""]
    short = anthropic("You are terse.", [user("Hi")])
    assert found(short, "no-breakpoint") == []       # below the minimum: nothing to cache anyway
    # OpenAI caches automatically: the rule does not apply
    assert found(chat([{"role": "system", "content": filler(1500)}, user("Hi")]), "no-breakpoint") == []
    # an image by URL has no size to count: Mirascope's "describe this image" by URL was said to be 1,385
    # tokens with the documented estimate, and billed 34 to 298 (a PNG, a JPEG, a GIF, a WebP)
    image = {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}}
    assert found(anthropic("You are terse.", [user([text("What is this?"), image])]), "no-breakpoint") == []
    known = anthropic(filler(1500), [user([text("What is this?"), image])])
    assert [h.pointer for h in found(known, "no-breakpoint")] == [""]   # over it without the image: said


# ------------------------------------------------------------------------------------------- PG401

def test_too_many_breakpoints():
    limit = providers()["anthropic"].max_breakpoints
    system = [text(f"Part {chr(65 + i)}", cache_control=EPH) for i in range(limit + 1)]
    bad = anthropic(system, [user("Hi")])
    assert [h.pointer for h in found(bad, "too-many-breakpoints")] == [f"/system/{limit}"]
    system[0].pop("cache_control")
    assert found(bad, "too-many-breakpoints") == []
    bad["cache_control"] = EPH                          # the automatic one takes a slot too
    assert len(found(bad, "too-many-breakpoints")) == 1


def test_too_many_breakpoints_openai_explicit():
    limit = providers()["openai"].max_breakpoints
    parts = [{"type": "text", "text": f"Part {chr(65 + i)}", "prompt_cache_breakpoint": {}} for i in range(limit + 1)]
    bad = chat([{"role": "system", "content": parts}, user("Hi")], model="gpt-5.6")
    assert len(found(bad, "too-many-breakpoints")) == 1
    parts.pop()
    assert found(bad, "too-many-breakpoints") == []


@pytest.mark.parametrize("mark", list(MARKS))
def test_too_many_breakpoints_openai_responses(mark):
    """Responses: markers on input parts and on tools, which the wire adapter reads as breakpoints too."""
    limit = providers()["openai"].max_breakpoints
    tool = {"type": "function", "name": "lookup", "parameters": {"type": "object"}, **MARKS[mark]}
    parts = [{"type": "input_text", "text": f"Part {chr(65 + i)}", **MARKS[mark]} for i in range(limit)]
    bad = responses("You are terse.", [{"role": "developer", "content": parts}, {"role": "user", "content": "Hi"}],
                    tools=[tool], model="gpt-5.6")
    hits = found(bad, "too-many-breakpoints")
    assert [h.pointer for h in hits] == [f"/input/0/content/{limit - 1}"]   # the first one past the limit
    assert hits[0].message == f"{limit + 1} cache breakpoints; at most {limit} are allowed"
    for key in MARKS[mark]:
        del tool[key]
    assert found(bad, "too-many-breakpoints") == []


# ------------------------------------------------------------------------------------------- PG402

def test_below_minimum_anthropic():
    model = "claude-haiku-4-5"
    minimum = model_contract("anthropic", model).min_cacheable_tokens
    bad = anthropic([text("You are terse.", cache_control=EPH)], [user("Hi")], model=model)
    hits = found(bad, "below-minimum")
    assert [(h.pointer, h.variant) for h in hits] == [("/system/0", None)]
    good = anthropic([text(filler(minimum + 200), cache_control=EPH)], [user("Hi")], model=model)
    assert found(good, "below-minimum") == []


@pytest.mark.parametrize("shape", ["chat", "responses"])
def test_below_minimum_openai_is_info(shape):
    minimum = model_contract("openai-chat", "gpt-4.1").min_cacheable_tokens
    def build(system):
        if shape == "chat":
            return chat([{"role": "system", "content": system}, user("Hi")])
        return responses(system, [{"role": "user", "content": "Hi"}], model="gpt-4.1")
    hits = found(build("You are terse."), "below-minimum")
    assert [h.variant for h in hits] == ["openai"]
    assert catalog.get("below-minimum").severity_of(hits[0].variant) == "info"
    assert found(build(filler(minimum + 100)), "below-minimum") == []


def test_below_minimum_compatible_server_has_none():
    body = chat([user("Hi")], model="Qwen/Qwen2.5-0.5B-Instruct")   # a model OpenAI does not sell
    assert found(body, "below-minimum") == []


# ------------------------------------------------------------------------------------------- PG403

def test_lookback_exceeded_not_for_far_apart_breakpoints():
    """Two breakpoints far apart are no problem: the previous request wrote its entry at its last block,
    and this request's breakpoint on the last message reaches it (Claude Code's layout: the system prompt
    and the last two user messages marked; the provider reads everything)."""
    lookback = providers()["anthropic"].lookback_blocks
    turns = []
    for i in range(lookback // 2 + 1):
        turns += [user(f"Step {chr(65 + i % 26)}"), assistant("Done.")]
    turns[-2] = user([text("Step Z", cache_control=EPH)])          # the previous request's last message
    body = anthropic([text(filler(1100), cache_control=EPH)], turns + [user([text("Go on", cache_control=EPH)])])
    assert found(body, "lookback-exceeded") == []
    assert found_in_sequence([dict(body, messages=body["messages"][:-2]), body], "lookback-exceeded") == [[], []]


def _agent_turn(calls: int, start: int) -> list[dict]:
    """One step of a tool loop: the model calls `calls` tools at once and the app sends the results."""
    ids = [f"toolu_{start + i:02d}" for i in range(calls)]
    return [assistant([{"type": "tool_use", "id": i, "name": "read_file", "input": {"path": f"src/{i}.py"}} for i in ids]),
            user([{"type": "tool_result", "tool_use_id": i, "content": "def main():\n    pass\n"} for i in ids])]


@pytest.mark.parametrize("where", ["automatic", "explicit"])
def test_lookback_exceeded_by_one_turn(where):
    """The reference case: a turn appends 20+ blocks after the last breakpoint, which the previous request
    wrote on its last block. The moving breakpoint is the request's only one, so no two breakpoints of
    this request are far apart; the entry of the previous request is what is out of reach."""
    lookback = providers()["anthropic"].lookback_blocks
    def build(calls: int, system_mark: bool = False) -> dict:
        history = [user("Fix the failing tests.")] + _agent_turn(1, 0)   # the previous request ended here
        messages = history + _agent_turn(calls, 1)
        system = [text("You are a coding agent. " + filler(1100), **({"cache_control": EPH} if system_mark else {}))]
        if where == "automatic":
            return anthropic(system, messages, cache_control=EPH)
        messages[-1]["content"][-1]["cache_control"] = EPH   # the app marks the last block of every request
        return anthropic(system, messages)
    last = "/cache_control" if where == "automatic" else f"/messages/4/content/{lookback // 2 - 1}"
    hits = found(build(lookback // 2), "lookback-exceeded")   # 2 x lookback/2 = lookback blocks appended
    assert [h.pointer for h in hits] == [last]
    assert f"the previous request wrote its cache entry at /messages/2/content/0, {lookback} blocks before this " \
        "breakpoint" in hits[0].message
    assert found(build(lookback // 2 - 1), "lookback-exceeded") == []   # lookback - 2 blocks: still read
    # with a system breakpoint too, the same breakpoint is reported once, for the turn
    hits = found(build(lookback // 2, system_mark=True), "lookback-exceeded")
    assert [(h.pointer, h.message.startswith("the previous request")) for h in hits] == [(last, True)]
    # the fix the rule gives: one more breakpoint within the lookback of the previous request's end
    fixed = build(lookback // 2)
    fixed["messages"][3]["content"][lookback // 4]["cache_control"] = EPH
    assert found(fixed, "lookback-exceeded") == []
    # a first turn has no previous request to read from
    first = anthropic("You are terse.", [user([text(f"Part {i}") for i in range(lookback + 5)])], cache_control=EPH)
    assert found(first, "lookback-exceeded") == []


def test_lookback_exceeded_in_sequence_mode_reads_what_was_written():
    """In a capture the earlier request's own breakpoints say where entries were written."""
    lookback = providers()["anthropic"].lookback_blocks
    system = [text("You are a coding agent. " + filler(1100))]
    first = anthropic(system, [user("Fix the failing tests.")] + _agent_turn(1, 0))
    first["messages"][-1]["content"][-1]["cache_control"] = EPH
    second = copy.deepcopy(first)
    second["messages"][-1]["content"][-1].pop("cache_control")
    second["messages"] += _agent_turn(lookback // 2, 1)
    second["messages"][-1]["content"][-1]["cache_control"] = EPH
    hits = found_in_sequence([first, second], "lookback-exceeded")
    assert [len(x) for x in hits] == [0, 1]
    assert hits[1][0].message.startswith("the request on line 1 wrote its cache entry at /messages/2/content/0")
    near = copy.deepcopy(second)
    near["messages"][-1]["content"][-1].pop("cache_control")
    near["messages"][3]["content"][0]["cache_control"] = EPH       # within the lookback of the entry
    assert found_in_sequence([first, near], "lookback-exceeded") == [[], []]
