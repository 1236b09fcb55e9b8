"""Charts as inline SVG strings: no script library, no external asset, readable in any browser.

Each axis has one unit, chosen from the largest value it shows (ms or s or min or h or days; tokens or k
tokens; dollars), and round ticks (1, 2 or 5 times a power of ten). A chart with nothing to draw is left
out (""), or, where the caller gives the reason, says in one line why: never an empty frame. A line
breaks where a value is missing rather than joining across the gap. Every drawn data element has class
"mark" and a tooltip (<title>) with its value, so a check can count what the browser actually laid out.

A chart is markup built here from numbers; every text in it (a title, a label, a tooltip) is escaped as it
goes in, so the whole is returned as Markup, which the page's template (autoescaped) writes as it is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

W, H = 560, 230
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 22, 40
COLORS = ("#2563eb", "#f59e0b", "#dc2626", "#16a34a", "#7c3aed", "#0891b2")
EMPTY_H = 56


@dataclass(frozen=True, slots=True)
class Unit:
    """How an axis shows its values: value / factor, then the label."""

    label: str
    factor: float

    def show(self, value: float, decimals: int | None = None) -> str:
        v = value / self.factor
        if decimals is None:
            decimals = 0 if abs(v) >= 100 or v == int(v) else (1 if abs(v) >= 10 else 2)
        text = f"{v:,.{decimals}f}"
        if self.label == "$":
            return ("-$" + text[1:]) if text.startswith("-") else "$" + text
        return text + ("%" if self.label == "%" else "")

    def tip(self, value: float) -> str:
        return self.show(value) + ("" if self.label in SELF_EVIDENT else f" {self.label}")


SELF_EVIDENT = ("%", "$")  # units the tick labels carry themselves: no unit label on the axis


def unit(kind: str, hi: float) -> Unit:
    """The unit of an axis of this kind whose largest value is `hi` (in base units: seconds, tokens)."""
    hi = abs(hi)
    if kind == "seconds":
        return (
            Unit(label="ms", factor=1e-3)
            if hi < 1
            else Unit(label="s", factor=1.0)
            if hi < 120
            else Unit(label="min", factor=60.0)
            if hi < 7200
            else Unit(label="h", factor=3600.0)
            if hi < 3 * 86400
            else Unit(label="days", factor=86400.0)
        )
    if kind == "tokens":
        return (
            Unit(label="M tokens", factor=1e6)
            if hi >= 1e7
            else Unit(label="k tokens", factor=1e3)
            if hi >= 1e4
            else Unit(label="tokens", factor=1.0)
        )
    if kind == "rate":
        return Unit(label="k tokens/s", factor=1e3) if hi >= 1e4 else Unit(label="tokens/s", factor=1.0)
    if kind == "ratio":
        return Unit(label="%", factor=0.01)
    if kind == "usd":
        return Unit(label="$", factor=1.0)
    return Unit(label=kind, factor=1.0)


def nice_ticks(lo: float, hi: float, count: int = 5) -> tuple[list[float], int]:
    """Round ticks covering [lo, hi] (about `count` of them) and the decimals they need."""
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / max(1, count - 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw * 0.999)
    first = math.floor(lo / step + 1e-9) * step
    last = math.ceil(hi / step - 1e-9) * step
    n = int(round((last - first) / step))
    decimals = 0
    while decimals < 6 and abs(step * 10**decimals - round(step * 10**decimals)) > 1e-6:
        decimals += 1  # as many as the step needs: 0.25 shows two, 0.2 one
    return [first + i * step for i in range(n + 1)], decimals


@dataclass(slots=True)
class Axis:
    """One axis: its unit, its ticks (in base units) and the map to pixels."""

    unit: Unit
    ticks: list[float]
    decimals: int
    a: float  # pixel of the first tick
    b: float  # pixel of the last tick

    @classmethod
    def make(
        cls,
        kind: str,
        lo: float,
        hi: float,
        a: float,
        b: float,
        fixed: tuple[float, float] | None = None,
        count: int = 5,
    ) -> Axis:
        u = unit(kind, max(abs(lo), abs(hi)))
        if fixed is not None:
            lo, hi = fixed
        ticks, decimals = nice_ticks(lo / u.factor, hi / u.factor, count)
        if fixed is not None:  # the range is the range (0-100%): ticks inside it only
            ticks = [t for t in ticks if lo / u.factor - 1e-9 <= t <= hi / u.factor + 1e-9]
        return cls(u, [t * u.factor for t in ticks], decimals, a, b)

    def __call__(self, v: float) -> float:
        lo, hi = self.ticks[0], self.ticks[-1]
        return self.a + (v - lo) / ((hi - lo) or 1.0) * (self.b - self.a)

    def label(self, v: float) -> str:
        return self.unit.show(v, self.decimals)


def _frame(name: str, title: str, body: str, legend: Sequence[tuple[str, str]] = (), height: int = H) -> Markup:
    keys = "".join(f'<span class="key"><i style="background:{c}"></i>{escape(label)}</span>' for label, c in legend)
    legend_html = f'<div class="legend">{keys}</div>' if keys else ""
    return Markup(
        f'<figure class="chart"><figcaption>{escape(title)}</figcaption>'
        f'<svg data-chart="{escape(name)}" viewBox="0 0 {W} {height}" width="{W}" height="{height}" '
        f'role="img" aria-label="{escape(title)}">{body}</svg>{legend_html}</figure>'
    )


def _grid(x: Axis | None, y: Axis, x_name: str = "") -> str:
    """Axes, grid lines, round tick labels, and each axis's unit written once."""
    bottom = H - BOTTOM
    out = [
        f'<line class="axis" x1="{LEFT}" y1="{bottom}" x2="{W - RIGHT}" y2="{bottom}"/>',
        f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}"/>',
    ]
    for v in y.ticks:
        py = y(v)
        out.append(f'<line class="grid" x1="{LEFT}" y1="{py:.1f}" x2="{W - RIGHT}" y2="{py:.1f}"/>')
        out.append(f'<text class="tick" x="{LEFT - 6}" y="{py + 4:.1f}" text-anchor="end">{escape(y.label(v))}</text>')
    if y.unit.label not in SELF_EVIDENT:
        out.append(f'<text class="unit" x="{LEFT - 6}" y="{TOP - 9}" text-anchor="end">{escape(y.unit.label)}</text>')
    if x is not None:
        for v in x.ticks:
            out.append(
                f'<text class="tick" x="{x(v):.1f}" y="{bottom + 15}" text-anchor="middle">{escape(x.label(v))}</text>'
            )
        name = f"{x_name} ({x.unit.label})" if x.unit.label != "%" else x_name
        out.append(f'<text class="unit" x="{W - RIGHT}" y="{bottom + 32}" text-anchor="end">{escape(name)}</text>')
    return "".join(out)


