"""What a cost owner asks first, answered from a capture: total spend, what caching saved, cost per model,
per tenant and over time, the date range, latency percentiles (streaming and non-streaming apart), cache
writes nobody read, and whether writing with the longer TTL would have paid off.

Every cost is the row's tokens by class at its model's contract prices (prefixguard.contracts.providers): what it
cost, and what the same tokens would have cost sent uncached. Verdicts are the rows' stored ones
(prefixguard.judge.verdict), never judged again here.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from datetime import UTC, datetime
from typing import Any

from prefixguard.contracts.providers import ModelContract, model_contract, provider_for, providers
from prefixguard.judge.verdict import VerdictName
from prefixguard.model.usage import Usage
from prefixguard.report.human import DAY, HOUR
from prefixguard.utils.stats import quantile

# Where a tenant is named, first found wins: what the caller said about its end user or cache key in the
# body, else the capture's own column (the proxy: a hash of the API key; an import: the session lineage).
TENANT_FIELDS = (("prompt_cache_key",), ("metadata", "user_id"), ("user",), ("safety_identifier",))
# cost-over-time bar widths and their names, the smallest that fits
BUCKETS = {
    10.0: "10 seconds",
    60.0: "minute",
    600.0: "10 minutes",
    HOUR: "hour",
    6 * HOUR: "6 hours",
    DAY: "day",
    7 * DAY: "week",
}
MAX_BUCKETS = 100
TOP_TENANTS = 10
LONGER_TTL = "1h"
PERCENTILES = (0.5, 0.95, 0.99)
STREAMING, NON_STREAMING, UNKNOWN = "streaming", "non-streaming", "mode unknown"
TTL_MISS = VerdictName.MISS_TTL_EXPIRED


def _usage(row: dict[str, Any]) -> Usage:
    return Usage.of_export(row.get("usage"))


def _contract(row: dict[str, Any]) -> ModelContract:
    return model_contract(row.get("api") or "", row.get("model"))


def paid(c: ModelContract, u: Usage) -> float:
    """What a call cost at its contract's prices, as billed: read, written and uncached apart."""
    return c.cost(
        uncached=u.uncached,
        cache_read=u.cache_read,
        write_5m=u.cache_write_5m,
        write_1h=u.cache_write_1h,
        output=u.output,
    )


def _uncached(c: ModelContract, u: Usage) -> float:
    """The same call with no cache: every prompt token at the base input price."""
    return c.cost(uncached=u.cache_read + u.cache_write + u.uncached, output=u.output)


def tenant(row: dict[str, Any]) -> tuple[str, str]:
    """(tenant, what names it) of a row."""
    body = row.get("request")
    if isinstance(body, dict):
        for path in TENANT_FIELDS:
            value: Any = body
            for key in path:
                value = value.get(key) if isinstance(value, dict) else None
            if isinstance(value, str) and value:
                return value, ".".join(path) + " in the request"
    name = str(row.get("tenant") or "")
    if str(row.get("upstream") or "").startswith("import:"):
        return name or "-", "session (or sub-agent) in the agent's log"
    return (name, "API key hash") if name else ("-", "none: no API key, user or cache key")


def mode(row: dict[str, Any]) -> str:
    """Streaming or not, from what the request asked: TTFT means a different thing in each."""
    path = str(row.get("path") or "")
    if "streamGenerateContent" in path or "-stream" in path:  # Gemini, Bedrock: the endpoint says
        return STREAMING
    body = row.get("request")
    if isinstance(body, dict):
        return STREAMING if body.get("stream") is True else NON_STREAMING
    return UNKNOWN


def _percentiles(values: list[float]) -> dict[str, float | None]:
    ordered = sorted(values)
    return {f"p{round(q * 100)}": (quantile(ordered, q) if ordered else None) for q in PERCENTILES}


