"""Engine server over HTTP: TTFT and decode tokens/s with and without prefix hits, at concurrency 1, 8, 32.

The server runs as its own process (`prefixguard engine serve`, so client and server share no GIL);
clients stream OpenAI Chat Completions over loopback with raw httpx. Each prompt has a long system
prompt and a short user turn. "miss": every request's system prompt starts with its own nonce, so
nothing is reused. "hit": every request shares the system prompt (warmed once first), so only the
user turn is prefilled. Both scenarios run side by side at each concurrency, one wave of requests
at a time; TTFT is measured at the first content chunk, the decode rate from there to the last one.

    .venv/bin/python bench/server.py [--model tiny] [--prompt-tokens 2000] [--output-tokens 32] [--json]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
CONCURRENCY = (1, 8, 32)


def system_prompt(tokens: int, nonce: str = "") -> str:
    # ~10 tokens per line with cl100k_base
    body = "\n".join(f"Rule {i}: confirm order {i} before you answer." for i in range(tokens // 10))
    return f"{nonce}\n{body}" if nonce else body


async def one(client: httpx.AsyncClient, url: str, system: str, output_tokens: int) -> dict[str, float]:
    body = {"model": "bench", "max_tokens": output_tokens, "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": uuid.uuid4().hex}]}
    sent = time.perf_counter()
    first = last = 0.0
    usage = {}
    async with client.stream("POST", url + "/v1/chat/completions", json=body) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[6:])
            if chunk["choices"]:  # the server sends its first chunk with the first token
                last = time.perf_counter()
                first = first or last
            else:
                usage = chunk["usage"]
    tokens = usage["completion_tokens"]
    return {"ttft": first - sent, "decode_tps": (tokens - 1) / (last - first),
            "cached": usage["prompt_tokens_details"]["cached_tokens"] / usage["prompt_tokens"]}


async def wave(url: str, n: int, hit: bool, prompt_tokens: int, output_tokens: int) -> list[dict[str, float]]:
    async with httpx.AsyncClient(timeout=600, limits=httpx.Limits(max_connections=64)) as client:
        shared = system_prompt(prompt_tokens)
        systems = [shared if hit else system_prompt(prompt_tokens, uuid.uuid4().hex) for _ in range(n)]
        return await asyncio.gather(*(one(client, url, s, output_tokens) for s in systems))


async def measure(url: str, prompt_tokens: int, output_tokens: int, requests: int) -> list[dict[str, Any]]:
    await wave(url, 1, True, prompt_tokens, output_tokens)          # warm the shared prefix (and the model)
    rows = []
    for c in CONCURRENCY:
        results: dict[bool, list[dict[str, float]]] = {False: [], True: []}
        for _ in range(max(1, requests // c)):
            for hit in (False, True):                                 # interleaved: the same machine noise
                results[hit] += await wave(url, c, hit, prompt_tokens, output_tokens)
        row: dict[str, Any] = {"concurrency": c, "requests": len(results[True])}
        for hit, name in ((False, "miss"), (True, "hit")):
            rs = results[hit]
            row[f"ttft_{name}_s"] = statistics.median(r["ttft"] for r in rs)
            row[f"decode_{name}_tps"] = statistics.median(r["decode_tps"] for r in rs)
            row[f"cached_{name}"] = statistics.mean(r["cached"] for r in rs)
        row["ttft_ratio"] = row["ttft_miss_s"] / row["ttft_hit_s"]
        row["decode_ratio"] = row["decode_hit_tps"] / row["decode_miss_tps"]
        rows.append(row)
    return rows


def start_server(model: str, kv_tokens: int) -> tuple[subprocess.Popen, str]:
    """The server process and its URL; its output goes to our stderr (tracebacks, if any)."""
    args = [sys.executable, "-c", "from prefixguard.cli import main; main()", "engine", "serve", "--engine-model", model,
            "--port", "0", "--kv-pages", str(kv_tokens), "--max-queue", "256"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    for line in proc.stdout:
        found = re.search(r"listening on (http://\S+)", line)
        if found:
            return proc, found.group(1)
    proc.wait()
    raise SystemExit(f"the server did not start (exit {proc.returncode})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--prompt-tokens", type=int, default=2000)
    parser.add_argument("--output-tokens", type=int, default=32)
    parser.add_argument("--requests", type=int, default=32, help="per scenario and concurrency (at least one wave)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    kv_tokens = (max(CONCURRENCY) + 2) * (args.prompt_tokens + args.output_tokens + 64) * 2
    proc, url = start_server(args.model, kv_tokens)
    try:
        rows = asyncio.run(measure(url, args.prompt_tokens, args.output_tokens, args.requests))
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    if args.json:
        print(json.dumps({"model": args.model, "prompt_tokens": args.prompt_tokens,
                          "output_tokens": args.output_tokens, "rows": rows}, indent=2))
        return
    print(f"model {args.model}, ~{args.prompt_tokens}-token prompts, {args.output_tokens} output tokens, "
          "medians over the requests at each concurrency")
    print("| concurrency | requests | TTFT miss | TTFT hit | TTFT miss/hit | decode tok/s miss | decode tok/s hit "
          "| decode hit/miss | cached (hit) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['concurrency']} | {r['requests']} | {r['ttft_miss_s'] * 1000:.1f} ms | "
              f"{r['ttft_hit_s'] * 1000:.1f} ms | {r['ttft_ratio']:.2f}x | {r['decode_miss_tps']:.0f} | "
              f"{r['decode_hit_tps']:.0f} | {r['decode_ratio']:.2f}x | {r['cached_hit']:.0%} |")


if __name__ == "__main__":
    main()
