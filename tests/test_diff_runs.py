"""A diff's second body read beside the first (`parse_request(like=A)`): the plain messages standing in
the text the two share are one Run, none decoded, and their parts are A's; everything read so is what
B read alone gives (every field of every part, the chain, the comparison)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.cli import CliRunner

from prefixguard.cli import main
from prefixguard.judge.compare import compare
from prefixguard.wire import _spans, jsonspan, parse_request


def body(contents: list[Any], model: str = "claude-sonnet-4-5", **extra: Any) -> bytes:
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": c} for i, c in enumerate(contents)]
    return json.dumps({"model": model, "max_tokens": 16, "messages": msgs, **extra}, separators=(",", ":")).encode()


def view(p: Any) -> tuple[Any, ...]:
    return (
        p.api,
        p.model,
        p.settings,
        p.chain,
        [
            (
                s.level,
                s.pointer,
                s.kind,
                s.role,
                s.value,
                s.start,
                s.end,
                s.key,
                s.tokens,
                s.breakpoint,
                s.message_index,
                s.header,
                s.canon,
            )
            for s in p.segments
        ],
    )


def test_shared_plain_messages_are_one_run_and_their_parts_are_a_s() -> None:
    n = 2000
    a = parse_request(body([f"{i} words" for i in range(n)]), count_tokens=False)
    text_b = body([f"{i} words" for i in range(n - 1)] + ["changed"]).decode()
    shared = jsonspan.common_prefix(a.text, text_b)
    messages = jsonspan.parse(text_b, _spans(text_b), None, shared).get("messages")
    assert messages is not None
    kids = messages.kids
    assert isinstance(kids, jsonspan.Elements) and len(kids) == n
    # one run for the messages wholly in the shared text (the one before the changed one ends at its comma)
    assert [(r.first, r.count) for r in kids.runs] == [(0, n - 1)]
    assert len(messages.value) == 2 and messages.value[0] is jsonspan.RUN_VALUE  # one slot for the run, none a message
    assert [m.content for m in kids][:3] == ["0 words", "1 words", "2 words"]  # still readable one by one
    assert kids[5].content == "5 words" and kids[n - 1].content == "changed" and kids[-2].value["role"] == "user"
    b = parse_request(text_b, count_tokens=False, like=a)
    assert [x is y for x, y in zip(a.segments, b.segments, strict=True)] == [True] * (n - 1) + [False]
    assert b.chain[: n - 1] == a.chain[: n - 1]
    alone = parse_request(text_b, count_tokens=False)
    assert view(b) == view(alone) and compare(a, b) == compare(a, alone)


def test_a_change_in_the_middle_is_found_at_its_message(tmp_path: Any) -> None:
    contents = [f"message {i}" for i in range(400)]
    changed = [*contents[:150], "message 150 edited", *contents[151:]]
    pa, pb = tmp_path / "a.json", tmp_path / "b.json"
    pa.write_bytes(body(contents))
    pb.write_bytes(body(changed))
    a = parse_request(pa.read_bytes(), count_tokens=False)
    b = parse_request(pb.read_bytes(), count_tokens=False, like=a)
    alone = parse_request(pb.read_bytes(), count_tokens=False)
    assert view(b) == view(alone)
    assert sum(x is y for x, y in zip(a.segments, b.segments, strict=True)) == 150  # the run before the change
    found = CliRunner().invoke(main, ["diff", "--no-tokens", "--format", "json", str(pa), str(pb)])
    out = json.loads(found.output)
    assert out["divergence"]["pointer"] == "/messages/150/content", out["divergence"]


VARIED: list[Any] = [
    "plain",
    'esc"aped \\ \u00e9',
    "caf\u00e9 \u4e2d\u6587 \U0001f600",
    [{"type": "text", "text": "a block", "cache_control": {"type": "ephemeral"}}],
    [
        {"type": "text", "text": "nested"},
        {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "r"}]},
    ],
    "",
    "after the blocks",
    "and one more",
]


@pytest.mark.parametrize("at", range(len(VARIED)))
@pytest.mark.parametrize("model", ["claude-sonnet-4-5", "gpt-4o"])
def test_read_beside_a_equals_read_alone_on_varied_bodies(at: int, model: str) -> None:
    """Bodies with escapes, unicode, block lists and markers, changed at each message in turn (and the
    same body): B read beside A is B read alone, parts and chain and comparison alike."""
    kw: dict[str, Any] = {"system": "be brief"} if model.startswith("claude") else {}
    a = parse_request(body(VARIED * 3, model, **kw), count_tokens=False)
    changed = list(VARIED * 3)
    changed[at + len(VARIED)] = "changed here"
    for text_b in (body(changed, model, **kw), body(VARIED * 3, model, **kw), body(VARIED * 3 + ["more"], model, **kw)):
        beside = parse_request(text_b, count_tokens=False, like=a)
        alone = parse_request(text_b, count_tokens=False)
        assert view(beside) == view(alone)
        assert compare(a, beside) == compare(a, alone)


@pytest.mark.parametrize(
    "b_bytes",
    [
        body(["same"] * 300 + ["changed"]),  # shares all but its end
        body(["same"] * 300),  # the very same body
        b"\xef\xbb\xbf" + body(["same"] * 300 + ["x"]),  # a byte order mark: shares nothing
        body(["same"] * 300 + ["caf\u00e9"]).replace(b"\\u00e9", "\u00e9".encode()),  # a UTF-8 tail
    ],
)
def test_the_second_file_is_read_beside_the_first_as_it_is_read_alone(b_bytes: bytes, tmp_path: Any) -> None:
    from prefixguard.cli.diff import load

    pa, pb = tmp_path / "a.json", tmp_path / "b.json"
    pa.write_bytes(body(["same"] * 300 + ["the end"]))
    pb.write_bytes(b_bytes)
    a = load(pa, False)
    beside, alone = load(pb, False, like=a), load(pb, False)
    assert beside.text == alone.text and view(beside) == view(alone)


def test_a_second_file_that_is_not_utf8_fails_as_it_does_alone(tmp_path: Any) -> None:
    pa, pb = tmp_path / "a.json", tmp_path / "b.json"
    pa.write_bytes(body(["same"] * 300 + ["the end"]))
    pb.write_bytes(body(["same"] * 300 + ["the end"]).replace(b"the end", b"the \xff end"))
    found = CliRunner().invoke(main, ["diff", "--no-tokens", str(pa), str(pb)])
    alone = CliRunner().invoke(main, ["lint", "--no-tokens", str(pb)])
    assert found.exit_code == 2 and "not UTF-8" in found.output and "bad byte at offset" in found.output
    assert found.output == alone.output  # the same line, naming the same byte


def test_shape_detection_reads_shared_role_objects_as_it_reads_distinct_messages() -> None:
    """anthropic_detect.score skips a message object it has just read (plain messages share one role
    object per role): the same score as for a body whose every message is its own object."""
    import random

    from prefixguard.wire.anthropic_detect import score

    rng = random.Random(7)
    roles = ["user", "assistant", "system", "tool", "developer"]
    kinds = [{"type": "tool_use"}, {"type": "image_url"}, {"type": "text"}]
    for _ in range(300):
        shared = {r: {"role": r} for r in roles}
        msgs: list[Any] = []
        for _ in range(rng.randint(0, 8)):
            pick = rng.random()
            if pick < 0.6:
                msgs.append(shared[rng.choice(roles[:2] if rng.random() < 0.8 else roles)])
            elif pick < 0.8:
                msgs.append({"role": rng.choice(roles), "content": [rng.choice(kinds)]})
            else:
                msgs.append({"role": "assistant", "tool_calls": []} if rng.random() < 0.5 else None)
        body_shared = {"model": rng.choice(["claude-x", "gpt-4o"]), "messages": msgs}
        distinct = json.loads(json.dumps(body_shared))
        assert score(body_shared) == score(distinct), msgs


def test_read_beside_equals_read_alone_on_random_pairs() -> None:
    """Random bodies (plain messages of every role, spaced or not, escapes, block lists, markers, names)
    and a second body changed, cut or extended at a random place: read beside the first, it is what it is
    read alone, and so is the comparison."""
    import random

    rng = random.Random(28)
    roles = ["user", "assistant", "user", "assistant", "system", "tool"]
    shapes = [  # R: the role, I: the message's index
        '{"role":"R","content":"mI"}',
        '{ "role" : "R" ,\n "content" : "spaced I" }',
        '{"role":"R","content":"esc\\"I\\u00e9"}',
        '{"role":"R","content":[{"type":"text","text":"bI","cache_control":{"type":"ephemeral"}}]}',
        '{"role":"R","content":"named I","name":"x"}',
    ]
    taken = 0
    for _ in range(60):
        model = rng.choice(['"model":"claude-sonnet-4-5","max_tokens":5', '"model":"gpt-4o"'])
        count = rng.randint(1, 40)
        msgs = [
            rng.choice(shapes[:2] * 3 + shapes).replace("R", rng.choice(roles[:4] * 3 + roles)).replace("I", str(i))
            for i in range(count)
        ]
        sep = rng.choice([",", ", ", ",\n  "])

        def text(ms: list[str], model: str = model, sep: str = sep) -> str:
            return "{" + model + ',"messages":[' + sep.join(ms) + "]}"

        a = parse_request(text(msgs), count_tokens=False)
        at = rng.randrange(len(msgs))
        for other in (
            [*msgs[:at], '{"role":"user","content":"changed"}', *msgs[at + 1 :]],
            msgs[: at + 1],
            [*msgs, '{"role":"assistant","content":"more"}'],
        ):
            alone = parse_request(text(other), count_tokens=False)
            beside = parse_request(text(other), count_tokens=False, like=a)
            assert view(beside) == view(alone), (msgs, other)
            assert compare(a, beside) == compare(a, alone)
            taken += sum(x is y for x, y in zip(a.segments, beside.segments, strict=False))
    assert taken > 500  # A's parts were taken (runs, and plain parts one by one), not only made again
