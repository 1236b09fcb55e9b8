"""Prefill and decode, side by side in one run: the engine against Hugging Face transformers'
LlamaForCausalLM on the same shape and the same random weights.

Prefill: both compute one prompt from scratch and the logits of its last position (the engine: one
request through the scheduler, paged KV pool and radix tree, max_tokens=1; transformers: a forward pass
with its KV cache and logits_to_keep=1, what its generate() does first). The two are timed alternately
and each keeps its fastest repeat: on the CPU this process's CPU time (one thread: equal to wall time
on an idle machine, and not inflated by other processes on a shared one), on CUDA wall time after a
synchronize. Before timing, the last logits are checked equal in fp32 (the same model, or the ratio
would mean nothing); in bf16 each side's error against an fp32 copy of the same weights is reported.

Decode (--decode-tokens N): greedy generation of N tokens after a short prompt, per step: the engine's
generate() against transformers' generate() (its own KV cache), each time minus its prefill.

    .venv/bin/python bench/prefill_vs_hf.py [--preset small] [--tokens 2048] [--repeats 5] [--json]
        [--device cuda --dtype bfloat16 --decode-tokens 64]

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
    """transformers' Llama of the same shape, holding the engine's weights (same device and dtype)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    hc = LlamaConfig(vocab_size=config.vocab_size, hidden_size=config.hidden_size,
                     intermediate_size=config.intermediate_size, num_hidden_layers=config.num_layers,
                     num_attention_heads=config.num_heads, num_key_value_heads=config.num_kv_heads,
                     head_dim=config.head_dim, max_position_embeddings=config.max_position,
                     rms_norm_eps=config.rms_eps, rope_theta=config.rope_theta,
                     tie_word_embeddings=config.tie_embeddings, attention_bias=config.qkv_bias,
                     torch_dtype="float32")
    hc._attn_implementation = "sdpa"
    with torch.device(engine.device):
        model = LlamaForCausalLM(hc).to(engine.dtype).eval()
    missing, unexpected = model.load_state_dict(engine.model.state_dict(), strict=False)
    if unexpected or [m for m in missing if m != "lm_head.weight"]:
        raise SystemExit(f"weights do not map: missing {missing}, unexpected {unexpected}")
    model.tie_weights()
    return model


