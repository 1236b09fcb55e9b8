"""The diagnosis as one self-contained HTML file: inline CSS and SVG charts, no external asset.

It opens with a headline (spend, savings by caching, hit rate, money lost to misses, the top cause and its
fix), then what a cost owner asks (prefixguard.report.money), then the five steps; every request it names
shows when it was sent and links to its body, kept at the end of the page. A panel without data is left
out or says in one line why.

The page is template.html, rendered by jinja2 with autoescape on: this module hands it data (text, numbers
as a person reads them, references to requests) and charts.py's SVG, and writes no markup itself.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from functools import cache
from importlib.resources import files
from typing import Any

from jinja2 import Environment, StrictUndefined, Template

from prefixguard.report import charts
from prefixguard.report.findings import ESTIMATED, Diagnosis
from prefixguard.report.human import date_range, duration, ms, usd

ELLIPSIS = "…"
UNPRICED = "No call has a price: its models are priced at $0 or not known (rules/providers.toml)."
Rows = list[list[Any]]  # table cells: text, or a request reference (rendered as its link)


@cache
def _template() -> Template:
    env = Environment(autoescape=True, undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    return env.from_string(files("prefixguard.report").joinpath("template.html").read_text("utf-8"))


def _tokens(v: float) -> str:
    return charts.unit("tokens", v).tip(v)


def _anchor(rid: str) -> str:
    return "req-" + re.sub(r"[^A-Za-z0-9_-]", "_", rid)


def _when(d: Diagnosis, rid: str) -> str:
    info = d.listed.get(rid) or {}
    if info.get("ts") is None:
        return ""
    at = datetime.fromtimestamp(info["ts"], UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"{at} (+{charts.unit('seconds', info['t']).tip(info['t'])})"


def _request(d: Diagnosis, rid: str) -> dict[str, str]:
    """A request named in the report: its id, the anchor of its body, and when it was sent."""
    return {"id": rid, "anchor": _anchor(rid), "when": _when(d, rid)}


def plain(snippet: str | None) -> str:
    """A snippet as the text it stands for. Compare quotes the bytes as sent, so a snippet from inside a
    JSON string shows JSON escapes (\\u00e9, \\", \\n); those are decoded here, so that the page escapes the
    text once, for HTML only. A snippet of JSON structure (unescaped quotes: keys, objects) stays as sent."""
    if not snippet:
        return snippet or ""
    head = ELLIPSIS if snippet.startswith(ELLIPSIS) else ""
    tail = ELLIPSIS if snippet.endswith(ELLIPSIS) and len(snippet) > len(head) else ""
    core = snippet[len(head) : len(snippet) - len(tail)]
    quoted = len(core) > 1 and core.startswith('"') and core.endswith('"') and not head and not tail
    if quoted:
        core = core[1:-1]
    elif core.startswith('"') and not head:
        core = core[1:]
    for trim in range(0, 6):  # a cut may end inside an escape (\\u00e9): drop its start
        try:
            text = json.loads('"' + core[: len(core) - trim] + '"')
        except ValueError:
            continue
        return head + text + tail
    return snippet


def _headline(d: Diagnosis) -> dict[str, Any] | None:
    h = d.headline
    if not h:
        return None
    m = d.money
    stats = [
        ("spend", usd(h["spend_usd"]), date_range(m["first_ts"], m["last_ts"])),
        ("saved by caching", usd(h["saved_usd"]), f"against {usd(m['without_cache_usd'])} without cache reads"),
        (
            "cache hit rate",
            "–" if h["hit_rate"] is None else f"{h['hit_rate']:.1%}",
            "of prompt tokens read from cache",
        ),
        (
            "lost to misses",
            usd(h["lost_usd"]),
            "paid over reading the cache" + (f" ({'; '.join(d.prices)})" if d.prices else ""),
        ),
        ("top cause", h.get("top_cause_label") or h["top_cause"] or "none", ""),
    ]
    return {"stats": [{"label": a, "value": b, "sub": c} for a, b, c in stats], "fix": h.get("fix")}


def _examples(d: Diagnosis) -> list[dict[str, Any]]:
    return [
        {
            "name": c.name,
            "request": _request(d, str(ex["request"])),
            "earlier": _request(d, str(ex["earlier"])),
            "pointer": str(ex["pointer"]),
            "byte_offset": f"{ex['byte_offset']:,}",
            "before": plain(ex["before"]),
            "after": plain(ex["after"]),
            "detail": ex.get("detail"),
            "fix": ex.get("fix"),
        }
        for c in d.causes
        if (ex := c.example)
    ]


def _indented(text: str) -> str:
    """A body as a reader reads it: JSON indented; a body cut to size, or not JSON, as it is."""
    try:
        return json.dumps(json.loads(text), indent=1, ensure_ascii=False)
    except (ValueError, RecursionError):
        return text


def _bodies(d: Diagnosis) -> list[dict[str, Any]]:
    return [
        {
            "id": rid,
            "anchor": _anchor(rid),
            "meta": " · ".join(x for x in (_when(d, rid), info.get("model"), info.get("verdict")) if x),
            "body": None if info.get("body") is None else _indented(info["body"]),
            "source": str(info.get("source") or ""),
        }
        for rid, info in sorted(d.listed.items(), key=lambda kv: kv[1].get("ts") or 0)
    ]


def _money_rows(rows: list[dict[str, Any]], key: str) -> Rows:
    return [[str(r[key]), f"{r['requests']:,}", usd(r["spend_usd"]), usd(r["saved_usd"])] for r in rows]


def _spend(d: Diagnosis) -> dict[str, Any] | None:
    """The cost owner's panel (template.html says what each part shows)."""
    m = d.money
    if not m:
        return None
    over = m.get("over_time") or {"buckets": []}
    buckets = over["buckets"]
    figures = charts.bars(
        "cost-by-model",
        "Cost by model",
        [(r["model"], r["spend_usd"]) for r in m["by_model"]],
        "usd",
        [f" in {r['requests']:,} requests, saved {usd(r['saved_usd'])}" for r in m["by_model"]],
        why=UNPRICED,
    )
    if buckets:
        figures += charts.stacked(
            "cost-over-time",
            f"Cost over time (by {over['bucket']})",
            [b["start"] for b in buckets],
            [
                ("paid", [b["spend_usd"] for b in buckets]),
                ("saved by caching", [max(0.0, b["saved_usd"]) for b in buckets]),
            ],
            "seconds",
            "usd",
            "UTC",
            labels=[b["label"] for b in buckets],
            why=UNPRICED,
        )
    u = m["unread_writes"]
    return {
        "finding": f"{usd(m['spend_usd'])} spent on {m['priced_requests']:,} priced requests, "
        f"{date_range(m['first_ts'], m['last_ts'])}; caching saved {usd(m['saved_usd'])} (the same traffic "
        f"without cache reads: {usd(m['without_cache_usd'])}).",
        "charts": figures,
        "by_model": _money_rows(m["by_model"], "model"),
        "by_tenant": _money_rows(m["by_tenant"], "tenant"),
        "tenants": f"{m['tenants']:,}" if m["by_tenant"] else "",
        "tenant_basis": "; ".join(f"{b['basis']} ({b['requests']:,} requests)" for b in m["tenant_basis"]),
        "latency": [
            [
                r["mode"],
                f"{r['requests']:,}",
                *(ms(r["ttft_s"][k]) for k in ("p50", "p95", "p99")),
                *(ms(r["total_s"][k]) for k in ("p50", "p95", "p99")),
            ]
            for r in m["latency"]
        ],
        "unread": (
            f"{u['requests']:,} calls wrote {u['tokens']:,} tokens to the cache that expired before any later "
            f"call read them: {usd(u['cost_usd'])} to write, {usd(u['premium_usd'])} more than sending them "
            "uncached."
            if u["requests"]
            else "None: every cache write that expired within the capture was read first (writes still alive "
            "when it ends are not counted)."
        ),
        "unread_examples": [str(x) for x in u["examples"]],
        "whatif": [
            [
                w["scope"],
                usd(w["actual_usd"]),
                usd(w["with_longer_ttl_usd"]),
                ("+" if w["net_usd"] > 0 else "") + usd(w["net_usd"]),
                f"{w['rewrites_avoided']:,}",
                "pays off" if w["pays_off"] else "does not pay off",
            ]
            for w in m["whatif_longer_ttl"]
        ],
    }


def _timing(d: Diagnosis) -> tuple[dict[str, Any], dict[str, Any]]:
    """Steps 1 and 2: TTFT, decode rate and hit rate over time; input tokens and their classes."""
    xs = [(w.start + w.end) / 2 for w in d.windows]
    modes = sorted({m for w in d.windows for m in w.ttft_p50_by_mode})
    step1 = (
        charts.lines(
            "ttft",
            "TTFT p50 over time" + (", streaming and non-streaming apart" if len(modes) > 1 else ""),
            xs,
            [(f"TTFT p50 ({mode})", [w.ttft_p50_by_mode.get(mode) for w in d.windows]) for mode in modes],
            "seconds",
            "seconds",
        )
        + charts.lines(
            "decode",
            "Decode rate p50 over time",
            xs,
            [("decode p50", [w.decode_p50 for w in d.windows])],
            "seconds",
            "rate",
        )
        + charts.lines(
            "hit-rate",
            "Cache hit rate over time (token-weighted)",
            xs,
            [("hit rate", [w.hit_ratio for w in d.windows])],
            "seconds",
            "ratio",
            y_range=(0.0, 1.0),
        )
    )
    step2 = (
        charts.lines(
            "inputs",
            "Input tokens over time",
            xs,
            [("p50", [w.prompt_p50 for w in d.windows]), ("p90", [w.prompt_p90 for w in d.windows])],
            "seconds",
            "tokens",
        )
        + charts.stacked(
            "tokens",
            "Prompt tokens by class",
            [w.start for w in d.windows],
            [
                ("read from cache", [w.cache_read for w in d.windows]),
                ("written", [w.cache_write for w in d.windows]),
                ("uncached", [w.uncached for w in d.windows]),
            ],
            "seconds",
            "tokens",
        )
        + charts.scatter(
            "ttft-vs-cached",
            f"TTFT against the cached fraction of the prompt ({d.split.get('mode')} calls)",
            d.points,
            "ratio",
            "seconds",
            "cached fraction of the prompt",
            (0.0, 1.0),
        )
    )
    i = d.inputs
    distribution = [_tokens(i[k]) if i[k] is not None else "-" for k in ("p50", "p90", "p99", "max")] if i["n"] else []
    return {"charts": step1}, {"charts": step2, "distribution": distribution}


def _prefix(d: Diagnosis) -> dict[str, Any]:
    """Step 3: what was re-prefilled, by cause, with an example of each."""
    return {
        "chart": charts.bars(
            "causes",
            "Re-prefilled tokens by cause",
            [(c.name, c.reprefill_tokens) for c in d.causes],
            "tokens",
            [f" in {c.requests} requests, {usd(c.cost_usd)}" for c in d.causes],
            why="No prefix break: nothing was re-prefilled.",
        ),
        "causes": [[c.name, str(c.requests), f"{c.reprefill_tokens:,}", usd(c.cost_usd)] for c in d.causes],
        "prices": "; ".join(d.prices),
        "examples": _examples(d),
    }


def _infra(d: Diagnosis) -> dict[str, Any]:
    """Step 4: the signals that are not a prefix break, those seen only (the finding says when there is none)."""
    infra = d.infra
    signals = [
        row
        for row in [
            ["TTL expired", str(infra["ttl_expired"]), f"{infra['ttl_expired_tokens']:,}"],
            ["server-side miss", str(infra["server_side"]), f"{infra['server_side_tokens']:,}"],
            ["queueing (slow hits)", str(infra["queued"]), ""],
            *[[f"error {k}", str(v), ""] for k, v in infra["errors"].items()],
            *[
                [f"not analysed: {u['method']} {u['path']} ({u['why']})", str(u["requests"]), ""]
                for u in infra.get("unanalysed", ())
            ],
        ]
        if row[1] != "0"
    ]  # no table of zeros
    return {"signals": signals, "slow": [_request(d, r) for r in infra["queued_examples"]]}


def _fields(d: Diagnosis) -> dict[str, Any]:
    """Step 5: the cache fields predicted against those reported, and the provider's own diagnostics."""
    f = d.fields
    agreement = f.get("agreement") or {}
    return {
        "verdicts": [[k, str(v)] for k, v in sorted(f["verdicts"].items(), key=lambda kv: -kv[1])],
        "gaps": [
            [
                _request(d, g["request"]),
                _when(d, g["request"]),
                f"{g['predicted']:,}",
                f"{g['reported']:,}",
                str(g["verdict"]),
            ]
            for g in f["largest_gaps"]
        ],
        "agreement": {
            "finding": agreement["finding"],
            "causes": [
                [c["cause"], f"{c['both']} ({c['agree']})", str(c["only_us"]), str(c["only_provider"])]
                for c in agreement["causes"]
            ],
            "disagreements": [[x["request"], str(x["provider"]), str(x["ours"])] for x in agreement["disagreements"]],
        }
        if agreement.get("compared")
        else None,
    }


def render(d: Diagnosis) -> str:
    step1, step2 = _timing(d)
    span = date_range(d.money["first_ts"], d.money["last_ts"]) if d.money else duration(d.span_s)
    return _template().render(
        title=d.source,
        meta=f"{d.source}: {d.requests:,} requests, {span}",
        headline=_headline(d),
        notes=([ESTIMATED] if d.tokens_estimated else []) + list(d.notes),
        spend=_spend(d),
        findings=d.findings,
        step1=step1,
        step2=step2,
        step3=_prefix(d),
        step4=_infra(d),
        step5=_fields(d),
        bodies=_bodies(d),
    )
