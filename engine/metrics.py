"""The engine's Prometheus metrics, through prometheus-client, in a registry per app (tests run several).

Names follow vLLM's where vLLM has one (prefix_cache_queries / prefix_cache_hits counted in tokens,
prompt / generation tokens, time to first token, prefill time, running / waiting requests), prefixed
`prefixguard_engine_` and without vLLM's colon, which Prometheus keeps for recording rules. The prefix
hit rate over a window is `rate(prefixguard_engine_prefix_cache_hits_total[5m]) /
rate(prefixguard_engine_prefix_cache_queries_total[5m])`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from prefixguard.model.usage import Usage
from prefixguard.telemetry.names import ENGINE, SECONDS, TOKENS_PER_SECOND


class _Live:
    """What the runner and the KV pool hold at scrape time (read then, never copied)."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner

    def collect(self) -> Iterator[Any]:
        r = self.runner
        stats = r.engine.stats
        total, used = stats["pool_pages_total"], stats["pool_pages_used"]
        for name, value, text in (
            ("num_requests_running", r.in_flight, "Requests admitted and not finished."),
            ("num_requests_waiting", r.waiting, "Requests admitted with no token yet."),
            ("queue_capacity", r.max_queue, "Requests in flight before 429."),
            ("kv_pool_pages", total, "KV pages in the pool."),
            ("kv_pool_used_ratio", used / total if total else 0.0, "Share of KV pages in use, radix tree included."),
        ):
            yield GaugeMetricFamily(f"{ENGINE}_{name}", text, value=value)
        yield CounterMetricFamily(
            f"{ENGINE}_kv_evicted_pages", "Tree pages evicted for room.", value=stats["evicted_pages"]
        )


class Metrics:
    def __init__(self, runner: Any) -> None:
        self.registry = r = CollectorRegistry()
        self.requests = Counter(
            f"{ENGINE}_requests", "Requests answered, by API and HTTP status code.", ("api", "code"), registry=r
        )
        self.invalid_requests = Counter(
            f"{ENGINE}_invalid_requests",
            "Requests answered 400 because they could "
            "not be parsed or checked (malformed JSON, a wrong type, a missing field).",
            ("api",),
            registry=r,
        )
        self.queries = Counter(
            f"{ENGINE}_prefix_cache_queries", "Prompt tokens looked up in the radix tree.", registry=r
        )
        self.hits = Counter(f"{ENGINE}_prefix_cache_hits", "Prompt tokens read from the radix tree.", registry=r)
        self.prompt = Counter(f"{ENGINE}_prompt_tokens", "Prompt tokens of finished requests.", registry=r)
        self.generated = Counter(f"{ENGINE}_generation_tokens", "Tokens generated.", registry=r)
        self.ttft = Histogram(
            f"{ENGINE}_time_to_first_token_seconds", "Time to first token.", buckets=SECONDS, registry=r
        )
        self.prefill = Histogram(
            f"{ENGINE}_request_prefill_time_seconds", "Prefill compute per request.", buckets=SECONDS, registry=r
        )
        self.decode = Histogram(
            f"{ENGINE}_decode_tokens_per_second",
            "Decode rate after the first token.",
            buckets=TOKENS_PER_SECOND,
            registry=r,
        )
        r.register(_Live(runner))

    def count(self, api: str, status: int) -> None:
        self.requests.labels(api=api, code=str(status)).inc()

    def invalid(self, api: str) -> None:
        self.invalid_requests.labels(api=api).inc()

    def finished(self, event: Any, usage: Usage) -> None:
        self.queries.inc(usage.prompt_total)
        self.prompt.inc(usage.prompt_total)
        self.hits.inc(usage.cache_read)
        self.generated.inc(usage.output)
        if event.ttft is not None:
            self.ttft.observe(event.ttft)
        if event.prefill_seconds is not None:
            self.prefill.observe(event.prefill_seconds)
        if event.decode_tps is not None:
            self.decode.observe(event.decode_tps)
