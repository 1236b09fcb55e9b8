"""The diagnosis of a capture, in the order an expert works through "it is slow":

1. split the slowness: TTFT against decode rate over time (decode steady while TTFT rose rules out
   bandwidth and concurrency, and leaves prompt length and cache misses);
2. the input-token distribution and how it changed;
3. prefix consistency: the causes of cache breaks, an example of each, the tokens and money they cost;
4. infrastructure signals: TTL expiries, server-side misses, queueing (slow first tokens on hits),
   provider errors;
5. the provider's cache fields against what its contract predicts.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from prefixguard.contracts.providers import model_contract
from prefixguard.judge.session import Sessions
from prefixguard.judge.verdict import VerdictName, judge_pair, of_row
from prefixguard.model import tokens
from prefixguard.model.prompt import Prompt
from prefixguard.report.findings import Cause, Diagnosis, Window
from prefixguard.report.headline import headline, listed, notes
from prefixguard.report.human import usd
from prefixguard.report.money import UNKNOWN as UNKNOWN_MODE
from prefixguard.report.money import mode, money
from prefixguard.utils.errors import InputError
from prefixguard.utils.stats import distribution, quantile
from prefixguard.wire import parse_request
from prefixguard.wire.routes import template

MAX_WINDOWS = 12
MOVED = 1.5  # a median that grew by this factor "moved"
STEADY = 0.2  # a decode rate within this fraction of its start is "steady"
QUEUED = 2.0  # a hit whose TTFT is this many times that of like hits waited in a queue...
QUEUE_MIN_S = 0.1  # ...and by at least this long (milliseconds of jitter are no queue)
QUEUE_PEERS = 3  # like hits needed to say what is typical
KEEP_PER_TENANT = 1000  # earlier prompts kept per tenant to compare with
# Verdicts of a request that read what its contract predicted (step 5's "as expected").
AS_EXPECTED = (VerdictName.HIT, VerdictName.COLD, VerdictName.BELOW_MINIMUM, VerdictName.NO_BREAKPOINT)


def diagnose(rows: list[dict[str, Any]], source: str = "") -> Diagnosis:
    """rows: capture rows in the export shape (prefixguard.capture.record.Record.row), oldest first."""
    unread = _unanalysed(rows)
    # rows the proxy wrote when it forwarded a request unread (no response is awaited for them): named in
    # the infrastructure step, no request of the analysis
    rows = [r for r in rows if not (r.get("api") is None and r.get("status") is None and r.get("analysed") is False)]
    if not rows:
        raise InputError("the capture holds no requests", source)
    t0 = rows[0].get("ts") or 0.0
    span = (rows[-1].get("ts") or 0.0) - t0
    windows = _windows(rows, t0, span)
    parents: dict[int, dict[str, Any]] = {}
    causes = _causes(rows, parents)
    split = _split(windows)
    diag = Diagnosis(
        source=source,
        requests=len(rows),
        span_s=span,
        windows=windows,
        split=split,
        inputs=_inputs(rows, windows),
        causes=causes,
        infra=_infra(rows, unread),
        fields=_fields(rows),
        points=_points(rows, split["mode"]),
    )
    diag.findings = [
        diag.split["finding"],
        diag.inputs["finding"],
        _causes_finding(diag.causes),
        diag.infra["finding"],
        diag.fields["finding"],
    ]
    diag.prices = sorted({model_contract(r.get("api") or "", r["model"]).prices for r in rows if r.get("model")})
    diag.notes = notes(rows)
    diag.money = money(rows, parents)
    diag.headline = headline(diag, rows)
    diag.listed = listed(diag, rows, t0)
    # The proxy's predictions were counted when it ran; the causes are counted here, now.
    diag.tokens_estimated = any(r.get("tokens_estimated") for r in rows) or (
        tokens.is_estimated() and any(isinstance(r.get("request"), dict) for r in rows)
    )
    return diag


def _usage(row: dict[str, Any]) -> dict[str, Any]:
    return row.get("usage") or {}


def _timing(row: dict[str, Any], key: str) -> float | None:
    return (row.get("timings") or {}).get(key)


def _ok(row: dict[str, Any]) -> bool:
    status = row.get("status")
    return status is not None and status < 400


def _median(values: list[float]) -> float | None:
    return quantile(sorted(values), 0.5) if values else None


def _windows(rows: list[dict[str, Any]], t0: float, span: float) -> list[Window]:
    n = max(1, min(MAX_WINDOWS, len(rows) // 4))
    groups: list[list[dict[str, Any]]] = [[] for _ in range(n)]
    for i, row in enumerate(rows):
        # By time when the capture spans any; else by arrival order.
        k = int(((row.get("ts") or t0) - t0) / span * n) if span > 0 else i * n // len(rows)
        groups[min(k, n - 1)].append(row)
    out = []
    for k, group in enumerate(groups):
        w = Window(start=k * span / n, end=(k + 1) * span / n, requests=len(group))
        ok = [r for r in group if _ok(r)]
        by_mode: dict[str, list[float]] = defaultdict(list)
        for r in ok:
            if (t := _timing(r, "ttft_s")) is not None:
                by_mode[mode(r)].append(t)
        w.ttft_p50_by_mode = {m: quantile(sorted(ts), 0.5) for m, ts in sorted(by_mode.items())}
        w.decode_p50 = _median([t for r in ok if (t := _timing(r, "decode_tps"))])
        prompts = sorted(_usage(r).get("prompt_total") or 0 for r in ok if _usage(r).get("prompt_total"))
        if prompts:
            w.prompt_p50, w.prompt_p90 = quantile(prompts, 0.5), quantile(prompts, 0.9)
        for r in ok:
            u = _usage(r)
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


def _split(windows: list[Window]) -> dict[str, Any]:
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


def _inputs(rows: list[dict[str, Any]], windows: list[Window]) -> dict[str, Any]:
    prompts = [p for r in rows if (p := _usage(r).get("prompt_total"))]
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


def _prompt(row: dict[str, Any]) -> Prompt | None:
    body = row.get("request")
    if not isinstance(body, dict):
        return None
    try:
        return parse_request(json.dumps(body, ensure_ascii=False), path=row.get("path"), source=str(row.get("id")))
    except InputError:
        return None


def _causes(rows: list[dict[str, Any]], parents: dict[int, dict[str, Any]] | None = None) -> list[Cause]:
    """The breaks by cause, counted as each row was judged (its stored verdict, re-prefilled tokens and
    cost); a row nobody judged (a recorded session: no verdict, no usage; a provider that reported no
    cache field) is judged here by the same
    rule (prefixguard.judge.verdict.judge_pair) against the best earlier request of its tenant (the core's
    session model), and so is what a miss was stored without (its cause, its tokens). Each cause's
    example is its first break with a body, as compared here. parents, where given, gets id(row) -> the
    earlier row each row with a body continued."""
    sessions = Sessions(keep=KEEP_PER_TENANT)
    causes: dict[str, Cause] = {}
    for row in rows:
        prompt = _prompt(row)
        match = None
        if prompt is not None:
            ts = row.get("ts")
            match = sessions.observe(prompt, row, row.get("tenant") or "", ts if isinstance(ts, (int, float)) else None)
            if parents is not None and match.earlier is not None:
                parents[id(row)] = match.earlier
        judged = of_row(row)
        if judged is not None and judged.verdict == VerdictName.NOT_REPORTED:
            judged = None  # no usage to judge by: the verdict its contract predicts, as `diff` gives it
        whole = judged is not None and (
            judged.verdict != VerdictName.MISS_PREFIX_CHANGED
            or (row.get("causes") and row.get("reprefill_tokens") is not None)
        )
        if not whole and match is not None and match.prompt is not None and prompt is not None:
            # no verdict, or a miss stored without its cause or tokens: what is missing is judged here
            then, now = match.earlier.get("ts"), row.get("ts")
            elapsed = now - then if isinstance(now, (int, float)) and isinstance(then, (int, float)) else None
            here = judge_pair(match.prompt, prompt, elapsed, match.comparison)[0]
            judged = (
                here
                if judged is None
                else judged._replace(
                    cause=row.get("cause") or here.cause,
                    change=judged.change or here.change,
                    reprefill_tokens=row.get("reprefill_tokens") or here.reprefill_tokens,
                    cost_usd=row.get("cost_usd") or here.cost_usd,
                )
            )
        if judged is None or judged.verdict != VerdictName.MISS_PREFIX_CHANGED:
            continue
        name = next(iter(judged.change.causes), None) if judged.change is not None else None
        if not name:
            continue
        cause = causes.setdefault(name, Cause(name=name))
        cause.requests += 1
        cause.reprefill_tokens += judged.reprefill_tokens
        cause.cost_usd += judged.cost_usd
        cmp = match.comparison if match is not None and match.broken else None
        if cause.example is None and match is not None and cmp is not None and name in cmp.causes:
            d = cmp.divergence
            cause.example = {
                "request": str(row.get("id")),
                "earlier": str(match.earlier.get("id")),
                "pointer": d.pointer if d else None,
                "byte_offset": d.byte_offset if d else None,
                "before": cmp.before,
                "after": cmp.after,
                "detail": cmp.detail,
                "fix": cmp.fix,
                "causes": cmp.causes,
            }
    return sorted(causes.values(), key=lambda c: (-c.reprefill_tokens, -c.requests, c.name))


def _causes_finding(causes: list[Cause]) -> str:
    if not causes:
        return "No prefix breaks: every request reused its predecessor's prefix whole."
    top = causes[0]
    return (
        f"{sum(c.requests for c in causes)} requests broke the cached prefix; the top cause, {top.name}, "
        f"re-prefilled {top.reprefill_tokens:,} tokens ({usd(top.cost_usd)}) in {top.requests} requests."
    )


def _unanalysed(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Forwarded requests the analysis did not read (no row of an agent's log), by method and endpoint."""
    named = Counter(
        (str(r.get("method") or "POST"), template(r.get("path") or ""))
        for r in rows
        if r.get("api") is None and not str(r.get("upstream") or "").startswith("import:")
    )
    return [{"method": m, "path": path, "requests": n} for (m, path), n in named.most_common()]


