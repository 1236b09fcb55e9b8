"""A provider's own account of a cache miss, set beside ours.

Anthropic (diagnostics.cache_miss_reason) and OpenAI Responses (prompt_cache_diagnostics) can say,
when asked with the id of an earlier response, where a request's prefix stopped matching it. The wire
adapters read that into a `Diagnosis` (no provider field names past them); `agreement` compares it
with prefixguard's own comparison of the same two requests; the engine server builds one the same way
a provider would (`of_comparison`), so demos and tests show agreement end to end.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from prefixguard.compare import Comparison

# What a diagnosis says happened (status), and for a miss, where (level; "model" is the model itself).
MISS, NO_MISS, NOT_FOUND, UNAVAILABLE = "miss", "no_miss", "not_found", "unavailable"
LEVELS = ("model", "tools", "system", "messages")


class Diagnosis(NamedTuple):
    status: str                    # miss | no_miss | not_found | unavailable
    level: str | None = None       # for a miss: model | tools | system | messages (None: not said)
    label: str = ""                # the provider's own name for it: system_changed, cache_miss, ...
    missed_tokens: int | None = None     # tokens the provider says it could not read
    reusable_tokens: int | None = None   # OpenAI: what the baseline response could have given
    reason: str | None = None      # the provider's free-text reason, where it gives one

    def to_json(self) -> str:
        return json.dumps(self._asdict(), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | None) -> Diagnosis | None:
        try:
            data = json.loads(text) if text else None
            if not isinstance(data, dict):
                return None
            return cls(**{k: v for k, v in data.items() if k in cls._fields})  # a row adds "agreement"
        except (ValueError, TypeError):
            return None

    def said(self) -> str:
        """How the console line quotes it: "system_changed (1,234 missed)"."""
        missed = f" ({self.missed_tokens:,} missed)" if self.missed_tokens is not None else ""
        return f"{self.label or self.status}{missed}"


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
        return Diagnosis(NOT_FOUND, label="previous_message_not_found")
    level = our_level(cmp)
    if level is None:
        return Diagnosis(NO_MISS)
    missed = max(cached_before - (cmp.reused_tokens if cmp else 0), 0)
    return Diagnosis(MISS, level, f"{level}_changed", missed, cmp.reused_tokens if cmp else None)


def as_row(diag: Diagnosis | None, verdict: str | None) -> dict[str, Any] | None:
    """The export shape of a stored diagnosis."""
    return None if diag is None else {**diag._asdict(), "agreement": verdict}
