"""Replay benchmark: `sim` speed on the Mooncake trace, and the engine replaying the miniswe agent trace
(and, with --capture, a capture store such as the demo's) with and without prefix reuse (total prefill
seconds, TTFT), measured side by side in one run: the path of `prefixguard replay SOURCE --target engine
--no-reuse-run`, with the engine's device and dtype chosen here.

Each source also gets the prefill time that reuse should save: every request's prefill time without
reuse, scaled by the compute its uncached suffix needs (bench/prefill_reuse.py's prefill_macs: the
compute floor), summed. `within_15pct` says whether the measured saving is within 15% of it.

    .venv/bin/python bench/replay.py [--sessions 10] [--model tiny] [--device cpu] [--dtype float32]
                                     [--capture demo.db] [--no-sim] [--data ../shared/data] [--json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import sys

sys.path.insert(0, str(Path(__file__).resolve().parent))

from prefill_reuse import prefill_macs  # noqa: E402

from prefixguard.engine import chat_template
from prefixguard.engine.llm_engine import LLMEngine
from prefixguard.engine.models import resolve

from prefixguard.replay import sources
from prefixguard.replay.results import against_baseline, summarize
from prefixguard.utils.stats import distribution
from prefixguard.replay.player import replay
from prefixguard.replay.targets import EngineTarget, SimTarget, prompt_of

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
MOONCAKE = Path("mooncake") / "synthetic_trace.jsonl"
MINISWE = Path("lmcache-agent-trace") / "miniswe"
PREDICTION_SLACK = 0.15


def sim_speed(repeat: int, data: Path) -> dict:
    """Whole trace: load + replay on an unbounded tree; best of `repeat` runs (2 noisy cores)."""
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        trace = sources.load(data / MOONCAKE)
        t1 = time.perf_counter()
        out = replay(trace.requests, SimTarget(), progress=False)
        t2 = time.perf_counter()
        runs.append((t2 - t0, t1 - t0, t2 - t1, summarize(out)["hit_ratio"]))
    total, load, run, hit = min(runs)
    blocks = sum(len(r.blocks) for r in trace.requests)
    return {"requests": len(trace.requests), "blocks": blocks, "total_s": total, "load_s": load, "replay_s": run,
            "requests_per_s": len(trace.requests) / total, "blocks_per_s": blocks / total, "hit_ratio": hit,
            "median_total_s": statistics.median(r[0] for r in runs)}


def miniswe_requests(data: Path, sessions: int) -> list:
    """The `sessions` smallest miniswe sessions, back to back."""
    files = sorted((data / MINISWE).glob("*.jsonl"), key=lambda f: f.stat().st_size)[:sessions]
    with tempfile.TemporaryDirectory() as tmp:
        subset = Path(tmp) / "subset.jsonl"
        subset.write_text("".join(f.read_text() for f in files))
        return sources.load(subset).requests


def engine_replay(requests: list, model: str, device: str, dtype: str, max_tokens: int) -> dict:
    """The requests on one engine with reuse and one without, and the saving the compute floor predicts."""
    # Room for every session's whole history (its last prompt), so nothing is evicted: reuse at its ideal.
    last = {r.session: r for r in requests}
    kv_pages = sum(len(chat_template.render(prompt_of(r).segments)) for r in last.values()
                   if r.blocks is None) // 16 + 1024
    out, runs = {}, {}
    for name, reuse in (("no_reuse", False), ("reuse", True)):
        target = EngineTarget(model, page_size=16, kv_pages=16, prefix_reuse=reuse, max_tokens=max_tokens,
                              device=device)
        # the replay target's own engine, with this run's dtype and a pool for the whole trace
        target.engine = LLMEngine(model, device=device, dtype=dtype, page_size=16, kv_pages=kv_pages,
                                  prefix_reuse=reuse)
        try:
            warm = target.engine.add_request(list(range(1, 200)), max_tokens=2)   # kernels compiled, graphs captured
            while not warm.finished:
                target.engine.step()
            t0 = time.perf_counter()
            outcomes = replay(requests, target, timestamps=False, progress=False)
            wall = time.perf_counter() - t0
        finally:
            target.close()
        s = summarize(outcomes)
        s["wall_s"] = wall
        s["ttft_all_s"] = distribution([o.ttft_s for o in outcomes if o.ttft_s is not None])
        out[name], runs[name] = s, outcomes
    out["reuse"] = against_baseline(out["reuse"], out["no_reuse"])
    out["prediction"] = predicted_saving(runs["no_reuse"], runs["reuse"], resolve(model))
    out["calls"], out["model"], out["device"], out["dtype"] = len(requests), model, device, dtype
    return out


def predicted_saving(cold: list, warm: list, config) -> dict:
    """What the measured hit rate and the compute floor say reuse should save: each request's prefill
    time without reuse, times the share of its compute the cached prefix removes."""
    predicted = 0.0
    for c, w in zip(sorted(cold, key=lambda o: o.index), sorted(warm, key=lambda o: o.index)):
        if c.error or w.error or c.prefill_s is None or not c.prompt_tokens:
            continue
        n = c.prompt_tokens
        predicted += c.prefill_s * (1 - prefill_macs(config, n - w.cache_read, n) / prefill_macs(config, n, n))
    measured = (sum(o.prefill_s or 0 for o in cold if not o.error) - sum(o.prefill_s or 0 for o in warm if not o.error))
    ratio = measured / predicted if predicted else None
    return {"predicted_saved_s": predicted, "measured_saved_s": measured, "measured_over_predicted": ratio,
            "within_15pct": ratio is not None and abs(ratio - 1) <= PREDICTION_SLACK}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=10, help="miniswe sessions (smallest first) for the engine")
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--max-tokens", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data", type=Path, default=DATA, help="the shared data folder (mooncake/, lmcache-agent-trace/)")
    ap.add_argument("--capture", type=Path, help="also replay this capture store (e.g. the demo's)")
    ap.add_argument("--no-sim", action="store_true", help="skip the sim speed run")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    result = {} if args.no_sim else {"sim": sim_speed(args.repeat, args.data)}
    result["engine"] = engine_replay(miniswe_requests(args.data, args.sessions), args.model, args.device,
                                     args.dtype, args.max_tokens)
    result["engine"]["sessions"] = args.sessions
    if args.capture:
        result["capture"] = engine_replay(sources.load(args.capture).requests, args.model, args.device, args.dtype,
                                          args.max_tokens)
    if args.json:
        print(json.dumps(result, indent=1))
        return
    if "sim" in result:
        print_sim(result["sim"])
    print_engine(f"miniswe: {args.sessions} smallest sessions", result["engine"])
    if "capture" in result:
        print_engine(f"capture {args.capture.name}", result["capture"])


def print_sim(s: dict) -> None:
    print(f"sim on the Mooncake trace ({s['requests']:,} requests, {s['blocks']:,} blocks of 512 tokens)")
    print(f"  whole trace        {s['total_s']:.3f} s (load {s['load_s']:.3f} s + replay {s['replay_s']:.3f} s)"
          f"  target < 1 s: {'met' if s['total_s'] < 1 else 'NOT met'}")
    print(f"  requests/s         {s['requests_per_s']:,.0f}")
    print(f"  blocks/s           {s['blocks_per_s']:,.0f}")
    print(f"  hit ratio          {s['hit_ratio']:.4f}")


def print_engine(label: str, e: dict) -> None:
    print(f"\nengine ({e['model']}, {e['device']}, {e['dtype']}) on {label}, {e['calls']} calls")
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
    p = e["prediction"]
    ratio = "-" if p["measured_over_predicted"] is None else f"{p['measured_over_predicted']:.3f}"
    print(f"  prefill saved {p['measured_saved_s']:.3f} s, predicted by hit rate and compute floor "
          f"{p['predicted_saved_s']:.3f} s (x{ratio}: {'within' if p['within_15pct'] else 'NOT within'} 15%)")


if __name__ == "__main__":
    main()
