"""Step 4 of the diagnosis, infrastructure signals: TTL expiries, server-side misses, queueing (slow first
tokens on hits), provider errors, and the forwarded requests the analysis did not read."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from prefixguard.judge.verdict import VerdictName
from prefixguard.report.rows import median, succeeded, timing, usage
from prefixguard.wire.routes import NOT_ANALYSED, template

QUEUED = 2.0  # a hit whose TTFT is this many times that of like hits waited in a queue...
QUEUE_MIN_S = 0.1  # ...and by at least this long (milliseconds of jitter are no queue)
QUEUE_PEERS = 3  # like hits needed to say what is typical


def unanalysed(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Forwarded requests the analysis did not read (no row of an agent's log), by method and endpoint, with
    the reason most of them were left (a token count, no API shape at that path, too large)."""
    why: defaultdict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for r in rows:
        if r.get("api") is None and not str(r.get("upstream") or "").startswith("import:"):
            endpoint = (str(r.get("method") or "POST"), template(r.get("path") or ""))
            why[endpoint][str(r.get("cause") or "").removeprefix(NOT_ANALYSED)] += 1
    by_count = sorted(why.items(), key=lambda item: -item[1].total())
    return [
        {"method": m, "path": path, "requests": causes.total(), "why": causes.most_common(1)[0][0]}
        for (m, path), causes in by_count
    ]


def infra_of(rows: list[dict[str, Any]], unread: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    verdicts = Counter(r.get("verdict") for r in rows)
    errors = Counter(str(r.get("status") or "no response") for r in rows if not succeeded(r))
    queued, median_hit = _queued(rows)
    lost: defaultdict[str, int] = defaultdict(int)
    ttl, server = VerdictName.MISS_TTL_EXPIRED, VerdictName.MISS_SERVER_SIDE
    for r in rows:
        if r.get("verdict") in (ttl, server):
            lost[r["verdict"]] += (r.get("expected_cached") or 0) - (usage(r).get("cache_read") or 0)
    parts = []
    if verdicts[ttl]:
        parts.append(f"{verdicts[ttl]} TTL expiries (requests further apart than the cache TTL)")
    if verdicts[server]:
        parts.append(f"{verdicts[server]} server-side misses (stable prefix, within TTL, still missed)")
    if queued:
        parts.append(f"{len(queued)} hits with TTFT over {QUEUED:g}x that of hits with as much to prefill: queueing")
    if errors:
        by_status = ", ".join(f"{k}: {v}" for k, v in errors.most_common())
        parts.append(f"{sum(errors.values())} failed requests ({by_status})")
    if unread:
        named = ", ".join(f"{u['method']} {u['path']} ({u['requests']}: {u['why']})" for u in unread[:5])
        parts.append(
            f"{sum(u['requests'] for u in unread)} forwarded requests not analysed: {named}"
            + (f" and {len(unread) - 5} more endpoints" if len(unread) > 5 else "")
        )
    return {
        "ttl_expired": verdicts[ttl],
        "server_side": verdicts[server],
        "ttl_expired_tokens": lost[ttl],
        "server_side_tokens": lost[server],
        "queued": len(queued),
        "queued_examples": [str(r.get("id")) for r in queued[:5]],
        "median_hit_ttft_s": median_hit,
        "errors": dict(errors),
        "unanalysed": list(unread),
        "finding": "; ".join(parts) + "."
        if parts
        else "No infrastructure signal: no TTL expiry, server-side miss, queueing or error.",
    }


def _queued(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], float | None]:
    """Hits that waited: TTFT far above that of hits with a like number of tokens to prefill (the
    same power of two), so a long uncached suffix is not mistaken for a queue."""
    hits = [
        (t, r)
        for r in rows
        if succeeded(r) and (usage(r).get("cache_read") or 0) > 0 and (t := timing(r, "ttft_s")) is not None
    ]
    bins: dict[int, list[float]] = defaultdict(list)
    work = {}
    for t, r in hits:
        u = usage(r)
        work[id(r)] = max(0, (u.get("prompt_total") or 0) - (u.get("cache_read") or 0)).bit_length()
        bins[work[id(r)]].append(t)
    typical = {k: median(v) for k, v in bins.items() if len(v) >= QUEUE_PEERS}
    queued = [
        r for t, r in hits if (m := typical.get(work[id(r)])) is not None and t > QUEUED * m and t - m > QUEUE_MIN_S
    ]
    return queued, median([t for t, _ in hits])
