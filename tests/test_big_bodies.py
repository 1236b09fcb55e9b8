"""Bodies of hundreds of thousands of parts: analysed at a cost linear in their parts and small per part,
and read exactly as the general walk reads them (the plain-message fast path changes no segment, no
fingerprint, no finding, no comparison)."""
from __future__ import annotations

import json
import re
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import CliRunner

import prefixguard.wire as wire
from prefixguard.cli import main
from prefixguard.judge.compare import compare
from prefixguard.model.prompt import Prompt
from prefixguard.utils.errors import InputError, TooLarge
from prefixguard.wire import jsonspan, parse_request


def tiny_messages(n: int, last: str = "the end", system: str | None = None) -> bytes:
    """n tiny alternating user/assistant messages with plain string content (bench/big_body.py's body)."""
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{i:07d} abcde"} for i in range(n - 1)]
    msgs.append({"role": "user", "content": last})
    body: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 16, "messages": msgs}
    if system is not None:
        body["system"] = system
    return json.dumps(body, separators=(",", ":")).encode()


def view(prompt: Prompt) -> tuple[Any, ...]:
    """Everything a consumer reads of a prompt, as one comparable value."""
    return (prompt.api, prompt.model, prompt.settings, prompt.auto_breakpoint, prompt.counts_only, prompt.chain,
            [(s.level, s.pointer, s.kind, s.role, s.value, s.start, s.end, s.key, s.tokens, s.breakpoint,
              s.message_index, s.header, s.media_tokens, s.estimated, s.canon) for s in prompt.segments])


