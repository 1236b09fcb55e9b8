"""Proxy overhead: latency and TTFT direct to the upstream, through bare mitmproxy (no addon but a
three-line one that streams SSE, as any proxy for LLM APIs must), and through prefixguard's proxy
(addon, analysis process, capture store), measured side by side in one run.

    .venv/bin/python bench/proxy.py              # table
    .venv/bin/python bench/proxy.py --runs 5     # five runs, fresh processes each, and their median
    .venv/bin/python bench/proxy.py --json       # the numbers as JSON

The upstream (a loopback server replaying a real recorded Anthropic response, JSON or SSE) and each proxy
run in their own process; requests to the paths are interleaved, in a shuffled order each round, so
drift and the place in the round hit all of them alike. A second bare mitmproxy ("bare-2") is the
control: its ratio to "bare" is what two identical proxies differ by here, the noise floor.
Request bodies of 10 KB and 1 MB, streamed responses and not; then throughput with 50 concurrent clients.
Target: prefixguard adds <= 5% to bare mitmproxy's latency and nothing measurable to TTFT.
"""
from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Iterator

import httpx

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT.parent / "shared" / "data" / "recorded"
STREAM = "openllmetry/test_prompt_caching_test_anthropic_prompt_caching_stream_legacy/0001"
PATHS = ("direct", "bare", "bare-2", "prefixguard")


# ---- the servers, each in its own process (`--serve KIND`): print the port, run until killed

def serve(kind: str, upstream: str | None, store: str | None) -> None:
    if kind == "upstream":
        sys.path.insert(0, str(ROOT / "tests"))
        from helpers.upstream import Upstream
        up = Upstream(RECORDED)
        print(f"PORT {up.url.rsplit(':', 1)[1]}", flush=True)
        up.server.serve_forever()
        return
    from prefixguard.proxy.addon import PrefixGuard
    from prefixguard.proxy.serve import serve as serve_proxy
    from prefixguard.proxy.tap import is_event_stream

    class StreamSSE:
        """Bare mitmproxy buffers every response; streaming SSE is the least a proxy for LLM APIs does."""

        def responseheaders(self, flow: Any) -> None:
            if is_event_stream(flow.response.headers.get("content-type")):
                flow.response.stream = True

    addon = PrefixGuard() if kind == "prefixguard" else StreamSSE()
    settings = {"prefixguard_store": store or "", "prefixguard_quiet": True}
    serve_proxy([upstream], host="127.0.0.1", port=0, addon=addon, settings=settings,
                on_listen=lambda port: print(f"PORT {port}", flush=True))


@contextmanager
def server(kind: str, *args: str) -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, __file__, "--serve", kind, *args], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        found = re.match(r"PORT (\d+)", line)
        if not found:
            raise RuntimeError(f"{kind} did not start: {line!r}")
        yield f"http://127.0.0.1:{found.group(1)}"
    finally:
        proc.terminate()
        proc.wait(30)


# ---- the clients

def body(size: int, stream: bool, doc: int, question: int = 0) -> bytes:
    """An Anthropic request of about `size` bytes: a long document (a breakpoint on it), then a short
    question. A session asks new questions about the same few documents: the prefix recurs, the end is new."""
    words = " ".join(f"w{doc}-{i}" for i in range(size // 8))[:size]
    return json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 256, "stream": stream,
                       "system": [{"type": "text", "text": "You summarise documents."}],
                       "messages": [{"role": "user", "content": [
                           {"type": "text", "text": words, "cache_control": {"type": "ephemeral"}},
                           {"type": "text", "text": f"Question {question}: what does it say about w{question}?"}]}]}).encode()


