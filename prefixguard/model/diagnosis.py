"""A provider's own account of a cache miss, set beside ours.

Anthropic (diagnostics.cache_miss_reason) and OpenAI Responses (prompt_cache_diagnostics) can say,
when asked with the id of an earlier response, where a request's prefix stopped matching it. The wire
adapters read that into a `Diagnosis` (no provider field names past them); judge/agreement.py sets
it beside prefixguard's own comparison of the same two requests.
"""

from __future__ import annotations

from typing import Any, NamedTuple

# What a diagnosis says happened (status), and for a miss, where (level; "model" is the model itself).
MISS, NO_MISS, NOT_FOUND, UNAVAILABLE = "miss", "no_miss", "not_found", "unavailable"
LEVELS = ("model", "tools", "system", "messages")


class Diagnosis(NamedTuple):
    status: str  # miss | no_miss | not_found | unavailable
    level: str | None = None  # for a miss: model | tools | system | messages (None: not said)
    label: str = ""  # the provider's own name for it: system_changed, cache_miss, ...
    missed_tokens: int | None = None  # tokens the provider says it could not read
    reusable_tokens: int | None = None  # OpenAI: what the baseline response could have given
    reason: str | None = None  # the provider's free-text reason, where it gives one

    def said(self) -> str:
        """How the console line quotes it: "system_changed (1,234 missed)"."""
        missed = f" ({self.missed_tokens:,} missed)" if self.missed_tokens is not None else ""
        return f"{self.label or self.status}{missed}"


def as_row(diag: Diagnosis | None, verdict: str | None) -> dict[str, Any] | None:
    """The export shape of a stored diagnosis."""
    return None if diag is None else {**diag._asdict(), "agreement": verdict}
