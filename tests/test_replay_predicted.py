"""Replay's predicted cached tokens against the reported ones, on a real mixed capture: `prefixguard demo`
runs the example agent (the real anthropic and openai SDKs) through the proxy to the engine server with
`--cache-policy auto`, so each request is served under its own provider's contract and the capture holds
both shapes with the server's cache fields.

How close: the sim judges a request by the same contract code (prefixguard.judge.policies) as the server, in
the same order, seconds apart (far from any TTL); it counts tokens as the proxy does for any provider
(our tokenizer, scaled to the totals the server reported before: prefixguard/judge/scale.py), not with the
server's own template. Totals must agree within 2%, and each request within results.agreement's slack
(16 tokens or 5%) on at least 80% of them: a read that ends inside a part (OpenAI matches tokens, in
128-token steps) can land one step off, and where a conversation starts its first read is judged with
the scale of the previous, longer requests.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.cli import CliRunner

from prefixguard.cli import main
from prefixguard.replay.results import AGREE_FRACTION, AGREE_TOKENS
from prefixguard.capture.reader import read_capture

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo_capture(demo_run) -> Path:
    return demo_run.store  # the session's one demo run (tests/conftest.py)


def replay_json(*args: str) -> dict:
    res = CliRunner().invoke(main, ["replay", *args, "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_auto_policy_predicts_what_the_engine_server_reported(demo_capture: Path, tmp_path: Path) -> None:
    rows = read_capture(demo_capture)
    assert {r["api"] for r in rows} == {"anthropic", "openai-chat"}
    reported = [r for r in rows if r["usage"]["reported"]]
    reported_cache_read = sum(r["usage"]["cache_read"] for r in reported)
    assert len(reported) == len(rows) and reported_cache_read > 0

    out = tmp_path / "results.json"
    doc = replay_json(str(demo_capture), "--out", str(out))
    assert doc["policy"] == "auto"                  # the default for a capture
    got = doc["predicted_vs_reported"]
    assert got["requests"] == len(rows) and got["reported_cache_read"] == reported_cache_read
    assert abs(got["predicted_cache_read"] - reported_cache_read) <= 0.02 * reported_cache_read, got
    assert got["agree"] >= 0.8 * got["requests"], got

    # Per request, from the results file: the same count of predictions within the slack of the report.
    outcomes = json.loads(out.read_text())["runs"]["as_is"]["requests"]
    by_id = {r["id"]: r for r in rows}
    agree = 0
    for o in outcomes:
        told = by_id[o["ref"]]["usage"]["cache_read"]
        assert o["reported_cache_read"] == told
        agree += abs(o["cache_read"] - told) <= max(AGREE_TOKENS, AGREE_FRACTION * max(told, o["cache_read"]))
    assert agree == got["agree"]
    # Both providers' requests hit and missed: the agreement is not all zeros.
    for api in ("anthropic", "openai-chat"):
        hits = [o for o in outcomes if by_id[o["ref"]]["api"] == api and o["reported_cache_read"]]
        misses = [o for o in outcomes if by_id[o["ref"]]["api"] == api and not o["reported_cache_read"]]
        assert hits and misses, api

    text = CliRunner().invoke(main, ["replay", str(demo_capture)]).output
    assert f"{got['agree']}/{got['requests']} agree" in text


def test_one_contract_for_a_mixed_capture_predicts_it_wrong(demo_capture: Path) -> None:
    """What auto fixes: one policy over both providers' traffic misses the reported numbers by far."""
    reported = replay_json(str(demo_capture))["predicted_vs_reported"]["reported_cache_read"]
    for policy in ("radix", "anthropic"):
        got = replay_json(str(demo_capture), "--policy", policy)["predicted_vs_reported"]
        assert abs(got["predicted_cache_read"] - reported) > 0.2 * reported, (policy, got)
