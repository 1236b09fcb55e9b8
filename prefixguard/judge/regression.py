"""Did a capture's caching get worse than a baseline's? The comparison behind `prefixguard check`.

Each side is a capture's rows (the export shape), cut to a time window and, for the baseline, with
incident windows left out (an outage must not lower the bar the next release is held to). A side is
summed from what the proxy stored: the provider's reported usage gives the hit rate (prompt tokens read
from cache over prompt tokens), each row's stored verdict (verdict.of_row, never judged again here)
gives the misses, their causes and what the prefix changes cost. The checks are thresholds on the
difference, overall and per model: the hit rate may not fall by more than so many points, the cost of
misses per request may not rise by more than so many percent, and a cause of breaks the baseline never
had may not appear.
"""

from __future__ import annotations

import re
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime
from typing import Any, NamedTuple

from prefixguard.judge.verdict import VerdictName, of_row

MISS_VERDICTS = frozenset({VerdictName.MISS_PREFIX_CHANGED, VerdictName.MISS_TTL_EXPIRED, VerdictName.MISS_SERVER_SIDE})
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class Window(NamedTuple):
    """A time span in unix seconds; an open end is None. `note` says what it is (an incident's name)."""

    start: float | None = None
    end: float | None = None
    note: str = ""

    def holds(self, ts: float) -> bool:
        return (self.start is None or ts >= self.start) and (self.end is None or ts < self.end)

    def to_json(self) -> dict[str, Any]:
        return {"start": _iso(self.start), "end": _iso(self.end), "note": self.note or None}


class Thresholds(NamedTuple):
    max_hit_rate_drop: float = 5.0  # percentage points of prompt tokens read from cache
    max_miss_cost_increase: float | None = None  # percent of the cost of misses per request; None: not checked
    allow_new_causes: bool = False  # a cause of breaks the baseline never had is a regression
    min_requests: int = 5  # a model is checked on its own when both sides have this many

    def to_json(self) -> dict[str, Any]:
        return {
            "max_hit_rate_drop": self.max_hit_rate_drop,
            "max_miss_cost_increase": self.max_miss_cost_increase,
            "allow_new_causes": self.allow_new_causes,
            "min_requests": self.min_requests,
        }


class CauseTotal(NamedTuple):
    requests: int
    reprefill_tokens: int
    cost_usd: float


class Summary(NamedTuple):
    """One side's caching, summed from its stored rows."""

    requests: int
    reported: int  # rows whose provider reported its cache fields
    prompt_tokens: int
    cache_read: int
    misses: int
    miss_cost_usd: float
    verdicts: dict[str, int]
    causes: dict[str, CauseTotal]

    @property
    def hit_rate(self) -> float | None:
        return self.cache_read / self.prompt_tokens if self.prompt_tokens else None

    @property
    def miss_cost_per_request(self) -> float | None:
        return self.miss_cost_usd / self.requests if self.requests else None

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "reported": self.reported,
            "prompt_tokens": self.prompt_tokens,
            "cache_read": self.cache_read,
            "hit_rate": self.hit_rate,
            "misses": self.misses,
            "miss_cost_usd": round(self.miss_cost_usd, 9),
            "miss_cost_per_1k_requests": None
            if self.miss_cost_per_request is None
            else round(self.miss_cost_per_request * 1000, 9),
            "verdicts": dict(sorted(self.verdicts.items())),
            "causes": {name: c._asdict() for name, c in sorted(self.causes.items())},
        }


class Side(NamedTuple):
    """A capture cut to its window: the rows kept, how many incidents removed, and their sums."""

    source: str
    window: Window
    incidents: tuple[Window, ...]
    excluded: int  # rows inside an incident
    total: Summary
    models: dict[str, Summary]

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "window": self.window.to_json(),
            "incidents": [i.to_json() for i in self.incidents],
            "excluded_requests": self.excluded,
            "summary": self.total.to_json(),
        }