def _infra(rows: list[dict[str, Any]], unread: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    verdicts = Counter(r.get("verdict") for r in rows)
    errors = Counter(str(r.get("status") or "no response") for r in rows if not _ok(r))
    queued, median_hit = _queued(rows)
    lost: defaultdict[str, int] = defaultdict(int)
    ttl, server = VerdictName.MISS_TTL_EXPIRED, VerdictName.MISS_SERVER_SIDE
    for r in rows:
        if r.get("verdict") in (ttl, server):
            lost[r["verdict"]] += (r.get("expected_cached") or 0) - (_usage(r).get("cache_read") or 0)
    parts = []
    if verdicts[ttl]:
        parts.append(f"{verdicts[ttl]} TTL expiries (requests further apart than the cache TTL)")
    if verdicts[server]:
        parts.append(f"{verdicts[server]} server-side misses (stable prefix, within TTL, still missed)")
    if queued:
        parts.append(f"{len(queued)} hits with TTFT over {QUEUED:g}x that of hits with as much to prefill: queueing")
    if errors:
        by_status = ", ".join(f"{k}: {v}" for k, v in errors.most_common())
        parts.append(f"{sum(errors.values())} failed requests ({by_status})")
    if unread:
        named = ", ".join(f"{u['method']} {u['path']} ({u['requests']})" for u in unread[:5])
        parts.append(
            f"{sum(u['requests'] for u in unread)} forwarded requests not analysed: {named}"
            + (f" and {len(unread) - 5} more endpoints" if len(unread) > 5 else "")
        )
    return {
        "ttl_expired": verdicts[ttl],
        "server_side": verdicts[server],
        "ttl_expired_tokens": lost[ttl],
        "server_side_tokens": lost[server],
        "queued": len(queued),
        "queued_examples": [str(r.get("id")) for r in queued[:5]],
        "median_hit_ttft_s": median_hit,
        "errors": dict(errors),
        "unanalysed": list(unread),
        "finding": "; ".join(parts) + "."
        if parts
        else "No infrastructure signal: no TTL expiry, server-side miss, queueing or error.",
    }


def _queued(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], float | None]:
    """Hits that waited: TTFT far above that of hits with a like number of tokens to prefill (the
    same power of two), so a long uncached suffix is not mistaken for a queue."""
    hits = [
        (t, r)
        for r in rows
        if _ok(r) and (_usage(r).get("cache_read") or 0) > 0 and (t := _timing(r, "ttft_s")) is not None
    ]
    bins: dict[int, list[float]] = defaultdict(list)
    work = {}
    for t, r in hits:
        u = _usage(r)
        work[id(r)] = max(0, (u.get("prompt_total") or 0) - (u.get("cache_read") or 0)).bit_length()
        bins[work[id(r)]].append(t)
    typical = {k: _median(v) for k, v in bins.items() if len(v) >= QUEUE_PEERS}
    queued = [
        r for t, r in hits if (m := typical.get(work[id(r)])) is not None and t > QUEUED * m and t - m > QUEUE_MIN_S
    ]
    return queued, _median([t for t, _ in hits])


