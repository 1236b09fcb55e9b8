"""The text Completions API (/v1/completions): its prompt read in pieces whose tokens are the whole prompt's, a
prompt extended or edited in front judged as such, its answers' usage, and the bodies it does not analyse."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from prefixguard.capture.store import open_store
from prefixguard.model import tokens
from prefixguard.proxy.analysis import Analyzer, FlowState, Response
from prefixguard.utils.errors import InputError, TooLarge
from prefixguard.wire import parse_request, parse_response, routes
from prefixguard.wire.openai_completions import pieces

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()
HANDBOOK = "\n".join(f"{i}. Quote the carrier status of order {i} word for word, then offer help." for i in range(90))


def completion(prompt: object, model: str = "Qwen/Qwen3-0.6B") -> bytes:
    return json.dumps({"model": model, "prompt": prompt, "max_tokens": 8}).encode()


@pytest.mark.parametrize("model", ["gpt-3.5-turbo-instruct", "gpt-4o"])  # cl100k_base, o200k_base
def test_the_pieces_count_the_whole_prompts_tokens(model: str) -> None:
    prompt = parse_request(completion(README, model), path="/v1/completions")
    assert prompt.api == "openai-completions" and not prompt.tokens_estimated
    assert "".join(s.value for s in prompt.segments) == README and len(prompt.segments) > 100
    assert prompt.total_tokens == tokens.count(README, tokens.encoding_for(model))


def test_recorded_prompts_come_out_at_their_bill() -> None:
    """Billed prompt_tokens of recorded text completions: davinci-002 (cl100k_base; traceloop/openllmetry's
    opentelemetry-instrumentation-openai 0.62.4, tests/traces/cassettes/test_completions/test_async_completion)
    and Qwen3-0.6B on vLLM (llama-stack 0.7.3, its openai_completion guided-choice recording): no template, no
    start token."""
    davinci = {"model": "davinci-002", "prompt": "Tell me a joke about opentelemetry"}
    qwen = {"model": "Qwen/Qwen3-0.6B", "prompt": "I am feeling really sad today.", "stream": False}
    for body, billed in ((davinci, 8), (qwen, 7)):
        assert parse_request(json.dumps(body), path="/v1/completions").total_tokens == billed


def test_pieces_are_cut_by_the_text_alone() -> None:
    """An extended prompt keeps every piece of the earlier one but its last; text put in front puts the pieces
    back in step within a few words."""
    before = [README[a:b] for a, b in pieces(README)]
    extended = parse_request(completion(README + " And one more line."), path="/v1/completions")
    assert [s.value for s in extended.segments][: len(before) - 1] == before[:-1]
    stamped = "Now: 2026-12-06T17:00:01\n" + README
    assert len(set(before) - {stamped[a:b] for a, b in pieces(stamped)}) <= 2


def test_paths_and_answers() -> None:
    for path in ("/v1/completions", "/v1/v1/completions", "/ollama/v1/completions"):
        assert parse_request(completion("Hello there"), path=path).api == "openai-completions"
    assert routes.resolve("/v1/chat/completions").api == "openai-chat"
    assert parse_request(completion("Hello there")).api == "openai-completions"  # by its body alone
    answer = {"id": "cmpl-1", "object": "text_completion", "model": "Qwen/Qwen3-0.6B",
              "choices": [{"text": " fine", "index": 0, "finish_reason": "length"}],
              "usage": {"prompt_tokens": 1630, "completion_tokens": 4,
                        "prompt_tokens_details": {"cached_tokens": 1619}}}
    usage = parse_response(json.dumps(answer), "openai-completions")
    counts = (usage.prompt_total, usage.cache_read, usage.uncached, usage.output, usage.reported)
    assert counts == (1630, 1619, 11, 4, True)
    first = {**answer, "choices": [{"text": " fi", "index": 0, "finish_reason": None}], "usage": None}
    chunks = [first, {**answer, "choices": []}]
    streamed = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    assert parse_response(streamed, "openai-completions").cache_read == 1619


@pytest.mark.parametrize(("prompt", "says"), [(["a", "b"], "a batch of 2 prompts"), ([1, 2, 3], "token ids"),
                                              (None, "no 'prompt' string")])
def test_what_is_not_analysed_says_why(prompt: object, says: str) -> None:
    with pytest.raises(InputError, match=says):
        parse_request(completion(prompt), path="/v1/completions")


def test_a_prompt_of_more_pieces_than_the_ceiling_is_too_large(monkeypatch: pytest.MonkeyPatch) -> None:
    import prefixguard.wire as wire

    monkeypatch.setattr(wire, "MAX_PARTS", 100)
    with pytest.raises(TooLarge, match="too large to analyse: .* pieces of text, over the ceiling of 100"):
        parse_request(completion(README), path="/v1/completions")
    assert parse_request(completion(HANDBOOK[:400]), path="/v1/completions").api == "openai-completions"


def test_a_prompt_extended_edited_in_front_or_new() -> None:
    """Through the proxy's analysis: an extension is a hit, a timestamp changed in front a break naming it, text
    put in front a break, an unrelated prompt a new one (cold)."""
    other = HANDBOOK.replace("Quote the carrier status of order", "Check the refund ledger entry")
    sequence = [(HANDBOOK, 0, "cold"), (HANDBOOK + "\nQ: where is order 7?\nA:", 1600, "hit"),
                ("Now: 2026-12-06T17:00:01\n" + HANDBOOK, 0, "miss_prefix_changed"), (other, 0, "cold"),
                ("Now: 2026-12-06T18:00:01\n" + other, 0, "miss_prefix_changed"),
                ("Now: 2026-12-06T18:05:09\n" + other, 0, "miss_prefix_changed"),
                ("Now: 2026-12-06T18:05:09\n" + other + "\nQ: and order 8?", 1700, "hit")]
    with tempfile.TemporaryDirectory() as tmp:
        analyzer = Analyzer(store=str(Path(tmp) / "capture.db"))
        for i, (text, read, _) in enumerate(sequence):
            analyzer.request(FlowState(id=str(i), ts=i, sent=i, path="/v1/completions",
                                       upstream="http://127.0.0.1:8000", body=completion(text)))
            billed = tokens.count(text, tokens.encoding_for("Qwen/Qwen3-0.6B"))
            usage = {"prompt_tokens": billed, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": read}}
            body = json.dumps({"object": "text_completion", "choices": [{"text": "x"}], "usage": usage}).encode()
            analyzer.finish(Response(id=str(i), status=200, headers_at=i, ended_at=i, body=body, chunks=None))
        analyzer.close()
        with open_store(Path(tmp) / "capture.db") as db:
            rows = list(db.rows())
    assert [r["verdict"] for r in rows] == [v for _, _, v in sequence]
    whole = tokens.count(HANDBOOK, tokens.encoding_for("Qwen/Qwen3-0.6B"))
    assert 0.95 * whole <= rows[1]["expected_cached"] <= whole  # every piece of the earlier prompt but its last
    assert rows[2]["cause"].startswith("history_rewritten at /prompt")
    assert rows[5]["cause"].startswith("volatile_content at /prompt")


def test_replay_renders_a_text_prompt_as_it_is() -> None:
    """Replay's engine and sim targets see a text prompt's own ids (no turns, no reply header), as the engine does."""
    from prefixguard.engine import chat_template
    from prefixguard.replay.rendering import rendered
    from prefixguard.replay.sources import Request

    req = Request(index=0, ts=0.0, path="/v1/completions", body={"model": "Qwen/Qwen3-0.6B", "prompt": HANDBOOK})
    prompt, ids = rendered(req, None)
    assert ids == chat_template.encoding().encode_ordinary(HANDBOOK) and prompt.total_tokens == len(ids)
