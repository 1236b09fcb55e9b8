"""The diagnosis over time (steps 1 and 2): the capture cut into time windows, the split of TTFT against
decode rate, the input-token distribution and how it changed, and the (cached fraction, TTFT) points."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from prefixguard.report.findings import Window
from prefixguard.report.money import UNKNOWN as UNKNOWN_MODE
from prefixguard.report.money import mode
from prefixguard.report.rows import median, succeeded, timing, usage
from prefixguard.utils.stats import distribution, quantile

MAX_WINDOWS = 12
MOVED = 1.5  # a median that grew by this factor "moved"
STEADY = 0.2  # a decode rate within this fraction of its start is "steady"


def windows_of(rows: list[dict[str, Any]], t0: float, span: float) -> list[Window]:
    n = max(1, min(MAX_WINDOWS, len(rows) // 4))
    groups: list[list[dict[str, Any]]] = [[] for _ in range(n)]
    for i, row in enumerate(rows):
        # By time when the capture spans any; else by arrival order.
        k = int(((row.get("ts") or t0) - t0) / span * n) if span > 0 else i * n // len(rows)
        groups[min(k, n - 1)].append(row)
    out = []
    for k, group in enumerate(groups):
        w = Window(start=k * span / n, end=(k + 1) * span / n, requests=len(group))
        ok = [r for r in group if succeeded(r)]
        by_mode: dict[str, list[float]] = defaultdict(list)
        for r in ok:
            if (t := timing(r, "ttft_s")) is not None:
                by_mode[mode(r)].append(t)
        w.ttft_p50_by_mode = {m: quantile(sorted(ts), 0.5) for m, ts in sorted(by_mode.items())}
        w.decode_p50 = median([t for r in ok if (t := timing(r, "decode_tps"))])
        prompts = sorted(usage(r).get("prompt_total") or 0 for r in ok if usage(r).get("prompt_total"))
        if prompts:
            w.prompt_p50, w.prompt_p90 = quantile(prompts, 0.5), quantile(prompts, 0.9)
        for r in ok:
            u = usage(r)
            if u.get("reported"):
                w.cache_read += u.get("cache_read") or 0
                w.cache_write += (u.get("cache_write_5m") or 0) + (u.get("cache_write_1h") or 0)
                w.uncached += u.get("uncached") or 0
        out.append(w)
    return out


def _change(windows: list[Window], key: str) -> tuple[float | None, float | None, float | None]:
    """(value at the start, value at the end, end / start) over the first and last thirds; (value, value,
    None) where one window alone has the value: nothing to compare it with."""
    values = [getattr(w, key) for w in windows if getattr(w, key) is not None]
    if not values:
        return None, None, None
    if len(values) == 1:
        return values[0], values[0], None
    third = max(1, len(values) // 3)
    first, last = quantile(sorted(values[:third]), 0.5), quantile(sorted(values[-third:]), 0.5)
    return first, last, (last / first if first else None)


def _ttft_mode(windows: list[Window]) -> str | None:
    """The mode of call whose TTFT the split compares over time: the one seen in the most windows (a
    streaming first token and a non-streaming whole response are different things: never compared)."""
    seen = Counter(m for w in windows for m, v in w.ttft_p50_by_mode.items() if v is not None)
    if not seen:
        return None
    chosen = max(seen, key=lambda m: (seen[m], m))
    for w in windows:
        w.ttft_p50 = w.ttft_p50_by_mode.get(chosen)
    return chosen


def split_of(windows: list[Window]) -> dict[str, Any]:
    chosen = _ttft_mode(windows)
    modes = sorted({m for w in windows for m in w.ttft_p50_by_mode})
    t_first, t_last, t_ratio = _change(windows, "ttft_p50")
    d_first, d_last, d_ratio = _change(windows, "decode_p50")
    if chosen is None:
        finding = "No TTFT was recorded: the split of prefill and decode is unknown."
    elif t_ratio is None:
        finding = (
            f"TTFT of {chosen} calls was recorded in one time window only: nothing like for like to "
            f"compare it with over time."
        )
    elif d_ratio is not None and d_ratio < 1 - STEADY:
        finding = (
            f"Decode rate fell {1 - d_ratio:.0%} ({d_first:.1f} -> {d_last:.1f} tokens/s): memory bandwidth "
            f"or concurrency (load on the server), which no prompt change fixes."
        )
    elif t_ratio >= MOVED:
        assert t_first is not None and t_last is not None  # a ratio has both ends
        steady = "decode rate steady" if d_ratio is not None else "no decode rate recorded"
        finding = (
            f"Only TTFT moved ({t_first * 1e3:.0f} -> {t_last * 1e3:.0f} ms, x{t_ratio:.1f}; {steady}): "
            f"bandwidth and concurrency are ruled out; prompt length and cache misses remain (steps 2, 3)."
        )
    else:
        trend = "fell" if t_ratio <= 1 / MOVED else "steady"
        finding = f"TTFT {trend} (x{t_ratio:.2f} from the first third to the last)" + (
            f", decode rate x{d_ratio:.2f}." if d_ratio is not None else "."
        )
    if chosen == UNKNOWN_MODE:
        finding += " Whether these calls streamed is unknown (no request bodies stored): they may mix both kinds."
    if chosen is not None and len(modes) > 1:
        others = ", ".join(m for m in modes if m != chosen)
        finding += f" TTFT compared over {chosen} calls only; {others} calls are not compared with them."
    return {
        "mode": chosen,
        "modes": modes,
        "ttft_start_s": t_first,
        "ttft_end_s": t_last,
        "ttft_ratio": t_ratio,
        "decode_start_tps": d_first,
        "decode_end_tps": d_last,
        "decode_ratio": d_ratio,
        "finding": finding,
    }


def inputs_of(rows: list[dict[str, Any]], windows: list[Window]) -> dict[str, Any]:
    prompts = [p for r in rows if (p := usage(r).get("prompt_total"))]
    first, last, ratio = _change(windows, "prompt_p50")
    dist = distribution([float(p) for p in prompts])
    if ratio is None:
        finding = "No prompt token counts were reported."
    elif ratio >= MOVED:
        finding = (
            f"Prompts grew x{ratio:.1f} (median {first:,.0f} -> {last:,.0f} tokens): longer prompts take "
            f"longer to prefill unless their prefix is cached."
        )
    else:
        finding = f"Prompt length steady: median {dist['p50']:,.0f} tokens, p90 {dist['p90']:,.0f}."
    return {
        **dist,
        "max": max(prompts) if prompts else None,
        "start_p50": first,
        "end_p50": last,
        "ratio": ratio,
        "finding": finding,
    }


def points_of(rows: list[dict[str, Any]], of_mode: str | None) -> list[tuple[float, float]]:
    """(cached fraction, TTFT) of each call of the mode the split compares: like with like."""
    out = []
    for r in rows:
        u, ttft = usage(r), timing(r, "ttft_s")
        if succeeded(r) and ttft is not None and u.get("reported") and u.get("prompt_total") and mode(r) == of_mode:
            out.append(((u.get("cache_read") or 0) / u["prompt_total"], ttft))
    return out
