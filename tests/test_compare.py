"""compare(): properties over generated sessions of each API shape, and each cause found in real
recorded requests (mutated the way apps break them) and in real recorded request sequences."""
from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import make_examples
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from prefixguard.judge.causes import CAUSES
from prefixguard.judge.compare import compare, contract_reads
from prefixguard.model.prompt import Prompt
from prefixguard.utils.errors import InputError
from prefixguard.wire import parse_request

ROOT = Path(__file__).resolve().parent.parent
SHAPES = ("anthropic", "openai-chat", "openai-responses")
PATHS = {"anthropic": "/v1/messages", "openai-chat": "/v1/chat/completions", "openai-responses": "/v1/responses"}


GEN = make_examples


def parse(body: dict | bytes, shape: str | None = None) -> Prompt:
    raw = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode("utf-8")
    return parse_request(raw, path=PATHS.get(shape or ""), count_tokens=False)


# ---- properties over generated sessions

text = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=40)
schema = st.fixed_dictionaries({"type": st.just("object"),
                                "properties": st.dictionaries(st.from_regex(r"[a-z_]{1,8}", fullmatch=True),
                                                              st.fixed_dictionaries({"type": st.sampled_from(
                                                                  ["string", "integer", "boolean"])}),
                                                              max_size=3)})
tools = st.lists(st.tuples(st.from_regex(r"[a-z_]{1,12}", fullmatch=True), text, schema), max_size=4,
                 unique_by=lambda t: t[0])


@st.composite
def sessions(draw: st.DrawFn) -> tuple[list, list]:
    """(tools, history): user turns, assistant turns that may call a tool, and the tools' results."""
    toolset = draw(tools)
    history: list[tuple[Any, ...]] = []
    for n in range(draw(st.integers(1, 6))):
        history.append(("user", draw(text)))
        calls = []
        if toolset and draw(st.booleans()):
            name, _, sch = draw(st.sampled_from(toolset))
            args = {k: draw(text) for k in sch["properties"]}
            calls = [(f"call_{n}", name, args)]
        history.append(("assistant", draw(text), calls))
        history += [("tool", cid, draw(text)) for cid, _, _ in calls]
    return toolset, history


def render(shape: str, system: str, toolset: list, history: list) -> dict:
    return GEN.RENDER[shape](GEN.MODELS[shape][0], system, toolset, history)


