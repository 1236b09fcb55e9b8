"""The diagnosis on the terminal: one numbered section per step, its finding first. Printed through
prefixguard.utils.styled (rich): plain text in a pipe, bold and colour on a terminal, tables drawn by rich."""

from __future__ import annotations

from typing import Any

from prefixguard.report.findings import ESTIMATED, Diagnosis
from prefixguard.report.human import date_range, duration, ms, usd, when
from prefixguard.utils.styled import GREEN, RED, YELLOW, columns, printable_data, strong


def _num(value: float | None, fmt: str, unit: str = "") -> str:
    return "-" if value is None else format(value, fmt) + unit


def _spend_rows(rows: list[dict[str, Any]], key: str) -> list[tuple[str, ...]]:
    return [(r[key], str(r["requests"]), usd(r["spend_usd"]), usd(r["saved_usd"])) for r in rows]


def _money(m: dict[str, Any]) -> None:
    """Spend, savings, by model, tenant and time, latency, unread writes, the longer TTL: each only with data."""
    print(
        f"\n{strong('Spend')}  {usd(m['spend_usd'])} over {m['priced_requests']} priced requests; caching saved "
        f"{usd(m['saved_usd'])} (without cache reads: {usd(m['without_cache_usd'])})."
    )
    if m["by_model"]:
        print(columns(("model", "requests", "spend", "saved"), _spend_rows(m["by_model"], "model")))
    if m["by_tenant"]:
        basis = "; ".join(f"{b['basis']} ({b['requests']})" for b in m["tenant_basis"])
        print(f"   {m['tenants']} tenants, named by: {basis}")
        print(columns(("tenant", "requests", "spend", "saved"), _spend_rows(m["by_tenant"], "tenant")))
    over = m.get("over_time")
    if over and len(over["buckets"]) > 1:
        busy = [b for b in over["buckets"] if b["requests"]]
        more = f" and {len(busy) - 12} more" if len(busy) > 12 else ""
        print(
            f"   over time, by {over['bucket']}: "
            + ", ".join(f"{b['label']} {usd(b['spend_usd'])}" for b in busy[:12])
            + more
        )
    if m["latency"]:
        print(
            columns(
                ("latency", "requests", "TTFT p50", "p95", "p99", "total p50", "p95", "p99"),
                [
                    (
                        r["mode"],
                        str(r["requests"]),
                        *(ms(r["ttft_s"][k]) for k in ("p50", "p95", "p99")),
                        *(ms(r["total_s"][k]) for k in ("p50", "p95", "p99")),
                    )
                    for r in m["latency"]
                ],
            )
        )
    else:
        print("   latency: no call in the capture has a timing.")
    u = m["unread_writes"]
    if u["requests"]:
        print(
            f"   {strong('writes never read')}: {u['requests']} calls wrote {u['tokens']:,} tokens that expired "
            f"unread: {usd(u['cost_usd'])} to write, {usd(u['premium_usd'])} over sending them uncached."
        )
    else:
        print("   writes never read: none expired unread within the capture.")
    for w in m["whatif_longer_ttl"]:
        verdict = "would pay off" if w["pays_off"] else "would not pay off"
        print(
            f"   {w['ttl']} TTL for {w['scope']}: {verdict} ({usd(w['actual_usd'])} -> "
            f"{usd(w['with_longer_ttl_usd'])}; {w['rewrites_avoided']} re-writes after an expiry avoided)."
        )


def _printable(record: Any) -> Any:
    """A copy of a slotted record (the diagnosis, a cause) whose strings print without control characters:
    model names, paths and excerpts come from the capture, which holds whatever the traffic sent."""
    out = object.__new__(type(record))
    for name in type(record).__slots__:
        value = getattr(record, name)
        setattr(out, name, [_printable(c) for c in value] if name == "causes" else printable_data(value))
    return out


def render(d: Diagnosis) -> None:
    d = _printable(d)
    span = date_range(d.money["first_ts"], d.money["last_ts"]) if d.money else duration(d.span_s)
    print(f"{strong('prefixguard report')} {d.source}: {d.requests} requests, {span}")
    if d.headline:
        print(strong(d.headline["text"]))
        if d.headline.get("fix"):
            print(f"fix: {d.headline['fix']}")
    for note in ([ESTIMATED] if d.tokens_estimated else []) + d.notes:
        print(strong(note, YELLOW))
    if d.money:
        _money(d.money)

    print(f"\n{strong('1. TTFT vs decode rate')}  {d.split['finding']}")
    t0 = d.money.get("first_ts") or 0.0
    print(
        columns(
            ("window from", "requests", "TTFT p50", "decode p50", "prompt p50", "hit ratio"),
            [
                (
                    when(t0 + w.start, d.span_s),
                    str(w.requests),
                    _num(None if w.ttft_p50 is None else w.ttft_p50 * 1e3, ",.0f", " ms"),
                    _num(w.decode_p50, ",.1f", " tok/s"),
                    _num(w.prompt_p50, ",.0f"),
                    _num(w.hit_ratio, ".1%"),
                )
                for w in d.windows
            ],
        )
    )

    i = d.inputs
    print(f"\n{strong('2. Input tokens')}  {i['finding']}")
    if i["n"]:
        print(f"   p50 {i['p50']:,.0f}  p90 {i['p90']:,.0f}  p99 {i['p99']:,.0f}  max {i['max']:,}")

    print(f"\n{strong('3. Prefix consistency')}  {d.findings[2]}")
    if d.causes:
        print(
            columns(
                ("cause", "requests", "re-prefilled tokens", "cost"),
                [(c.name, str(c.requests), f"{c.reprefill_tokens:,}", usd(c.cost_usd)) for c in d.causes],
            )
        )
        if d.prices:
            print(f"   prices: {'; '.join(d.prices)}")
        for c in d.causes:
            ex = c.example
            if not ex:
                continue
            print(
                f"   {strong(c.name)}: request {ex['request']} vs {ex['earlier']} at {ex['pointer']} "
                f"(byte {ex['byte_offset']})"
            )
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
        print(
            columns(
                ("cause", "both (agree)", "only us", "only the provider"),
                [
                    (c["cause"], f"{c['both']} ({c['agree']})", str(c["only_us"]), str(c["only_provider"]))
                    for c in agreement["causes"]
                ],
            )
        )
        for dis in agreement["disagreements"]:
            print(f"   disagree {dis['request']}: provider {dis['provider']}, prefixguard {dis['ours']}")
