"""The report's headline: hit rate, money lost to misses (priced at the row's model), the top cause and
its fix, from capture rows shaped like the proxy's and the log import's."""
from __future__ import annotations

import pytest

from prefixguard.contracts.providers import model_contract
from prefixguard.report.diagnose import diagnose
from prefixguard.report.headline import TTL_FIX


def row(i: int, *, read: int, written: int = 0, verdict: str = "hit", expected: int | None = None,
        cause: str | None = None, cost: float | None = None, reprefill: int | None = None) -> dict:
    prompt = read + written + 50
    return {"id": f"r{i}", "ts": 1_764_000_000.0 + 60 * i, "path": "/v1/messages", "api": "anthropic",
            "model": "claude-sonnet-4-5", "tenant": "t", "request": None, "status": 200,
            "usage": {"prompt_total": prompt, "cache_read": read, "cache_write_5m": written, "cache_write_1h": 0,
                      "uncached": 50, "output": 10, "reported": True},
            "timings": {}, "verdict": verdict, "cause": cause, "causes": [cause] if cause else [], "pointer": None,
            "expected_cached": expected,
            "cost_usd": cost, "reprefill_tokens": reprefill}


def test_ttl_expiries_are_priced_and_lead_when_they_cost_most() -> None:
    rows = [row(0, read=0, written=10_000, verdict="cold"), row(1, read=10_000),
            row(2, read=0, written=10_000, verdict="miss_ttl_expired", expected=10_000)]
    h = diagnose(rows, "c").headline
    contract = model_contract("anthropic", "claude-sonnet-4-5")
    assert h["lost_usd"] == pytest.approx(contract.cost(write_5m=10_000) - contract.cost(cache_read=10_000))
    assert h["top_cause"] == "miss_ttl_expired" and h["fix"] == TTL_FIX
    assert h["hit_rate"] == pytest.approx(10_000 / 30_150)
    assert "lost to misses" in h["text"] and contract.prices in h["text"]


def test_a_stored_cause_leads_with_its_catalog_fix() -> None:
    rows = [row(0, read=0, written=20_000, verdict="cold"),
            row(1, read=0, written=20_000, verdict="miss_prefix_changed", expected=20_000, cause="model_changed",
                cost=0.07, reprefill=20_000),
            row(2, read=0, written=1_000, verdict="miss_ttl_expired", expected=1_000, cost=0.002)]
    h = diagnose(rows, "c").headline
    assert h["lost_usd"] == pytest.approx(0.072)
    assert h["top_cause"] == "model_changed" and "one model per session" in h["fix"]


def test_a_clean_capture_has_no_cause() -> None:
    h = diagnose([row(0, read=0, written=5_000, verdict="cold"), row(1, read=5_000)], "c").headline
    assert h["lost_usd"] == 0 and h["top_cause"] is None and h["fix"] is None