class Check(NamedTuple):
    name: str  # hit_rate_drop | miss_cost_increase | new_causes
    scope: str  # "all", or a model's name
    base: Any
    new: Any
    change: Any  # points, percent, or the new causes' names
    limit: Any
    failed: bool
    message: str

    def to_json(self) -> dict[str, Any]:
        return self._asdict()


class Outcome(NamedTuple):
    base: Side
    new: Side
    thresholds: Thresholds
    checks: tuple[Check, ...]
    skipped_models: tuple[str, ...]  # on one side only, or too few requests to judge alone

    @property
    def regression(self) -> bool:
        return any(c.failed for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        models = sorted(set(self.base.models) | set(self.new.models))
        return {
            "regression": self.regression,
            "thresholds": self.thresholds.to_json(),
            "base": self.base.to_json(),
            "new": self.new.to_json(),
            "checks": [c.to_json() for c in self.checks],
            "models": [
                {
                    "model": m,
                    "base": self.base.models[m].to_json() if m in self.base.models else None,
                    "new": self.new.models[m].to_json() if m in self.new.models else None,
                    "checked": m not in self.skipped_models,
                }
                for m in models
            ],
        }


# ------------------------------------------------------------------------------------------- times


def parse_time(text: str, now: float | None = None) -> float:
    """A point in time: unix seconds, an ISO 8601 date or date-time (UTC unless it names its offset), or
    a duration before now (30m, 24h, 7d, 2w). Raises ValueError with a sentence a user can act on."""
    text = text.strip()
    found = _DURATION.match(text)
    if found:
        return (time.time() if now is None else now) - float(found.group(1)) * _UNIT_S[found.group(2)]
    try:
        return float(text)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        raise ValueError(
            f"{text!r} is not a time (use ISO 8601 such as 2026-12-01T09:00Z, unix seconds, "
            "or a duration before now such as 24h or 7d)"
        ) from None
    return as_unix(when)


def as_unix(when: Any) -> float:
    """A datetime (TOML's, or fromisoformat's; naive means UTC) or a date, in unix seconds."""
    if not isinstance(when, datetime):  # a date: its midnight, UTC
        when = datetime(when.year, when.month, when.day)
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def parse_span(text: str, note: str = "", now: float | None = None) -> Window:
    """START..END (either end may be left open: `..END`, `START..`), as an incident is written."""
    start, sep, end = text.partition("..")
    if not sep:
        raise ValueError(f"{text!r} is not a span: write START..END (e.g. 2026-11-02T10:00Z..2026-11-02T14:00Z)")
    window = Window(
        start=parse_time(start, now) if start.strip() else None,
        end=parse_time(end, now) if end.strip() else None,
        note=note,
    )
    if window.start is not None and window.end is not None and window.end <= window.start:
        raise ValueError(f"{text!r}: its end is not after its start")
    return window


def _iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


# ------------------------------------------------------------------------------------------- sums


def summarize(rows: list[dict[str, Any]]) -> Summary:
    """The sums of rows as they were stored and judged."""
    reported = prompt = read = misses = 0
    cost = 0.0
    verdicts: Counter[str] = Counter()
    causes: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0.0])
    for row in rows:
        usage = row.get("usage") or {}
        ok = 200 <= (row.get("status") or 0) < 300
        if usage.get("reported") and ok:
            reported += 1
            prompt += usage.get("prompt_total") or 0
            read += usage.get("cache_read") or 0
        judged = of_row(row)
        verdicts[judged.verdict.value if judged else "none"] += 1
        if judged is None or judged.verdict not in MISS_VERDICTS:
            continue
        misses += 1
        cost += judged.cost_usd
        if judged.verdict == VerdictName.MISS_PREFIX_CHANGED:
            for name in (judged.change.causes if judged.change is not None else ()) or ("unknown",):
                total = causes[name]
                total[0] += 1
                total[1] += judged.reprefill_tokens
                total[2] += judged.cost_usd
    return Summary(
        requests=len(rows),
        reported=reported,
        prompt_tokens=prompt,
        cache_read=read,
        misses=misses,
        miss_cost_usd=cost,
        verdicts=dict(verdicts),
        causes={
            k: CauseTotal(requests=int(v[0]), reprefill_tokens=int(v[1]), cost_usd=v[2]) for k, v in causes.items()
        },
    )


