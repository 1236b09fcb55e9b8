"""Fleet mode against the single-machine default, in one run (ratios side by side):

1. analysis cost per request (request + finish steps of the proxy's analysis, ms, p50 / p99) with the
   session index in Redis against the in-process one, over every recorded session of
   ../shared/data/recorded (each cassette a session, its recorded responses as the answers);
2. capture write throughput (rows/s, until every row is committed) into PostgreSQL (batched, one
   writer thread) against the SQLite store (one transaction per flow, as the proxy writes it), with the
   rows those sessions produced.
It also checks what the tests check: two analyses sharing the Redis index, the requests of each session
alternating between them, give the verdicts and causes of one analysis alone. --big KB adds a third: an
agent's session on OpenAI Chat whose system prompt is KB kilobytes of prose, each turn a user message and
an answer more (a prefix policy keeps an entry for every 128 characters of it: what a lookup fetches from
Redis grows with the prompt).

    PYTHONPATH=. .venv/bin/python bench/fleet.py [--redis URL] [--postgres URL] [--rounds 3] [--big 400]

Keys go under a prefix of their own and rows into a schema of their own, both removed at the end.
"""
from __future__ import annotations

import argparse
import json
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from real_traffic import DATA, _response  # noqa: E402 - the recorded sessions, read as that bench reads them

from prefixguard.utils.errors import InputError  # noqa: E402
from prefixguard.proxy.analysis import Analyzer, FlowState, Response  # noqa: E402
from prefixguard.replay import sources  # noqa: E402
from prefixguard.capture.record import RECORD_FIELDS  # noqa: E402
from prefixguard.capture.store import Record, Store, open_capture  # noqa: E402

SOURCES = ("crewai", "openllmetry", "pydantic-ai", "pydantic-ai-bedrock", "pydantic-ai-gemini")
JUDGED = ("verdict", "cause", "expected_cached", "expected_reason", "previous_id", "reprefill_tokens", "degraded")


def sessions(data: Path = DATA) -> list[tuple[str, Path, Any]]:
    """(name, folder, trace) of every recorded session the replay sources read."""
    out = []
    for source in SOURCES:
        root = data / source
        if not root.is_dir():
            continue
        for folder in sorted(d for d in root.iterdir() if d.is_dir()):
            try:
                out.append((f"{source}/{folder.name}", folder, sources.load(folder)))
            except InputError:
                continue
    return out


def run_session(folder: Path, trace: Any, analyzers: list[Analyzer], times: list[float] | None = None,
                ids: str = "") -> None:
    """The session's requests in order, request i (both its steps) on analyzers[i % len]: a fleet
    whose load balancer sends each request anywhere."""
    for i, req in enumerate(trace.requests):
        body, chunks = _response(folder, req.ref)
        analyzer = analyzers[i % len(analyzers)]
        flow_id = f"{ids}{i}"
        start = time.perf_counter()
        analyzer.request(FlowState(id=flow_id, ts=1_000.0 + i, sent=float(i), path=req.path or "/v1/messages",
                                   body=json.dumps(req.body).encode()))
        analyzer.finish(Response(id=flow_id, status=200, headers_at=float(i), ended_at=float(i), body=body, chunks=chunks))
        if times is not None:
            times.append((time.perf_counter() - start) * 1e3)


def judged(stores: list[Path]) -> dict[str, dict[str, Any]]:
    """Row id -> the fields a verdict is made of, over the stores of a fleet."""
    out = {}
    for path in stores:
        with open_capture(path) as store:
            for rec in store.records():
                out[rec.id] = {k: getattr(rec, k) for k in JUDGED}
    return out


def verdicts(index_url: str, tmp: Path, found: list[tuple[str, Path, Any]] | None = None,
             proxies: int = 2) -> tuple[dict[str, dict], dict[str, dict]]:
    """(one analysis alone, `proxies` analyses sharing the index at index_url) -> name/row id -> judged fields."""
    alone, fleet = {}, {}
    for n, (name, folder, trace) in enumerate(found if found is not None else sessions()):
        base = tmp / f"s{n}"
        one = Analyzer(store=str(base.with_suffix(".one.db")))
        run_session(folder, trace, [one])
        one.close()
        paths = [base.with_suffix(f".p{k}.db") for k in range(proxies)]
        many = [Analyzer(store=str(p), index=f"{index_url}{n}:") for p in paths]  # a key prefix per session
        run_session(folder, trace, many)
        for a in many:
            a.close()
        alone.update({f"{name}#{k}": v for k, v in judged([base.with_suffix(".one.db")]).items()})
        fleet.update({f"{name}#{k}": v for k, v in judged(paths).items()})
    return alone, fleet


def analysis_ms(found: list[tuple[str, Path, Any]], make: Callable[[int], Analyzer]) -> list[float]:
    times: list[float] = []
    for n, (_, folder, trace) in enumerate(found):
        analyzer = make(n)
        run_session(folder, trace, [analyzer], times)
        analyzer.close()
    return times


