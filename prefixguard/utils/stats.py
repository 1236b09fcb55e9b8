"""Summary statistics of measured values (replay's latencies, report's prompt sizes)."""

from __future__ import annotations


def distribution(values: list[float]) -> dict[str, float | int | None]:
    if not values:
        return {"n": 0, "p50": None, "p90": None, "p99": None, "mean": None}
    ordered = sorted(values)
    return {
        "n": len(ordered),
        "p50": quantile(ordered, 0.5),
        "p90": quantile(ordered, 0.9),
        "p99": quantile(ordered, 0.99),
        "mean": sum(ordered) / len(ordered),
    }


def quantile(ordered: list[float], q: float) -> float:
    """Linear interpolation between closest ranks, on sorted values."""
    pos = (len(ordered) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)