def _fields(rows: list[dict[str, Any]]) -> dict[str, Any]:
    checked = [r for r in rows if _usage(r).get("reported") and r.get("expected_cached") is not None]
    not_reported = sum(1 for r in rows if _ok(r) and not _usage(r).get("reported"))
    predicted = sum(r["expected_cached"] for r in checked)
    reported = sum(_usage(r).get("cache_read") or 0 for r in checked)
    agree = sum(1 for r in checked if r.get("verdict") in AS_EXPECTED)
    verdicts = Counter(r.get("verdict") for r in rows if r.get("verdict"))
    if checked:
        finding = (
            f"Predicted {predicted:,} cached tokens, the provider reported {reported:,} "
            f"({agree}/{len(checked)} requests as expected)."
        )
    else:
        finding = "No request carries both a prediction and the provider's cache fields."
    if not_reported:
        finding += f" {not_reported} responses reported no cache field (never counted as misses)."
    gaps = sorted(checked, key=lambda r: -abs(r["expected_cached"] - (_usage(r).get("cache_read") or 0)))
    return {
        "requests": len(checked),
        "predicted_cache_read": predicted,
        "reported_cache_read": reported,
        "as_expected": agree,
        "not_reported": not_reported,
        "verdicts": dict(verdicts),
        "largest_gaps": [
            {
                "request": str(r.get("id")),
                "predicted": r["expected_cached"],
                "reported": _usage(r).get("cache_read") or 0,
                "verdict": r.get("verdict"),
            }
            for r in gaps[:5]
            if r["expected_cached"] != (_usage(r).get("cache_read") or 0)
        ],
        "finding": finding,
        "agreement": _agreement(rows),
    }


