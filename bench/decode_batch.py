"""Decode throughput with continuous batching: tokens/s at batch 1, 4, 16, 64.

Each batch size gets its requests prefilled first; only the decode steps after that are timed.

    .venv/bin/python bench/decode_batch.py [--json] [--preset small] [--batches 1 4 16 64]
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

from prefixguard.engine.llm_engine import LLMEngine  # noqa: E402


def clock(args) -> float:
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
        return time.perf_counter()
    return time.process_time()   # this process's CPU time: other processes on a shared machine do not inflate it


def run_batch(engine: LLMEngine, batch: int, args, rng: random.Random) -> dict:
    vocab = min(engine.config.vocab_size, 100_000)   # a real model's vocabulary may be smaller
    seqs = [engine.add_request([rng.randrange(vocab) for _ in range(args.prompt)], max_tokens=args.tokens + 1)
            for _ in range(batch)]
    while any(not s.output_ids for s in seqs):      # prefill everything first
        engine.step()
    t0 = clock(args)
    steps = 0
    while engine.has_unfinished():
        engine.step()
        steps += 1
    dt = clock(args) - t0
    tokens = sum(len(s.output_ids) - 1 for s in seqs)
    return {"batch": batch, "decode_tokens": tokens, "steps": steps, "seconds": dt, "tokens_per_s": tokens / dt,
            "step_ms": dt / steps * 1e3}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--preset", default="small", help="a model preset, or smollm2-135m (the real model)")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--prompt", type=int, default=32, help="prompt tokens per request")
    ap.add_argument("--tokens", type=int, default=16, help="decode steps timed per request")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads (1: stable timings on busy shared cores)")
    ap.add_argument("--attention", default="auto", help="the engine's attention backend (auto, sdpa, triton, flex)")
    ap.add_argument("--cuda-graphs", choices=["auto", "on", "off"], default="auto")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    rng = random.Random(0)
    graphs = {"on": True, "off": False, "auto": None}[args.cuda_graphs]
    pages = max(args.batches) * (-(-(args.prompt + args.tokens + 2) // 16)) + 16
    engine = LLMEngine(args.preset, device=args.device, dtype=args.dtype, page_size=16, max_batch=max(args.batches),
                       kv_pages=pages, prefix_reuse=False, attention=args.attention, cuda_graphs=graphs)
    for b in args.batches:    # warm up (kernels compiled; each batch's CUDA graph captured or flex bucket compiled)
        if b == args.batches[0] or engine.graphs is not None or engine.flex is not None:
            run_batch(engine, b, args, rng)
    rows = [run_batch(engine, b, args, rng) for b in args.batches]
    base = rows[0]["tokens_per_s"]
    for r in rows:
        r["speedup"] = r["tokens_per_s"] / base
    if args.json:
        print(json.dumps({"preset": args.preset, "device": args.device, "dtype": args.dtype, "prompt": args.prompt,
                          "tokens": args.tokens, "attention": engine.attention,
                          "cuda_graphs": engine.graphs is not None, "rows": rows}, indent=2))
        return
    print(f"preset {args.preset} on {args.device} ({args.dtype}, attention {engine.attention}, CUDA graphs "
          f"{'on' if engine.graphs is not None else 'off'}), {args.prompt}-token prompts, {args.tokens} decode steps")
    print(f"{'batch':>5} {'tokens/s':>10} {'step ms':>8} {'vs batch ' + str(rows[0]['batch']):>11}")
    for r in rows:
        print(f"{r['batch']:>5} {r['tokens_per_s']:>10.1f} {r['step_ms']:>8.1f} {r['speedup']:>10.2f}x")


if __name__ == "__main__":
    main()
