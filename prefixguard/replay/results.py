"""What a replay measured: one Outcome per request, a summary over them, and files to keep them in."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from prefixguard.capture.store import SQLITE_SUFFIXES
from prefixguard.schemas import SCHEMA_VERSION
from prefixguard.utils.stats import distribution

# A prediction agrees with the provider's number within this many tokens or this fraction, whichever
# is larger: tokenizers differ by a few tokens per block between us and the provider.
AGREE_TOKENS = 16
AGREE_FRACTION = 0.05


@dataclass(slots=True)
class Outcome:
    """One replayed request: token classes as the target saw them, timings where it has them."""

    index: int
    ts: float
    ref: str
    session: str
    model: str | None
    prompt_tokens: int
    cache_read: int  # read from the cache
    cache_write: int = 0  # prefilled and kept for later requests
    uncached: int = 0  # prefilled and not kept (below the minimum, no breakpoint, no room)
    reason: str | None = None  # the policy's reason, e.g. hit, cold, ttl_expired
    output_tokens: int = 0
    ttft_s: float | None = None
    prefill_s: float | None = None
    decode_tps: float | None = None
    cost_usd: float = 0.0
    full_cost_usd: float = 0.0  # the same tokens with no cache at all
    reported_cache_read: int | None = None  # the provider's own number, where the capture holds one
    reported_prompt: int | None = None
    error: str | None = None  # the target failed this request (HTTP status, message)
    prices: str = ""  # the price table the costs come from, with its date


def summarize(outcomes: list[Outcome]) -> dict[str, Any]:
    """Totals and ratios over a replay; `hit_ratio` is token-weighted, `request_hit_ratio` per request."""
    done = [o for o in outcomes if o.error is None]
    prompt = sum(o.prompt_tokens for o in done)
    cached = sum(o.cache_read for o in done)
    out: dict[str, Any] = {
        "requests": len(done),
        "errors": len(outcomes) - len(done),
        "prompt_tokens": prompt,
        "cache_read": cached,
        "cache_write": sum(o.cache_write for o in done),
        "uncached": sum(o.uncached for o in done),
        "hit_ratio": cached / prompt if prompt else 0.0,
        "request_hit_ratio": (
            sum(o.cache_read / o.prompt_tokens for o in done if o.prompt_tokens) / len(done) if done else 0.0
        ),
        "requests_with_hits": sum(1 for o in done if o.cache_read),
        "cost_usd": sum(o.cost_usd for o in done),
        "cost_without_cache_usd": sum(o.full_cost_usd for o in done),
        "prices": sorted({o.prices for o in done if o.prices}),
    }
    timed = [(o.ttft_s, o.cache_read) for o in done if o.ttft_s is not None]
    if timed:
        out["ttft_s"] = {
            "with_reuse": distribution([t for t, reused in timed if reused]),
            "without_reuse": distribution([t for t, reused in timed if not reused]),
        }
    prefilled = [o.prefill_s for o in done if o.prefill_s is not None]
    if prefilled:
        out["prefill_s"] = sum(prefilled)
    checked = [o for o in done if o.reported_cache_read is not None]
    if checked:
        out["predicted_vs_reported"] = agreement(checked)
    return out


def against_baseline(summary: dict[str, Any], baseline: dict[str, Any]) -> dict[str, Any]:
    """Prefill time saved by reuse, measured against the same trace replayed with reuse off."""
    if "prefill_s" not in summary or "prefill_s" not in baseline:
        return summary
    saved = baseline["prefill_s"] - summary["prefill_s"]
    ratio = summary["prefill_s"] / baseline["prefill_s"] if baseline["prefill_s"] else None
    return {**summary, "prefill_saved_s": saved, "prefill_ratio": ratio}


def agreement(outcomes: list[Outcome]) -> dict[str, Any]:
    """Predicted cached tokens against the provider's reported ones."""
    pairs = [(o.cache_read, o.reported_cache_read) for o in outcomes if o.reported_cache_read is not None]
    over = under = 0
    for predicted, reported in pairs:
        d = predicted - reported
        slack = max(AGREE_TOKENS, AGREE_FRACTION * max(reported, predicted))
        over += d > slack
        under += d < -slack
    return {
        "requests": len(pairs),
        "predicted_cache_read": sum(p for p, _ in pairs),
        "reported_cache_read": sum(r for _, r in pairs),
        "agree": len(pairs) - over - under,
        "over_predicted": over,
        "under_predicted": under,
        "mean_abs_diff_tokens": sum(abs(p - r) for p, r in pairs) / len(pairs) if pairs else 0.0,
    }


def write(path: str | Path, runs: dict[str, list[Outcome]], meta: dict[str, Any]) -> None:
    """Results of one or more runs ("as_is", "fixed"): SQLite when the name ends in .db/.sqlite, else JSON."""
    p = Path(path)
    if p.suffix in SQLITE_SUFFIXES:
        _write_sqlite(p, runs, meta)
    else:
        done = {
            name: {"summary": summarize(rows), "requests": [asdict(o) for o in rows]} for name, rows in runs.items()
        }
        doc = {"schema_version": SCHEMA_VERSION, "meta": meta, "runs": done}
        p.write_text(json.dumps(doc, indent=1), "utf-8")


def _write_sqlite(p: Path, runs: dict[str, list[Outcome]], meta: dict[str, Any]) -> None:
    cols = [f.name for f in fields(Outcome)]
    p.unlink(missing_ok=True)
    con = sqlite3.connect(p)
    try:
        with con:
            con.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
            con.execute("CREATE TABLE summary (run TEXT PRIMARY KEY, value TEXT)")
            con.execute(f"CREATE TABLE requests (run TEXT, {', '.join(f'"{c}"' for c in cols)})")
            con.executemany("INSERT INTO meta VALUES (?, ?)", [(k, json.dumps(v)) for k, v in meta.items()])
            for name, rows in runs.items():
                con.execute("INSERT INTO summary VALUES (?, ?)", (name, json.dumps(summarize(rows))))
                con.executemany(
                    f"INSERT INTO requests VALUES ({', '.join('?' * (len(cols) + 1))})",
                    [(name, *_row(o)) for o in rows],
                )
    finally:
        con.close()


def _row(o: Outcome) -> tuple[Any, ...]:
    return tuple(getattr(o, f.name) for f in fields(Outcome))
