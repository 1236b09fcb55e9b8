"""The engine on CUDA (skipped without a GPU; bench/gpu.sh runs it on a lent one)."""
from __future__ import annotations

import random

import pytest
import torch

from prefixguard.engine.llm_engine import LLMEngine

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def prompts(rng: random.Random) -> list[list[int]]:
    base = [rng.randrange(100_000) for _ in range(300)]
    return [base[:c] + [rng.randrange(100_000) for _ in range(rng.randint(1, 40))] for c in (0, 16, 100, 255, 300)]


@pytest.mark.parametrize("dtype,tol", [("float32", 1e-4), ("bfloat16", 3e-2)])
@pytest.mark.parametrize("page_size", [1, 16])
def test_reuse_equals_scratch_on_cuda(dtype, tol, page_size):
    torch.backends.cuda.matmul.allow_tf32 = False
    rng = random.Random(page_size)
    engine = LLMEngine("tiny", device="cuda", dtype=dtype, page_size=page_size, prefill_chunk=128, keep_logits=True)
    ps = prompts(rng)
    seqs = engine.generate(ps[:1], max_tokens=4) + engine.generate(ps[1:], max_tokens=6)
    assert sum(s.cached_tokens for s in seqs) > 0
    for s in seqs:
        ref = engine.model.reference_logits(s.prompt_ids + s.output_ids[:-1], start=len(s.prompt_ids) - 1)
        got = torch.stack(s.logits).to(ref.device)
        scale = ref.abs().max().item() if dtype != "float32" else 1.0
        assert (ref - got).abs().max().item() <= tol * scale, s


def test_1b_bf16_reuse_matches_scratch():
    rng = random.Random(0)
    engine = LLMEngine("1b", device="cuda", dtype="bfloat16", page_size=16, kv_pages=1024, keep_logits=True)
    system = [rng.randrange(128_000) for _ in range(1000)]
    engine.generate([system + [1, 2, 3]], max_tokens=8)
    second = engine.generate([system + [1, 2, 3]], max_tokens=8)[0]
    assert second.cached_tokens == 992
    ref = engine.model.reference_logits(second.prompt_ids + second.output_ids[:-1], start=len(second.prompt_ids) - 1)
    got = torch.stack(second.logits).to(ref.device)
    assert (ref - got).abs().max().item() <= 3e-2 * ref.abs().max().item()
