"""Prometheus metrics of the proxied calls, from their capture records (prometheus-client).

Counters, not ratios: the hit rate over any window is
`rate(prefixguard_proxy_cached_tokens_total[5m]) / rate(prefixguard_proxy_prompt_tokens_total[5m])`.
Labels stay few and bounded: provider, model, client (user-agent family and major version), route (the
endpoint template), code (HTTP status), verdict, cause (the taxonomy's names). tenant and site are one
value per API key or call site, with no bound: each value is a series kept for the process's life, so they
are added only when PREFIXGUARD_METRICS_LABELS names them ("tenant,site"); the capture and
`report --by` carry them always.
"""

from __future__ import annotations

import os
from typing import Any

from prefixguard.capture.attribution import client_family
from prefixguard.capture.store import Record
from prefixguard.contracts.providers import provider_for
from prefixguard.judge.names import MISSES, miss_cause
from prefixguard.telemetry import names as n
from prefixguard.wire.routes import template

OPT_IN_ENV = "PREFIXGUARD_METRICS_LABELS"


def opt_in_labels(text: str | None = None) -> tuple[str, ...]:
    """The unbounded labels asked for (PREFIXGUARD_METRICS_LABELS="tenant,site"), in their fixed order;
    a name that is no such label raises ValueError naming the ones there are."""
    asked = {part.strip() for part in (os.environ.get(OPT_IN_ENV, "") if text is None else text).split(",")} - {""}
    unknown = asked - set(n.LABELS_OPT_IN)
    if unknown:
        raise ValueError(f"{OPT_IN_ENV}: no label {', '.join(sorted(unknown))} (one of {', '.join(n.LABELS_OPT_IN)})")
    return tuple(name for name in n.LABELS_OPT_IN if name in asked)


class ProxyMetrics:
    """The metrics, in a registry of their own (several proxies or tests in one process never clash)."""

    def __init__(self, registry: Any = None, prefix: str = n.PROXY, extra: tuple[str, ...] | None = None) -> None:
        """extra: the opt-in labels (tenant, site); None: as PREFIXGUARD_METRICS_LABELS says."""
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.registry = registry if registry is not None else CollectorRegistry()
        self.extra = opt_in_labels() if extra is None else extra
        r, base = self.registry, (*n.LABELS, *self.extra)

        def counter(name: str, text: str, labels: tuple[str, ...] = base) -> Any:
            return Counter(f"{prefix}_{name}", text, labels, registry=r)

        def histogram(name: str, text: str, buckets: tuple[float, ...], labels: tuple[str, ...] = base) -> Any:
            return Histogram(f"{prefix}_{name}", text, labels, buckets=buckets, registry=r)

        self.requests = counter(n.REQUESTS, "LLM calls, by HTTP status code and verdict.", (*base, "code", "verdict"))
        self.prompt = counter(n.PROMPT_TOKENS, "Prompt tokens the provider reported.")
        self.cached = counter(n.CACHED_TOKENS, "Prompt tokens the provider read from its cache.")
        self.written = counter(n.CACHE_WRITE_TOKENS, "Prompt tokens the provider wrote to its cache.")
        self.misses = counter(n.MISSES, "Cache misses, by cause.", (*base, "cause"))
        self.reprefill = counter(
            n.REPREFILL_TOKENS, "Tokens prefilled again because the prefix changed, by cause.", (*base, "cause")
        )
        self.cost = counter(n.MISS_COST, "What prefix changes cost over cache reads, in US dollars.")
        self.ttft = histogram(n.TTFT, "Time to first token.", n.SECONDS)
        self.decode = histogram(n.DECODE_RATE, "Decode rate after the first token.", n.TOKENS_PER_SECOND)
        self.lag = histogram(n.ANALYSIS_LAG, "From a response's end to its analysis done.", n.SECONDS, ())
        # method and endpoint (routes.template: no ids, no query): bounded by the endpoints an app calls
        self.unanalysed_requests = counter(
            n.UNANALYSED, "Requests forwarded without analysis, by method and endpoint.", ("method", "path")
        )

    def add(self, rec: Record, lag: float | None = None) -> None:
        provider = provider_for(rec.api, rec.model) if rec.api else "unknown"
        base = {
            "provider": provider,
            "model": rec.model or "",
            "client": client_family(rec.client or ""),
            "route": rec.route or template(rec.path),
        }
        base |= {name: getattr(rec, name) or "" for name in self.extra}
        code = str(rec.status) if rec.status is not None else "none"
        self.requests.labels(**base, code=code, verdict=rec.verdict or "none").inc()
        u = rec.usage
        if u.reported:
            self.prompt.labels(**base).inc(u.prompt_total)
            self.cached.labels(**base).inc(u.cache_read)
            self.written.labels(**base).inc(u.cache_write)
        if rec.verdict in MISSES:
            cause = miss_cause(rec.verdict, rec.causes)
            self.misses.labels(**base, cause=cause).inc()
            if rec.reprefill_tokens:
                self.reprefill.labels(**base, cause=cause).inc(rec.reprefill_tokens)
                self.cost.labels(**base).inc(rec.cost_usd or 0.0)
        if rec.ttft_s is not None:
            self.ttft.labels(**base).observe(rec.ttft_s)
        if rec.decode_tps is not None:
            self.decode.labels(**base).observe(rec.decode_tps)
        if lag is not None:
            self.lag.observe(max(lag, 0.0))

    def unanalysed(self, rec: Record) -> None:
        self.unanalysed_requests.labels(method=rec.method, path=template(rec.path)).inc()

    def serve(self, host: str, port: int) -> Any:
        """/metrics on host:port from a daemon thread; returns the server (shutdown() stops it)."""
        from prometheus_client import start_http_server

        server, _ = start_http_server(port, addr=host, registry=self.registry)
        return server