def _empty(name: str, title: str, why: str | None = None) -> Markup:
    """Nothing to draw: left out, or, with a reason, one line that says it."""
    if not why:
        return Markup("")
    return _frame(
        name,
        title,
        f'<text class="empty" x="{W / 2}" y="{EMPTY_H / 2 + 5}" text-anchor="middle">{escape(why)}</text>',
        height=EMPTY_H,
    )


def lines(
    name: str,
    title: str,
    xs: Sequence[float],
    series: Sequence[tuple[str, Sequence[float | None]]],
    x_kind: str,
    y_kind: str,
    x_name: str = "time since the first request",
    y_range: tuple[float, float] | None = None,
    why: str | None = None,
) -> Markup:
    """Line chart: one line per series, broken where a value is missing, a dot with its value at each point."""
    values = [v for _, vs in series for v in vs if v is not None]
    if not values or not xs:
        return _empty(name, title, why)
    x = Axis.make(x_kind, min(0.0, min(xs)) if x_kind == "seconds" else min(xs), max(xs), LEFT, W - RIGHT)
    y = Axis.make(y_kind, 0.0, max(values), H - BOTTOM, TOP, fixed=y_range)
    body = [_grid(x, y, x_name)]
    for (label, vs), color in zip(series, COLORS, strict=False):
        runs: list[list[tuple[float, float, float, float]]] = [[]]
        for xv, v in zip(xs, vs, strict=True):
            if v is None:
                runs.append([])  # a gap: the next point starts a new line
            else:
                runs[-1].append((x(xv), y(v), xv, v))
        for run in runs:
            if len(run) > 1:
                path = " ".join(f"{px:.1f},{py:.1f}" for px, py, _, _ in run)
                body.append(f'<polyline class="line" fill="none" stroke="{color}" stroke-width="2" points="{path}"/>')
            body.extend(
                f'<circle class="mark" cx="{px:.1f}" cy="{py:.1f}" r="3.5" fill="{color}"><title>'
                f"{escape(label)}: {escape(y.unit.tip(v))} at {escape(x.unit.tip(xv))}</title></circle>"
                for px, py, xv, v in run
            )
    return _frame(name, title, "".join(body), [(label, c) for (label, _), c in zip(series, COLORS, strict=False)])


def scatter(
    name: str,
    title: str,
    points: Sequence[tuple[float, float]],
    x_kind: str,
    y_kind: str,
    x_name: str,
    x_range: tuple[float, float] | None = None,
    why: str | None = None,
) -> Markup:
    if not points:
        return _empty(name, title, why)
    x = Axis.make(x_kind, min(p[0] for p in points), max(p[0] for p in points), LEFT, W - RIGHT, fixed=x_range)
    y = Axis.make(y_kind, 0.0, max(p[1] for p in points), H - BOTTOM, TOP)
    body = [_grid(x, y, x_name)]
    body.extend(
        f'<circle class="mark" cx="{x(px):.1f}" cy="{y(py):.1f}" r="3.5" fill="{COLORS[0]}" '
        f'fill-opacity="0.6"><title>{escape(y.unit.tip(py))} at {escape(x.unit.tip(px))}</title></circle>'
        for px, py in points
    )
    return _frame(name, title, "".join(body))


