"""Judgement: does a request reuse what an earlier one cached, and if not, why and at what cost.
`compare` finds where two prompts part, `classify` names the parts, the policies apply a provider's
contract (minimums, breakpoints, TTLs), `scale` turns our token counts into the provider's, `session`
picks the earlier request a new one continues, and `verdict` is the one place a verdict is made. What
they remember between requests lives in `index` (this process) or `redis_index` (a fleet)."""
