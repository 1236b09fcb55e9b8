"""The diagnosis on the terminal (rich): one numbered section per step, its finding first."""
from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from prefixguard.report.diagnose import ESTIMATED, Diagnosis


def _num(value: float | None, fmt: str, unit: str = "") -> str:
    return "-" if value is None else format(value, fmt) + unit


def render(d: Diagnosis, console: Console | None = None) -> None:
    console = console or Console()
    console.print(f"[bold]prefixguard report[/] {escape(d.source)}: {d.requests} requests over {d.span_s:,.0f} s")
    if d.headline:
        console.print(f"[bold]{escape(d.headline['text'])}[/]")
        if d.headline.get("fix"):
            console.print(f"fix: {escape(d.headline['fix'])}")
    if d.tokens_estimated:
        console.print(f"[yellow]{escape(ESTIMATED)}[/]")
    for note in d.notes:
        console.print(f"[yellow]{escape(note)}[/]")

    console.print(f"\n[bold]1. TTFT vs decode rate[/]  {escape(d.split['finding'])}")
    table = Table("window (s)", "requests", "TTFT p50", "decode p50", "prompt p50", "hit ratio", box=None)
    for w in d.windows:
        table.add_row(f"{w.start:,.0f}-{w.end:,.0f}", str(w.requests),
                      _num(None if w.ttft_p50 is None else w.ttft_p50 * 1e3, ",.0f", " ms"),
                      _num(w.decode_p50, ",.1f", " tok/s"),
                      _num(w.prompt_p50, ",.0f"), _num(w.hit_ratio, ".1%"))
    console.print(table)

    i = d.inputs
    console.print(f"\n[bold]2. Input tokens[/]  {escape(i['finding'])}")
    if i["n"]:
        console.print(f"   p50 {i['p50']:,.0f}  p90 {i['p90']:,.0f}  p99 {i['p99']:,.0f}  max {i['max']:,}")

    console.print(f"\n[bold]3. Prefix consistency[/]  {escape(d.findings[2])}")
    if d.causes:
        table = Table("cause", "requests", "re-prefilled tokens", "cost", box=None)
        for c in d.causes:
            table.add_row(c.name, str(c.requests), f"{c.reprefill_tokens:,}", f"${c.cost_usd:,.4f}")
        console.print(table)
        if d.prices:
            console.print(f"   prices: {escape('; '.join(d.prices))}")
        for c in d.causes:
            ex = c.example
            if not ex:
                continue
            console.print(f"   [bold]{c.name}[/]: request {escape(ex['request'])} vs {escape(ex['earlier'])} at "
                          f"{escape(str(ex['pointer']))} (byte {ex['byte_offset']})")
            console.print(f"     before: [red]{escape(repr(ex['before']))}[/]")
            console.print(f"     after:  [green]{escape(repr(ex['after']))}[/]")
            if ex["fix"]:
                console.print(f"     fix: {escape(ex['fix'])}")

    console.print(f"\n[bold]4. Infrastructure[/]  {escape(d.infra['finding'])}")

    f = d.fields
    console.print(f"\n[bold]5. Cache fields, predicted vs reported[/]  {escape(f['finding'])}")
    if f["verdicts"]:
        console.print("   " + ", ".join(f"{k}: {v}" for k, v in sorted(f["verdicts"].items(), key=lambda kv: -kv[1])))
    for gap in f["largest_gaps"]:
        console.print(f"   {escape(gap['request'])}: predicted {gap['predicted']:,}, reported {gap['reported']:,} "
                      f"({gap['verdict']})")
    agreement = f.get("agreement") or {}
    if agreement.get("compared"):
        console.print(f"   provider diagnostics: {escape(agreement['finding'])}")
        table = Table("cause", "both (agree)", "only us", "only the provider", box=None, padding=(0, 2))
        for c in agreement["causes"]:
            table.add_row(escape(c["cause"]), f"{c['both']} ({c['agree']})", str(c["only_us"]), str(c["only_provider"]))
        console.print(table)
        for dis in agreement["disagreements"]:
            console.print(f"   disagree {escape(dis['request'])}: provider {escape(str(dis['provider']))}, "
                          f"prefixguard {escape(str(dis['ours']))}")
