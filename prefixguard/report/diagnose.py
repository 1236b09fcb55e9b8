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

from typing import Any

from prefixguard.contracts.providers import model_contract
from prefixguard.model import tokens
from prefixguard.report.breaks import by_cause, causes_finding
from prefixguard.report.cache_fields import fields_of
from prefixguard.report.findings import Diagnosis
from prefixguard.report.headline import headline, listed, notes
from prefixguard.report.infra import infra_of, unanalysed
from prefixguard.report.money import money
from prefixguard.report.timeline import inputs_of, points_of, split_of, windows_of
from prefixguard.utils.errors import InputError


def diagnose(rows: list[dict[str, Any]], source: str = "") -> Diagnosis:
    """rows: capture rows in the export shape (prefixguard.capture.record.Record.row), oldest first."""
    unread = unanalysed(rows)
    # rows the proxy wrote when it forwarded a request unread (no response is awaited for them): named in
    # the infrastructure step, no request of the analysis
    rows = [r for r in rows if not (r.get("api") is None and r.get("status") is None and r.get("analysed") is False)]
    if not rows:
        raise InputError("the capture holds no requests", source)
    t0 = rows[0].get("ts") or 0.0
    span = (rows[-1].get("ts") or 0.0) - t0
    windows = windows_of(rows, t0, span)
    parents: dict[int, dict[str, Any]] = {}
    causes = by_cause(rows, parents)
    split = split_of(windows)
    diag = Diagnosis(
        source=source,
        requests=len(rows),
        span_s=span,
        windows=windows,
        split=split,
        inputs=inputs_of(rows, windows),
        causes=causes,
        infra=infra_of(rows, unread),
        fields=fields_of(rows),
        points=points_of(rows, split["mode"]),
    )
    diag.findings = [
        diag.split["finding"],
        diag.inputs["finding"],
        causes_finding(diag.causes),
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
