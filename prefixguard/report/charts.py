"""Charts as inline SVG strings: no script library, no external asset, readable in any browser.

Every drawn data element has class "mark", so a check can count what the browser actually laid out.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape

W, H = 560, 230
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 12, 36
COLORS = ("#2563eb", "#f59e0b", "#dc2626", "#16a34a", "#7c3aed", "#0891b2")

Fmt = Callable[[float], str]


def _scale(lo: float, hi: float, a: float, b: float) -> Callable[[float], float]:
    span = (hi - lo) or 1.0
    return lambda v: a + (v - lo) / span * (b - a)


def _frame(name: str, title: str, body: str, legend: Sequence[tuple[str, str]] = ()) -> str:
    keys = "".join(f'<span class="key"><i style="background:{c}"></i>{escape(label)}</span>' for label, c in legend)
    return (f'<figure class="chart"><figcaption>{escape(title)}</figcaption>'
            f'<svg data-chart="{name}" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" '
            f'aria-label="{escape(title)}">{body}</svg><div class="legend">{keys}</div></figure>')


def _axes(x_lo: float, x_hi: float, y_lo: float, y_hi: float, x_fmt: Fmt, y_fmt: Fmt, ticks: int = 4) -> str:
    out = [f'<line class="axis" x1="{LEFT}" y1="{H - BOTTOM}" x2="{W - RIGHT}" y2="{H - BOTTOM}"/>',
           f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{H - BOTTOM}"/>']
    sx, sy = _scale(x_lo, x_hi, LEFT, W - RIGHT), _scale(y_lo, y_hi, H - BOTTOM, TOP)
    for i in range(ticks + 1):
        yv = y_lo + (y_hi - y_lo) * i / ticks
        xv = x_lo + (x_hi - x_lo) * i / ticks
        out.append(f'<line class="grid" x1="{LEFT}" y1="{sy(yv):.1f}" x2="{W - RIGHT}" y2="{sy(yv):.1f}"/>')
        out.append(f'<text class="tick" x="{LEFT - 6}" y="{sy(yv) + 4:.1f}" text-anchor="end">'
                   f'{escape(y_fmt(yv))}</text>')
        out.append(f'<text class="tick" x="{sx(xv):.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">'
                   f'{escape(x_fmt(xv))}</text>')
    return "".join(out)


def _empty(name: str, title: str) -> str:
    return _frame(name, title, f'<text class="empty" x="{W / 2}" y="{H / 2}" text-anchor="middle">no data</text>')


def lines(name: str, title: str, xs: Sequence[float], series: Sequence[tuple[str, Sequence[float | None]]],
          x_fmt: Fmt, y_fmt: Fmt, y_min: float | None = 0.0, y_max: float | None = None) -> str:
    """Line chart: one polyline per series (gaps where a value is None), a dot at each point."""
    values = [v for _, vs in series for v in vs if v is not None]
    if not values or not xs:
        return _empty(name, title)
    y_lo = min(values) if y_min is None else y_min
    y_hi = max(values) if y_max is None else y_max
    x_lo, x_hi = min(xs), max(xs)
    sx, sy = _scale(x_lo, x_hi, LEFT, W - RIGHT), _scale(y_lo, y_hi, H - BOTTOM, TOP)
    body = [_axes(x_lo, x_hi, y_lo, y_hi, x_fmt, y_fmt)]
    for (label, vs), color in zip(series, COLORS):
        pts = [(sx(x), sy(v)) for x, v in zip(xs, vs) if v is not None]
        if len(pts) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
            body.append(f'<polyline class="mark" fill="none" stroke="{color}" stroke-width="2" points="{path}"/>')
        body.extend(f'<circle class="mark" cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"><title>{escape(label)}'
                    f'</title></circle>' for x, y in pts)
    return _frame(name, title, "".join(body), [(label, c) for (label, _), c in zip(series, COLORS)])


def scatter(name: str, title: str, points: Sequence[tuple[float, float]], x_fmt: Fmt, y_fmt: Fmt,
            x_range: tuple[float, float] | None = None) -> str:
    if not points:
        return _empty(name, title)
    x_lo, x_hi = x_range or (min(p[0] for p in points), max(p[0] for p in points))
    y_hi = max(p[1] for p in points)
    sx, sy = _scale(x_lo, x_hi, LEFT, W - RIGHT), _scale(0.0, y_hi, H - BOTTOM, TOP)
    body = [_axes(x_lo, x_hi, 0.0, y_hi, x_fmt, y_fmt)]
    body.extend(f'<circle class="mark" cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3.5" fill="{COLORS[0]}" '
                f'fill-opacity="0.6"/>' for x, y in points)
    return _frame(name, title, "".join(body))


def stacked(name: str, title: str, labels: Sequence[str], stacks: Sequence[tuple[str, Sequence[float]]],
            y_fmt: Fmt) -> str:
    """Stacked bars, one per label; each stack is a class of the whole (e.g. read, written, uncached)."""
    totals = [sum(vs[i] for _, vs in stacks) for i in range(len(labels))]
    if not labels or not any(totals):
        return _empty(name, title)
    y_hi = max(totals)
    sy = _scale(0.0, y_hi, H - BOTTOM, TOP)
    slot = (W - LEFT - RIGHT) / len(labels)
    body = [_axes(0, 1, 0.0, y_hi, lambda _: "", y_fmt)]
    for i, label in enumerate(labels):
        base = 0.0
        x = LEFT + i * slot + slot * 0.15
        for (cls, vs), color in zip(stacks, COLORS):
            v = vs[i]
            if v > 0:
                y0, y1 = sy(base), sy(base + v)
                body.append(f'<rect class="mark" x="{x:.1f}" y="{y1:.1f}" width="{slot * 0.7:.1f}" '
                            f'height="{y0 - y1:.1f}" fill="{color}"><title>{escape(cls)}: {v:,.0f}</title></rect>')
            base += v
        body.append(f'<text class="tick" x="{x + slot * 0.35:.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">'
                    f'{escape(label)}</text>')
    return _frame(name, title, "".join(body), [(cls, c) for (cls, _), c in zip(stacks, COLORS)])


def bars(name: str, title: str, items: Sequence[tuple[str, float]], fmt: Fmt) -> str:
    """Horizontal bars in the order given (callers pass the largest first), each labelled with its value."""
    items = [(label, v) for label, v in items if v > 0]
    if not items:
        return _empty(name, title)
    hi = max(v for _, v in items)
    label_w = 150
    sx = _scale(0.0, hi, label_w, W - 90)
    row = min(32.0, (H - TOP - 8) / len(items))
    body = []
    for i, (label, v) in enumerate(items):
        y = TOP + i * row
        body.append(f'<text class="tick" x="{label_w - 8}" y="{y + row * 0.6:.1f}" text-anchor="end">'
                    f'{escape(label)}</text>')
        body.append(f'<rect class="mark" x="{label_w}" y="{y + row * 0.15:.1f}" '
                    f'width="{max(1.0, sx(v) - label_w):.1f}" height="{row * 0.7:.1f}" fill="{COLORS[2]}"/>')
        body.append(f'<text class="tick" x="{sx(v) + 6:.1f}" y="{y + row * 0.6:.1f}">{escape(fmt(v))}</text>')
    return _frame(name, title, "".join(body))
