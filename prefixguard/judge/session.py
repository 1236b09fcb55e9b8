"""The one session model: which earlier request a new one continues, and whether it starts a new
conversation. The proxy, lint's sequence mode and the report all ask it; none keeps its own.

- The best earlier request is the one of the same tenant and provider (across its models, so a model
  switch is named; two providers never share a cache) that shares the longest prefix of segments; on
  ties one of the same model, then the most recent. When not even the first segment is shared (a
  timestamp at the very start, tools reordered), it is the recent request with the most segments in
  common wherever they stand, else the latest.
- A request starts a new conversation when it departs from that request only inside its own newest
  message (new content by definition), or at its first message with another first message (not the
  same one re-rendered with a new timestamp) without going on with the earlier one's later messages.
  What it shares (tools, system prompt) is still reused; its first message is simply new.
- How many are kept: `keep` requests per tenant, `tenants` tenants (the least recently active go first).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import Any, NamedTuple

from xxhash import xxh3_64_intdigest

from prefixguard.contracts.providers import provider_for
from prefixguard.judge.classify import messages, same_message
from prefixguard.judge.compare import Comparison, compare
from prefixguard.judge.index import LocalSessions, SessionIndex, TenantView
from prefixguard.model.prompt import TEXT_PIECES, Prompt

KEEP_PER_TENANT = 64  # earlier requests searched by prefix per tenant
KEEP_TENANTS = 256  # tenants (and providers) whose history is kept
RECENT = 32  # requests per tenant searched by content when no prefix is shared

# Causes that a new message explains by itself; a model, setting, tool or breakpoint change is still a break.
NEW_CONTENT_CAUSES = frozenset(
    {"volatile_content", "history_rewritten", "whitespace_changed", "images_changed", "key_order_changed"}
)


class Match(NamedTuple):
    """A request against the best earlier request of its tenant."""

    earlier: Any = None  # what the caller stored with that request (row, flow id, line)
    prompt: Prompt | None = None  # its prompt
    comparison: Comparison | None = None  # compare(earlier, this); None when there is no earlier request
    new_conversation: bool = False  # this request starts a new conversation

    @property
    def broken(self) -> bool:
        """A prefix break: the earlier request's prefix changed, and not by starting a new conversation."""
        return self.comparison is not None and self.comparison.broken and not self.new_conversation


class Seen:
    """A request as the session index keeps it. `parts` (a hash of each segment's key) is read only
    when no earlier request shares a prefix, and by the shared index: made then, from the prompt, and
    kept as 8 bytes a distinct part (a body can hold millions)."""

    __slots__ = ("prompt", "item", "ts", "_parts")

    def __init__(self, *, prompt: Prompt, item: Any, ts: float | None, parts: array[int] | None = None) -> None:
        self.prompt, self.item, self.ts, self._parts = prompt, item, ts, parts

    @property
    def parts(self) -> array[int]:
        """The distinct hashes of the segments' keys, in ascending order."""
        if self._parts is None:
            self._parts = parts_of(self.prompt)
        return self._parts

    def shared(self, other: Seen) -> int:
        """How many distinct parts the two requests have in common, wherever they stand."""
        mine, theirs = self.parts, other.parts
        small, large = (mine, theirs) if len(mine) <= len(theirs) else (theirs, mine)
        return len(set(small).intersection(large))


def parts_of(prompt: Prompt) -> array[int]:
    """Each segment's key, hashed (as small as a fingerprint, so a shared index can hold it): the
    distinct hashes, ascending."""
    return array("Q", sorted({xxh3_64_intdigest(s.key) for s in prompt.segments}))


