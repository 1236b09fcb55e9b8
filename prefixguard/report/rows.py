"""Reading a capture row in its export shape (prefixguard.capture.record.Record.row) for the diagnosis:
its usage, its timings, whether it succeeded; and the median of a list."""

from __future__ import annotations

from typing import Any

from prefixguard.utils.stats import quantile


def usage(row: dict[str, Any]) -> dict[str, Any]:
    return row.get("usage") or {}


def timing(row: dict[str, Any], key: str) -> float | None:
    return (row.get("timings") or {}).get(key)


def succeeded(row: dict[str, Any]) -> bool:
    status = row.get("status")
    return status is not None and status < 400


def median(values: list[float]) -> float | None:
    return quantile(sorted(values), 0.5) if values else None