@pytest.fixture
def general_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every message walked member by member: the plain-message fast path never matches."""
    monkeypatch.setattr(jsonspan, "_plain_message", re.compile(r"(?!)"))


def read(body: bytes, **kw: Any) -> tuple[str, Any]:
    try:
        return "ok", view(parse_request(body, **{"count_tokens": False, **kw}))
    except InputError as err:
        return "error", str(err)


def both_ways(body: bytes, monkeypatch: pytest.MonkeyPatch, **kw: Any) -> tuple[tuple[str, Any], tuple[str, Any]]:
    fast = read(body, **kw)
    with monkeypatch.context() as m:
        m.setattr(jsonspan, "_plain_message", re.compile(r"(?!)"))
        general = read(body, **kw)
    return fast, general


MIXED = [
    '{"role":"user","content":"plain"}',
    '{ "role" : "assistant" ,\n "content" : "spaced out" }',
    '{"role":"user","content":"esc\\"aped \\u00e9"}',
    '{"role":"user","content":"caf\u00e9 \u4e2d\u6587 \U0001f600"}',
    '{"content":"content first","role":"assistant"}',
    '{"role":"user","content":"with a name","name":"bob"}',
    '{"role":"user","content":[{"type":"text","text":"a block","cache_control":{"type":"ephemeral"}}]}',
    '{"role":"assistant","content":""}',
    '{"role":"user","content":null}',
    '{"role":"user"}',
    '{"role":"ro\\u006ce","content":"an escaped role"}',
    '{"role":"user","content":"dup","content":"keys"}',
]


@pytest.mark.parametrize("api_fields", ['"model":"claude-sonnet-4-5","max_tokens":5',
                                        '"model":"gpt-4o"'])
def test_plain_messages_read_as_the_general_walk_reads_them(api_fields: str, monkeypatch: pytest.MonkeyPatch) -> None:
    body = ('{' + api_fields + ',"system":"be brief","messages":[' + ",\n ".join(MIXED) + ']}').encode()
    fast, general = both_ways(body, monkeypatch)
    assert fast == general
    assert fast[0] == "ok" and len(fast[1][-1]) == 1 + len(MIXED)   # the system prompt and one part a message
    # counted by the tokenizer too (Chat: each message's framing tokens, the reply's on the first part)
    counted = both_ways(body, monkeypatch, count_tokens=True)
    assert counted[0] == counted[1] and counted[0][0] == "ok"
    messages = jsonspan.parse(body.decode(), wire._spans(body.decode())).get("messages")
    assert messages is not None
    kinds = [type(n).__name__ for n in messages.elements]
    assert kinds[:4] == ["PlainMessage", "PlainMessage", "Node", "PlainMessage"]   # the fast path was taken
    # the Responses API's input items are messages too
    items = ('{"model":"gpt-4o","input":[' + ",".join(MIXED[:6]) + "]}").encode()
    fast, general = both_ways(items, monkeypatch)
    assert fast == general and fast[0] == "ok"


def test_lint_places_a_pointer_into_a_plain_message_as_the_general_walk_does(monkeypatch: pytest.MonkeyPatch) -> None:
    from prefixguard.lint.position import Locator
    text = '{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[' + ",\n ".join(MIXED) + "]}"
    pointers = [f"/messages/{i}{tail}" for i in range(len(MIXED)) for tail in ("", "/content", "/role", "/content/0")]

    def spans() -> list[tuple[int, int]]:
        return [Locator(text).span(p) for p in pointers]   # a fresh locator each: no span remembered

    fast = spans()
    monkeypatch.setattr(jsonspan, "_plain_message", re.compile(r"(?!)"))
    assert spans() == fast
    assert text[slice(*fast[1])] == '"plain"' and text[slice(*fast[5])] == '"spaced out"'


@pytest.mark.parametrize("bad", ['{"role":"user","content":"a\tb"}',      # a raw control character
                                 '{"role":"user","content":"open}',        # an unclosed string
                                 '{"role":"user","content":"x"} {"role":"user","content":"y"}'])
def test_bad_plain_messages_fail_as_the_general_walk_fails(bad: str, monkeypatch: pytest.MonkeyPatch) -> None:
    body = ('{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[' + bad + "]}").encode()
    fast, general = both_ways(body, monkeypatch)
    assert fast == general and fast[0] == "error"


def test_every_recorded_request_reads_the_same_both_ways(shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bodies = sorted((shared_data / "recorded").rglob("*.request.json"))
    assert len(bodies) > 50
    for path in bodies:
        raw = json.loads(path.read_bytes())
        # as recorded (indented: the fast path rarely fits) and compact (as SDKs send it: it fits)
        for body in (path.read_bytes(), json.dumps(raw, separators=(",", ":")).encode()):
            fast, general = both_ways(body, monkeypatch)
            assert fast == general, path


def test_a_large_body_lints_and_diffs_the_same_both_ways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over the old ceiling of 20,000 parts: findings and the comparison are those of the general walk."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_bytes(tiny_messages(21_000, "the end", system="Today is 2026-12-04 10:31:07."))
    b.write_bytes(tiny_messages(21_000, "another end", system="Today is 2026-12-04 10:31:07."))

    def outputs() -> list[tuple[int, str]]:
        runs = [CliRunner().invoke(main, args, catch_exceptions=False) for args in (
            ["lint", "--no-tokens", "-o", "json", str(a)], ["diff", "--no-tokens", str(a), str(b)])]
        return [(r.exit_code, r.stdout) for r in runs]

    fast = outputs()
    assert fast[0][0] == 1 and "PG" in fast[0][1]    # a finding (the timestamp in the system prompt)
    assert "'the end' -> 'another end'" in fast[1][1]  # the break is found at the last message
    monkeypatch.setattr(jsonspan, "_plain_message", re.compile(r"(?!)"))
    assert outputs() == fast
    pa, pb = (parse_request(p.read_bytes(), count_tokens=False) for p in (a, b))
    monkeypatch.undo()
    fa, fb = (parse_request(p.read_bytes(), count_tokens=False) for p in (a, b))
    assert compare(fa, fb) == compare(pa, pb)


def cpu_per_part(n: int) -> float:
    """CPU seconds per part of reading n tiny messages."""
    body = tiny_messages(n)
    start = time.process_time()
    parse_request(body, count_tokens=False)
    return (time.process_time() - start) / n


def memory_per_part(n: int) -> float:
    """Peak bytes of Python memory per part of reading n tiny messages, the text itself left out."""
    body = tiny_messages(n)
    tracemalloc.start()
    try:
        parse_request(body, count_tokens=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return (peak - len(body)) / n


def test_cost_per_part_stays_flat_from_20k_to_200k_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wire, "MAX_PARTS", 0)
    cpu_per_part(1_000)  # warm: imports, rules, regexes
    cpu_small, cpu_big = cpu_per_part(20_000), cpu_per_part(200_000)
    # linear: ten times the parts cost ten times as much, within the noise of a shared machine
    assert cpu_big < 1.6 * cpu_small + 2e-6, (cpu_small, cpu_big)
    mem_small, mem_big = memory_per_part(5_000), memory_per_part(50_000)   # tracemalloc slows every allocation
    assert mem_big < 1.2 * mem_small, (mem_small, mem_big)
    # and small: microseconds and about 400 bytes a part (its segment, content, offsets and fingerprint;
    # no key or pointer string of its own, and the decoded message is let go as its segment is made)
    assert cpu_big < 25e-6 and mem_big < 460, (cpu_big, mem_big)


def test_real_sessions_are_far_below_the_ceiling_and_a_body_above_it_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert wire.MAX_PARTS is not None and wire.MAX_PARTS >= 200_000
    parse_request(tiny_messages(25_000))   # over the old ceiling: analysed
    monkeypatch.setattr(wire, "MAX_PARTS", 1_000)
    with pytest.raises(TooLarge, match="about 1200 parts, over the ceiling of 1000"):
        parse_request(tiny_messages(1_200))


@pytest.mark.parametrize("content_keys", [("content",), ("content", "tool_calls")])
def test_shared_headers_equal_each_message_own(content_keys: tuple[str, ...]) -> None:
    from prefixguard.wire.segments import MessageHeaders, message_header
    messages = [json.loads(m) for m in MIXED] + [{"role": "assistant", "tool_calls": []},
                                                 {"role": "user", "cache_control": {"type": "ephemeral"}},
                                                 {"role": ["user"], "content": "x"}, {"name": "x", "content": "y"}]
    header_of = MessageHeaders(*content_keys)
    shared = [header_of(m) for m in messages]
    assert shared == [message_header(m, *content_keys) for m in messages]
    assert shared[0] is header_of({"role": "user", "content": "again"})


def recorded_prompts(shared_data: Path) -> list[Prompt]:
    out = []
    for path in sorted((shared_data / "recorded").rglob("*.request.json")):
        for body in (path.read_bytes(), json.dumps(json.loads(path.read_bytes()), separators=(",", ":")).encode()):
            try:
                out.append(parse_request(body, count_tokens=False))
            except InputError:
                continue
    return out


def test_keys_made_again_are_those_the_chain_hashed(shared_data: Path) -> None:
    """A part whose key is left out makes it again when read: the chain made from those keys is the
    one made while the parts were read (from the keys then encoded)."""
    from prefixguard.model.fingerprint import chain
    prompts = recorded_prompts(shared_data) + [parse_request(tiny_messages(50), count_tokens=False)]
    left_out = 0
    for prompt in prompts:
        assert chain(prompt.segments) == prompt.chain
        left_out += sum(s._key is None for s in prompt.segments)
    assert left_out > 100   # most parts hold no key of their own


def test_a_part_is_found_by_its_pointer_as_a_dict_of_every_pointer_finds_it(shared_data: Path) -> None:
    from prefixguard.model.prompt import part_finder
    prompts = recorded_prompts(shared_data) + [parse_request(tiny_messages(50, system="s"), count_tokens=False)]
    for prompt in prompts:
        every = {s.pointer: s for s in prompt.segments}
        find = part_finder(prompt.segments)
        for pointer, seg in every.items():
            assert find(pointer) is seg
            for near in (pointer + "/0", pointer.rsplit("/", 1)[0], pointer + "x"):
                assert find(near) is every.get(near)
    assert part_finder([])("/messages/0/content") is None


def test_the_history_is_keyed_from_the_divergence_as_from_the_start(
        shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """classify walks only the messages from the first differing part on: the cause and detail are
    those of a walk of every message, for truncated, compacted and rewritten histories."""
    from prefixguard.judge import classify
    base: list[Any] = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"} for i in range(40)]
    summary = {"role": "user", "content": "Summary of the previous conversation: we fixed the bug."}
    variants: list[list[Any]] = [
        base[:10] + base[13:], base[:10] + [summary] + base[36:], base[:10] + [summary],
        base[:10] + [{"role": "user", "content": "turn 13"}] + base[11:],
        base[:39] + [{"role": "user", "content": [{"type": "text", "text": "turn 39"}]}]]

    def body(messages: list[Any]) -> bytes:
        return json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 5, "messages": messages}).encode()

    a = parse_request(body(base), count_tokens=False)
    pairs = [(a, parse_request(body(v), count_tokens=False)) for v in variants]
    prompts = recorded_prompts(shared_data)
    pairs += list(zip(prompts, prompts[1:], strict=False))
    fast = [compare(x, y) for x, y in pairs]
    assert {"history_truncated", "history_compacted"} <= {c for r in fast for c in r.causes}
    monkeypatch.setattr(classify, "_message_start", lambda a, b, at: 0)
    assert [compare(x, y) for x, y in pairs] == fast


def test_plain_chat_messages_keep_their_level_and_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    """Leading system and developer messages are the system level, a later one is not; a tool message's
    string is a tool result: the same on the plain-message path as on the general walk."""
    roles = ["system", "developer", "user", "system", "assistant", "tool", "user"]
    messages = [{"role": r, "content": f"{r} {i}"} for i, r in enumerate(roles)]
    body = json.dumps({"model": "gpt-4o", "messages": messages}, separators=(",", ":")).encode()
    for count_tokens in (False, True):
        fast, general = both_ways(body, monkeypatch, count_tokens=count_tokens)
        assert fast == general and fast[0] == "ok"
    parts = fast[1][-1]
    assert [(p[0], p[2]) for p in parts] == [("system", "text"), ("system", "text")] + [("messages", "text")] * 3 + [
        ("messages", "tool_result"), ("messages", "text")]


def test_a_body_read_like_another_is_the_body_read_alone(shared_data: Path) -> None:
    """A diff's B takes the parts it would make equal to A's (parse_request `like`): what every
    consumer reads of it is what B alone reads as, however A differs (another model, counting, API,
    a part moved, a header with other fields), and the parts it shares are A's own."""
    chat = [{"role": r, "content": f"{r} {i}"} for i, r in enumerate(["system", "user", "assistant", "user"])]

    def body(messages: list[Any], **fields: Any) -> bytes:
        return json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 5, **fields, "messages": messages},
                          separators=(",", ":")).encode()

    plain = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"} for i in range(30)]
    named = [dict(m, name="bob") if i == 3 else m for i, m in enumerate(plain)]
    numbered = [dict(m, n=1) if i == 3 else m for i, m in enumerate(plain)]
    floated = [dict(m, n=1.0) if i == 3 else m for i, m in enumerate(plain)]
    pairs: list[tuple[bytes, bytes]] = [
        (body(plain), body(plain[:29] + [{"role": "user", "content": "another"}])),
        (body(plain), body(plain + plain[:3])),                                     # B extends A
        (body(plain), body(plain[:10])),                                            # B is a prefix of A
        (body(plain), body(plain[1:])),                                             # every part moved
        (body(plain), body(plain, system="a system prompt first")),                 # every part moved on
        (body(plain), body(plain, max_tokens=500)),                                 # every start moved
        (body(plain), body(plain, model="claude-opus-4-1")),                        # counted for another model
        (body(numbered), body(floated)), (body(plain), body(named)), (body(named), body(named)),
        (body(plain), body(chat, model="gpt-4o")),
        (body(chat, model="gpt-4o"), body(chat + chat, model="gpt-4o")),
        (tiny_messages(300, "the end"), tiny_messages(300, "another end")),
    ]
    recorded = sorted((shared_data / "recorded").rglob("*.request.json"))
    compact = [json.dumps(json.loads(p.read_bytes()), separators=(",", ":")).encode() for p in recorded]
    pairs += list(zip(compact, compact[1:], strict=False)) + [(b, b) for b in compact]
    taken = 0
    for a, b in pairs:
        for count_tokens, counted_a in ((False, False), (True, True), (True, False)):
            try:
                first = parse_request(a, count_tokens=counted_a)
                alone = parse_request(b, count_tokens=count_tokens)
            except InputError:
                continue
            like = parse_request(b, count_tokens=count_tokens, like=first)
            assert view(like) == view(alone), (a[:80], b[:80], count_tokens)
            ids = {id(s) for s in first.segments}
            taken += sum(id(s) in ids for s in like.segments)
    assert taken > 1000   # parts were taken, not only made again
    a, b = (parse_request(tiny_messages(300, end), count_tokens=False) for end in ("the end", "another end"))
    again = parse_request(tiny_messages(300, "another end"), count_tokens=False, like=a)
    assert [x is y for x, y in zip(a.segments, again.segments, strict=True)] == [True] * 299 + [False]
    assert compare(a, again) == compare(a, b)
    # headers are taken as the same only where they encode the same (== says 1 == 1.0, and ignores order)
    from prefixguard.wire.segments import _same_header
    assert _same_header({"role": "user"}, {"role": "user"})
    assert not _same_header({"role": "user", "n": 1}, {"role": "user", "n": 1.0})
    assert not _same_header({"role": "user", "name": "x"}, {"name": "x", "role": "user"})
    assert not _same_header(None, {"role": "user"}) and not _same_header({"role": "user"}, {"role": "tool"})