class Sessions:
    """index: where the requests seen are kept (prefixguard/judge/index.py); in this process by default."""

    def __init__(
        self,
        keep: int = KEEP_PER_TENANT,
        tenants: int = KEEP_TENANTS,
        recent: int = RECENT,
        index: SessionIndex | None = None,
    ) -> None:
        self.keep, self.tenants, self.recent = keep, tenants, recent
        self.index: SessionIndex = index or LocalSessions(keep, tenants, recent)

    def observe(
        self,
        prompt: Prompt,
        item: Any = None,
        tenant: str = "",
        ts: float | None = None,
        scaled: Callable[[Prompt], Prompt] | None = None,
    ) -> Match:
        """Compare with the best earlier request of the tenant, then remember this one under `item`.
        ts: when it was sent (seconds), where known: the contract's TTL then applies to what it reuses.
        scaled: both prompts in the provider's tokens (a learned TokenScale), so that what a break costs is
        counted as the provider bills it; else in ours."""
        key = (tenant, provider_for(prompt.api, prompt.model))  # a cache lives at one provider
        seen = Seen(prompt=prompt, item=item, ts=ts)
        match = Match()
        view = self.index.view(key, prompt.chain, prompt.model)
        best = self._best(view, seen) if view is not None else None
        if best is not None:
            elapsed = ts - best.ts if ts is not None and best.ts is not None else None
            cmp = (
                compare(scaled(best.prompt), scaled(prompt), elapsed=elapsed)
                if scaled
                else compare(best.prompt, prompt, elapsed=elapsed)
            )
            match = Match(
                earlier=best.item,
                prompt=best.prompt,
                comparison=cmp,
                new_conversation=new_conversation(best.prompt, prompt, cmp),
            )
        self.index.add(key, prompt.chain, prompt.model, seen)
        return match

    def add(self, prompt: Prompt, item: Any = None, tenant: str = "", ts: float | None = None) -> None:
        """Remember a prompt the provider holds that no request sent whole (a stored context and what came
        before it), for later requests to continue."""
        key = (tenant, provider_for(prompt.api, prompt.model))
        self.index.add(key, prompt.chain, prompt.model, Seen(prompt=prompt, item=item, ts=ts))

    @staticmethod
    def _best(view: TenantView, seen: Seen) -> Seen | None:
        model = seen.prompt.model
        shared, best = view.longest(any_model=True)
        if best is not None and best.prompt.model != model:
            own_shared, own_best = view.longest(model)
            if own_best is not None and own_shared >= shared:
                best = own_best  # as much in common with a request of its own model: that cache
        if best is None:  # most parts in common; the latest on ties
            recent = view.recent()
            best = max(reversed(recent), key=seen.shared) if recent else None
        return best


def new_conversation(a: Prompt, b: Prompt, cmp: Comparison) -> bool:
    """Whether B, diverging from A as `cmp` says, starts a new conversation rather than breaking A's prefix."""
    d = cmp.divergence
    if not cmp.broken or d is None or d.level != "messages" or d.segment_index >= len(b.segments):
        return False
    if not set(cmp.causes) <= NEW_CONTENT_CAUSES:
        return False
    at = b.segments[d.segment_index].message_index
    newest = max(
        (s.message_index for s in b.segments if s.level == "messages" and s.message_index is not None), default=None
    )
    if at == newest:
        return not _edited_text(a, b, d.segment_index)
    ma, mb = messages(a, "canon", count=2), messages(b, "canon", count=2)  # the first two say it
    if not ma or not mb or at != mb[0][0] or same_message(ma[0][1], mb[0][1]):
        return False
    return len(ma) == 1 or len(mb) == 1 or ma[1][1] != mb[1][1]


def _edited_text(a: Prompt, b: Prompt, at: int) -> bool:
    """Whether B's part `at` is a piece of a text prompt whose later pieces are mostly A's, wherever they stand:
    text put in or changed inside A's, not a new text."""
    if b.segments[at].pointer != TEXT_PIECES:
        return False
    later = [s.key for s in b.segments[at + 1 :]]
    theirs = {s.key for s in a.segments}
    return 2 * sum(k in theirs for k in later) > len(later) > 0
