"""The diagnosis as one self-contained HTML file: inline CSS and SVG charts, no external asset.

It opens with a headline (spend, savings by caching, hit rate, money lost to misses, the top cause and its
fix), then what a cost owner asks (prefixguard.report.money), then the five steps; every request it names
shows when it was sent and links to its body, kept at the end of the page. A panel without data is left
out or says in one line why."""
from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from html import escape
from importlib.resources import files
from string import Template

from prefixguard.report import charts
from prefixguard.report.diagnose import ESTIMATED, Diagnosis
from prefixguard.report.human import date_range, duration, ms, usd

ELLIPSIS = "…"
UNPRICED = "No call has a price: its models are priced at $0 or not known (rules/providers.toml)."


def _tokens(v: float) -> str:
    return charts.unit("tokens", v).tip(v)


def _table(head: list[str], rows: list[list[str]], raw: tuple[int, ...] = ()) -> str:
    """A table of text cells; the columns in `raw` hold HTML made here (request links)."""
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    trs = "".join("<tr>" + "".join(f"<td>{c if i in raw else escape(c)}</td>" for i, c in enumerate(row)) + "</tr>"
                  for row in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table>"


def _section(n: int | None, title: str, finding: str, *parts: str, key: str = "") -> str:
    """One panel: its heading, its finding in one line, then what it has to show (parts left empty are left out)."""
    number = f"{n}. " if n is not None else ""
    anchor = f' id="{key}"' if key else ""
    return (f'<section class="panel"{anchor}><h2>{number}{escape(title)}</h2><p class="finding">{escape(finding)}</p>'
            + "".join(parts) + "</section>")


def _anchor(rid: str) -> str:
    return "req-" + re.sub(r"[^A-Za-z0-9_-]", "_", rid)


def _when(d: Diagnosis, rid: str) -> str:
    info = d.listed.get(rid) or {}
    if info.get("ts") is None:
        return ""
    at = datetime.fromtimestamp(info["ts"], UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"{at} (+{charts.unit('seconds', info['t']).tip(info['t'])})"


def _link(rid: str) -> str:
    return f'<a class="req" href="#{_anchor(rid)}">{escape(rid)}</a>'


def _request(d: Diagnosis, rid: str) -> str:
    """A request named in the report: its id linked to its body, and when it was sent."""
    when = _when(d, rid)
    return (_link(rid)
            + (f' <span class="when">{escape(when)}</span>' if when else ""))


def plain(snippet: str | None) -> str:
    """A snippet as the text it stands for. Compare quotes the bytes as sent, so a snippet from inside a
    JSON string shows JSON escapes (\\u00e9, \\", \\n); those are decoded here, so that the page escapes the
    text once, for HTML only. A snippet of JSON structure (unescaped quotes: keys, objects) stays as sent."""
    if not snippet:
        return snippet or ""
    head = ELLIPSIS if snippet.startswith(ELLIPSIS) else ""
    tail = ELLIPSIS if snippet.endswith(ELLIPSIS) and len(snippet) > len(head) else ""
    core = snippet[len(head):len(snippet) - len(tail)]
    quoted = len(core) > 1 and core.startswith('"') and core.endswith('"') and not head and not tail
    if quoted:
        core = core[1:-1]
    elif core.startswith('"') and not head:
        core = core[1:]
    for trim in range(0, 6):     # a cut may end inside an escape (\\u00e9): drop its start
        try:
            text = json.loads('"' + core[:len(core) - trim] + '"')
        except ValueError:
            continue
        return head + text + tail
    return snippet


def _headline(d: Diagnosis) -> str:
    h = d.headline
    if not h:
        return ""
    hit = "–" if h["hit_rate"] is None else f"{h['hit_rate']:.1%}"
    m = d.money
    cells = [("spend", usd(h["spend_usd"]), date_range(m["first_ts"], m["last_ts"])),
             ("saved by caching", usd(h["saved_usd"]), f"against {usd(m['without_cache_usd'])} without cache reads"),
             ("cache hit rate", hit, "of prompt tokens read from cache"),
             ("lost to misses", usd(h["lost_usd"]), "paid over reading the cache" +
              (f" ({'; '.join(d.prices)})" if d.prices else "")),
             ("top cause", h.get("top_cause_label") or h["top_cause"] or "none", "")]
    stats = "".join(f'<div class="stat"><span class="label">{escape(a)}</span><span class="value">{escape(b)}'
                    f'</span><span class="sub">{escape(c)}</span></div>' for a, b, c in cells)
    fix = f'<p class="fix"><b>Fix:</b> {escape(h["fix"])}</p>' if h.get("fix") else ""
    return f'<section class="headline" id="headline"><div class="stats">{stats}</div>{fix}</section>'


def _examples(d: Diagnosis) -> str:
    out = []
    for c in d.causes:
        ex = c.example
        if not ex:
            continue
        out.append(
            f'<div class="example"><p><b>{escape(c.name)}</b>: request {_request(d, str(ex["request"]))} against '
            f'{_request(d, str(ex["earlier"]))}, at <code>{escape(str(ex["pointer"]))}</code> '
            f'(byte {ex["byte_offset"]:,})</p>'
            f'<p>before: <code class="before">{escape(plain(ex["before"]))}</code></p>'
            f'<p>after: <code class="after">{escape(plain(ex["after"]))}</code></p>'
            + (f'<p>{escape(ex["detail"])}</p>' if ex.get("detail") else "")
            + (f'<p><i>Fix:</i> {escape(ex["fix"])}</p>' if ex.get("fix") else "") + "</div>")
    return "".join(out)


def _indented(text: str) -> str:
    """A body as a reader reads it: JSON indented; a body cut to size, or not JSON, as it is."""
    try:
        return json.dumps(json.loads(text), indent=1, ensure_ascii=False)
    except (ValueError, RecursionError):
        return text


def _bodies(d: Diagnosis) -> str:
    if not d.listed:
        return ""
    items = []
    for rid, info in sorted(d.listed.items(), key=lambda kv: kv[1].get("ts") or 0):
        meta = " · ".join(x for x in (_when(d, rid), info.get("model"), info.get("verdict")) if x)
        body = (f"<pre>{escape(_indented(info['body']))}</pre>" if info.get("body") is not None else
                f'<p class="nobody">No body stored (--no-bodies, or imported from an agent\'s log: '
                f'{escape(str(info.get("source") or ""))}).</p>')
        items.append(f'<details id="{_anchor(rid)}"><summary><code>{escape(rid)}</code> '
                     f'<span class="when">{escape(meta)}</span></summary>{body}</details>')
    return '<h2>Requests named above</h2>' + "".join(items)


def _charts(figures: str) -> str:
    return f'<div class="charts">{figures}</div>' if figures else ""


def _money_rows(rows: list[dict], key: str) -> list[list[str]]:
    return [[str(r[key]), f"{r['requests']:,}", usd(r["spend_usd"]), usd(r["saved_usd"])] for r in rows]


def _spend(d: Diagnosis) -> str:
    """The cost owner's panel: spend and savings, by model, tenant and time; latency; unread writes; the
    longer TTL. Each part only where it has data; a part without says in one line why."""
    m = d.money
    if not m:
        return ""
    finding = (f"{usd(m['spend_usd'])} spent on {m['priced_requests']:,} priced requests, "
               f"{date_range(m['first_ts'], m['last_ts'])}; caching saved {usd(m['saved_usd'])} (the same traffic "
               f"without cache reads: {usd(m['without_cache_usd'])}).")
    over = m.get("over_time") or {"buckets": []}
    buckets = over["buckets"]
    figures = charts.bars("cost-by-model", "Cost by model", [(r["model"], r["spend_usd"]) for r in m["by_model"]],
                          "usd", [f" in {r['requests']:,} requests, saved {usd(r['saved_usd'])}" for r in m["by_model"]],
                          why=UNPRICED)
    if buckets:
        figures += charts.stacked(
            "cost-over-time", f"Cost over time (by {over['bucket']})", [b["start"] for b in buckets],
            [("paid", [b["spend_usd"] for b in buckets]), ("saved by caching", [max(0.0, b["saved_usd"]) for b in buckets])],
            "seconds", "usd", "UTC", labels=[b["label"] for b in buckets], why=UNPRICED)
    parts = [_charts(figures),
             "<h3>By model</h3>" + _table(["model", "requests", "spend", "saved by caching"], _money_rows(m["by_model"], "model"))
             if m["by_model"] else ""]
    if m["by_tenant"]:
        basis = "; ".join(f"{b['basis']} ({b['requests']:,} requests)" for b in m["tenant_basis"])
        parts.append(f"<h3>By tenant</h3><p class=\"note\">{m['tenants']:,} tenants, named by: {escape(basis)}.</p>"
                     + _table(["tenant", "requests", "spend", "saved by caching"], _money_rows(m["by_tenant"], "tenant")))
    if m["latency"]:
        parts.append("<h3>Latency</h3><p class=\"note\">Streaming and non-streaming calls apart: a streamed first token "
                     "and a whole response are not the same wait.</p>" + _table(
                         ["calls", "requests", "TTFT p50", "TTFT p95", "TTFT p99", "total p50", "total p95", "total p99"],
                         [[r["mode"], f"{r['requests']:,}", *(ms(r["ttft_s"][k]) for k in ("p50", "p95", "p99")),
                           *(ms(r["total_s"][k]) for k in ("p50", "p95", "p99"))] for r in m["latency"]]))
    else:
        parts.append("<h3>Latency</h3><p>No call in this capture carries a timing (agents' logs keep none).</p>")
    u = m["unread_writes"]
    unread = (f"{u['requests']:,} calls wrote {u['tokens']:,} tokens to the cache that expired before any later call "
              f"read them: {usd(u['cost_usd'])} to write, {usd(u['premium_usd'])} more than sending them uncached."
              if u["requests"] else "None: every cache write that expired within the capture was read first "
                                    "(writes still alive when it ends are not counted).")
    parts.append(f"<h3>Writes never read</h3><p>{escape(unread)}</p>" + (
        "<p>For example: " + ", ".join(escape(x) for x in u["examples"]) + "</p>" if u["examples"] else ""))
    if m["whatif_longer_ttl"]:
        parts.append("<h3>What if every write used the 1-hour TTL</h3>" + _table(
            ["calls", "cost as sent", "with 1 h writes", "difference", "re-writes avoided", "answer"],
            [[w["scope"], usd(w["actual_usd"]), usd(w["with_longer_ttl_usd"]),
              ("+" if w["net_usd"] > 0 else "") + usd(w["net_usd"]),
              f"{w['rewrites_avoided']:,}", "pays off" if w["pays_off"] else "does not pay off"]
             for w in m["whatif_longer_ttl"]]) + '<p class="note">Input cost of the calls whose provider sells the '
                     '1-hour TTL: each written token at its price instead, and each call that found its cache expired '
                     'within the hour reads it instead.</p>')
    return _section(None, "Spend and savings", finding, *parts, key="spend")


def render(d: Diagnosis) -> str:
    xs = [(w.start + w.end) / 2 for w in d.windows]
    modes = sorted({m for w in d.windows for m in w.ttft_p50_by_mode})
    step1 = _charts(charts.lines(
        "ttft", "TTFT p50 over time" + (", streaming and non-streaming apart" if len(modes) > 1 else ""), xs,
        [(f"TTFT p50 ({mode})", [w.ttft_p50_by_mode.get(mode) for w in d.windows]) for mode in modes], "seconds",
        "seconds") + \
        charts.lines("decode", "Decode rate p50 over time", xs, [("decode p50", [w.decode_p50 for w in d.windows])],
                     "seconds", "rate") + charts.lines(
        "hit-rate", "Cache hit rate over time (token-weighted)", xs,
        [("hit rate", [w.hit_ratio for w in d.windows])], "seconds", "ratio", y_range=(0.0, 1.0)))
    step2 = _charts(charts.lines(
        "inputs", "Input tokens over time", xs,
        [("p50", [w.prompt_p50 for w in d.windows]), ("p90", [w.prompt_p90 for w in d.windows])], "seconds",
        "tokens") + charts.stacked(
        "tokens", "Prompt tokens by class", [w.start for w in d.windows],
        [("read from cache", [w.cache_read for w in d.windows]), ("written", [w.cache_write for w in d.windows]),
         ("uncached", [w.uncached for w in d.windows])], "seconds", "tokens") + charts.scatter(
        "ttft-vs-cached", f"TTFT against the cached fraction of the prompt ({d.split.get('mode')} calls)", d.points,
        "ratio", "seconds", "cached fraction of the prompt", (0.0, 1.0)))
    i = d.inputs
    dist = _table(["p50", "p90", "p99", "max"], [[_tokens(i[k]) if i[k] is not None else "-"
                                                  for k in ("p50", "p90", "p99", "max")]]) if i["n"] else ""

    cause_rows = [[c.name, str(c.requests), f"{c.reprefill_tokens:,}", usd(c.cost_usd)] for c in d.causes]
    prices = f'<p class="prices">Costs at list prices: {escape("; ".join(d.prices))}.</p>' if d.prices else ""
    step3 = charts.bars("causes", "Re-prefilled tokens by cause", [(c.name, c.reprefill_tokens) for c in d.causes],
                        "tokens", [f" in {c.requests} requests, {usd(c.cost_usd)}" for c in d.causes],
                        why="No prefix break: nothing was re-prefilled.") + (
        _table(["cause", "requests", "re-prefilled tokens", "cost"], cause_rows) + prices if cause_rows else "") \
        + _examples(d)

    f = d.fields
    infra = d.infra
    signals = [row for row in [
        ["TTL expired", str(infra["ttl_expired"]), f"{infra['ttl_expired_tokens']:,}"],
        ["server-side miss", str(infra["server_side"]), f"{infra['server_side_tokens']:,}"],
        ["queueing (slow hits)", str(infra["queued"]), ""],
        *[[f"error {k}", str(v), ""] for k, v in infra["errors"].items()],
        *[[f"not analysed: {u['method']} {u['path']}", str(u["requests"]), ""] for u in infra.get("unanalysed", ())]]
        if row[1] != "0"]   # the finding says when there is none: no table of zeros
    step4 = _table(["signal", "requests", "tokens"], signals) if signals else ""
    if infra["queued_examples"]:
        step4 += "<p>Slow hits: " + ", ".join(_request(d, r) for r in infra["queued_examples"]) + "</p>"
    step5 = (_table(["verdict", "requests"], [[k, str(v)] for k, v in sorted(f["verdicts"].items(),
                                                                            key=lambda kv: -kv[1])])
             if f["verdicts"] else "") + (
        _table(["request", "sent", "predicted", "reported", "verdict"],
               [[_link(g["request"]), escape(_when(d, g["request"])), f"{g['predicted']:,}",
                 f"{g['reported']:,}", str(g["verdict"])] for g in f["largest_gaps"]], raw=(0, 1))
        if f["largest_gaps"] else "")
    agreement = f.get("agreement") or {}
    if agreement.get("compared"):
        step5 += f"<p>{escape(agreement['finding'])}</p>" + _table(
            ["cause", "both (agree)", "only prefixguard", "only the provider"],
            [[c["cause"], f"{c['both']} ({c['agree']})", str(c["only_us"]), str(c["only_provider"])]
             for c in agreement["causes"]]) + (_table(
                ["disagreement", "provider says", "prefixguard says"],
                [[d["request"], str(d["provider"]), str(d["ours"])] for d in agreement["disagreements"]])
                if agreement["disagreements"] else "")

    body = "".join([
        _headline(d),
        f'<p class="estimated">{escape(ESTIMATED)}</p>' if d.tokens_estimated else "",
        *(f'<p class="estimated">{escape(n)}</p>' for n in d.notes),
        _spend(d),
        _section(1, "TTFT vs decode rate", d.findings[0], step1),
        _section(2, "Input tokens", d.findings[1], step2, dist),
        _section(3, "Prefix consistency", d.findings[2], step3),
        _section(4, "Infrastructure signals", d.findings[3], step4),
        _section(5, "Cache fields: predicted vs reported", d.findings[4], step5),
        _bodies(d),
    ])
    span = date_range(d.money["first_ts"], d.money["last_ts"]) if d.money else duration(d.span_s)
    meta = f"{d.source}: {d.requests:,} requests, {span}"
    page = Template(files("prefixguard.report").joinpath("template.html").read_text("utf-8"))
    return page.substitute(title=escape(d.source), meta=escape(meta), body=body)
