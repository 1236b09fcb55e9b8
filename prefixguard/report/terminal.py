"""The diagnosis on the terminal: one numbered section per step, its finding first (plain text, bold and
colour only on a terminal)."""
from __future__ import annotations

from prefixguard.report.diagnose import ESTIMATED, Diagnosis
from prefixguard.styled import GREEN, RED, YELLOW, columns, strong


def _num(value: float | None, fmt: str, unit: str = "") -> str:
    return "-" if value is None else format(value, fmt) + unit


def render(d: Diagnosis) -> None:
    print(f"{strong('prefixguard report')} {d.source}: {d.requests} requests over {d.span_s:,.0f} s")
    if d.headline:
        print(strong(d.headline["text"]))
        if d.headline.get("fix"):
            print(f"fix: {d.headline['fix']}")
    for note in ([ESTIMATED] if d.tokens_estimated else []) + d.notes:
        print(strong(note, YELLOW))

    print(f"\n{strong('1. TTFT vs decode rate')}  {d.split['finding']}")
    print(columns(("window (s)", "requests", "TTFT p50", "decode p50", "prompt p50", "hit ratio"),
                [(f"{w.start:,.0f}-{w.end:,.0f}", str(w.requests),
                  _num(None if w.ttft_p50 is None else w.ttft_p50 * 1e3, ",.0f", " ms"),
                  _num(w.decode_p50, ",.1f", " tok/s"), _num(w.prompt_p50, ",.0f"), _num(w.hit_ratio, ".1%"))
                 for w in d.windows]))

    i = d.inputs
    print(f"\n{strong('2. Input tokens')}  {i['finding']}")
    if i["n"]:
        print(f"   p50 {i['p50']:,.0f}  p90 {i['p90']:,.0f}  p99 {i['p99']:,.0f}  max {i['max']:,}")

    print(f"\n{strong('3. Prefix consistency')}  {d.findings[2]}")
    if d.causes:
        print(columns(("cause", "requests", "re-prefilled tokens", "cost"),
                    [(c.name, str(c.requests), f"{c.reprefill_tokens:,}", f"${c.cost_usd:,.4f}") for c in d.causes]))
        if d.prices:
            print(f"   prices: {'; '.join(d.prices)}")
        for c in d.causes:
            ex = c.example
            if not ex:
                continue
            print(f"   {strong(c.name)}: request {ex['request']} vs {ex['earlier']} at {ex['pointer']} "
                f"(byte {ex['byte_offset']})")
            print(f"     before: {strong(repr(ex['before']), RED)}")
            print(f"     after:  {strong(repr(ex['after']), GREEN)}")
            if ex["fix"]:
                print(f"     fix: {ex['fix']}")

    print(f"\n{strong('4. Infrastructure')}  {d.infra['finding']}")

    f = d.fields
    print(f"\n{strong('5. Cache fields, predicted vs reported')}  {f['finding']}")
    if f["verdicts"]:
        print("   " + ", ".join(f"{k}: {v}" for k, v in sorted(f["verdicts"].items(), key=lambda kv: -kv[1])))
    for gap in f["largest_gaps"]:
        print(f"   {gap['request']}: predicted {gap['predicted']:,}, reported {gap['reported']:,} ({gap['verdict']})")
    agreement = f.get("agreement") or {}
    if agreement.get("compared"):
        print(f"   provider diagnostics: {agreement['finding']}")
        print(columns(("cause", "both (agree)", "only us", "only the provider"),
                    [(c["cause"], f"{c['both']} ({c['agree']})", str(c["only_us"]), str(c["only_provider"]))
                     for c in agreement["causes"]]))
        for dis in agreement["disagreements"]:
            print(f"   disagree {dis['request']}: provider {dis['provider']}, prefixguard {dis['ours']}")
