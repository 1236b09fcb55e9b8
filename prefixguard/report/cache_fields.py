"""Step 5 of the diagnosis: the provider's cache fields against what its contract predicts, and the
provider's own miss diagnostics beside ours."""

from __future__ import annotations

from collections import Counter
from typing import Any

from prefixguard.judge.verdict import VerdictName
from prefixguard.report.rows import succeeded, usage

# Verdicts of a request that read what its contract predicted (step 5's "as expected").
AS_EXPECTED = (VerdictName.HIT, VerdictName.COLD, VerdictName.BELOW_MINIMUM, VerdictName.NO_BREAKPOINT)


def fields_of(rows: list[dict[str, Any]]) -> dict[str, Any]:
    checked = [r for r in rows if usage(r).get("reported") and r.get("expected_cached") is not None]
    not_reported = sum(1 for r in rows if succeeded(r) and not usage(r).get("reported"))
    predicted = sum(r["expected_cached"] for r in checked)
    reported = sum(usage(r).get("cache_read") or 0 for r in checked)
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
    gaps = sorted(checked, key=lambda r: -abs(r["expected_cached"] - (usage(r).get("cache_read") or 0)))
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
                "reported": usage(r).get("cache_read") or 0,
                "verdict": r.get("verdict"),
            }
            for r in gaps[:5]
            if r["expected_cached"] != (usage(r).get("cache_read") or 0)
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