def one(client: httpx.Client, url: str, data: bytes, stream: bool, headers: dict[str, str]) -> tuple[float, float]:
    """(total seconds, seconds to the first content event) for one request."""
    t0 = time.perf_counter()
    ttft = None
    with client.stream("POST", f"{url}/v1/messages", content=data, headers=headers) as r:
        for chunk in r.iter_raw():
            if ttft is None and (not stream or b"content_block_delta" in chunk):
                ttft = time.perf_counter() - t0
    r.raise_for_status()
    return time.perf_counter() - t0, ttft or 0.0


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def latency(urls: dict[str, str], size: int, stream: bool, n: int, pause: float) -> dict[str, Any]:
    """p50, p99 and TTFT p50 of each path. `pause` seconds after each request leave the CPU to the
    analysis of the last one: with two cores for client, upstream and proxies, work left over from one
    request would land on the next, whatever its path. (The analysis runs on spare CPU; `throughput`
    measures the case with none to spare.)"""
    headers = {"content-type": "application/json", "x-api-key": "sk-bench-key-000000", "x-upstream-gap": "0.002"}
    if stream:
        headers["x-replay"] = STREAM
    times: dict[str, list[float]] = {p: [] for p in urls}
    ttfts: dict[str, list[float]] = {p: [] for p in urls}
    order = list(urls.items())
    rng = random.Random(size + stream)
    with httpx.Client(timeout=60) as client:
        for path, url in order:  # warm: connections, the tokenizer, the page cache
            one(client, url, body(size, stream, -1), stream, headers)
        for i in range(n):
            data = body(size, stream, i % 5, i)
            rng.shuffle(order)  # each path in each place of the round alike: the place moves the numbers
            for path, url in order:
                total, first = one(client, url, data, stream, headers)
                times[path].append(total)
                ttfts[path].append(first)
                if pause:
                    time.sleep(pause)
    return {p: {"p50_ms": 1e3 * statistics.median(times[p]), "p99_ms": 1e3 * pct(times[p], 0.99),
                "ttft_p50_ms": 1e3 * statistics.median(ttfts[p])} for p in urls}


def analysis_seconds(size: int, store: Path, n: int = 10) -> float:
    """What prefixguard's analysis of one request of `size` takes here (the slowest of the last n-5 of n,
    in this process): the bodies the bench sends, the answer's usage, a real SQLite store."""
    from prefixguard.proxy.analysis import Analyzer, FlowState, Response

    answer = json.dumps({"type": "message", "usage": {"input_tokens": 10, "cache_read_input_tokens": 0,
                                                      "cache_creation_input_tokens": 0, "output_tokens": 5}}).encode()
    analyzer, took = Analyzer(store=str(store)), []
    for i in range(n):  # the first five meet each document for the first time, as the bench's first round
        t0 = time.perf_counter()
        analyzer.request(FlowState(id=str(i), ts=time.time(), sent=t0, path="/v1/messages", body=body(size, False, i % 5, i)))
        analyzer.finish(Response(id=str(i), status=200, headers_at=t0, ended_at=t0, body=answer))
        took.append(time.perf_counter() - t0)
    analyzer.close()
    return max(took[5:])


def throughput(urls: dict[str, str], clients: int, per_client: int, reps: int = 3) -> dict[str, float]:
    """Requests per second with `clients` concurrent streaming clients: the median of `reps` rounds,
    the paths in a shuffled order each round (one round alone varies by 10% here)."""
    headers = {"content-type": "application/json", "x-replay": STREAM, "x-upstream-gap": "0.001"}
    rates: dict[str, list[float]] = {p: [] for p in urls}
    order = list(urls.items())
    rng = random.Random(clients)
    for _ in range(reps):
        rng.shuffle(order)
        for path, url in order:
            def work(k: int) -> None:
                with httpx.Client(timeout=60) as client:
                    for i in range(per_client):
                        one(client, url, body(10_000, True, k, i), True, {**headers, "x-api-key": f"sk-bench-{k:04d}-key"})
            threads = [threading.Thread(target=work, args=(k,)) for k in range(clients)]
            t0 = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            rates[path].append(clients * per_client / (time.perf_counter() - t0))
    return {p: statistics.median(r) for p, r in rates.items()}