@pytest.mark.parametrize("shape", SHAPES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(system=text, session=sessions())
def test_a_request_compared_with_itself_never_breaks(shape: str, system: str, session: tuple) -> None:
    body = render(shape, system, *session)
    a, b = parse(body, shape), parse(copy.deepcopy(body), shape)
    result = compare(a, b)
    assert not result.broken and result.causes == ["append_only"] and result.divergence is None
    # the same request again reads all that the first one cached under the contract, and no more
    _, cached = contract_reads(a, b)
    assert result.reprefill_tokens == 0 and result.reused_tokens == cached <= a.total_tokens


@pytest.mark.parametrize("shape", SHAPES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(system=text, session=sessions(), data=st.data())
def test_appending_messages_is_always_append_only(shape: str, system: str, session: tuple, data: st.DataObject) -> None:
    toolset, history = session
    cut = data.draw(st.integers(1, len(history) - 1)) if len(history) > 1 else 1
    a = parse(render(shape, system, toolset, history[:cut]), shape)
    b = parse(render(shape, system, toolset, history), shape)
    result = compare(a, b)
    assert not result.broken and result.causes == ["append_only"], result
    reused, cached = contract_reads(a, b)
    assert result.reused_tokens == reused and result.reprefill_tokens == 0
    if shape != "anthropic":  # automatic caching: an appended turn reads all A cached (Anthropic: by lookback)
        assert reused == cached


def _local(body: dict[str, Any]) -> dict[str, Any]:
    """The body sent to a model no hosted contract knows: the radix contract (every prefix cached)."""
    return body | {"model": "local-llama"} if "model" in body else body


@pytest.mark.parametrize("shape", SHAPES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(system=text, session=sessions(), data=st.data())
def test_an_edited_message_breaks_at_its_first_differing_byte(shape: str, system: str, session: tuple,
                                                              data: st.DataObject) -> None:
    toolset, history = session
    turn = data.draw(st.sampled_from([i for i, t in enumerate(history) if t[0] == "user"]))
    edited = list(history)
    new = data.draw(text.filter(lambda s: s != history[turn][1]))
    edited[turn] = ("user", new)
    body_a, body_b = render(shape, system, toolset, history), render(shape, system, toolset, edited)
    if shape != "anthropic":
        body_a, body_b = _local(body_a), _local(body_b)
    raw_a, raw_b = (json.dumps(x, ensure_ascii=False).encode() for x in (body_a, body_b))
    a, b = parse(raw_a, shape), parse(raw_b, shape)
    result = compare(a, b)
    assert result.broken and result.divergence.level == "messages"
    first = next(i for i, (x, y) in enumerate(zip(raw_a, raw_b, strict=False)) if x != y)
    assert result.divergence.byte_offset == first
    assert result.causes[0] in CAUSES
    if shape != "anthropic":  # radix contract: everything A sent was cached, so the edit costs its rest
        d = result.divergence.segment_index
        assert result.reused_tokens == sum(s.tokens for s in a.segments[:d])
        assert result.reprefill_tokens > 0


@pytest.mark.parametrize("shape", SHAPES)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(system=text, session=sessions(), data=st.data())
def test_dropping_the_oldest_messages_is_history_truncated(shape: str, system: str, session: tuple,
                                                           data: st.DataObject) -> None:
    body = render(shape, system, *session)
    key, keep = {"anthropic": ("messages", 0), "openai-chat": ("messages", 1), "openai-responses": ("input", 0)}[shape]
    items = body[key]
    assume(len(items) - keep >= 2)
    drop = data.draw(st.integers(1, len(items) - keep - 1))
    later = items[:keep] + items[keep + drop:]
    assume(later[keep] not in items[keep:keep + drop] and later[keep] != items[keep])
    result = compare(parse(body, shape), parse(body | {key: later}, shape))
    assert result.broken and result.causes == ["history_truncated"], result.detail
    assert result.divergence.level == "messages"


@pytest.mark.parametrize("shape", SHAPES)
@settings(max_examples=20, deadline=None)
@given(session=sessions(), order=st.randoms(use_true_random=False))
def test_top_level_field_order_never_breaks(shape: str, session: tuple, order: Any) -> None:
    body = render(shape, "You are a careful assistant.", *session)
    keys = list(body)
    order.shuffle(keys)
    result = compare(parse(body, shape), parse({k: body[k] for k in keys}, shape))
    assert not result.broken


# ---- each cause, on real recorded requests mutated the way apps break them

def recorded(shared_data: Path, folder: str, n: int = 1) -> dict:
    return json.loads((shared_data / "recorded" / "pydantic-ai" / folder / f"{n:04d}.request.json").read_text())


ANTHROPIC = "test_anthropic_test_anthropic_mixed_strict_tool_run"      # 2 tools, tool_use / tool_result
CHAT = "test_prefect_test_complex_agent_run_in_flow"                    # 21 tools, parallel tool calls
RESPONSES = "test_openai_responses_test_openai_responses_thinking_with_tool_calls"


def check(a: dict, b: dict, cause: str, level: str | None = None, pointer: str | None = None) -> Any:
    result = compare(parse(a), parse(b))
    assert result.causes[0] == cause, (result.causes, result.detail)
    assert result.broken is (cause != "append_only")
    if level:
        assert (result.divergence.level, result.divergence.pointer) == (level, pointer)
    return result


def test_tools_reordered_changed_and_schema(shared_data: Path) -> None:
    a = recorded(shared_data, ANTHROPIC, 2)
    b = copy.deepcopy(a)
    b["tools"].reverse()
    check(a, b, "tools_reordered", "tools", "/tools/0")
    b = copy.deepcopy(a)
    del b["tools"][0]
    check(a, b, "tools_changed", "tools", "/tools/0")
    b = copy.deepcopy(a)
    b["tools"][1]["input_schema"]["properties"]["country"]["description"] = "ISO country name"
    result = check(a, b, "tool_schema_changed", "tools", "/tools/1")
    assert "capital_lookup" in result.detail and "description" in result.detail


def test_key_order_of_a_schema_and_of_tool_call_arguments(shared_data: Path) -> None:
    a = recorded(shared_data, ANTHROPIC, 2)
    b = copy.deepcopy(a)
    schema = b["tools"][1]["input_schema"]
    b["tools"][1]["input_schema"] = dict(reversed(list(schema.items())))
    check(a, b, "key_order_changed", "tools", "/tools/1")

    a = recorded(shared_data, CHAT, 3)
    a["messages"][3]["tool_calls"][0]["function"]["arguments"] = '{"city": "Mexico City", "units": "metric"}'
    b = copy.deepcopy(a)
    b["messages"][3]["tool_calls"][0]["function"]["arguments"] = '{"units": "metric", "city": "Mexico City"}'
    result = check(a, b, "key_order_changed", "messages", "/messages/3/tool_calls/0")
    assert "city, units -> units, city" in result.detail


@pytest.mark.parametrize("shape_folder,key", [(ANTHROPIC, "system"), (RESPONSES, "instructions")])
def test_volatile_whitespace_and_edits_in_the_system_prompt(shared_data: Path, shape_folder: str, key: str) -> None:
    a = recorded(shared_data, shape_folder, 2)
    b = copy.deepcopy(a)
    a[key] += "\nCurrent time: 2026-12-02T16:11:31.204Z"
    b[key] += "\nCurrent time: 2026-12-02T16:11:58.911Z"
    result = check(a, b, "volatile_content", "system", f"/{key}")
    assert "iso-timestamp" in result.detail and "16:11:58.911Z" in result.after
    b = copy.deepcopy(a)
    b[key] = a[key].replace("Current time", "Current  time")
    check(a, b, "whitespace_changed", "system", f"/{key}")
    b[key] = a[key].replace("Current time", "Local time")
    check(a, b, "system_changed", "system", f"/{key}")


def test_request_and_session_ids_are_volatile(shared_data: Path) -> None:
    a = recorded(shared_data, CHAT, 3)
    b = copy.deepcopy(a)
    a["messages"].insert(0, {"role": "system", "content": "Trace context: request_id=7fa3c9e1b2d4 (for logs)."})
    b["messages"].insert(0, {"role": "system", "content": "Trace context: request_id=0b91e2aa55f3 (for logs)."})
    result = check(a, b, "volatile_content", "system", "/messages/0/content")
    assert result.detail.startswith("request-id")


def test_history_rewritten_truncated_and_re_serialized(shared_data: Path) -> None:
    a = recorded(shared_data, CHAT, 3)
    b = copy.deepcopy(a)
    b["messages"][2]["content"] = "Mexico (country code MX)"
    check(a, b, "history_rewritten", "messages", "/messages/2/content")
    b = copy.deepcopy(a)
    b["messages"] = a["messages"][:1] + a["messages"][3:]  # the window drops the first tool round trip
    result = check(a, b, "history_truncated", "messages", "/messages/1/tool_calls/0")
    assert "2 messages dropped" in result.detail
    a = recorded(shared_data, ANTHROPIC, 2)
    b = copy.deepcopy(a)
    b["messages"][0]["content"] = a["messages"][0]["content"][0]["text"]  # block list -> plain string:
    check(a, b, "append_only")                                             # rendered alike, no break
    b["messages"][0]["content"] = [a["messages"][0]["content"][0] | {"citations": None}]  # another field
    result = check(a, b, "history_rewritten", "messages", "/messages/0/content/0")


def test_model_setting_and_image_changes(shared_data: Path) -> None:
    a = recorded(shared_data, ANTHROPIC, 2)
    b = copy.deepcopy(a) | {"model": "claude-opus-4-5"}
    result = check(a, b, "model_changed", "tools", "/tools/0")
    _, cached = contract_reads(parse(a), parse(a))
    assert result.reused_tokens == 0 and result.reprefill_tokens == cached  # each model has its own cache
    b = copy.deepcopy(a) | {"thinking": {"type": "enabled", "budget_tokens": 2048}}
    result = check(a, b, "setting_changed", "messages", "/messages/0/content/0")  # per rules/providers.toml
    assert result.setting == "thinking" and result.reused_tokens <= cached
    b = copy.deepcopy(a) | {"tool_choice": {"type": "any"}}
    assert check(a, b, "setting_changed").setting == "tool_choice"
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": GEN.IMAGE_B64}}
    b = copy.deepcopy(a)
    b["messages"][-1]["content"].append(image)  # after the cached prefix: nothing A cached changes
    check(a, b, "append_only")
    b = copy.deepcopy(a)
    b["messages"][0]["content"].insert(0, image)  # inside the cached prefix: it changes there
    check(a, b, "images_changed", "messages", "/messages/0/content/0")

    a = recorded(shared_data, RESPONSES, 2) | {"prompt_cache_key": "session-1"}
    b = a | {"prompt_cache_key": "session-2"}
    assert check(a, b, "setting_changed", "tools", "/tools/0").setting == "prompt_cache_key"


def test_breakpoints_moved_forward_removed_and_ttl(shared_data: Path) -> None:
    a = recorded(shared_data, ANTHROPIC, 2)
    a["messages"][-1]["content"][-1]["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    later = recorded(shared_data, ANTHROPIC, 3)
    moved = copy.deepcopy(later)
    moved["messages"][-1]["content"][-1]["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    check(a, moved, "append_only")  # the incremental-caching pattern: the breakpoint moves to the newest block
    check(a, later, "breakpoint_changed", "tools", "/tools/0")  # no breakpoint left to read A's entry
    ttl = copy.deepcopy(a)
    ttl["messages"][-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    result = check(a, ttl, "breakpoint_changed")
    assert "TTL" in result.detail


def test_history_compacted_in_a_real_sequence(shared_data: Path) -> None:
    folder = "test_openai_responses_test_openai_responses_compact_messages"
    result = check(recorded(shared_data, folder, 2), recorded(shared_data, folder, 4), "history_compacted",
                   "messages", "/input/0")
    assert "compaction item" in result.detail


# ---- real recorded sequences: what each next request of a session does to the cache

@pytest.mark.parametrize("folder,n,cause,pointer", [
    ("test_anthropic_test_anthropic_mixed_strict_tool_run", 2, "append_only", None),
    ("test_cache_prefix_stability_test_openai_tool_call_roundtrip_wire_stable_ag_ui_", 2, "append_only", None),
    ("test_tool_search_test_openai_client_tool_search_streaming", 3, "append_only", None),
    ("test_anthropic_test_anthropic_lazy_advertisement_live", 2, "tools_changed", "/tools/3"),
    # message 1 re-sent as a string after a one-block list: the provider read 3,211 of 3,329 tokens
    ("test_cache_test_openrouter_cache_messages_anthropic_real_api", 2, "append_only", None),
])
def test_real_request_sequences(shared_data: Path, folder: str, n: int, cause: str, pointer: str | None) -> None:
    result = check(recorded(shared_data, folder, n - 1), recorded(shared_data, folder, n), cause)
    assert (result.divergence.pointer if result.divergence else None) == pointer


def test_every_recorded_request_compared_with_itself(shared_data: Path) -> None:
    seen = 0
    for path in sorted((shared_data / "recorded").glob("*/*/*.request.json")):
        raw = path.read_bytes()
        try:
            a, b = parse(raw), parse(raw)
        except InputError:  # a request to another endpoint (e.g. /responses/compact without input)
            continue
        assert not compare(a, b).broken, path
        seen += 1
    assert seen > 100


def test_cost_prices_the_re_prefill_at_the_breakpoint_ttl() -> None:
    """The extra cost is B's re-prefilled tokens written at the TTL of B's next breakpoint (here the 1h
    system one) instead of read from cache, at B's model prices from rules/providers.toml."""
    from prefixguard.contracts.providers import model_contract
    pair = ROOT / "examples" / "requests" / "anthropic" / "volatile_content"
    a, b = (parse_request((pair / n).read_bytes()) for n in ("a.json", "b.json"))
    result = compare(a, b)
    c = model_contract(b.api, b.model)
    n = result.reprefill_tokens
    # A cached its whole prompt (a breakpoint on its last block); B reads none of it (the changed system
    # block comes before B's first breakpoint that could look back to an entry of A's) and writes it again.
    assert result.reused_tokens == 0 and n == contract_reads(a, a)[1] == a.total_tokens
    assert result.cost_usd == pytest.approx(c.cost(write_1h=n) - c.cost(cache_read=n))


def test_a_system_block_removed(shared_data: Path) -> None:
    a = recorded(shared_data, ANTHROPIC, 2)
    a["system"] = [{"type": "text", "text": a["system"]}, {"type": "text", "text": "Answer in English."}]
    b = copy.deepcopy(a)
    del b["system"][1]
    result = check(a, b, "system_changed", "system", "/system")
    assert "/system/1" in result.detail


_json_leaf = st.one_of(st.text(max_size=20), st.integers(-3, 3), st.booleans(), st.none())
_json = st.recursive(_json_leaf, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.sampled_from(["type", "text", "name", "id", "n"]), inner, max_size=4)),
    max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(_json, _json)
def test_changes_name_a_change_exactly_when_there_is_one(a: Any, b: Any) -> None:
    from prefixguard.judge.jsondiff import changes
    found = changes(a, b)
    assert (found == []) == (json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True))   # key order: key_orders
    assert changes(a, a) == [] and found == changes(a, b)   # none against itself; the same each time


def test_a_boolean_become_a_number_is_a_change() -> None:
    """Python takes True == 1 (and 1 == 1.0), deepdiff too inside lists; JSON does not: each is a change."""
    from prefixguard.judge.jsondiff import changes
    assert changes([3, [True, None]], [3, [1, None]]) == ["/1/0: true -> 1"]
    assert changes({"a": [1.0], "b": "x"}, {"a": [1], "b": "y"}) == ["/a/0: 1.0 -> 1", "/b: 'x' -> 'y'"]
    assert changes({"a": True}, {"a": 1}) == ["/a: true -> 1"]


def test_changes_say_what_a_reader_needs() -> None:
    from prefixguard.judge.jsondiff import changes
    tool = {"name": "get_date", "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}}
    wider = copy.deepcopy(tool)
    wider["parameters"]["properties"]["day"] = {"type": "integer"}
    assert changes(tool, wider) == ['added /parameters/properties/day = {"type": "integer"}']
    assert changes({"type": "text", "text": "Hello there"}, {"type": "text", "text": "Hello here"}) == \
        ["/text: 'Hello there' -> 'Hello here'"]
    # an item put in front is one item added, not every later item changed
    assert changes(["a", "b", "c"], ["z", "a", "b", "c"]) == ["added /0 = z"]
    assert changes(["a", "b", "c"], ["a", "c"]) == ["removed /1 (was b)"]
    # a changed type first, then keys added, removed, values changed
    assert changes({"n": 1, "id": "x", "text": "t"}, {"n": "1", "text": "u", "name": "y"}) == \
        ['/n: 1 -> "1"', "added /name = y", "removed /id (was x)", "/text: 't' -> 'u'"]


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["type", "text", "name", "id"]), st.text(max_size=30), min_size=1, max_size=4),
       st.text(max_size=30))
def test_the_one_string_shortcut_says_what_deepdiff_says(block: dict[str, str], new: str) -> None:
    """A single changed string is explained without importing deepdiff; the line must be deepdiff's own."""
    from deepdiff import DeepDiff

    from prefixguard.judge.jsondiff import _change, _one_string_changed, _pointer
    key = sorted(block)[0]
    edited = {**block, key: new}
    tree = DeepDiff(block, edited, view="tree", verbose_level=2)
    expected = [_change(kind, _pointer(item.path(output_format="list")), item.t1, item.t2)
                for kind, items in tree.items() for item in items]
    shortcut = _one_string_changed(block, edited)
    assert (shortcut is None) == (expected == [])
    assert expected == ([shortcut] if shortcut is not None else [])
    text_line = _one_string_changed(block[key], new)
    assert (text_line is None) == (block[key] == new)


def test_a_text_edit_is_explained_without_deepdiff() -> None:
    """`diff` of an edited system prompt stays within the startup budget: deepdiff is not imported."""
    code = ("import sys; from prefixguard.judge.jsondiff import changes; "
            "print(changes({'type': 'text', 'text': 'It is 10:01'}, {'type': 'text', 'text': 'It is 10:02'})); "
            "print('deepdiff' in sys.modules); print(changes([1, 2], [0, 1, 2])); print('deepdiff' in sys.modules); "
            "print(sorted({'numpy', 'pydantic'} & set(sys.modules))); import numpy, pydantic; print('imported')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    # deepdiff comes without numpy and pydantic (its import time), and leaves both importable
    assert out.splitlines() == ["[\"/text: 'It is 10:01' -> 'It is 10:02'\"]", "False", "['added /0 = 0']", "True",
                                "[]", "imported"]


@pytest.mark.parametrize("pair, ttl", [("openai-chat/system_changed", 600), ("anthropic/volatile_content", 3600)])
def test_a_change_after_the_cache_expired_costs_nothing(pair: str, ttl: int) -> None:
    """A change against an earlier request whose cache the TTL has dropped by the time B is sent (Mirascope's
    gpt-4o tool test, recorded again 27 days later with another tool schema; a crewAI task 11 months on) is
    named, but B prefills nothing again because of it: the verdict is no miss_prefix_changed. Within the
    TTL the same change costs what A had cached. (The TTLs: rules/providers.toml, OpenAI's in-memory
    retention and the 1 h breakpoint of the Anthropic pair's system block.)"""
    from prefixguard.judge.policies import Expected
    from prefixguard.judge.verdict import judge
    folder = ROOT / "examples" / "requests" / pair
    a, b = (parse_request((folder / n).read_bytes()) for n in ("a.json", "b.json"))
    fresh, stale = compare(a, b, elapsed=30.0), compare(a, b, elapsed=ttl + 60.0)
    assert fresh.broken and stale.broken and stale.causes == fresh.causes
    assert fresh.reprefill_tokens > 0 and stale.reprefill_tokens == 0
    cold = Expected(cache_read=0, cache_write=0, uncached=b.total_tokens, reason="cold")
    assert judge(cold, fresh).verdict.value == "miss_prefix_changed"
    assert judge(cold, stale).verdict.value == "cold"


def test_another_conversation_re_prefills_none_of_its_messages() -> None:
    """B drops A's tools and asks something else (req_llm's grok-4: a weather question with three tools,
    then "Hello world!" alone). What A cached past the change is tools and a question B does not hold: B
    prefills its own new message, nothing again. Drop only the tools and keep A's question, and that
    question is written again."""
    tools = [{"type": "function", "function": {"name": f"tool_{i}", "description": "Looks things up. " * 40,
                                               "parameters": {"type": "object"}}} for i in range(3)]
    question = [{"role": "user", "content": "What's the weather like in Paris? " * 60}]
    a = parse({"model": "gpt-4.1", "tools": tools, "messages": question}, "openai-chat")
    other = parse({"model": "gpt-4.1", "messages": [{"role": "user", "content": "Hello world! " * 60}]}, "openai-chat")
    same = parse({"model": "gpt-4.1", "messages": question}, "openai-chat")
    new, kept = compare(a, other), compare(a, same)
    assert new.broken and new.causes == kept.causes == ["tools_changed"]
    assert new.reprefill_tokens == 0
    assert kept.reprefill_tokens >= same.segments[-1].tokens > 0
