"""The flex attention backend (engine/flex_paged.py) on the CPU.

flex_attention runs eagerly here (compiling it takes about a minute per shape on a CPU): the eager
path evaluates the mask_mod on every (query, key) pair and ignores the block lists, so the block
lists the compiled kernels walk are checked on their own (test_block_lists_allow_exactly_the_mask).
On CUDA the compiled kernels run in tests/test_engine_cuda.py, through bench/gpu.sh."""
from __future__ import annotations

import random

import pytest
import torch

from prefixguard.engine.attention import choose_backend
from prefixguard.engine.flex_paged import Q_BLOCK, FlexPaged
from prefixguard.engine.llm_engine import LLMEngine

TOL = 1e-4


def scratch_error(engine: LLMEngine, seq) -> float:
    ref = engine.model.reference_logits(seq.prompt_ids + seq.output_ids[:-1], start=len(seq.prompt_ids) - 1)
    return (ref - torch.stack(seq.logits)).abs().max().item()


@pytest.mark.parametrize("page_size", [1, 16])
def test_flex_engine_equals_scratch_and_sdpa(page_size):
    """Cold prefill, prefill over a cached prefix (chunked), and decode of several sequences at once
    (padding rows in the batch bucket): logits within the fp32 tolerance of a from-scratch pass, the
    same tokens as the sdpa backend."""
    rng = random.Random(page_size)
    base = [rng.randrange(100_000) for _ in range(150)]
    prompts = [base[:c] + [rng.randrange(100_000) for _ in range(rng.randint(1, 20))] for c in (0, 17, 40, 100, 150)]
    outputs = {}
    for attention in ("flex", "sdpa"):
        engine = LLMEngine("tiny", page_size=page_size, kv_pages=1024 // page_size, prefill_chunk=48,
                           keep_logits=True, attention=attention)
        seqs = engine.generate(prompts[:1], max_tokens=2) + engine.generate(prompts[1:], max_tokens=5)
        assert sum(s.cached_tokens for s in seqs) > 0.4 * sum(len(s.prompt_ids) for s in seqs[1:])
        assert max(scratch_error(engine, s) for s in seqs) <= TOL
        outputs[attention] = [s.output_ids for s in seqs]
        if attention == "flex":   # shapes by bucket: powers of two, decode steps of 3 and 4 sequences in one
            assert all(b & (b - 1) == 0 and q & (q - 1) == 0 for b, q in engine.flex._buckets)
            assert (4, 1) in engine.flex._buckets and (3, 1) not in engine.flex._buckets
    assert outputs["flex"] == outputs["sdpa"]


@pytest.mark.parametrize("page_size", [1, 4, 16])
def test_block_lists_allow_exactly_the_mask(page_size):
    """What the compiled kernel computes: partial blocks through the mask_mod, full blocks whole,
    nothing else. That must be exactly the causal mask over each sequence's own pages: a block left
    out drops keys, a block listed twice counts them twice, a wrong full block lets other sequences'
    keys in. Shared prefix pages, scattered pages, several query blocks, and padding rows."""
    rng = random.Random(page_size)
    pages_total = 800 // page_size
    flex = FlexPaged((pages_total + 1) * page_size, page_size, torch.device("cpu"), compile=False)
    shared = list(range(128 // page_size))             # the cached prefix on consecutive pages: 2 whole KV blocks
    rest = rng.sample(range(len(shared), pages_total), pages_total - len(shared))
    rows = []
    for start, end in ((0, 300), (60, 61), (64, 333), (199, 200), (126, 127), (127, 128)):   # (first, end)
        own = rest[len(rows) * (40 // page_size):]
        need = -(-end // page_size)
        rows.append((shared + own[:need - len(shared)] if need > len(shared) else shared[:need], start, end))
    decode = [r for r in rows if r[2] - r[1] == 1]
    for batch, has_full in ((rows, True), (rows[1:2], False), (decode, True)):
        meta = flex.plan(batch)
        bm = meta.block_mask
        b = torch.arange(meta.batch)[:, None, None]
        q = torch.arange(meta.q_rows)[None, :, None]
        kv = torch.arange(flex.num_blocks * flex.kv_block)[None, None, :]
        want = bm.mask_mod(b, 0, q, kv)                                            # [B, Q, KV]
        tiles = torch.zeros(meta.batch, -(-meta.q_rows // Q_BLOCK), flex.num_blocks, dtype=torch.int64)
        for num, idx, weight in ((bm.kv_num_blocks, bm.kv_indices, 1), (bm.full_kv_num_blocks, bm.full_kv_indices, 2)):
            for i in range(meta.batch):
                for j in range(tiles.shape[1]):
                    listed = idx[i, 0, j, :num[i, 0, j]].long()
                    assert listed.unique().numel() == listed.numel()
                    tiles[i, j, listed] += weight
        assert tiles.max() <= 2                                                     # never partial and full
        tile = tiles.repeat_interleave(Q_BLOCK, 1)[:, :meta.q_rows].repeat_interleave(flex.kv_block, 2)
        allowed = ((tile == 1) & want) | (tile == 2)
        assert torch.equal(allowed, want)
        assert bool((tiles == 2).any()) == has_full
        assert (meta.q_rows > Q_BLOCK) == (batch is rows)                           # several query blocks


def test_flex_is_chosen_only_by_name():
    cpu = torch.device("cpu")
    assert choose_backend("flex", cpu) == "flex"
    assert choose_backend("auto", cpu) == "sdpa"
    with pytest.raises(ValueError, match="flex"):
        choose_backend("flash", cpu)