def run_once(n: int) -> dict[str, Any]:
    """One run: fresh upstream and proxies, every case, then throughput."""
    results: dict[str, Any] = {"latency": {}, "throughput": {}}
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        up = stack.enter_context(server("upstream"))
        urls = {"direct": up, "bare": stack.enter_context(server("bare", up)),
                "bare-2": stack.enter_context(server("bare", up)),
                "prefixguard": stack.enter_context(server("prefixguard", up, str(Path(tmp) / "bench.db")))}
        # Back to back: the analysis of one request runs while the next ones go, whatever their path. Spaced:
        # a pause after each request, longer than the analysis of one of that size takes here, so each
        # starts on an idle machine, as requests to an LLM API mostly do (every path is slower from idle).
        # SSE requests last ~85 ms (the recorded stream's events 2 ms apart) and vary little: fewer of them.
        # The pause: twice what the analysis of one request of that size takes on this machine, now.
        spaced = {size: max(floor, 2 * analysis_seconds(size, Path(tmp) / f"timing-{size}.db"))
                  for size, floor in ((10_000, 0.01), (1_000_000, 0.12))}
        results["pauses_s"] = spaced
        for case, size, stream, count, pause in (("10KB json", 10_000, False, n, 0.0),
                                                 ("10KB sse", 10_000, True, n // 10, 0.0),
                                                 ("1MB json", 1_000_000, False, n // 4, 0.0),
                                                 ("1MB sse", 1_000_000, True, n // 20, 0.0),
                                                 ("10KB json spaced", 10_000, False, n // 2, spaced[10_000]),
                                                 ("1MB json spaced", 1_000_000, False, n // 16, spaced[1_000_000])):
            results["latency"][case] = latency(urls, size, stream, max(5, count), pause)
        results["throughput"] = throughput(urls, 50, 4)
    return results


def ratios(results: dict[str, Any], path: str) -> dict[str, float]:
    """path / bare: p50 latency and TTFT of each case, and throughput."""
    out = {}
    for case, by_path in results["latency"].items():
        out[f"{case} p50"] = by_path[path]["p50_ms"] / by_path["bare"]["p50_ms"]
        out[f"{case} TTFT"] = by_path[path]["ttft_p50_ms"] / by_path["bare"]["ttft_p50_ms"]
    out["throughput"] = results["throughput"][path] / results["throughput"]["bare"]
    return out


def print_run(results: dict[str, Any]) -> None:
    print(f"{'case':<16} {'path':<12} {'p50 ms':>8} {'p99 ms':>8} {'TTFT ms':>8}  vs bare (p50 / TTFT)")
    for case, by_path in results["latency"].items():
        bare = by_path["bare"]
        for path, r in by_path.items():
            ratio = f"{r['p50_ms'] / bare['p50_ms']:.3f} / {r['ttft_p50_ms'] / bare['ttft_p50_ms']:.3f}"
            print(f"{case:<16} {path:<12} {r['p50_ms']:8.2f} {r['p99_ms']:8.2f} {r['ttft_p50_ms']:8.2f}  {ratio}")
    print("spaced cases pause " + ", ".join(f"{p * 1e3:.0f} ms after each {size // 1000} KB request"
                                            for size, p in results["pauses_s"].items()))
    tp = results["throughput"]
    print("throughput, 50 concurrent streaming clients (req/s): "
          + ", ".join(f"{p} {tp[p]:.1f}" for p in PATHS) + f"; prefixguard / bare = {tp['prefixguard'] / tp['bare']:.3f}")


def print_summary(runs: list[dict[str, Any]]) -> None:
    """Each run's ratios to bare, prefixguard and the bare-2 control, and the median over runs."""
    ours, control = [ratios(r, "prefixguard") for r in runs], [ratios(r, "bare-2") for r in runs]
    print(f"\n{len(runs)} runs, ratio to bare: prefixguard (median of runs) [each run] | bare-2, the control")
    for key in ours[0]:
        mine = [r[key] for r in ours]
        print(f"{key:<22} {statistics.median(mine):.3f} [{' '.join(f'{x:.3f}' for x in mine)}]"
              f" | {statistics.median(r[key] for r in control):.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument("--n", type=int, default=400,
                    help="requests per path, 10 KB JSON (fewer for the other cases, see run_once)")
    ap.add_argument("--runs", type=int, default=1, help="runs, each with fresh processes")
    ap.add_argument("--serve", choices=["upstream", "bare", "prefixguard"], help=argparse.SUPPRESS)
    ap.add_argument("args", nargs="*", help=argparse.SUPPRESS)
    opts = ap.parse_args()
    if opts.serve:
        return serve(opts.serve, *(opts.args + [None, None])[:2])
    runs = []
    for _ in range(opts.runs):
        runs.append(run_once(opts.n))
        if not opts.json:
            print_run(runs[-1])
    if opts.json:
        print(json.dumps(runs, indent=1))
    elif opts.runs > 1:
        print_summary(runs)


if __name__ == "__main__":
    main()