def timer(device: torch.device):
    """A clock: CPU time of this process on the CPU, wall time after a synchronize on CUDA."""
    if device.type == "cuda":
        def now() -> float:
            torch.cuda.synchronize(device)
            return time.perf_counter()
        return now
    return time.process_time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="small")
    ap.add_argument("--tokens", type=int, nargs="+", default=[2048])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--decode-tokens", type=int, default=0, help="also time greedy decode of this many tokens")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.backends.cuda.matmul.allow_tf32 = False
    rng = random.Random(0)
    longest = max(args.tokens)
    engine = LLMEngine(args.preset, device=args.device, dtype=args.dtype, page_size=16, prefill_chunk=longest,
                       kv_pages=2 * longest // 16 + 64, prefix_reuse=False, keep_logits=True)
    config = engine.config
    hf = hf_model(config, engine)
    now = timer(engine.device)
    dev = engine.device

    def ours(prompt: list[int]) -> torch.Tensor:
        return engine.generate([prompt], max_tokens=1)[0].logits[-1]

    @torch.inference_mode()
    def theirs(prompt: list[int]) -> torch.Tensor:
        return hf(torch.tensor([prompt], device=dev), use_cache=True, logits_to_keep=1).logits[0, -1].float().cpu()

    def timed(fn) -> float:
        t0 = now()
        fn()
        return now() - t0

    reference = None
    if engine.dtype != torch.float32:     # an fp32 copy of the same (rounded) weights: each side's error
        from prefixguard.engine.model import build_model
        reference = build_model(config, device=args.device, dtype=torch.float32, seed=0)
        reference.load_state_dict({k: v.float() for k, v in engine.model.state_dict().items()}, strict=False)
    prefill = []
    for n in args.tokens:
        prompt = [rng.randrange(config.vocab_size) for _ in range(n)]
        a, b = ours(prompt), theirs(prompt)                       # also the warm-up
        row = {"tokens": n, "max_logit_diff": (a - b).abs().max().item()}
        if reference is None and row["max_logit_diff"] > 1e-3:
            raise SystemExit(f"the two models disagree: last logits differ by {row['max_logit_diff']:.2e}")
        if reference is not None:
            ref = reference.reference_logits(prompt, start=n - 1)[0].cpu()
            scale = ref.abs().max().item()
            row["engine_error_of_scale"] = (a - ref).abs().max().item() / scale
            row["transformers_error_of_scale"] = (b - ref).abs().max().item() / scale
        best = {"engine": float("inf"), "transformers": float("inf")}
        for _ in range(args.repeats):
            prompt = [rng.randrange(config.vocab_size) for _ in range(n)]
            best["engine"] = min(best["engine"], timed(lambda p=prompt: ours(p)))
            best["transformers"] = min(best["transformers"], timed(lambda p=prompt: theirs(p)))
        row.update(engine_s=best["engine"], transformers_s=best["transformers"],
                   ratio=best["engine"] / best["transformers"])
        prefill.append(row)
    del reference
    decode = decode_side_by_side(engine, hf, args, rng, now) if args.decode_tokens else None
    import transformers

    result = {"preset": args.preset, "threads": args.threads, "device": args.device, "dtype": args.dtype,
              "prefill": prefill, "decode": decode, "torch": torch.__version__,
              "transformers": transformers.__version__}
    if len(prefill) == 1:                  # the fields of a single-length run, as before
        result.update(tokens=prefill[0]["tokens"], engine_s=prefill[0]["engine_s"],
                      transformers_s=prefill[0]["transformers_s"], ratio=prefill[0]["ratio"],
                      max_logit_diff=prefill[0]["max_logit_diff"])
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for r in prefill:
        print(f"prefill of {r['tokens']} tokens, preset {args.preset}, {args.dtype} on {args.device}, "
              f"fastest of {args.repeats}; last logits differ by {r['max_logit_diff']:.1e}")
        print(f"  engine        {r['engine_s']:.4f} s")
        print(f"  transformers  {r['transformers_s']:.4f} s   (LlamaForCausalLM {transformers.__version__}, sdpa)")
        print(f"  engine / transformers = {r['ratio']:.3f}  ({'ok' if r['ratio'] <= 1.0 else 'SLOWER'}: goal <= 1.00)")
    if decode:
        print(f"decode of {decode['tokens']} tokens: engine {decode['engine_step_ms']:.2f} ms/step, transformers "
              f"generate() {decode['transformers_step_ms']:.2f} ms/step (engine x{decode['speedup']:.2f})")


def decode_side_by_side(engine: LLMEngine, hf, args, rng: random.Random, now) -> dict:
    """Greedy decode after a 32-token prompt, per step, prefill subtracted: the engine against transformers'
    generate()."""
    n = args.decode_tokens
    prompt = [rng.randrange(engine.config.vocab_size) for _ in range(32)]
    ids = torch.tensor([prompt], device=engine.device)

    def ours(tokens: int) -> float:
        t0 = now()
        engine.generate([prompt], max_tokens=tokens)
        return now() - t0

    @torch.inference_mode()
    def theirs(tokens: int) -> float:
        t0 = now()
        hf.generate(ids, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False, pad_token_id=0)
        return now() - t0

    ours(n), theirs(n)                                             # warm-up
    best = {"engine": float("inf"), "transformers": float("inf")}
    for _ in range(max(1, args.repeats // 2)):
        best["engine"] = min(best["engine"], (ours(n + 1) - ours(1)) / n)
        best["transformers"] = min(best["transformers"], (theirs(n + 1) - theirs(1)) / n)
    return {"tokens": n, "prompt": len(prompt), "engine_step_ms": best["engine"] * 1e3,
            "transformers_step_ms": best["transformers"] * 1e3, "speedup": best["transformers"] / best["engine"]}


if __name__ == "__main__":
    main()
