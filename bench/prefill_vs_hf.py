"""CPU prefill, side by side in one run: the engine against Hugging Face transformers'
LlamaForCausalLM on the same shape and the same random weights.

Both compute one prompt from scratch and the logits of its last position (the engine: one request
through the scheduler, paged KV pool and radix tree, max_tokens=1; transformers: a forward pass with
its KV cache and logits_to_keep=1, what its generate() does first). The two are timed alternately
and each keeps its fastest repeat of this process's CPU time (one thread: equal to wall time on an
idle machine, and not inflated by other processes on a shared one). Before timing, the last logits
are checked equal (the same model, or the ratio would mean nothing).

    .venv/bin/python bench/prefill_vs_hf.py [--preset small] [--tokens 2048] [--repeats 5] [--json]

Prints both times and engine / transformers (goal: <= 1.00). Needs transformers (the dev extra).
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from prefixguard.engine.config import ModelConfig  # noqa: E402
from prefixguard.engine.llm_engine import LLMEngine  # noqa: E402


def hf_model(config: ModelConfig, engine: LLMEngine):
    """transformers' Llama of the same shape, holding the engine's weights."""
    from transformers import LlamaConfig, LlamaForCausalLM

    hc = LlamaConfig(vocab_size=config.vocab_size, hidden_size=config.hidden_size,
                     intermediate_size=config.intermediate_size, num_hidden_layers=config.num_layers,
                     num_attention_heads=config.num_heads, num_key_value_heads=config.num_kv_heads,
                     head_dim=config.head_dim, max_position_embeddings=config.max_position,
                     rms_norm_eps=config.rms_eps, rope_theta=config.rope_theta,
                     tie_word_embeddings=config.tie_embeddings, attention_bias=config.qkv_bias,
                     torch_dtype="float32")
    hc._attn_implementation = "sdpa"
    model = LlamaForCausalLM(hc).eval()
    missing, unexpected = model.load_state_dict(engine.model.state_dict(), strict=False)
    if unexpected or [m for m in missing if m != "lm_head.weight"]:
        raise SystemExit(f"weights do not map: missing {missing}, unexpected {unexpected}")
    model.tie_weights()
    return model


def cpu_time(fn) -> tuple[float, torch.Tensor]:
    t0 = time.process_time()
    out = fn()
    return time.process_time() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="small")
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    rng = random.Random(0)
    engine = LLMEngine(args.preset, dtype="float32", page_size=16, prefill_chunk=args.tokens,
                       kv_pages=2 * args.tokens // 16 + 64, prefix_reuse=False, keep_logits=True)
    config = engine.config
    hf = hf_model(config, engine)

    def ours(prompt: list[int]) -> torch.Tensor:
        return engine.generate([prompt], max_tokens=1)[0].logits[-1]

    @torch.inference_mode()
    def theirs(prompt: list[int]) -> torch.Tensor:
        return hf(torch.tensor([prompt]), use_cache=True, logits_to_keep=1).logits[0, -1]

    prompt = [rng.randrange(config.vocab_size) for _ in range(args.tokens)]
    diff = (ours(prompt) - theirs(prompt)).abs().max().item()      # also the warm-up
    if diff > 1e-3:
        raise SystemExit(f"the two models disagree: last logits differ by {diff:.2e}")
    best = {"engine": float("inf"), "transformers": float("inf")}
    for _ in range(args.repeats):
        prompt = [rng.randrange(config.vocab_size) for _ in range(args.tokens)]
        best["engine"] = min(best["engine"], cpu_time(lambda: ours(prompt))[0])
        best["transformers"] = min(best["transformers"], cpu_time(lambda: theirs(prompt))[0])
    ratio = best["engine"] / best["transformers"]
    import transformers

    result = {"preset": args.preset, "tokens": args.tokens, "threads": args.threads, "dtype": "float32",
              "engine_s": best["engine"], "transformers_s": best["transformers"], "ratio": ratio,
              "max_logit_diff": diff, "torch": torch.__version__, "transformers": transformers.__version__}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"prefill of {args.tokens} tokens, preset {args.preset}, fp32, {args.threads} thread(s), "
          f"fastest of {args.repeats} (CPU time); last logits agree to {diff:.1e}")
    print(f"  engine        {best['engine']:.3f} s")
    print(f"  transformers  {best['transformers']:.3f} s   (LlamaForCausalLM {transformers.__version__}, sdpa)")
    print(f"  engine / transformers = {ratio:.3f}  ({'ok' if ratio <= 1.0 else 'SLOWER'}: goal <= 1.00)")


if __name__ == "__main__":
    main()
