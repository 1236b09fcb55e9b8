"""A chat template that writes the tools somewhere else than in front of the messages (rules/encodings.toml
[tool_placement], prefixguard/wire/front.py, prefixguard/wire/openai_chat.py): Ollama's Llama 3.2 writes them
into the last message, and only where it is the user's, as Ollama's api.Tool JSON, under its own text; a call as
its name and parameters. Checked against llama-stack's recordings of Llama 3.2 on Ollama (tests/data/public), and
the break it makes every turn: the next user message takes the tools, the one before is rendered without them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from prefixguard.cli import main
from prefixguard.judge.compare import compare
from prefixguard.model import templates
from prefixguard.model.prompt import Prompt
from prefixguard.replay.sources import cassette_uris
from prefixguard.wire import parse_request, parse_response, tool_render

PUBLIC = Path(__file__).resolve().parent / "data" / "public"
LOOP = PUBLIC / "llama_stack" / "ollama_llama32_tool_loop"


def _recorded(folder: Path, n: str) -> tuple[Prompt, int, dict]:
    body = json.loads((folder / f"{n}.request.json").read_text())
    prompt = parse_request(json.dumps(body), path=cassette_uris(folder)[n])
    answer = next(folder.glob(f"{n}.response.*"))
    return prompt, parse_response(answer.read_bytes(), prompt.api).prompt_total, body


@pytest.mark.parametrize(("folder", "n", "off"), [
    (LOOP, "0001", 13),  # two tools and a question: 267 billed (counted 84 under before: no template text)
    (LOOP, "0002", 2),  # the same prompt recorded again: 278 billed
    (LOOP, "0003", 0),  # the call and its result last: no tools written, 106 billed (counted 162 over before)
    (LOOP, "0004", 1),  # the next question: the tools in front of it, 414 billed
    (LOOP, "0005", 1),  # a second call's result last: 248 billed
    (PUBLIC / "llama_stack" / "ollama_llama32_tool_schemas", "0001", 3),  # three tools, a $ref the struct drops
    (PUBLIC / "llama_stack" / "ollama_llama32_tool_schemas", "0002", 9),  # an MCP tool: titles dropped
])
def test_ollama_llama_tool_requests_come_out_at_their_bill(folder: Path, n: str, off: int) -> None:
    """The tools where the template writes them, as Ollama's struct writes them, under its text (32 tokens in
    the system message, 52 in front of the tools, a newline after each), calls as their name and parameters: each
    request's body alone comes within `off` of its bill."""
    prompt, billed, _ = _recorded(folder, n)
    assert abs(prompt.total_tokens - billed) <= off, (prompt.total_tokens, billed)


def test_the_tools_go_into_the_last_message_where_it_is_the_users() -> None:
    placed = templates.tool_placement("openai-chat", "llama3.2:3b-instruct-fp16")
    assert placed is not None and (placed.at, placed.system, placed.intro, placed.each) == ("last_user", 32, 52, 1)
    asked, _, body = _recorded(LOOP, "0004")
    levels = [(s.level, s.message_index) for s in asked.segments]
    first_tool = levels.index(("tools", None))
    assert levels[first_tool - 1][1] == 4 and levels[first_tool + 2] == ("messages", 5) == levels[-1]
    answered, _, _ = _recorded(LOOP, "0003")
    assert not any(s.level == "tools" for s in answered.segments)
    # a model whose template writes them in front: the tools lead, as for every other model
    qwen = parse_request(json.dumps({**body, "model": "Qwen/Qwen3-8B"}), path="/v1/chat/completions")
    assert [s.level for s in qwen.segments[:2]] == ["tools", "tools"]


