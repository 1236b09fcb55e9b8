"""Sequence mode: each request of a capture against its best earlier match, as the core's session
model (prefixguard/judge/session.py) finds it. A break is reported under the rule of its first cause
(rules/catalog.toml, family PG5), with the tokens that must be prefilled again and what that costs. A
request that starts a new conversation is not a break: what it shares (tools, system prompt) is reused,
and its first message is simply new.
"""

from __future__ import annotations

from collections.abc import Collection

from prefixguard.contracts.providers import model_contract
from prefixguard.judge.causes import DESCRIPTIONS
from prefixguard.judge.compare import Comparison
from prefixguard.judge.session import Match, Sessions
from prefixguard.lint import catalog
from prefixguard.lint.finding import Hit, tokens_text
from prefixguard.model.prompt import Prompt


class SequenceMode:
    def __init__(self, codes: Collection[str]) -> None:
        self.rules = {cause: r for cause, r in catalog.by_cause().items() if r.code in codes}
        self._sessions = Sessions()

    def add(self, prompt: Prompt, line: int, tenant: str = "") -> tuple[Match | None, list[Hit]]:
        """Compare with the best earlier request of the same tenant, then remember this one. Returns the
        match (for the single-request rules' evidence of change) and the break, if any. A token-counting
        request is not part of the conversation: neither compared nor remembered."""
        if prompt.counts_only:
            return None, []
        match = self._sessions.observe(prompt, line, tenant)
        if not self.rules or not match.broken or match.comparison is None:
            return match, []
        hit = self._hit(match.comparison, prompt, match.earlier)
        return match, [hit] if hit is not None else []

    def _hit(self, r: Comparison, prompt: Prompt, earlier: int) -> Hit | None:
        rule = self.rules.get(r.causes[0])
        if rule is None or r.divergence is None:
            return None
        d = r.divergence
        what = DESCRIPTIONS[r.causes[0]] + (f" ({r.setting})" if r.setting else "")
        tokens = tokens_text(r.reprefill_tokens, r.tokens_estimated)
        message = (
            f"prefix break against line {earlier}: {what}; {tokens} prefilled again, "
            f"${r.cost_usd:.6f} at {r.model or 'unknown model'} prices "
            f"({model_contract(prompt.api, r.model).prices})"
        )
        if r.detail:
            message += f" [{r.detail}]"
        char = len(prompt.text.encode("utf-8")[: d.byte_offset].decode("utf-8", "ignore"))
        data = {
            "earlier_line": earlier,
            "causes": r.causes,
            "level": d.level,
            "reused_tokens": r.reused_tokens,
            "reprefill_tokens": r.reprefill_tokens,
            "cost_usd": r.cost_usd,
            "before": r.before,
            "after": r.after,
            "detail": r.detail,
            "tokens_estimated": r.tokens_estimated,
        }
        return Hit(
            rule=rule.name,
            pointer=d.pointer,
            message=message,
            key=",".join(r.causes),
            offset=char,
            fix=r.fix or None,
            data=data,
        )
