"""Money, durations and dates as a person reads them, on a 24-second demo and on a 90-day agent log alike:
"$482" not "$482.3321", "89 days" not "2,144 h", a date range not seconds since the first request."""

from __future__ import annotations

from datetime import UTC, datetime

MINUTE, HOUR, DAY = 60.0, 3600.0, 86400.0


def usd(value: float) -> str:
    """Dollars to the precision the amount deserves: cents hide nothing under $1, nobody reads them over $1,000."""
    sign = "-" if value < 0 else ""
    v = abs(value)
    if v >= 1000:
        return f"{sign}${v:,.0f}"
    if v >= 1:
        return f"{sign}${v:,.2f}"
    if v == 0:
        return "$0"
    return f"{sign}${v:.4f}"


def duration(seconds: float) -> str:
    """A span in the largest unit that keeps it readable: 24 s, 35 min, 5.2 h, 89 days."""
    s = abs(seconds)
    if s < 2 * MINUTE:
        return f"{s:,.0f} s" if s >= 10 else f"{s:.1f} s"
    if s < 2 * HOUR:
        return f"{s / MINUTE:,.0f} min"
    if s < 2 * DAY:
        return f"{s / HOUR:,.1f} h"
    return f"{s / DAY:,.0f} days"


def when(ts: float, span: float) -> str:
    """A moment, as precise as a capture of this span needs: the date on a months-long log, the time on a demo."""
    at = datetime.fromtimestamp(ts, UTC)
    if span >= 2 * DAY:
        return at.strftime("%Y-%m-%d")
    if span >= 2 * HOUR:
        return at.strftime("%Y-%m-%d %H:%M")
    return at.strftime("%Y-%m-%d %H:%M:%S")


def date_range(first: float, last: float) -> str:
    """'2026-09-01 to 2026-11-29 UTC (89 days)'; one moment when first is last."""
    span = last - first
    if span <= 0:
        return f"{when(first, span)} UTC"
    start, end = when(first, span), when(last, span)
    if span < 2 * DAY and start[:10] == end[:10]:
        end = end[11:]  # the same day: its date once
    return f"{start} to {end} UTC ({duration(span)})"


def ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1e3:,.0f} ms" if seconds < 10 else f"{seconds:,.1f} s"