def _agreement(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The provider's own miss diagnostics beside ours, per cause: both found it, only we did, only the
    provider did; and the requests where both found a miss but placed it differently."""
    table: dict[str, Counter[str]] = {}
    disagreements = []
    clear = 0  # both said nothing broke: agreement, with no cause to file it under
    for r in rows:
        diag = r.get("diagnosis") or {}
        verdict = diag.get("agreement")
        clear += verdict == "both_clear"
        if verdict is None or verdict == "both_clear":
            continue
        ours = "+".join(r.get("causes") or ()) if r.get("verdict") == VerdictName.MISS_PREFIX_CHANGED else ""
        name = ours or diag.get("label") or diag.get("status") or "?"
        table.setdefault(name, Counter())[verdict] += 1
        if verdict == "disagree":
            disagreements.append(
                {
                    "request": str(r.get("id")),
                    "provider": diag.get("label"),
                    "provider_level": diag.get("level"),
                    "ours": r.get("cause"),
                }
            )
    compared = clear + sum(sum(c.values()) for c in table.values())
    agreed = clear + sum(c["agree"] for c in table.values())
    finding = (
        f"The provider's own diagnostics and ours agree on {agreed} of {compared} compared requests."
        if compared
        else "No request carries the provider's own cache diagnostics."
    )
    return {
        "compared": compared,
        "agreed": agreed,
        "both_clear": clear,
        "finding": finding,
        "disagreements": disagreements,
        "causes": [
            {
                "cause": name,
                "both": c["agree"] + c["disagree"],
                "agree": c["agree"],
                "only_us": c["only_us"],
                "only_provider": c["only_provider"],
            }
            for name, c in sorted(table.items())
        ],
    }


def _points(rows: list[dict[str, Any]], of_mode: str | None) -> list[tuple[float, float]]:
    """(cached fraction, TTFT) of each call of the mode the split compares: like with like."""
    out = []
    for r in rows:
        u, ttft = _usage(r), _timing(r, "ttft_s")
        if _ok(r) and ttft is not None and u.get("reported") and u.get("prompt_total") and mode(r) == of_mode:
            out.append(((u.get("cache_read") or 0) / u["prompt_total"], ttft))
    return out