def test_the_reader_takes_a_known_string_only_where_the_characters_are_the_same() -> None:
    """jsonspan.parse(known=...): a plain message's content is the known string at the same start when it
    has the same characters (no copy is kept), and its own string wherever anything differs."""
    text = json.dumps({"messages": [{"role": "user", "content": c} for c in ("abc", "xyz", "q")]})
    starts = [m.start() for m in re.finditer(r'"(abc|xyz|q)"', text)]
    same, other, longer = "".join(["ab", "c"]), "xyw", "qq"   # made at run time: not the literals' own objects
    spec = {"messages": {"[]": {"content": {"[]": None}}}}
    known = [(0, "skipped"), (starts[0], same), (starts[1], other), (starts[2], longer)]
    root = jsonspan.parse(text, spec, iter(known))
    values = list(root.get("messages").elements)  # type: ignore[union-attr]
    assert [m.content for m in values] == ["abc", "xyz", "q"]
    assert values[0].content is same and values[1].content is not other and values[2].content is not longer
    # a plain message's decoded value is made when asked for (the array's value holds its role only)
    assert [m.value for m in jsonspan.parse(text, spec).get("messages").elements] == json.loads(text)["messages"]  # type: ignore[union-attr]
    assert [m.value for m in values] == json.loads(text)["messages"]
    # read like a body for another model (its parts are not taken), B's parts still hold A's strings
    a = parse_request(tiny_messages(50, "the end"), count_tokens=False)
    other_model = tiny_messages(50, "the end").replace(b"claude-sonnet-4-5", b"claude-sonnet-4-0")
    b = parse_request(other_model, count_tokens=False, like=a)
    assert not any(x is y for x, y in zip(a.segments, b.segments, strict=True))
    assert all(x.value is y.value for x, y in zip(a.segments, b.segments, strict=True))
    assert view(b) == view(parse_request(other_model, count_tokens=False))