def stacked(
    name: str,
    title: str,
    starts: Sequence[float],
    stacks: Sequence[tuple[str, Sequence[float]]],
    x_kind: str,
    y_kind: str,
    x_name: str = "window start",
    labels: Sequence[str] | None = None,
    why: str | None = None,
) -> Markup:
    """Stacked bars, one per window; each stack is a class of the whole (e.g. read, written, uncached).
    labels: what to write under each bar (dates) instead of its start in x_kind's unit."""
    totals = [sum(vs[i] for _, vs in stacks) for i in range(len(starts))]
    if not starts or not any(totals):
        return _empty(name, title, why)
    y = Axis.make(y_kind, 0.0, max(totals), H - BOTTOM, TOP)
    xu = unit(x_kind, max(starts))

    def tick(i: int) -> str:
        return labels[i] if labels is not None else xu.tip(starts[i])

    body = [_grid(None, y)]
    slot = (W - LEFT - RIGHT) / len(starts)
    every = max(1, math.ceil(len(starts) / (6 if labels is not None else 8)))  # labels never overlap
    for i, start in enumerate(starts):
        base = 0.0
        x0 = LEFT + i * slot + slot * 0.15
        tips = []
        for (cls, vs), color in zip(stacks, COLORS, strict=False):
            v = vs[i]
            if v > 0:
                y0, y1 = y(base), y(base + v)
                tips.append(f"{cls}: {y.unit.tip(v)}")
                body.append(
                    f'<rect class="mark" x="{x0:.1f}" y="{y1:.1f}" width="{slot * 0.7:.1f}" '
                    f'height="{y0 - y1:.1f}" fill="{color}"><title>{escape(tick(i))}: {escape(cls)} '
                    f"{escape(y.unit.tip(v))} of {escape(y.unit.tip(totals[i]))}</title></rect>"
                )
            base += v
        if i % every == 0:
            below = labels[i] if labels is not None else xu.show(start, 0 if start / xu.factor >= 10 else 1)
            body.append(
                f'<text class="tick" x="{x0 + slot * 0.35:.1f}" y="{H - BOTTOM + 15}" text-anchor="middle">'
                f"{escape(below)}</text>"
            )
    body.append(
        f'<text class="unit" x="{W - RIGHT}" y="{H - BOTTOM + 32}" text-anchor="end">'
        f"{escape(x_name)}{'' if labels is not None else f' ({xu.label})'}</text>"
    )
    return _frame(name, title, "".join(body), [(cls, c) for (cls, _), c in zip(stacks, COLORS, strict=False)])


def bars(
    name: str,
    title: str,
    items: Sequence[tuple[str, float]],
    kind: str,
    tips: Sequence[str] | None = None,
    why: str | None = None,
) -> Markup:
    """Horizontal bars in the order given (callers pass the largest first), each labelled with its value.
    The chart is as tall as its bars: no empty band under a short list."""
    shown = [(label, v, (tips[i] if tips else "")) for i, (label, v) in enumerate(items) if v > 0]
    if not shown:
        return _empty(name, title, why)
    u = unit(kind, max(v for _, v, _ in shown))
    # as wide as the longest label at ~6.5 px a character (11 px text), within a third to half the chart
    label_w, row = min(W // 2, max(150, int(6.5 * max(len(label) for label, _, _ in shown)) + 12)), 30.0
    height = int(8 + row * len(shown) + 8)
    hi = max(v for _, v, _ in shown)
    body = []
    for i, (label, v, tip) in enumerate(shown):
        y0 = 8 + i * row
        w = max(1.0, v / hi * (W - 110 - label_w))
        body.append(
            f'<text class="tick" x="{label_w - 8}" y="{y0 + row * 0.6:.1f}" text-anchor="end">{escape(label)}</text>'
        )
        body.append(
            f'<rect class="mark" x="{label_w}" y="{y0 + row * 0.15:.1f}" width="{w:.1f}" '
            f'height="{row * 0.7:.1f}" fill="{COLORS[2]}"><title>{escape(label)}: {escape(u.tip(v))}'
            f"{escape(tip)}</title></rect>"
        )
        body.append(f'<text class="tick" x="{label_w + w + 6:.1f}" y="{y0 + row * 0.6:.1f}">{escape(u.tip(v))}</text>')
    return _frame(name, title, "".join(body), height=height)
