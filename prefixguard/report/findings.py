"""The findings a report is made of: per time window, per cause of a prefix break, and the diagnosis that
holds the five steps' findings (report/diagnose.py fills it; headline, terminal and HTML read it)."""

from __future__ import annotations

from typing import Any


class Window:
    """One slice of the capture's time span."""

    __slots__ = (
        "start",
        "end",
        "requests",
        "ttft_p50",
        "ttft_p50_by_mode",
        "decode_p50",
        "prompt_p50",
        "prompt_p90",
        "cache_read",
        "cache_write",
        "uncached",
    )

    def __init__(self, start: float, end: float, requests: int = 0) -> None:
        self.start, self.end, self.requests = start, end, requests  # seconds since the first request
        self.ttft_p50: float | None = None  # of the mode of call the split compares (Diagnosis.split["mode"])
        self.ttft_p50_by_mode: dict[str, float] = {}  # streaming, non-streaming, mode unknown: never mixed
        self.decode_p50: float | None = None
        self.prompt_p50: float | None = None
        self.prompt_p90: float | None = None
        self.cache_read = self.cache_write = self.uncached = 0

    @property
    def hit_ratio(self) -> float | None:
        total = self.cache_read + self.cache_write + self.uncached
        return self.cache_read / total if total else None

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__} | {"hit_ratio": self.hit_ratio}


class Cause:
    """One cause of cache breaks: how often, what it re-prefilled and cost, the first example."""

    __slots__ = ("name", "requests", "reprefill_tokens", "cost_usd", "example")

    def __init__(self, name: str) -> None:
        self.name, self.requests, self.reprefill_tokens, self.cost_usd = name, 0, 0, 0.0
        self.example: dict[str, Any] | None = None  # ref, earlier ref, pointer, byte offset, before, after, detail, fix

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


class Diagnosis:
    """The five steps' findings on one capture, and what the report leads with."""

    __slots__ = (
        "source",
        "requests",
        "span_s",
        "windows",
        "split",
        "inputs",
        "causes",
        "infra",
        "fields",
        "points",
        "findings",
        "tokens_estimated",
        "prices",
        "notes",
        "headline",
        "listed",
        "money",
    )

    def __init__(
        self,
        source: str,
        requests: int,
        span_s: float,
        windows: list[Window],
        split: dict[str, Any],
        inputs: dict[str, Any],
        causes: list[Cause],
        infra: dict[str, Any],
        fields: dict[str, Any],
        points: list[tuple[float, float]],
    ) -> None:
        self.source, self.requests, self.span_s, self.windows = source, requests, span_s, windows
        self.split, self.inputs, self.causes, self.infra, self.fields = split, inputs, causes, infra, fields  # 1-5
        self.points = points  # (cached fraction, TTFT s) per request
        self.findings: list[str] = []  # one headline per step
        self.tokens_estimated = False  # our counts (predictions, re-prefilled tokens) are estimates
        self.prices: list[str] = []  # the price tables costs come from, with their dates
        self.notes: list[str] = []  # what the reader must know about the source
        self.headline: dict[str, Any] = {}  # hit rate, money lost to misses, top cause, fix
        self.listed: dict[str, dict[str, Any]] = {}  # requests the report names: time, body
        self.money: dict[str, Any] = {}  # spend, savings, cost by model/tenant/time, latency, unread writes

    def to_json(self) -> dict[str, Any]:
        doc = {k: getattr(self, k) for k in self.__slots__}
        return doc | {"windows": [w.to_json() for w in self.windows], "causes": [c.to_json() for c in self.causes]}


ESTIMATED = (
    "Token counts of prefixguard's own (predicted cached tokens, re-prefilled tokens and their cost) "
    "are estimates at ~4 bytes a token: no tokenizer was loaded. The provider's reported counts are exact."
)