def _requests(cause: str, n: int) -> str:
    return f"{cause} ({n} request{'s' * (n != 1)})"


def side(
    rows: list[dict[str, Any]],
    source: str,
    window: Window = Window(),  # noqa: B008 (a NamedTuple: immutable)
    incidents: tuple[Window, ...] = (),
) -> Side:
    """A capture's rows in `window`, less those inside an incident, summed overall and per model."""
    kept, excluded = [], 0
    for row in rows:
        ts = row.get("ts")
        if not isinstance(ts, (int, float)) or not window.holds(ts):
            continue
        if any(i.holds(ts) for i in incidents):
            excluded += 1
            continue
        kept.append(row)
    by_model: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in kept:
        by_model[row.get("model") or "(none)"].append(row)
    return Side(
        source=source,
        window=window,
        incidents=incidents,
        excluded=excluded,
        total=summarize(kept),
        models={m: summarize(r) for m, r in sorted(by_model.items())},
    )


# ------------------------------------------------------------------------------------------- checks


def compare(base: Side, new: Side, thresholds: Thresholds = Thresholds()) -> Outcome:  # noqa: B008 (immutable)
    """The checks of `new` against `base`: overall, then each model both sides have enough of."""
    checks = list(_checks("all", base.total, new.total, thresholds))
    skipped = []
    for model in sorted(set(base.models) | set(new.models)):
        b, n = base.models.get(model), new.models.get(model)
        if b is None or n is None or min(b.requests, n.requests) < thresholds.min_requests:
            skipped.append(model)
            continue
        checks += _checks(model, b, n, thresholds)
    return Outcome(base=base, new=new, thresholds=thresholds, checks=tuple(checks), skipped_models=tuple(skipped))


def _checks(scope: str, base: Summary, new: Summary, t: Thresholds) -> list[Check]:
    out = []
    if base.hit_rate is not None and new.hit_rate is not None:
        drop = round((base.hit_rate - new.hit_rate) * 100, 4)
        failed = drop > t.max_hit_rate_drop
        out.append(
            Check(
                name="hit_rate_drop",
                scope=scope,
                base=base.hit_rate,
                new=new.hit_rate,
                change=-drop,
                limit=t.max_hit_rate_drop,
                failed=failed,
                message=f"hit rate {base.hit_rate:.1%} -> {new.hit_rate:.1%} ({-drop:+.1f} points; "
                f"the limit is a drop of {t.max_hit_rate_drop:g})",
            )
        )
    if t.max_miss_cost_increase is not None:
        b, n = base.miss_cost_per_request or 0.0, new.miss_cost_per_request or 0.0
        rise = None if b == 0 else round((n - b) / b * 100, 4)
        failed = n > 0 and (rise is None or rise > t.max_miss_cost_increase)
        shown = "from nothing" if rise is None and n > 0 else f"{rise or 0:+.0f}%"
        out.append(
            Check(
                name="miss_cost_increase",
                scope=scope,
                base=b * 1000,
                new=n * 1000,
                change=rise,
                limit=t.max_miss_cost_increase,
                failed=failed,
                message=f"cost of misses ${b * 1000:.4f} -> ${n * 1000:.4f} per 1,000 requests "
                f"({shown}; the limit is {t.max_miss_cost_increase:g}%)",
            )
        )
    appeared = sorted(set(new.causes) - set(base.causes))
    listed = ", ".join(_requests(c, new.causes[c].requests) for c in appeared)
    out.append(
        Check(
            name="new_causes",
            scope=scope,
            base=sorted(base.causes),
            new=sorted(new.causes),
            change=appeared,
            limit="allowed" if t.allow_new_causes else "none",
            failed=bool(appeared) and not t.allow_new_causes,
            message=f"new causes of breaks: {listed}" if appeared else "no cause of breaks the baseline did not have",
        )
    )
    return out
