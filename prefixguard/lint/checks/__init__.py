"""Single-request rules: each reads one Prompt (through a Context) and yields Hits.

A check knows prompt structure (segments, breakpoints, token counts), not provider field names; the
numbers it compares against (minimums, breakpoint limits, lookback, TTLs, routing prefix) come from
rules/providers.toml. Which rules run for a prompt is decided by the catalog (`providers` of each rule).

A finding needs evidence. A value that merely looks volatile (a date, a UUID) is reported only when the
request itself says it varies (a clock value or a per-request id in the system prompt, which apps render
for every request: rules/volatile.toml `varies`) or, in sequence mode, when it changed since the earlier
request of the same session (`Context.earlier`). A block byte-identical to the earlier request's is never
called volatile, and constants inside tool definitions never are.

The rules live by family: volatile.py (volatile content), order.py (order and serialization),
breakpoints.py (the breakpoints themselves), limits.py (the provider's limits); base.py holds the
registry they fill as they are imported.
"""

from __future__ import annotations

# imported for their @check registrations
from prefixguard.lint.checks import breakpoints, limits, order, volatile  # noqa: F401
from prefixguard.lint.checks.base import CHECKS

__all__ = ["CHECKS", "VALIDITY"]

# Rules about what the API rejects: the only ones that apply to a token-counting request (nothing cached).
VALIDITY = frozenset({"invalid-breakpoint", "too-many-breakpoints", "ttl-order"})