def latency(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """TTFT and total time p50/p95/p99, one entry per mode of call that has any timing."""
    by_mode: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for r in rows:
        t = r.get("timings") or {}
        status = r.get("status")
        if status is None or status >= 400:
            continue
        ttft, total = t.get("ttft_s"), t.get("total_s")
        if ttft is None and total is None:
            continue
        ttfts, totals = by_mode[mode(r)]
        if ttft is not None:
            ttfts.append(ttft)
        if total is not None:
            totals.append(total)
    return [
        {"mode": m, "requests": max(len(a), len(b)), "ttft_s": _percentiles(a), "total_s": _percentiles(b)}
        for m, (a, b) in sorted(by_mode.items())
    ]


def _bucket(span: float) -> float:
    return next((b for b in BUCKETS if span / b < MAX_BUCKETS), max(BUCKETS))


def _bucket_label(ts: float, width: float) -> str:
    at = datetime.fromtimestamp(ts, UTC)
    if width >= DAY:
        return at.strftime("%Y-%m-%d")
    if width >= HOUR:
        return at.strftime("%m-%d %H:%M")
    return at.strftime("%H:%M:%S" if width < 60 else "%H:%M")


def _over_time(points: list[tuple[float, float, float]], first: float, last: float) -> dict[str, Any]:
    """(ts, paid, without cache) per row -> bars of equal width, aligned to UTC (midnight, the hour)."""
    width = _bucket(last - first)
    start = math.floor(first / width) * width
    n = int((last - start) // width) + 1
    paid, uncached, requests = [0.0] * n, [0.0] * n, [0] * n
    for ts, p, u in points:
        k = min(n - 1, int((ts - start) // width))
        paid[k] += p
        uncached[k] += u
        requests[k] += 1
    return {
        "bucket_s": width,
        "bucket": BUCKETS[width],
        "buckets": [
            {
                "start": start + k * width,
                "label": _bucket_label(start + k * width, width),
                "requests": requests[k],
                "spend_usd": paid[k],
                "saved_usd": uncached[k] - paid[k],
            }
            for k in range(n)
        ],
    }


def _ttl_s(provider: str, u: Usage) -> float:
    """How long what this call wrote lives (rules/providers.toml), inf where the table names no TTL."""
    table = providers().get(provider)
    if table is None:
        return math.inf
    ttls = table.ttl_seconds
    if ttls:
        name = "1h" if u.cache_write_1h and not u.cache_write_5m else table.default_ttl
        return float(ttls.get(name or "", max(ttls.values())))
    kept = table.default_retention
    return float(table.retention_seconds.get(kept, math.inf)) if kept is not None else math.inf


def _unread(rows: list[dict[str, Any]], parents: dict[int, dict[str, Any]], end: float) -> dict[str, Any]:
    """Writes no later call read, whose TTL ran out inside the capture. A write was read when a call that
    continued its prefix (its parent: the best earlier request of the tenant, or the previous call of its
    lineage) read more than the writer had read itself, i.e. into what it wrote."""
    read_into: set[int] = set()
    for r in rows:
        p = parents.get(id(r))
        if p is not None and _usage(r).cache_read > _usage(p).cache_read:
            read_into.add(id(p))
    requests, tokens, paid, premium = 0, 0, 0.0, 0.0
    examples: list[str] = []
    for r in rows:
        u = _usage(r)
        if not u.cache_write or id(r) in read_into:
            continue
        ts = r.get("ts") or 0.0
        if ts + _ttl_s(provider_for(r.get("api") or "", r.get("model")), u) > end:
            continue  # still alive when the capture ends: a later call may yet read it
        c = _contract(r)
        cost = c.cost(write_5m=u.cache_write_5m, write_1h=u.cache_write_1h)
        requests += 1
        tokens += u.cache_write
        paid += cost
        premium += cost - c.cost(uncached=u.cache_write)
        if len(examples) < 5:
            examples.append(str(r.get("id")))
    return {"requests": requests, "tokens": tokens, "cost_usd": paid, "premium_usd": premium, "examples": examples}


def _whatif(
    rows: list[dict[str, Any]], parents: dict[int, dict[str, Any]], scope: str = "all calls"
) -> dict[str, Any] | None:
    """Every write at the longer TTL instead: each one costs its multiplier, and each miss of an expired
    cache whose gap the longer TTL covers reads instead of writing again. None where no provider in the
    capture sells the longer TTL."""
    actual = hypothetical = 0.0
    avoided_requests = avoided_tokens = written = 0
    sold = False
    for r in rows:
        provider = provider_for(r.get("api") or "", r.get("model"))
        longer = providers()[provider].ttl_seconds.get(LONGER_TTL) if provider in providers() else None
        c = _contract(r)
        if longer is None or LONGER_TTL not in c.write_multiplier:
            continue
        sold = True
        u = _usage(r)
        lost = 0
        p = parents.get(id(r))
        if r.get("verdict") == TTL_MISS and p is not None and (r.get("ts") or 0) - (p.get("ts") or 0) <= longer:
            lost = r.get("reprefill_tokens") or max(0, (r.get("expected_cached") or 0) - u.cache_read)
        moved_w = min(lost, u.cache_write)
        moved_u = min(lost - moved_w, u.uncached)
        actual += c.cost(
            uncached=u.uncached, cache_read=u.cache_read, write_5m=u.cache_write_5m, write_1h=u.cache_write_1h
        )
        hypothetical += c.cost(
            uncached=u.uncached - moved_u, cache_read=u.cache_read + moved_w + moved_u, write_1h=u.cache_write - moved_w
        )
        written += u.cache_write
        if lost:
            avoided_requests += 1
            avoided_tokens += moved_w + moved_u
    if not sold:
        return None
    net = hypothetical - actual
    return {
        "scope": scope,
        "ttl": LONGER_TTL,
        "written_tokens": written,
        "rewrites_avoided": avoided_requests,
        "tokens_read_instead": avoided_tokens,
        "actual_usd": actual,
        "with_longer_ttl_usd": hypothetical,
        "net_usd": net,
        "pays_off": net < 0,
    }


def _subagent(row: dict[str, Any]) -> bool:
    """A sub-agent's call in an imported Claude Code log: its lineage is "<session>/<agent id>"
    (prefixguard.importer.claude_code)."""
    return str(row.get("upstream") or "") == "import:claude-code" and "/" in str(row.get("tenant") or "")


def _table(groups: dict[str, list[float]], key: str) -> list[dict[str, Any]]:
    return [
        {key: k, "requests": int(v[0]), "spend_usd": v[1], "saved_usd": v[2] - v[1]}
        for k, v in sorted(groups.items(), key=lambda kv: (-kv[1][1], kv[0]))
    ]


def money(rows: list[dict[str, Any]], parents: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """rows: oldest first. parents: id(row) -> the earlier row it continued, where one was found."""
    first, last = rows[0].get("ts") or 0.0, rows[-1].get("ts") or 0.0
    lineage: dict[tuple[str, str | None], dict[str, Any]] = {}
    parents = dict(parents)
    by_model: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    by_tenant: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    bases: Counter[str] = Counter()
    points = []
    spend = uncached = 0.0
    priced = 0
    for r in rows:
        key = (str(r.get("tenant") or ""), r.get("model"))
        if id(r) not in parents and not isinstance(r.get("request"), dict) and key in lineage:
            # no body to match by: the previous call of its lineage (the importer's model of a log)
            parents[id(r)] = lineage[key]
        lineage[key] = r
        u = _usage(r)
        if not (u.prompt_total or u.output):
            continue
        c = _contract(r)
        p, n = paid(c, u), _uncached(c, u)
        priced += 1
        spend += p
        uncached += n
        for groups, name in ((by_model, r.get("model") or "-"), (by_tenant, None)):
            if name is None:
                name, basis = tenant(r)
                bases[basis] += 1
            g = groups[name]
            g[0] += 1
            g[1] += p
            g[2] += n
        points.append((r.get("ts") or first, p, n))
    tenants = _table(by_tenant, "tenant")
    if len(tenants) > TOP_TENANTS:
        rest = tenants[TOP_TENANTS - 1 :]
        tenants = tenants[: TOP_TENANTS - 1] + [
            {
                "tenant": f"{len(rest)} others",
                "requests": sum(t["requests"] for t in rest),
                "spend_usd": sum(t["spend_usd"] for t in rest),
                "saved_usd": sum(t["saved_usd"] for t in rest),
            }
        ]
    whatif = [
        w
        for w in (
            _whatif(rows, parents),
            _whatif([r for r in rows if _subagent(r)], parents, "sub-agents")
            if any(_subagent(r) for r in rows)
            else None,
        )
        if w is not None
    ]
    return {
        "first_ts": first,
        "last_ts": last,
        "first": datetime.fromtimestamp(first, UTC).isoformat(),
        "last": datetime.fromtimestamp(last, UTC).isoformat(),
        "priced_requests": priced,
        "spend_usd": spend,
        "without_cache_usd": uncached,
        "saved_usd": uncached - spend,
        "by_model": _table(by_model, "model"),
        "by_tenant": tenants,
        "tenants": len(by_tenant),
        "tenant_basis": [{"basis": b, "requests": n} for b, n in bases.most_common()],
        "over_time": _over_time(points, first, last) if points else None,
        "latency": latency(rows),
        "unread_writes": _unread(rows, parents, last),
        "whatif_longer_ttl": whatif,
    }
