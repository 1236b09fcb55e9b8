"""Proxy latency under load: 200 concurrent clients, each on its own keep-alive connection, sending 10 KB
Anthropic JSON requests with a random pause between them, for a bounded time (and a bounded count),
through bare mitmproxy, prefixguard's proxy and a second bare mitmproxy (the control), in one run.

    .venv/bin/python bench/proxy_load.py                        # 200 clients, 3 rounds of 10 s per path
    .venv/bin/python bench/proxy_load.py --clients 200 --seconds 10 --rounds 3 --think 1.0

The upstream and each proxy run in their own process (bench/proxy.py's `server`); the paths take turns,
in a shuffled order each round, so drift hits them alike. The clients are one asyncio process speaking
plain HTTP/1.1 (an HTTP library per client would eat the CPU the proxies need). Reported: p50/p99 of each
path, and the added latency (path minus bare); bare-2 minus bare is the noise floor.
Target: prefixguard's p99 <= 50 ms above bare mitmproxy's on 2 cores.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from proxy import body, pct, server  # noqa: E402  (bench/proxy.py: the servers and the request bodies)


async def one_client(url: str, k: int, until: float, think: float, cap: int, rng: random.Random,
                     times: list[float], errors: list[str]) -> None:
    """One client: its own connection; request, read the whole answer, pause, until `until` or `cap`."""
    host, port = url.rsplit("/", 1)[1].split(":")
    await asyncio.sleep(rng.uniform(0, 2 * think))  # clients start spread out, as they would arrive
    try:
        reader, writer = await asyncio.open_connection(host, int(port))
    except OSError as err:
        errors.append(repr(err))
        return
    try:
        for i in range(cap):
            if time.monotonic() >= until:
                break
            data = body(10_000, False, k % 50, i)
            head = (f"POST /v1/messages HTTP/1.1\r\nhost: {host}:{port}\r\ncontent-type: application/json\r\n"
                    f"x-api-key: sk-load-{k:04d}-key\r\ncontent-length: {len(data)}\r\n\r\n").encode()
            t0 = time.perf_counter()
            writer.write(head + data)
            status = await reader.readline()
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            await reader.readexactly(length)
            times.append(time.perf_counter() - t0)
            if b" 200 " not in status:
                errors.append(status.decode(errors="replace").strip())
            await asyncio.sleep(rng.uniform(0, 2 * think))
    except (OSError, asyncio.IncompleteReadError) as err:
        errors.append(repr(err))
    finally:
        writer.close()


async def phase(url: str, clients: int, seconds: float, think: float, cap: int, seed: int) -> tuple[list[float], list[str]]:
    times: list[float] = []
    errors: list[str] = []
    rng = random.Random(seed)
    until = time.monotonic() + seconds
    await asyncio.gather(*(one_client(url, k, until, think, cap, random.Random(rng.random()), times, errors)
                           for k in range(clients)))
    return times, errors


def run(clients: int, seconds: float, rounds: int, think: float, cap: int) -> dict[str, Any]:
    times: dict[str, list[float]] = {}
    errors: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        up = stack.enter_context(server("upstream"))
        urls = {"bare": stack.enter_context(server("bare", up)),
                "bare-2": stack.enter_context(server("bare", up)),
                "prefixguard": stack.enter_context(server("prefixguard", up, str(Path(tmp) / "load.db")))}
        order = list(urls.items())
        rng = random.Random(clients)
        for r in range(rounds):
            rng.shuffle(order)
            for path, url in order:
                t, e = asyncio.run(phase(url, clients, seconds, think, cap, r))
                times.setdefault(path, []).extend(t)
                errors.setdefault(path, []).extend(e)
                time.sleep(1.0)  # what one path left over (the analysis' backlog) settles before the next
    return {p: {"requests": len(times[p]), "errors": len(errors[p]), "first_errors": errors[p][:3],
                "p50_ms": 1e3 * statistics.median(times[p]), "p99_ms": 1e3 * pct(times[p], 0.99),
                "rate_per_s": len(times[p]) / (rounds * seconds)} for p in times}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=10.0, help="per path per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--think", type=float, default=1.0, help="mean pause between a client's requests (s)")
    ap.add_argument("--cap", type=int, default=100, help="at most this many requests per client per phase")
    ap.add_argument("--json", action="store_true")
    opts = ap.parse_args()
    res = run(opts.clients, opts.seconds, opts.rounds, opts.think, opts.cap)
    if opts.json:
        print(json.dumps(res, indent=1))
        return
    bare = res["bare"]
    print(f"{opts.clients} clients, {opts.rounds} rounds x {opts.seconds:.0f} s per path, think {opts.think} s mean")
    print(f"{'path':<12} {'req':>6} {'err':>4} {'req/s':>7} {'p50 ms':>8} {'p99 ms':>8} {'+p50 ms':>8} {'+p99 ms':>8}")
    for path in ("bare", "bare-2", "prefixguard"):
        r = res[path]
        print(f"{path:<12} {r['requests']:6d} {r['errors']:4d} {r['rate_per_s']:7.1f} {r['p50_ms']:8.2f} {r['p99_ms']:8.2f}"
              f" {r['p50_ms'] - bare['p50_ms']:8.2f} {r['p99_ms'] - bare['p99_ms']:8.2f}")
        if r["first_errors"]:
            print(f"  errors: {r['first_errors']}")


if __name__ == "__main__":
    main()
