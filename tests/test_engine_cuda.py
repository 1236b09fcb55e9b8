"""The engine on CUDA (skipped without a GPU; bench/gpu.sh runs it on a lent one).

Logits are judged against an fp32 reference of the same weights (the engine's bf16 weights, widened):
fp32 runs must match it to 1e-4, bf16 runs within BF16_TOL of the logits' scale. On an H200 the engine's
bf16 logits were measured 2.8-3.8% of the scale off such a reference at 1k-8k tokens (transformers' own
bf16 path: 33-67%), so BF16_TOL leaves headroom over that and still fails a wrong page or position,
which moves the logits by their whole scale (each test checks its tolerance tells those apart)."""
from __future__ import annotations

import random

import pytest
import torch

from prefixguard.engine.llm_engine import LLMEngine
from prefixguard.engine.model import LlamaModel, build_model

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

BF16_TOL = 0.06
FP32_TOL = 1e-4


@pytest.fixture(autouse=True)
def no_tf32():
    torch.backends.cuda.matmul.allow_tf32 = False


def fp32_reference(engine: LLMEngine) -> LlamaModel:
    if engine.dtype == torch.float32:
        return engine.model
    ref = build_model(engine.config, device="cuda", dtype=torch.float32, seed=0)
    ref.load_state_dict({k: v.float() for k, v in engine.model.state_dict().items()}, strict=False)
    return ref


def error(ref: LlamaModel, seq, scaled: bool) -> tuple[float, float]:
    """Largest difference of the sequence's sampled logits from the reference's, and from the
    reference's logits of the same tokens in another order (what a wrong page would look like)."""
    ids = seq.prompt_ids + seq.output_ids[:-1]
    start = len(seq.prompt_ids) - 1
    want = ref.reference_logits(ids, start=start)
    got = torch.stack(seq.logits).to(want.device)
    wrong = ref.reference_logits(ids[::-1], start=start)
    scale = want.abs().max().item() if scaled else 1.0
    return (want - got).abs().max().item() / scale, (want - wrong).abs().max().item() / scale


def prompts(rng: random.Random) -> list[list[int]]:
    base = [rng.randrange(100_000) for _ in range(300)]
    return [base[:c] + [rng.randrange(100_000) for _ in range(rng.randint(1, 40))] for c in (0, 16, 100, 255, 300)]


@pytest.mark.parametrize("attention", ["sdpa", "triton"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("page_size", [1, 16])
def test_reuse_equals_fp32_reference_on_cuda(attention, dtype, page_size):
    rng = random.Random(page_size)
    engine = LLMEngine("tiny", device="cuda", dtype=dtype, page_size=page_size, prefill_chunk=128, keep_logits=True,
                       attention=attention)
    ps = prompts(rng)
    seqs = engine.generate(ps[:1], max_tokens=4) + engine.generate(ps[1:], max_tokens=6)
    assert sum(s.cached_tokens for s in seqs) > 0
    ref = fp32_reference(engine)
    tol = FP32_TOL if dtype == "float32" else BF16_TOL
    for s in seqs:
        err, wrong = error(ref, s, scaled=dtype != "float32")
        assert err <= tol < wrong, (s, err, wrong)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_flex_reuse_equals_fp32_reference_on_cuda(dtype):
    """The flex backend compiled (engine/flex_paged.py: the kernels walk the block lists, which the CPU's
    eager path never reads): cold and cached prefill, decode of four sequences in one bucket."""
    from torch.nn.attention.flex_attention import flex_attention

    rng = random.Random(16)
    engine = LLMEngine("tiny", device="cuda", dtype=dtype, page_size=16, prefill_chunk=128, keep_logits=True,
                       attention="flex")
    assert engine.flex is not None and engine.flex._attn is not flex_attention    # compiled
    ps = prompts(rng)
    seqs = engine.generate(ps[:1], max_tokens=4) + engine.generate(ps[1:], max_tokens=6)
    assert sum(s.cached_tokens for s in seqs) > 0
    ref = fp32_reference(engine)
    tol = FP32_TOL if dtype == "float32" else BF16_TOL
    for s in seqs:
        err, wrong = error(ref, s, scaled=dtype != "float32")
        assert err <= tol < wrong, (s, err, wrong)


def test_1b_bf16_reuse_matches_fp32_reference():
    rng = random.Random(0)
    engine = LLMEngine("1b", device="cuda", dtype="bfloat16", page_size=16, kv_pages=1024, keep_logits=True)
    system = [rng.randrange(128_000) for _ in range(1000)]
    engine.generate([system + [1, 2, 3]], max_tokens=8)
    second = engine.generate([system + [1, 2, 3]], max_tokens=8)[0]
    assert second.cached_tokens == 992
    err, wrong = error(fp32_reference(engine), second, scaled=True)
    assert err <= BF16_TOL < wrong, (err, wrong)


@pytest.mark.parametrize("preset", ["tiny", "1b"])
def test_cuda_graph_decode_equals_eager_token_for_token(preset):
    """fp32, so that a near tie of random weights cannot flip a token between two correct runs.
    Batches of 1, 3 and 6 sequences replay the graphs of buckets 1, 4 and 8 (padding rows included)."""
    rng = random.Random(4)
    ps = [[rng.randrange(100_000) for _ in range(rng.randint(5, 90))] for _ in range(10)]
    runs = {}
    for graphs in (True, False):
        engine = LLMEngine(preset, device="cuda", dtype="float32", page_size=16, kv_pages=256, attention="triton",
                           cuda_graphs=graphs, keep_logits=True)
        assert (engine.graphs is not None) == graphs
        seqs = []
        for group in (ps[:1], ps[1:4], ps[4:10]):
            seqs += engine.generate(group, max_tokens=12)
        runs[graphs] = seqs
    assert [s.output_ids for s in runs[True]] == [s.output_ids for s in runs[False]]
    for a, b in zip(runs[True], runs[False], strict=True):
        assert (torch.stack(a.logits) - torch.stack(b.logits)).abs().max().item() <= FP32_TOL


def test_paged_decode_equals_sdpa_decode():
    rng = random.Random(9)
    ps = [[rng.randrange(100_000) for _ in range(rng.randint(100, 400))] for _ in range(5)]
    out = {}
    for attention in ("sdpa", "triton", "flex"):
        engine = LLMEngine("tiny", device="cuda", dtype="float32", page_size=16, attention=attention)
        out[attention] = [s.output_ids for s in engine.generate(ps, max_tokens=16)]
    assert out["sdpa"] == out["triton"] == out["flex"]
