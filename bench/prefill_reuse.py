"""TTFT with a cached prefix over TTFT without one: what a stable prompt prefix is worth.

For each prompt length, one engine: a base prompt fills the radix tree, then prompts that share
its first f of tokens (page-aligned) and differ after it are timed. The ideal ratio is the uncached
fraction 1 - f; the target is within 0.05 of it.

    .venv/bin/python bench/prefill_reuse.py [--json] [--preset small] [--lengths 2048 8192]
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

FRACTIONS = (0.0, 0.25, 0.5, 0.75, 0.9, 0.99)
SLACK = 0.05


def measure(engine: LLMEngine, prompt: list[int], clock: str) -> tuple[float, int]:
    """TTFT of one request alone. clock "cpu": this process's CPU time (1 thread: equal to wall
    time on an idle machine, and not inflated by other processes on a shared one)."""
    t0 = time.process_time()
    seq = engine.generate([prompt], max_tokens=1)[0]
    return (time.process_time() - t0 if clock == "cpu" else seq.ttft), seq.cached_tokens


def prefill_macs(c: ModelConfig, new: int, ctx: int) -> float:
    """Multiply-adds the engine spends to prefill the last `new` of `ctx` tokens: projections and MLP
    per token, attention per (query, visible key) pair, and one row of logits. The last layer
    computes K and V for every token but the rest only for the last row (nothing reads the others)."""
    q, kv = c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim
    per_token = c.hidden_size * (2 * q + 2 * kv) + 3 * c.hidden_size * c.intermediate_size
    pairs = (ctx * (ctx + 1) - (ctx - new) * (ctx - new + 1)) // 2
    last = 2 * c.hidden_size * kv * new + (per_token - 2 * c.hidden_size * kv) + 2 * q * ctx
    return (c.num_layers - 1) * (per_token * new + 2 * q * pairs) + last + c.hidden_size * c.vocab_size


def run_length(length: int, args, rng: random.Random) -> list[dict]:
    engine = LLMEngine(args.preset, device=args.device, dtype=args.dtype, page_size=args.page_size,
                       kv_pages=6 * length // args.page_size + 64, prefill_chunk=args.prefill_chunk,
                       attention=args.attention)
    vocab = min(engine.config.vocab_size, 100_000)                  # a real model's vocabulary may be smaller
    fresh = lambda n: [rng.randrange(vocab) for _ in range(n)]      # noqa: E731
    measure(engine, fresh(256), args.clock)                         # warm up kernels
    base = fresh(length)
    measure(engine, base, args.clock)                               # the shared prefix, now cached
    rows = []
    for f in FRACTIONS:
        times = []
        for _ in range(args.repeats):
            keep = int(f * length)
            ttft, cached = measure(engine, base[:keep] + fresh(length - keep), args.clock)
            times.append(ttft)
        rows.append({"length": length, "f": f, "cached_tokens": cached, "ttft_s": min(times)})
    t0 = rows[0]["ttft_s"]
    full = prefill_macs(engine.config, length, length)
    for r in rows:
        r["ideal"] = 1 - r["cached_tokens"] / length
        r["compute"] = prefill_macs(engine.config, length - r["cached_tokens"], length) / full
        r["ratio"] = r["ttft_s"] / t0
        r["target"] = r["ideal"] + SLACK
        r["ok"] = r["ratio"] <= r["target"]
        r["within_floor"] = r["ratio"] <= r["compute"] + SLACK       # the compute floor plus the same slack
        r["attention"] = engine.attention                             # "auto" resolved
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--preset", default="small", help="a model preset, or smollm2-135m (the real model)")
    ap.add_argument("--lengths", type=int, nargs="+", default=[2048, 8192])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--page-size", type=int, default=16)
    ap.add_argument("--prefill-chunk", type=int, default=2048)
    ap.add_argument("--attention", default="auto", help="the engine's attention backend (auto, sdpa, triton, flex)")
    ap.add_argument("--repeats", type=int, default=1, help="take the fastest of this many runs per point")
    ap.add_argument("--clock", choices=["cpu", "wall"], help="default: cpu on a CPU device, wall on CUDA")
    ap.add_argument("--threads", type=int, default=1,
                    help="CPU threads (1 by default: on busy shared cores OpenMP barriers add noise)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    args.clock = args.clock or ("cpu" if args.device == "cpu" else "wall")
    rng = random.Random(0)
    rows = [r for n in args.lengths for r in run_length(n, args, rng)]
    if args.json:
        print(json.dumps({"preset": args.preset, "device": args.device, "dtype": args.dtype, "clock": args.clock,
                          "attention": rows[0]["attention"] if rows else args.attention, "rows": rows}, indent=2))
        return
    print(f"preset {args.preset} on {args.device} ({args.dtype}), page size {args.page_size}, "
          f"prefill chunk {args.prefill_chunk}, {args.clock} clock")
    print("ideal = uncached fraction; compute = multiply-adds of the uncached suffix (attention over the"
          " whole context included) over those of the whole prompt")
    print(f"{'tokens':>6} {'f':>5} {'cached':>7} {'TTFT s':>8} {'ratio':>6} {'ideal':>6} {'compute':>7} {'target':>6}")
    for r in rows:
        print(f"{r['length']:>6} {r['f']:>5.2f} {r['cached_tokens']:>7} {r['ttft_s']:>8.3f} {r['ratio']:>6.3f} "
              f"{r['ideal']:>6.3f} {r['compute']:>7.3f} {r['target']:>6.3f} {'ok' if r['ok'] else 'MISS'}")


if __name__ == "__main__":
    main()
