"""Replay benchmark: `sim` speed on the Mooncake trace, and the engine replaying the miniswe agent trace
with and without prefix reuse (total prefill seconds, TTFT), measured side by side in one run.

    .venv/bin/python bench/replay.py [--sessions 10] [--model tiny] [--device cpu] [--json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from prefixguard.engine import chat_template

from prefixguard.replay import sources
from prefixguard.replay.results import against_baseline, summarize
from prefixguard.stats import distribution
from prefixguard.replay.player import replay
from prefixguard.replay.targets import EngineTarget, SimTarget, prompt_of

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
MOONCAKE = DATA / "mooncake" / "synthetic_trace.jsonl"
MINISWE = DATA / "lmcache-agent-trace" / "miniswe"


def sim_speed(repeat: int) -> dict:
    """Whole trace: load + replay on an unbounded tree; best of `repeat` runs (2 noisy cores)."""
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        trace = sources.load(MOONCAKE)
        t1 = time.perf_counter()
        out = replay(trace.requests, SimTarget(), progress=False)
        t2 = time.perf_counter()
        runs.append((t2 - t0, t1 - t0, t2 - t1, summarize(out)["hit_ratio"]))
    total, load, run, hit = min(runs)
    blocks = sum(len(r.blocks) for r in trace.requests)
    return {"requests": len(trace.requests), "blocks": blocks, "total_s": total, "load_s": load, "replay_s": run,
            "requests_per_s": len(trace.requests) / total, "blocks_per_s": blocks / total, "hit_ratio": hit,
            "median_total_s": statistics.median(r[0] for r in runs)}


def engine_replay(sessions: int, model: str, device: str, max_tokens: int) -> dict:
    """The `sessions` smallest miniswe sessions, back to back, on one engine with reuse and one without."""
    files = sorted(MINISWE.glob("*.jsonl"), key=lambda f: f.stat().st_size)[:sessions]
    with tempfile.TemporaryDirectory() as tmp:
        subset = Path(tmp) / "subset.jsonl"
        subset.write_text("".join(f.read_text() for f in files))
        requests = sources.load(subset).requests
    # Room for every session's whole history (its last prompt), so nothing is evicted: reuse at its ideal.
    last = {r.session: r for r in requests}
    kv_pages = sum(len(chat_template.render(prompt_of(r).segments)) for r in last.values()) // 16 + 1024
    out = {}
    for name, reuse in (("no_reuse", False), ("reuse", True)):
        target = EngineTarget(model, page_size=16, kv_pages=kv_pages, prefix_reuse=reuse, max_tokens=max_tokens,
                              device=device)
        try:
            t0 = time.perf_counter()
            outcomes = replay(requests, target, timestamps=False, progress=False)
            wall = time.perf_counter() - t0
        finally:
            target.close()
        s = summarize(outcomes)
        s["wall_s"] = wall
        s["ttft_all_s"] = distribution([o.ttft_s for o in outcomes if o.ttft_s is not None])
        out[name] = s
    out["reuse"] = against_baseline(out["reuse"], out["no_reuse"])
    out["sessions"], out["calls"], out["model"], out["device"] = sessions, len(requests), model, device
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=10, help="miniswe sessions (smallest first) for the engine")
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--max-tokens", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    result = {"sim": sim_speed(args.repeat), "engine": engine_replay(args.sessions, args.model, args.device,
                                                                       args.max_tokens)}
    if args.json:
        print(json.dumps(result, indent=1))
        return
    s = result["sim"]
    print(f"sim on the Mooncake trace ({s['requests']:,} requests, {s['blocks']:,} blocks of 512 tokens)")
    print(f"  whole trace        {s['total_s']:.3f} s (load {s['load_s']:.3f} s + replay {s['replay_s']:.3f} s)"
          f"  target < 1 s: {'met' if s['total_s'] < 1 else 'NOT met'}")
    print(f"  requests/s         {s['requests_per_s']:,.0f}")
    print(f"  blocks/s           {s['blocks_per_s']:,.0f}")
    print(f"  hit ratio          {s['hit_ratio']:.4f}")
    e = result["engine"]
    print(f"\nengine ({e['model']}, {e['device']}) on miniswe: {e['sessions']} smallest sessions, {e['calls']} calls")
    print(f"  {'':22}{'no reuse':>12}{'reuse':>12}{'ratio':>10}")
    for label, key, fmt in (("prompt tokens", "prompt_tokens", ",.0f"), ("cached tokens", "cache_read", ",.0f"),
                            ("hit ratio", "hit_ratio", ".3f"), ("prefill seconds", "prefill_s", ".2f"),
                            ("wall seconds", "wall_s", ".2f")):
        a, b = e["no_reuse"][key], e["reuse"][key]
        ratio = f"{b / a:.3f}" if a else "-"
        print(f"  {label:22}{a:>12{fmt}}{b:>12{fmt}}{ratio:>10}")
    for label, q in (("TTFT p50 (ms)", "p50"), ("TTFT p90 (ms)", "p90")):
        a, b = e["no_reuse"]["ttft_all_s"][q] * 1e3, e["reuse"]["ttft_all_s"][q] * 1e3
        print(f"  {label:22}{a:>12.1f}{b:>12.1f}{b / a:>10.3f}")
    print(f"  ideal prefill ratio (1 - hit ratio): {1 - e['reuse']['hit_ratio']:.3f}")


if __name__ == "__main__":
    main()
