"""Sequence mode: each request of a capture against its best earlier match.

The best earlier match is the request that shares the longest prefix of segments (PrefixIndex over the
fingerprint chains). When not even the first segment is shared (a timestamp at the very start, tools
reordered), it is the recent request with the most segments in common, wherever they stand. A break is
reported under the rule of its first cause (rules/catalog.toml, family PG5), with the tokens that must be
prefilled again and what that costs. A request that starts a new conversation is not a break: what it
shares (tools, system prompt) is reused, and its first message is simply new.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Collection
from dataclasses import dataclass

from prefixguard.compare import DESCRIPTIONS, Comparison, compare, messages
from prefixguard.fingerprint import PrefixIndex
from prefixguard.lint import catalog
from prefixguard.lint.finding import Hit, tokens_text
from prefixguard.prompt import Prompt
from prefixguard.volatile import find_volatile

RECENT = 32   # requests per tenant searched by content when no prefix is shared


@dataclass(slots=True)
class Seen:
    prompt: Prompt
    line: int
    parts: frozenset[bytes]   # fingerprint key of each segment


class Sequence:
    def __init__(self, codes: Collection[str]) -> None:
        self.rules = {cause: r for cause, r in catalog.by_cause().items() if r.code in codes}
        self._index: dict[str, PrefixIndex] = {}   # one per tenant: captures of several apps stay apart
        self._recent: dict[str, deque[Seen]] = {}

    def add(self, prompt: Prompt, line: int, tenant: str = "") -> list[Hit]:
        """Compare with the best earlier request of the same tenant, then remember this one."""
        index = self._index.setdefault(tenant, PrefixIndex())
        recent = self._recent.setdefault(tenant, deque(maxlen=RECENT))
        seen = Seen(prompt, line, frozenset(s.key for s in prompt.segments))
        hits: list[Hit] = []
        if self.rules and recent:
            _, earlier = index.longest(prompt.chain)
            if earlier is None:  # most parts in common; the latest on ties
                earlier = max(reversed(recent), key=lambda e: len(e.parts & seen.parts))
            result = compare(earlier.prompt, prompt)
            if result.broken and not _new_conversation(earlier.prompt, prompt, result):
                hit = self._hit(result, prompt, earlier.line)
                if hit is not None:
                    hits.append(hit)
        index.add(prompt.chain, seen)
        recent.append(seen)
        return hits

    def _hit(self, r: Comparison, prompt: Prompt, earlier: int) -> Hit | None:
        rule = self.rules.get(r.causes[0])
        if rule is None or r.divergence is None:
            return None
        d = r.divergence
        what = DESCRIPTIONS[r.causes[0]] + (f" ({r.setting})" if r.setting else "")
        tokens = tokens_text(r.reprefill_tokens, r.tokens_estimated)
        message = (f"prefix break against line {earlier}: {what}; {tokens} prefilled again, "
                   f"${r.cost_usd:.6f} at {r.model or 'unknown model'} prices")
        if r.detail:
            message += f" [{r.detail}]"
        char = len(prompt.text.encode("utf-8")[:d.byte_offset].decode("utf-8", "ignore"))
        data = {"earlier_line": earlier, "causes": r.causes, "level": d.level, "reused_tokens": r.reused_tokens,
                "reprefill_tokens": r.reprefill_tokens, "cost_usd": r.cost_usd, "before": r.before,
                "after": r.after, "detail": r.detail, "tokens_estimated": r.tokens_estimated}
        return Hit(rule.name, d.pointer, message, key=",".join(r.causes), offset=char, fix=r.fix or None, data=data)


def _new_conversation(a: Prompt, b: Prompt, r: Comparison) -> bool:
    """B diverges at its first message, which is another message than A's first (not the same one
    re-rendered with a new timestamp), and B does not go on with A's later messages: B starts a new
    conversation (a single-turn request with the same tools and system prompt is one too)."""
    d = r.divergence
    if d is None or d.level != "messages" or r.causes[0] not in ("history_rewritten", "volatile_content"):
        return False
    ma, mb = messages(a, "canon"), messages(b, "canon")
    at = b.segments[d.segment_index].message_index if d.segment_index < len(b.segments) else None
    if not ma or not mb or at != mb[0][0] or _masked(ma[0][1]) == _masked(mb[0][1]):
        return False
    return len(ma) == 1 or len(mb) == 1 or ma[1][1] != mb[1][1]


def _masked(parts: tuple[bytes, ...]) -> str:
    """A message's canon with its volatile values blanked: equal for the same message re-rendered."""
    text = b"".join(parts).decode("utf-8", "replace")
    for m in reversed(find_volatile(text)):
        text = text[:m.start] + "\x00" + text[m.end:]
    return text
