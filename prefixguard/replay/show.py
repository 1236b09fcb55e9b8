"""The replay summary on the terminal: one column per run (as is, fixed), the same rows in each."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from prefixguard.utils import styled

if TYPE_CHECKING:
    from rich.console import Console


def _ttft(summary: dict[str, Any], group: str) -> str:
    d = summary.get("ttft_s", {}).get(group) or {}
    return " / ".join("-" if d.get(q) is None else f"{d[q] * 1e3:,.0f} ms" for q in ("p50", "p90"))


ROWS: list[tuple[str, Any]] = [
    ("requests", lambda s: f"{s['requests']:,}" + (f" ({s['errors']} failed)" if s["errors"] else "")),
    ("prompt tokens", lambda s: f"{s['prompt_tokens']:,}"),
    ("cached (read)", lambda s: f"{s['cache_read']:,}"),
    ("written", lambda s: f"{s['cache_write']:,}"),
    ("uncached", lambda s: f"{s['uncached']:,}"),
    ("hit ratio, token-weighted", lambda s: f"{s['hit_ratio']:.1%}"),
    ("hit ratio, per request", lambda s: f"{s['request_hit_ratio']:.1%}"),
    ("requests with a hit", lambda s: f"{s['requests_with_hits']:,}"),
    ("TTFT p50 / p90 with reuse", lambda s: _ttft(s, "with_reuse")),
    ("TTFT p50 / p90 without", lambda s: _ttft(s, "without_reuse")),
    ("prefill seconds", lambda s: f"{s['prefill_s']:.2f} s" if "prefill_s" in s else "-"),
    (
        "prefill seconds saved",
        lambda s: (
            f"{s['prefill_saved_s']:.2f} s (x{s['prefill_ratio']:.2f})" if s.get("prefill_ratio") is not None else "-"
        ),
    ),
    ("cost", lambda s: f"${s['cost_usd']:,.4f}"),
    ("prices from", lambda s: "; ".join(s.get("prices") or ()) or "-"),
    ("cost with no cache", lambda s: f"${s['cost_without_cache_usd']:,.4f}"),
    ("predicted vs reported cached", lambda s: _agreement(s.get("predicted_vs_reported"))),
]


def _agreement(a: dict[str, Any] | None) -> str:
    if not a:
        return "-"
    return f"{a['predicted_cache_read']:,} vs {a['reported_cache_read']:,} ({a['agree']}/{a['requests']} agree)"


def show(meta: dict[str, Any], summaries: dict[str, dict[str, Any]], console: Console | None = None) -> None:
    console = console or styled.console()
    title = f"replay of {Path(meta['source']).name} ({meta['format']}) on {meta['target']}"
    if meta["target"] == "sim":
        title += f", policy {meta['policy']}"
    head = ["", *(name.replace("_", " ") for name in summaries)]
    rows = [[label, *(cell(s) for s in summaries.values())] for label, cell in ROWS]
    console.print(styled.table(head, styled.printable_data(rows), title=styled.printable(title)))
    if meta.get("tokens_estimated"):
        console.print("Some token counts are estimates (~4 bytes a token): no tokenizer loaded.")
    if skipped := meta.get("skipped"):
        some = "1 request had" if skipped == 1 else f"{skipped} requests had"
        console.print(f"{some} no body or no LLM request (a token count, say): not replayed.")