def big_session_ms(make: Callable[[], Analyzer], kb: int, turns: int = 12) -> list[float]:
    """ms per request (both steps) of a session whose system prompt is `kb` KB of prose."""
    words = ("ledger", "account", "balance", "statement", "reconcile", "nightly", "entry", "variance")
    system = " ".join(f"{words[i % 8]}-{i}" for i in range(kb * 1024 // 11))[: kb * 1024]
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    analyzer, times = make(), []
    for i in range(turns):
        messages.append({"role": "user", "content": f"Which entries of batch {i} do not reconcile?"})
        body = json.dumps({"model": "gpt-4.1", "messages": messages}).encode()
        answer = f"Entries {i}-3 and {i}-7 differ from the statement."
        usage = {"prompt_tokens": len(body) // 4, "completion_tokens": 12,
                 "prompt_tokens_details": {"cached_tokens": (len(body) // 4 - 200) // 128 * 128 if i else 0}}
        response = json.dumps({"object": "chat.completion", "model": "gpt-4.1", "usage": usage,
                               "choices": [{"message": {"role": "assistant", "content": answer},
                                            "finish_reason": "stop"}]}).encode()
        start = time.perf_counter()
        analyzer.request(FlowState(id=f"big{i}", ts=1_000.0 + i, sent=float(i), path="/v1/chat/completions", body=body))
        analyzer.finish(Response(id=f"big{i}", status=200, headers_at=float(i), ended_at=float(i), body=response))
        times.append((time.perf_counter() - start) * 1e3)
        messages.append({"role": "assistant", "content": answer})
    analyzer.close()
    return times


def records(found: list[tuple[str, Path, Any]], tmp: Path, copies: int) -> list[Record]:
    """The rows the sessions produce, `copies` times over (fresh ids)."""
    db = tmp / "rows.db"
    analyzer = Analyzer(store=str(db))
    for n, (_, folder, trace) in enumerate(found):
        run_session(folder, trace, [analyzer], ids=f"s{n}-")
    analyzer.close()
    with open_capture(db) as store:
        base = list(store.records())
    out = []
    for c in range(copies):
        for rec in base:
            out.append(Record(**{**{f: getattr(rec, f) for f in RECORD_FIELDS}, "id": f"{c}-{len(out)}"}))
    return out


def write_rate(rows: list[Record], open_writer: Callable[[], Any]) -> float:
    start = time.perf_counter()
    store = open_writer()
    for rec in rows:
        store.add(rec)
    store.close()  # every row committed
    return len(rows) / (time.perf_counter() - start)


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]


def main() -> None:
    import psycopg
    import redis

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    ap.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test")
    ap.add_argument("--rounds", type=int, default=3, help="runs of each side, alternated (the best is kept)")
    ap.add_argument("--copies", type=int, default=10, help="copies of the sessions' rows written")
    ap.add_argument("--big", type=int, default=0, help="also a session with a system prompt of this many KB")
    args = ap.parse_args()
    prefix = f"pgbench-{secrets.token_hex(4)}:"
    schema = f"pgbench_{secrets.token_hex(4)}"
    index_url = f"{args.redis}?prefix={prefix}"
    admin = psycopg.connect(args.postgres, autocommit=True)
    admin.execute(f"CREATE SCHEMA {schema}")
    store_url = f"{args.postgres}{'&' if '?' in args.postgres else '?'}options=-csearch_path%3D{schema}"
    client = redis.Redis.from_url(args.redis)
    try:
        found = sessions()
        with tempfile.TemporaryDirectory() as tmp:
            alone, fleet = verdicts(index_url, Path(tmp), found)
            same = sum(alone[k] == fleet.get(k) for k in alone)
            print(f"sessions {len(found)}, requests {len(alone)}: two analyses sharing Redis judge "
                  f"{same}/{len(alone)} requests as one alone does")
            local_ms, redis_ms = [], []
            for r in range(args.rounds):  # alternated, so both sides meet the same machine load
                local_ms.append(analysis_ms(found, lambda n: Analyzer()))
                redis_ms.append(analysis_ms(found, lambda n, r=r: Analyzer(index=f"{index_url}t{r}-{n}:")))
            best = lambda runs, q: min(pct(t, q) for t in runs)  # noqa: E731
            print(f"\n{'analysis ms/request':24} {'local index':>12} {'Redis index':>12} {'ratio':>7}")
            for q in (50, 99):
                lo, re_ = best(local_ms, q), best(redis_ms, q)
                print(f"{'p' + str(q):24} {lo:12.2f} {re_:12.2f} {re_ / lo:7.2f}")
            if args.big:
                big_local, big_redis = [], []
                for r in range(args.rounds):
                    big_local.append(big_session_ms(Analyzer, args.big))
                    big_redis.append(big_session_ms(lambda r=r: Analyzer(index=f"{index_url}big{r}:"), args.big))
                print(f"\n{f'{args.big} KB prompt, ms/request':24} {'local index':>12} {'Redis index':>12} {'ratio':>7}")
                for q in (50, 99):
                    lo, re_ = best(big_local, q), best(big_redis, q)
                    print(f"{'p' + str(q):24} {lo:12.2f} {re_:12.2f} {re_ / lo:7.2f}")
            rows = records(found, Path(tmp), args.copies)
            sqlite_rate = pg_rate = 0.0
            for r in range(args.rounds):
                sqlite_rate = max(sqlite_rate, write_rate(rows, lambda r=r: Store(Path(tmp) / f"w{r}.db")))
                admin.execute(f"DROP TABLE IF EXISTS {schema}.flows")
                pg_rate = max(pg_rate, write_rate(rows, lambda: open_capture(store_url, create=True)))
            with open_capture(store_url) as check:
                assert len(check) == len(rows), (len(check), len(rows))
            print(f"\n{'capture writes':24} {'SQLite':>12} {'PostgreSQL':>12} {'ratio':>7}")
            print(f"{'rows/s (' + str(len(rows)) + ' rows)':24} {sqlite_rate:12.0f} {pg_rate:12.0f} {pg_rate / sqlite_rate:7.2f}")
    finally:
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        for i in range(0, len(keys), 500):
            client.delete(*keys[i:i + 500])
        admin.execute(f"DROP SCHEMA {schema} CASCADE")


if __name__ == "__main__":
    main()
