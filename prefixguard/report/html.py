"""The diagnosis as one self-contained HTML file: inline CSS and SVG charts, no external asset.

It opens with a headline (hit rate, money lost to misses, the top cause and its fix); every request it
names shows when it was sent and links to its body, kept at the end of the page."""
from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from html import escape
from importlib.resources import files
from string import Template

from prefixguard.report import charts
from prefixguard.report.diagnose import ESTIMATED, Diagnosis

ELLIPSIS = "…"


def _tokens(v: float) -> str:
    return charts.unit("tokens", v).tip(v)


def _table(head: list[str], rows: list[list[str]], raw: tuple[int, ...] = ()) -> str:
    """A table of text cells; the columns in `raw` hold HTML made here (request links)."""
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    trs = "".join("<tr>" + "".join(f"<td>{c if i in raw else escape(c)}</td>" for i, c in enumerate(row)) + "</tr>"
                  for row in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table>"


def _section(n: int, title: str, finding: str, *parts: str) -> str:
    return f'<h2>{n}. {escape(title)}</h2><p class="finding">{escape(finding)}</p>' + "".join(parts)


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
    cells = [("cache hit rate", hit, "of prompt tokens read from cache"),
             ("lost to misses", f"${h['lost_usd']:,.4f}", "paid over reading the cache" +
              (f" ({'; '.join(d.prices)})" if d.prices else "")),
             ("top cause", h["top_cause"] or "none", "")]
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


def render(d: Diagnosis) -> str:
    xs = [(w.start + w.end) / 2 for w in d.windows]
    step1 = '<div class="charts">' + charts.lines(
        "ttft", "TTFT p50 over time", xs, [("TTFT p50", [w.ttft_p50 for w in d.windows])], "seconds", "seconds") + \
        charts.lines("decode", "Decode rate p50 over time", xs, [("decode p50", [w.decode_p50 for w in d.windows])],
                     "seconds", "rate") + charts.lines(
        "hit-rate", "Cache hit rate over time (token-weighted)", xs,
        [("hit rate", [w.hit_ratio for w in d.windows])], "seconds", "ratio", y_range=(0.0, 1.0)) + "</div>"
    step2 = '<div class="charts">' + charts.lines(
        "inputs", "Input tokens over time", xs,
        [("p50", [w.prompt_p50 for w in d.windows]), ("p90", [w.prompt_p90 for w in d.windows])], "seconds",
        "tokens") + charts.stacked(
        "tokens", "Prompt tokens by class", [w.start for w in d.windows],
        [("read from cache", [w.cache_read for w in d.windows]), ("written", [w.cache_write for w in d.windows]),
         ("uncached", [w.uncached for w in d.windows])], "seconds", "tokens") + charts.scatter(
        "ttft-vs-cached", "TTFT against the cached fraction of the prompt", d.points, "ratio", "seconds",
        "cached fraction of the prompt", (0.0, 1.0)) + "</div>"
    i = d.inputs
    dist = _table(["p50", "p90", "p99", "max"], [[_tokens(i[k]) if i[k] is not None else "-"
                                                  for k in ("p50", "p90", "p99", "max")]]) if i["n"] else ""

    cause_rows = [[c.name, str(c.requests), f"{c.reprefill_tokens:,}", f"${c.cost_usd:,.4f}"] for c in d.causes]
    prices = f'<p class="prices">Costs at list prices: {escape("; ".join(d.prices))}.</p>' if d.prices else ""
    step3 = charts.bars("causes", "Re-prefilled tokens by cause", [(c.name, c.reprefill_tokens) for c in d.causes],
                        "tokens", [f" in {c.requests} requests, ${c.cost_usd:,.4f}" for c in d.causes]) + (
        _table(["cause", "requests", "re-prefilled tokens", "cost"], cause_rows) + prices if cause_rows else "") \
        + _examples(d)

    f = d.fields
    infra = d.infra
    step4 = _table(["signal", "requests", "tokens"], [
        ["TTL expired", str(infra["ttl_expired"]), f"{infra['ttl_expired_tokens']:,}"],
        ["server-side miss", str(infra["server_side"]), f"{infra['server_side_tokens']:,}"],
        ["queueing (slow hits)", str(infra["queued"]), ""],
        *[[f"error {k}", str(v), ""] for k, v in infra["errors"].items()],
        *[[f"not analysed: {u['method']} {u['path']}", str(u["requests"]), ""] for u in infra.get("unanalysed", ())]])
    if infra["queued_examples"]:
        step4 += "<p>Slow hits: " + ", ".join(_request(d, r) for r in infra["queued_examples"]) + "</p>"
    step5 = _table(["verdict", "requests"], [[k, str(v)] for k, v in sorted(f["verdicts"].items(),
                                                                           key=lambda kv: -kv[1])]) + (
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
        _section(1, "TTFT vs decode rate", d.findings[0], step1),
        _section(2, "Input tokens", d.findings[1], step2, dist),
        _section(3, "Prefix consistency", d.findings[2], step3),
        _section(4, "Infrastructure signals", d.findings[3], step4),
        _section(5, "Cache fields: predicted vs reported", d.findings[4], step5),
        _bodies(d),
    ])
    span = charts.unit("seconds", d.span_s).tip(d.span_s)
    meta = f"{d.source}: {d.requests} requests over {span}"
    page = Template(files("prefixguard.report").joinpath("template.html").read_text("utf-8"))
    return page.substitute(title=escape(d.source), meta=escape(meta), body=body)
