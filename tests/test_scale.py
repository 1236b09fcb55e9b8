"""The token scale by kind of content (prefixguard/judge/scale.py): tool schemas, text and tool calls scale
apart, fitted from what the tokenizer explains, on real recorded sessions and their billed totals."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.bench import load_bench

from prefixguard.judge.redis_table import _decode_value, _encode_value
from prefixguard.judge.scale import CALLS, MAX_RATIO, TEXT, TOOLS, Fit, TokenScale, fit_key
from prefixguard.model import tokens
from prefixguard.model.prompt import Prompt, compact_json
from prefixguard.model.usage import Usage
from prefixguard.replay import sources
from prefixguard.wire import parse_request

PLANNING = "recorded/crewai/utilities_TestAnthropicStructuredPlanning.test_anthropic_research_workflow_generates_steps"
OPENAI_AGENT = "recorded/pydantic-ai/test_temporal_test_complex_agent_run"


def _session(shared_data: Path, name: str) -> list[tuple]:
    """(prompt, the provider's usage) of each request of a recorded session that reported its total."""
    out = []
    for r in sources.load(shared_data / name).requests:
        if r.body and r.reported and r.reported.prompt_total:
            out.append((parse_request(json.dumps(r.body), path=r.path), r.reported))
    return out


def _one_ratio(scale: TokenScale, prompt, usage: Usage) -> None:
    """What the scale did before kinds: one ratio per model over its latest request, within MAX_RATIO
    either way (beyond, tokens unseen), knowing no tool-use prompt."""
    media = sum(s.media_tokens for s in prompt.segments)
    ours, theirs = prompt.total_tokens - media - prompt.front, usage.prompt_total - media
    ratio = min(MAX_RATIO, max(1 / MAX_RATIO, theirs / ours))
    scale._fit.put(fit_key(prompt), Fit(ratio=ratio, unseen=max(0, round(theirs - ratio * ours)), ruled=0.0), 1e9)


def _next_totals(session: list[tuple], one_ratio: bool) -> list[float]:
    """Each request after the first: its prompt total as scaled by what earlier ones taught, over its bill."""
    scale, errors = TokenScale(), []
    for i, (prompt, usage) in enumerate(session):
        if i:
            errors.append(scale.scaled(prompt).total_tokens / usage.prompt_total - 1)
        scale.learn(prompt, usage, [len(prompt.segments) - 1])
        if one_ratio:
            _one_ratio(scale, prompt, usage)
    return errors


def test_a_growing_session_tells_tool_schemas_from_text(shared_data: Path) -> None:
    """Claude, 12 requests: 245 tokens of tool schemas (ours, cl100k) stay while the conversation grows.
    One ratio per model, knowing no tool-use prompt, predicts each next total 3-8% over; by kind, with the
    tool-use prompt's share the bills bear out kept apart (Fit.ruled), within 3% (1.3% on average) once the
    session has shown two make-ups, and the second request within 2% (it was 19% over, and later ones up to
    3.3% off, while the prompt was unseen tokens fitted as text)."""
    session = _session(shared_data, PLANNING)
    assert len(session) >= 10 and {p.model for p, _ in session} == {"claude-sonnet-4-20250514"}
    by_kind, one = _next_totals(session, False), _next_totals(session, True)
    later = [abs(e) for e in by_kind[2:]]
    assert max(later) <= 0.03 and sum(later) / len(later) <= 0.014, [round(100 * e, 1) for e in by_kind]
    assert abs(by_kind[1]) <= 0.02
    assert sum(abs(e) > 0.03 for e in one[2:]) >= 6, [round(100 * e, 1) for e in one]
    scale = TokenScale()
    for prompt, usage in session:
        scale.learn(prompt, usage, [len(prompt.segments) - 1])
    kinds = scale._fit.get(fit_key(session[-1][0])).kinds
    # the growing tool calls scale near Claude's ratio to cl100k for JSON; the constant prefix (schemas and
    # system text, the tool-use prompt apart) holds more per token of ours
    assert 1.0 < kinds[CALLS] < 1.15 and min(kinds[TOOLS], kinds[TEXT]) > kinds[CALLS]


def test_tool_render_count_as_the_model_reads_them(shared_data: Path) -> None:
    """gpt-4o with 19 function tools, counted in its own encoding with the tools as OpenAI renders them (a typed
    namespace, prefixguard/wire/tool_render.py; their JSON is 2.4x the bill): the body alone comes within 11%
    of each bill (the first, whose docstring descriptions we render ~40 tokens long, the most). The text is
    exact, so the fit scales only the tools and the calls, and only a little."""
    session = _session(shared_data, OPENAI_AGENT)
    assert [p.model for p, _ in session] == ["gpt-4o"] * len(session) and len(session) >= 3
    first, bill = session[0]
    json_tools = sum(tokens.count(compact_json(s.value), "o200k_base") for s in first.segments if s.level == "tools")
    assert json_tools > 2 * bill.prompt_total
    assert all(abs(p.total_tokens / u.prompt_total - 1) <= 0.11 for p, u in session)
    by_kind = _next_totals(session, False)
    assert all(abs(e) <= 0.09 for e in by_kind), [round(100 * e, 1) for e in by_kind]
    scale = TokenScale()
    scale.learn(first, bill, [len(first.segments) - 1])
    kinds = scale._fit.get(fit_key(first)).kinds
    assert kinds[TEXT] == 1.0 and 0.85 < kinds[TOOLS] <= 1.0


def test_requests_of_one_make_up_keep_one_ratio_and_the_bill(shared_data: Path) -> None:
    """Until requests differ in their mix of kinds, nothing tells the kinds apart: one ratio for all, and
    the latest request comes out at its bill."""
    prompt, usage = _session(shared_data, PLANNING)[0]
    scale = TokenScale()
    for _ in range(3):
        scale.learn(prompt, usage, [len(prompt.segments) - 1])
    fit = scale._fit.get(fit_key(prompt))
    assert len(set(fit.kinds)) == 1 and len(fit.seen) == 3
    assert abs(scale.scaled(prompt).total_tokens - usage.prompt_total) <= 1


@pytest.mark.parametrize("fit", [Fit(1.1, 12, 5, (0.4, 1.0, 0.7), ((869, 20, 0, 364), (869, 20, 95, 423))),
                                 Fit(0.9, 0, -1, (0.9, 0.9, 0.9), ()), Fit(1.25, 300, 40)])
def test_the_fleet_index_keeps_fits_by_kind(fit: Fit) -> None:
    assert _decode_value(_encode_value(fit)) == fit


def test_a_bill_smaller_than_exact_text_scales_it_down() -> None:
    """gpt-4o text only, billed less than its exact count (a provider that dropped a part): the text
    scales down rather than predicting reads of tokens the provider does not have."""
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hello " * 300}]}
    prompt = parse_request(json.dumps(body))
    scale = TokenScale()
    scale.learn(prompt, Usage(prompt_total=prompt.total_tokens - 100, reported=True), [0])
    assert scale.scaled(prompt).total_tokens == prompt.total_tokens - 100


PUBLIC = Path(__file__).resolve().parent / "data" / "public"


def test_tokens_the_provider_adds_after_every_breakpoint_are_never_read() -> None:
    """Claude with a breakpoint on its tool definition (Mirascope's public cassettes, the Messages API and
    Bedrock): request 1 writes 4,602 tokens and bills 147 (Sonnet 4) or 330 (Haiku 4.5 on Bedrock) more
    that the body does not show: the tool-use instructions, after the tools. Fitted into the tools' ratio,
    they made request 2's prefix 4,742 and 4,925; the write says where the prefix ends, so both predict
    the 4,602 the provider read. The three-turn sessions, whose breakpoint moves, stay exact."""
    rows = [r for r in load_bench("real_traffic").measure(PUBLIC, ("mirascope",)).rows
            if "claude" in r.model and "web_search" not in r.cassette]
    reads = [r for r in rows if r.reported_read]
    assert len(reads) == 4 and not any(r.first for r in reads)
    for r in reads:
        assert r.proxy_expected == r.sim_predicted == r.reported_read, r
        assert r.verdict == "hit"
    assert {r.reported_read for r in reads if "tool" in r.cassette} == {4602}
    assert all(r.proxy_expected == 0 for r in rows if not r.reported_read)


def test_a_breakpoint_that_held_nothing_had_the_unseen_tokens_after_it() -> None:
    """Mirascope's streamed web search (tests/data/public/mirascope): a breakpoint on the web search tool, whose
    definition is 19 of our tokens; the first pass bills 2,060 and holds nothing (its first event: no read, no
    write). ~2,040 tokens the body does not show, put in front, would have taken the prefix at the breakpoint
    over Sonnet 4's 1,024 and been written: they sit after it, and the next request writes at that breakpoint
    nothing (predicted a read of 2,012 there, read 0)."""
    from prefixguard.wire import parse_response

    folder = PUBLIC / "mirascope" / "test_web_search_tool_stream_anthropic_beta_claude_sonnet_4_0"
    prompt = parse_request((folder / "0001.request.json").read_bytes(), path="/v1/messages")
    usage = parse_response((folder / "0001.response.sse").read_bytes(), "anthropic")
    assert usage.first_pass == 2060 and prompt.segments[0].breakpoint and prompt.segments[0].tokens < 50
    scale = TokenScale()
    scale.learn(prompt, usage, [0], 0, minimum=1024)
    held = scale.scaled(prompt)
    assert scale._fit.get(fit_key(prompt)).front == 0  # shown: none of them in front
    assert held.segments[0].tokens < 1024 and held.total_tokens + held.after >= 2000
    scale = TokenScale()
    scale.learn(prompt, usage, [0], 0)  # the minimum unknown: nothing says where they sit
    assert scale._fit.get(fit_key(prompt)).front == -1
    # a tool of the provider's own: until a read shows them in front, after the parts (its results)
    assert scale.scaled(prompt).segments[0].tokens < 1024


def test_a_short_request_between_an_agents_turns_leaves_the_tool_schemas_ratio() -> None:
    """charmbracelet/crush's recorded Claude sessions: an agent turn (7,781 of our tokens of tool schemas,
    3,843 of text; 14,072 billed), then a 170-token title request on the same model with no tools, then the
    agent again, which read 14,070. The title request pulled the tools' ratio to its own (1.21 -> 1.03) and
    the next read was predicted 12,229. A request without a kind says nothing of its ratio."""
    def body(tools: int, system: str, user: str) -> bytes:
        schemas = [{"name": f"tool_{i}", "description": f"Does thing {i} to a file. " * 6, "input_schema": {
            "type": "object", "properties": {"path": {"type": "string", "description": "Where."},
                                             f"arg_{i}": {"type": "integer"}}, "required": ["path"]}}
                   for i in range(tools)]
        return json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 8, "tools": schemas,
                           "system": [{"type": "text", "text": system}],
                           "messages": [{"role": "user", "content": user}]}).encode()
    agent = parse_request(body(60, "You are a coding agent. " * 300, "Edit the file."), path="/v1/messages")
    title = parse_request(body(0, "Write a short title for this conversation.", "Edit the file."), path="/v1/messages")
    # the bill: the body's tokens at the ratio, and the tool-use prompt the provider adds in front
    def bill(p: Prompt, r: float) -> Usage:
        total = round(r * (p.total_tokens - p.front)) + p.front
        return Usage(prompt_total=total, uncached=total, reported=True)

    scale = TokenScale()
    scale.learn(agent, bill(agent, 1.21), [len(agent.segments) - 1])
    scale.learn(title, bill(title, 1.10), [len(title.segments) - 1])
    assert abs(scale.scaled(agent).total_tokens / bill(agent, 1.21).prompt_total - 1) <= 0.02