def test_ollama_reads_a_tool_as_its_struct_and_a_call_as_name_and_parameters() -> None:
    tool = {"type": "function", "function": {"name": "greet", "parameters": {
        "type": "object", "title": "greetArguments", "required": ["url"],
        "properties": {"url": {"title": "Url", "type": "string"}, "a<b": {"$ref": "#/$defs/X"}}}}}
    text = tool_render.rendered(tool, "openai-chat", "llama3.2")
    assert text == ('{"type":"function","function":{"name":"greet","description":"","parameters":{"type":"object",'
                    '"required":["url"],"properties":{"a\\u003cb":{"type":null,"description":""},'
                    '"url":{"type":"string","description":""}}}}}')
    call = {"id": "call_1", "type": "function", "function": {"name": "greet", "arguments": '{"url": "x"}'}}
    assert tool_render.rendered_call(call, "openai-chat", "llama3.2") == '{"name": "greet", "parameters": {"url": "x"}}'
    assert tool_render.rendered(tool, "openai-chat", "meta-llama/Llama-3.2-3B-Instruct") is None  # as sent


def test_each_new_turn_moves_the_tools_and_the_server_prefills_again() -> None:
    """The next user turn takes the tools: everything from the earlier user message on is prefilled again, told
    as the template's doing (not as tools the client removed); a template that writes them in front appends."""
    _, _, body = _recorded(LOOP, "0002")
    later = {**body, "messages": [*body["messages"], {"role": "assistant", "content": "Hello, world!"},
                                  {"role": "user", "content": "And the boiling point of water?"}]}
    a, b = (parse_request(json.dumps(x), path="/v1/chat/completions") for x in (body, later))
    result = compare(a, b)
    assert result.broken and result.causes == ["tools_moved"]
    assert result.reused_tokens == a.segments[0].tokens  # the system message alone
    assert "into message 1 in A, into message 3 in B" in result.detail
    for model in ("Qwen/Qwen3-8B", "meta-llama/Llama-3.2-3B-Instruct"):
        a, b = (parse_request(json.dumps({**x, "model": model}), path="/v1/chat/completions") for x in (body, later))
        assert compare(a, b).causes == ["append_only"]


def test_diff_counts_the_templates_text_once(tmp_path: Path) -> None:
    """`prefixguard diff` reads B with A's parts where they are equal: the system part, which holds the template's
    own text, is counted for B as for A (it was counted twice), so the prefix reused is the system message."""
    body = json.loads((LOOP / "0002.request.json").read_text())
    later = {**body, "messages": [*body["messages"], {"role": "assistant", "content": "Hello, world!"},
                                  {"role": "user", "content": "And the boiling point of water?"}]}
    (tmp_path / "a.json").write_text(json.dumps(body))
    (tmp_path / "b.json").write_text(json.dumps(later))
    result = CliRunner().invoke(main, ["diff", "--format", "json", str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    assert result.exit_code == 1, result.output
    got = json.loads(result.output)
    alone = parse_request(json.dumps(later), path="/v1/chat/completions")
    assert got["causes"] == ["tools_moved"] and got["reused_tokens"] == alone.segments[0].tokens == 58


@pytest.mark.parametrize("body", [
    {"model": "llama3.2", "tools": [{"type": "function", "function": {"name": "a"}}],
     "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yes"},
                  {"role": "user", "content": "go on"}]},
    {"model": "Qwen/Qwen3-8B", "messages": [{"role": "user", "content": "hi"}],
     "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}},
])
def test_a_template_shapes_the_prompt_whether_or_not_it_is_counted(body: dict) -> None:
    """Where the tools go and whether a schema is in the prompt are the template's, not the counting's: `lint
    --no-tokens` and `diff --no-tokens` see the parts a counted read sees (the schema was in their prompt)."""
    counted, sized = (parse_request(json.dumps(body), path="/v1/chat/completions", count_tokens=c) for c in (True, False))
    assert sized.tokens_estimated and not counted.tokens_estimated
    assert [(s.level, s.kind, s.pointer) for s in sized.segments] == [(s.level, s.kind, s.pointer) for s in counted.segments]
