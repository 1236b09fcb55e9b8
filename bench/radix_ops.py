"""Radix tree operations per second: match_prefix and insert on a multi-turn chat workload and on
the Mooncake trace, as the engine calls them (match, allocate the uncached rest, insert the whole). Timed in
process CPU time (time.process_time), which other processes on a shared machine do not inflate.

    .venv/bin/python bench/radix_ops.py [--json]

Rates alone, for the engine's own workloads. The comparison with SGLang's RadixCache is measured side by
side, in one process, by ../shared/tools/radix-vs-sglang/radix_vs_sglang.py.
"""
from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from prefixguard.engine.kv_pool import PageAllocator  # noqa: E402
from prefixguard.engine.radix import RadixTree  # noqa: E402

MOONCAKE = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "mooncake" / "synthetic_trace.jsonl"
BLOCK = 512


def multi_turn(seed: int = 0, systems: int = 8, system_len: int = 1024, conversations: int = 200,
               requests: int = 5000) -> list[tuple[list[int], list[int]]]:
    """(prompt, reply) pairs: each conversation keeps its system prompt and history; turns interleave."""
    rng = random.Random(seed)
    sys_prompts = [[rng.randrange(100_000) for _ in range(system_len)] for _ in range(systems)]
    history = [list(sys_prompts[c % systems]) for c in range(conversations)]
    out = []
    for _ in range(requests):
        c = rng.randrange(conversations)
        history[c] += [rng.randrange(100_000) for _ in range(rng.randint(20, 200))]
        reply = [rng.randrange(100_000) for _ in range(rng.randint(50, 300))]
        out.append((list(history[c]), reply))
        history[c] += reply
    return out


def mooncake() -> tuple[list[tuple[list[int], list[int]]], list[dict]]:
    rows = [json.loads(line) for line in MOONCAKE.open()]
    return [(r["hash_ids"], []) for r in rows], rows


def run(work: list[tuple[list[int], list[int]]], page_size: int) -> dict:
    total = sum(len(p) + len(r) for p, r in work)
    alloc = PageAllocator(total // page_size + 1)
    tree = RadixTree(page_size, alloc)
    t_match = t_insert = 0.0
    hit = prompt_tokens = 0
    hits = []
    # The workload's lists (tens of millions of token references) out of the cyclic GC's walks: else a
    # collection that the tree's allocations trigger walks them all and lands on whichever op ran it.
    gc.collect()
    gc.freeze()
    for prompt, reply in work:
        t0 = time.process_time()
        pages, _ = tree.match_prefix(prompt)
        t1 = time.process_time()
        full = prompt + reply
        given = list(pages) + alloc.alloc(len(full) // page_size - len(pages))
        t2 = time.process_time()
        tree.insert(full, given)
        t3 = time.process_time()
        t_match += t1 - t0
        t_insert += t3 - t2
        hit += len(pages) * page_size
        hits.append(len(pages))
        prompt_tokens += len(prompt)
    gc.unfreeze()
    n = len(work)
    return {"requests": n, "page_size": page_size, "match_per_s": n / t_match, "insert_per_s": n / t_insert,
            "hit_ratio": hit / prompt_tokens, "tree_pages": tree.total_pages, "hits": hits}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    results = {}
    work = multi_turn()
    for ps in (1, 16):
        results[f"multi_turn_ps{ps}"] = run(work, ps)
    if MOONCAKE.is_file():
        work, rows = mooncake()
        r = run(work, 1)     # one "token" per 512-token block: the trace's own granularity
        # token-weighted, as the data README states it: min(hit_blocks * 512, input_length) / input_length
        r["token_hit_ratio"] = (sum(min(h * BLOCK, row["input_length"]) for h, row in zip(r.pop("hits"), rows))
                                / sum(row["input_length"] for row in rows))
        results["mooncake_blocks"] = r
    for r in results.values():
        r.pop("hits", None)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{'workload':<18} {'match/s':>10} {'insert/s':>10} {'hit ratio':>9}")
    for name, r in results.items():
        print(f"{name:<18} {r['match_per_s']:>10,.0f} {r['insert_per_s']:>10,.0f} "
              f"{r.get('token_hit_ratio', r['hit_ratio']):>9.3f}")


if __name__ == "__main__":
    main()
