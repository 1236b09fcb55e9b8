"""Logits computed with prefix reuse from the paged pool equal logits computed from scratch (fp32)."""
from __future__ import annotations

import random

import pytest
import torch

from prefixguard.engine.llm_engine import LLMEngine

TOL = 1e-4


def max_diff(engine: LLMEngine, seq) -> float:
    """Every logits row the engine sampled from, against one from-scratch pass over the same tokens."""
    ref = engine.model.reference_logits(seq.prompt_ids + seq.output_ids[:-1], start=len(seq.prompt_ids) - 1)
    return (ref - torch.stack(seq.logits)).abs().max().item()


def shared_prefix_prompts(rng: random.Random, base_len: int, n: int) -> list[list[int]]:
    base = [rng.randrange(100_000) for _ in range(base_len)]
    cuts = sorted({0, 1, 15, 16, 17, 31, 33, 64, base_len // 2, base_len - 1, base_len}
                  | {rng.randrange(base_len) for _ in range(n)})
    return [base[:c] + [rng.randrange(100_000) for _ in range(rng.randint(1, 20))] for c in cuts]


@pytest.mark.parametrize("page_size", [1, 16])
def test_reuse_equals_scratch_interleaved(page_size):
    rng = random.Random(page_size)
    engine = LLMEngine("tiny", page_size=page_size, prefill_chunk=48, keep_logits=True)
    prompts = shared_prefix_prompts(rng, 120, 6)
    first = engine.generate(prompts[:2], max_tokens=3)      # warm the tree
    rest = [engine.add_request(p, max_tokens=rng.randint(1, 6)) for p in prompts[2:]]
    late = []
    while engine.has_unfinished():                             # requests arrive while others decode
        engine.step()
        if len(late) < 3:
            late.append(engine.add_request(prompts[len(late) * 3] + [7, 8, 9], max_tokens=4))
    seqs = first + rest + late
    assert all(s.finish_reason == "length" for s in seqs)
    assert sum(s.cached_tokens for s in seqs) > 0.4 * sum(len(s.prompt_ids) for s in seqs)
    for s in seqs:
        assert s.cached_tokens % page_size == 0 and s.cached_tokens < len(s.prompt_ids)
        assert max_diff(engine, s) <= TOL, s
    tree = engine.scheduler.tree
    assert engine.pool.allocator.num_used == tree.total_pages == tree.evictable_pages   # nothing leaked or left locked


@pytest.mark.parametrize("page_size", [1, 16])
def test_reuse_equals_scratch_under_memory_pressure(page_size):
    rng = random.Random(10 + page_size)
    pool_tokens = 320
    engine = LLMEngine("tiny", page_size=page_size, kv_pages=pool_tokens // page_size, prefill_chunk=64,
                       max_batch=8, keep_logits=True)
    prompts = shared_prefix_prompts(rng, 100, 8) + shared_prefix_prompts(rng, 150, 4)
    rng.shuffle(prompts)
    seqs = engine.generate(prompts, max_tokens=12)
    st = engine.stats
    assert st["evicted_pages"] > 0 and st["cached_tokens"] > 0
    for s in seqs:
        assert len(s.output_ids) == 12 or s.finish_reason == "length"
        assert max_diff(engine, s) <= TOL, s
    tree = engine.scheduler.tree
    assert engine.pool.allocator.num_used == tree.total_pages == tree.evictable_pages


def test_preemption_keeps_outputs_exact():
    """A pool too small for every decode at once: the newest sequence is preempted, recomputed
    from the tree, and still produces exactly the from-scratch tokens."""
    rng = random.Random(3)
    engine = LLMEngine("tiny", page_size=4, kv_pages=40, keep_logits=True)
    prompts = [[rng.randrange(100_000) for _ in range(30)] for _ in range(4)]
    seqs = engine.generate(prompts, max_tokens=20)
    assert engine.stats["preemptions"] > 0
    for s in seqs:
        assert len(s.output_ids) == 20
        ids = s.prompt_ids + s.output_ids[:-1]
        greedy = engine.model.reference_logits(ids, start=len(s.prompt_ids) - 1).argmax(-1).tolist()
        assert greedy == s.output_ids
    assert engine.pool.allocator.num_used == engine.scheduler.tree.total_pages


def test_no_reuse_gives_the_same_tokens():
    rng = random.Random(5)
    prompts = shared_prefix_prompts(rng, 80, 3)
    on = LLMEngine("tiny", page_size=8).generate(prompts, max_tokens=5)
    off_engine = LLMEngine("tiny", page_size=8, prefix_reuse=False)
    off = off_engine.generate(prompts, max_tokens=5)
    assert [s.output_ids for s in on] == [s.output_ids for s in off]
    assert all(s.cached_tokens == 0 for s in off) and any(s.cached_tokens for s in on)
    assert off_engine.pool.allocator.num_used == 0


@pytest.mark.parametrize("dtype,tol", [("bfloat16", 0.05), ("float16", 0.01)])
def test_half_precision_close_to_fp32(dtype, tol):
    rng = random.Random(7)
    prompt = [rng.randrange(100_000) for _ in range(40)]
    ref = LLMEngine("tiny").model.reference_logits(prompt, start=len(prompt) - 1)[0]
    engine = LLMEngine("tiny", dtype=dtype, page_size=16, keep_logits=True)
    engine.generate([prompt[:35] + [1]], max_tokens=1)
    s = engine.generate([prompt], max_tokens=1)[0]
    assert s.cached_tokens == 32
    assert (s.logits[0] - ref).abs().max().item() <= tol


def test_chunked_prefill_equals_scratch():
    rng = random.Random(11)
    engine = LLMEngine("tiny", page_size=16, prefill_chunk=64, keep_logits=True)
    seq = engine.add_request([rng.randrange(100_000) for _ in range(300)], max_tokens=3)
    steps = []
    while engine.has_unfinished():
        steps.append(engine.step())
    assert [len(s) for s in steps[:5]] == [0, 0, 0, 0, 1]     # 64+64+64+64+44 tokens, then the first token
    assert all(got == [seq] for got in steps[4:])              # step() returns who got a token
    assert len(seq.output_ids) == 3 and max_diff(engine, seq) <= TOL
