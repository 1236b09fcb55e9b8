"""A provider's own account of a miss (model/diagnosis.py) set beside ours: do both say the prefix broke,
and at the same level? The engine server builds a diagnosis the same way a provider would
(`of_comparison`), so demos and tests show agreement end to end."""

from __future__ import annotations

from prefixguard.judge.compare import Comparison
from prefixguard.model.diagnosis import MISS, NO_MISS, NOT_FOUND, UNAVAILABLE, Diagnosis


def our_level(cmp: Comparison | None) -> str | None:
    """Where our comparison says the prefix broke: model, tools, system, messages; None when it did not."""
    if cmp is None or not cmp.broken:
        return None
    if "model_changed" in cmp.causes:
        return "model"
    return cmp.divergence.level if cmp.divergence else None


# Our finding of a break whose place is not known (an agent's log holds usage, no prompt to compare).
UNPLACED = ""


def agreement(diag: Diagnosis | None, cmp: Comparison | None) -> str | None:
    """agree | disagree | only_provider | only_us | both_clear; None when the provider made no comparison
    (not asked, the earlier response not found, unavailable): nothing to set beside ours."""
    return agreement_at(diag, our_level(cmp))


def agreement_at(diag: Diagnosis | None, ours: str | None) -> str | None:
    """As `agreement`, with our finding given as the level where the prefix broke (None: no break,
    UNPLACED: a break found without a place)."""
    if diag is None or diag.status in (NOT_FOUND, UNAVAILABLE):
        return None
    if diag.status != MISS:
        return "only_us" if ours is not None else "both_clear"
    if ours is None:
        return "only_provider"
    if diag.level is None or ours == UNPLACED:  # a miss without a place on either side: the fact agrees
        return "agree"
    return "agree" if diag.level == ours else "disagree"


def of_comparison(cmp: Comparison | None, found: bool, cached_before: int) -> Diagnosis:
    """What a provider would report for a request compared with an earlier one: `found` whether the
    earlier one is known; `cached_before` the tokens the earlier request left reusable."""
    if not found:
        return Diagnosis(status=NOT_FOUND, label="previous_message_not_found")
    level = our_level(cmp)
    if level is None:
        return Diagnosis(status=NO_MISS)
    missed = max(cached_before - (cmp.reused_tokens if cmp else 0), 0)
    return Diagnosis(
        status=MISS,
        level=level,
        label=f"{level}_changed",
        missed_tokens=missed,
        reusable_tokens=cmp.reused_tokens if cmp else None,
    )
