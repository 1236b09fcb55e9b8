"""The diagnosis steps on captures shaped like the slowdowns users report."""
from __future__ import annotations

from prefixguard.report.diagnose import diagnose


def row(i: int, *, ttft: float, tps: float | None = 40.0, prompt: int = 5000, read: int = 0, status: int = 200,
        verdict: str = "hit", expected: int | None = None) -> dict:
    return {"id": f"r{i}", "ts": 1_764_000_000.0 + 10 * i, "path": "/v1/messages", "api": "anthropic",
            "model": "claude-sonnet-4-5", "tenant": "t", "request": None, "status": status,
            "usage": {"prompt_total": prompt, "cache_read": read, "cache_write_5m": 0, "cache_write_1h": 0,
                      "uncached": prompt - read, "output": 100, "reported": True},
            "timings": {"ttft_s": ttft, "decode_tps": tps, "total_s": ttft + 2.5},
            "verdict": verdict, "cause": None, "expected_cached": read if expected is None else expected}


def test_only_ttft_moved_rules_out_bandwidth() -> None:
    # Hits turn into misses halfway: TTFT climbs, the decode rate does not move.
    rows = [row(i, ttft=0.3, read=4500) for i in range(30)] + [row(i, ttft=1.8, read=0) for i in range(30, 60)]
    d = diagnose(rows, "capture")
    assert d.split["ttft_ratio"] > 5 and abs(d.split["decode_ratio"] - 1) < 0.01
    assert d.findings[0].startswith("Only TTFT moved") and "bandwidth and concurrency are ruled out" in d.findings[0]
    hit = [w.hit_ratio for w in d.windows]
    assert hit[0] == 0.9 and hit[-1] == 0.0


def test_falling_decode_rate_points_at_the_server() -> None:
    rows = [row(i, ttft=0.3, tps=60.0 - i, read=4500) for i in range(40)]
    d = diagnose(rows, "capture")
    assert d.split["decode_ratio"] < 0.8 and d.findings[0].startswith("Decode rate fell")


def test_prompt_growth_is_step_two() -> None:
    rows = [row(i, ttft=0.3 + i / 50, prompt=1000 + 400 * i, read=900) for i in range(40)]
    d = diagnose(rows, "capture")
    assert d.inputs["ratio"] > 3 and d.findings[1].startswith("Prompts grew")
    assert d.inputs["max"] == 1000 + 400 * 39


def test_infrastructure_signals() -> None:
    rows = [row(i, ttft=0.3, read=4500) for i in range(20)]
    rows += [row(20, ttft=3.0, read=4500)]                                    # a hit that waited in a queue
    rows += [row(21, ttft=1.5, read=0, verdict="miss_ttl_expired", expected=4500)]
    rows += [row(22, ttft=1.5, read=0, verdict="miss_server_side", expected=4500)]
    rows += [row(23, ttft=0.1, status=529, verdict="error"), row(24, ttft=0.1, status=429, verdict="error")]
    d = diagnose(rows, "capture")
    infra = d.infra
    assert (infra["ttl_expired"], infra["server_side"], infra["queued"]) == (1, 1, 1)
    assert infra["queued_examples"] == ["r20"] and infra["ttl_expired_tokens"] == 4500
    assert infra["errors"] == {"529": 1, "429": 1}
    assert "TTL expiries" in d.findings[3] and "queueing" in d.findings[3]
    f = d.fields
    assert f["predicted_cache_read"] - f["reported_cache_read"] == 2 * 4500
    assert {g["request"] for g in f["largest_gaps"]} == {"r21", "r22"}
