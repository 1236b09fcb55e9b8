"""The diagnosis as one self-contained HTML file: inline CSS and SVG charts, no external asset."""
from __future__ import annotations

from html import escape
from importlib.resources import files
from string import Template

from prefixguard.report import charts
from prefixguard.report.diagnose import ESTIMATED, Diagnosis


def _ms(v: float) -> str:
    return f"{v * 1e3:,.0f} ms"


def _tokens(v: float) -> str:
    return f"{v / 1e3:,.1f}k" if v >= 10_000 else f"{v:,.0f}"


def _table(head: list[str], rows: list[list[str]]) -> str:
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    trs = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table>"


def _section(n: int, title: str, finding: str, *parts: str) -> str:
    return f'<h2>{n}. {escape(title)}</h2><p class="finding">{escape(finding)}</p>' + "".join(parts)


def render(d: Diagnosis) -> str:
    xs = [(w.start + w.end) / 2 for w in d.windows]
    time_fmt = (lambda v: f"{v:,.0f} s") if d.span_s else (lambda v: "")
    labels = [f"{w.start:,.0f}s" for w in d.windows]

    step1 = '<div class="charts">' + charts.lines(
        "ttft", "TTFT p50 over time", xs, [("TTFT p50", [w.ttft_p50 for w in d.windows])], time_fmt, _ms) + \
        charts.lines("decode", "Decode rate p50 over time", xs, [("tokens/s", [w.decode_p50 for w in d.windows])],
                     time_fmt, lambda v: f"{v:,.0f}/s") + charts.lines(
        "hit-rate", "Cache hit rate over time (token-weighted)", xs,
        [("hit rate", [w.hit_ratio for w in d.windows])], time_fmt, lambda v: f"{v:.0%}", 0.0, 1.0) + "</div>"
    step2 = '<div class="charts">' + charts.lines(
        "inputs", "Input tokens over time", xs,
        [("p50", [w.prompt_p50 for w in d.windows]), ("p90", [w.prompt_p90 for w in d.windows])], time_fmt,
        _tokens) + charts.stacked(
        "tokens", "Prompt tokens by class", labels,
        [("read from cache", [w.cache_read for w in d.windows]), ("written", [w.cache_write for w in d.windows]),
         ("uncached", [w.uncached for w in d.windows])], _tokens) + charts.scatter(
        "ttft-vs-cached", "TTFT against the cached fraction of the prompt", d.points, lambda v: f"{v:.0%}", _ms,
        (0.0, 1.0)) + "</div>"
    i = d.inputs
    dist = _table(["p50", "p90", "p99", "max"], [[_tokens(i[k]) if i[k] is not None else "-"
                                                  for k in ("p50", "p90", "p99", "max")]]) if i["n"] else ""

    cause_rows = [[c.name, str(c.requests), f"{c.reprefill_tokens:,}", f"${c.cost_usd:,.4f}"] for c in d.causes]
    examples = "".join(
        f"<p><b>{escape(c.name)}</b>: request {escape(c.example['request'])} against {escape(c.example['earlier'])}"
        f", at <code>{escape(str(c.example['pointer']))}</code> (byte {c.example['byte_offset']})<br>"
        f'before: <code class="before">{escape(c.example["before"])}</code><br>'
        f'after: <code class="after">{escape(c.example["after"])}</code><br>'
        f"{escape(c.example['detail'])}<br><i>Fix:</i> {escape(c.example['fix'])}</p>"
        for c in d.causes if c.example)
    step3 = charts.bars("causes", "Re-prefilled tokens by cause", [(c.name, c.reprefill_tokens) for c in d.causes],
                        _tokens) + (_table(["cause", "requests", "re-prefilled tokens", "cost"], cause_rows)
                                    if cause_rows else "") + examples

    f = d.fields
    infra = d.infra
    step4 = _table(["signal", "requests", "tokens"], [
        ["TTL expired", str(infra["ttl_expired"]), f"{infra['ttl_expired_tokens']:,}"],
        ["server-side miss", str(infra["server_side"]), f"{infra['server_side_tokens']:,}"],
        ["queueing (slow hits)", str(infra["queued"]), ""],
        *[[f"error {k}", str(v), ""] for k, v in infra["errors"].items()]])
    step5 = _table(["verdict", "requests"], [[k, str(v)] for k, v in sorted(f["verdicts"].items(),
                                                                           key=lambda kv: -kv[1])]) + (
        _table(["request", "predicted", "reported", "verdict"],
               [[g["request"], f"{g['predicted']:,}", f"{g['reported']:,}", str(g["verdict"])]
                for g in f["largest_gaps"]]) if f["largest_gaps"] else "")

    body = "".join([
        f'<p class="estimated">{escape(ESTIMATED)}</p>' if d.tokens_estimated else "",
        _section(1, "TTFT vs decode rate", d.findings[0], step1),
        _section(2, "Input tokens", d.findings[1], step2, dist),
        _section(3, "Prefix consistency", d.findings[2], step3),
        _section(4, "Infrastructure signals", d.findings[3], step4),
        _section(5, "Cache fields: predicted vs reported", d.findings[4], step5),
    ])
    meta = f"{d.source}: {d.requests} requests over {d.span_s:,.0f} s"
    page = Template(files("prefixguard.report").joinpath("template.html").read_text("utf-8"))
    return page.substitute(title=escape(d.source), meta=escape(meta), body=body)
