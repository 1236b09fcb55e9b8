"""The engine target: a real (tiny) model replays an agent session; its radix tree reuses exactly what
the sim predicts, and reuse cuts the measured prefill time."""
from __future__ import annotations

from pathlib import Path

import pytest

from prefixguard.replay import sources
from prefixguard.replay.results import against_baseline, summarize
from prefixguard.replay.player import replay
from prefixguard.replay.targets import EngineTarget, SimTarget

SESSION = "189f0222310bd8eee310f204e91b9c84.jsonl"   # the smallest miniswe session: 6 calls, ~8k tokens


@pytest.fixture(scope="module")
def session(shared_data: Path) -> list[sources.Request]:
    return sources.load(shared_data / "lmcache-agent-trace" / "miniswe" / SESSION).requests


def on_engine(requests: list[sources.Request], reuse: bool) -> list:
    target = EngineTarget("tiny", page_size=16, prefix_reuse=reuse, max_tokens=4)
    try:
        return replay(requests, target, timestamps=False, progress=False)
    finally:
        target.close()


def test_engine_reuses_what_the_sim_predicts_and_saves_prefill(session: list[sources.Request]) -> None:
    predicted = replay(session, SimTarget(page_size=16), progress=False)
    measured = on_engine(session, reuse=True)
    baseline = on_engine(session, reuse=False)
    assert [o.error for o in measured] == [None] * len(session)
    assert [o.cache_read for o in measured] == [o.cache_read for o in predicted]
    assert [o.prompt_tokens for o in measured] == [o.prompt_tokens for o in predicted]
    assert all(o.cache_read == 0 for o in baseline)
    assert all(o.ttft_s and o.prefill_s and o.output_tokens == 4 for o in measured)
    summary = against_baseline(summarize(measured), summarize(baseline))
    assert summary["hit_ratio"] > 0.75
    assert summary["ttft_s"]["with_reuse"]["n"] == len(session) - 1   # all but the cold first call
    # Prefill of ~20% of the tokens: well under the full prefill (about 0.53 of its time on an idle machine). The
    # totals are tens of milliseconds, so the other test worker's load can land on one side of a pair (0.87 was
    # seen once): the best of up to three pairs is the figure, as timeit takes the best of its repeats.
    for _ in range(2):
        if summary["prefill_ratio"] < 0.8:
            break
        summary = against_baseline(summarize(on_engine(session, reuse=True)), summarize(on_engine(session, reuse=False)))
    assert summary["prefill_ratio"] < 0.8 and summary["prefill_saved_s"] > 0


def test_engine_fails_a_request_too_long_for_the_model_without_stopping(session: list[sources.Request]) -> None:
    target = EngineTarget("tiny", page_size=16, kv_pages=64, max_tokens=2)   # 1,024 tokens of KV
    try:
        out = replay(session[:2], target, timestamps=False, progress=False)
    finally:
        target.close()
    assert all(o.error and "KV pool" in o.error for o in out)


def test_realtime_targets_keep_the_trace_pace_scaled(session: list[sources.Request]) -> None:
    import time
    first = session[:3]
    span = first[-1].ts - first[0].ts
    assert span > 1
    speed = span / 1.0                       # the three calls spread over one second
    target = EngineTarget("tiny", page_size=16, max_tokens=1)
    try:
        t0 = time.perf_counter()
        out = replay(first, target, speed=speed, progress=False)
        wall = time.perf_counter() - t0
    finally:
        target.close()
    assert wall >= 1.0 and all(o.error is None for o in out)
