"""What the single-request rules read: one Prompt through a Context (breakpoints, the prefix a later
request should reuse, volatile values and the evidence that they vary), each computed once.

A value that merely looks volatile (a date, a UUID) counts only with evidence (see checks.py)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cached_property, lru_cache
from itertools import accumulate
from typing import Any, NamedTuple

from prefixguard.contracts.providers import Contract, model_contract, provider_for, providers
from prefixguard.lint.finding import tokens_text
from prefixguard.model.breakpoints import breakpoints as policy_breakpoints
from prefixguard.model.prompt import Prompt, Segment
from prefixguard.model.volatile import VolatileMatch, find_volatile, id_patterns
from prefixguard.wire.fields import NOT_TEXT_KEYS, is_id
from prefixguard.wire.jsonspan import join_pointer

# Content the model or a tool produced once and the app resends as it was: a timestamp in it is history,
# not something re-rendered per request, so volatile-in-prefix looks only at what the app writes.
PRODUCED_KINDS = ("tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use")


PRODUCED_ROLES = ("assistant", "tool")


class Breakpoint(NamedTuple):
    segment: int  # index of the segment it sits on (the automatic one: the block the API puts it on)
    ttl: str
    pointer: str  # where it is written: the block, or the top-level marker for the automatic one
    auto: bool = False


class Volatile(NamedTuple):
    pointer: str  # the string value holding the match
    start: int  # character span of the match in that string
    end: int
    name: str  # pattern name
    text: str
    at: float  # where in the segment's text the match starts, 0..1 (for token positions)
    varies: str = ""  # the pattern's own evidence: "clock" | "request" | "user" | "" (a shape only)
    changed: bool = False  # sequence mode: the value differs from the earlier request's at this place


class Context:
    """One prompt with what several checks need, computed once."""

    def __init__(
        self,
        prompt: Prompt,
        extra_patterns: Mapping[str, str] | None = None,
        earlier: Prompt | None = None,
        earlier_line: int | None = None,
        new_conversation: bool = False,
    ) -> None:
        self.prompt = prompt
        # Sequence mode: the session's best earlier request (prefixguard/judge/session.py), for evidence of change.
        self.earlier, self.earlier_line, self.new_conversation = earlier, earlier_line, new_conversation
        self.segments = prompt.segments
        self.provider = provider_for(prompt.api, prompt.model)
        self.limits: Contract = providers()[self.provider]
        # written at breakpoints and read by lookback (Anthropic, and Bedrock with its own numbers)
        self.breakpointed = self.limits.breakpointed
        self.contract = model_contract(prompt.api, prompt.model)
        self._extra = tuple(sorted((extra_patterns or {}).items()))  # hashable: the key of _find's cache
        # blocks no breakpoint may sit on, and that the automatic breakpoint walks back over
        self.ineligible = self.limits.breakpoint_ineligible_kinds
        self.before = list(accumulate((s.tokens for s in self.segments), initial=0))  # tokens before i
        self._volatile: dict[int, list[Volatile]] = {}

    @property
    def total(self) -> int:
        return self.before[-1]

    def tokens(self, n: int) -> str:
        """'N tokens', said to be an estimate when no tokenizer counted them."""
        return tokens_text(n, self.prompt.tokens_estimated)

    @cached_property
    def explicit(self) -> list[Breakpoint]:
        return [
            Breakpoint(segment=i, ttl=s.breakpoint, pointer=s.pointer)
            for i, s in enumerate(self.segments)
            if s.breakpoint
        ]

    @cached_property
    def _points(self) -> dict[int, str]:
        """The policy's breakpoints (prefixguard/judge/policies/): segment index -> TTL, the automatic one included."""
        return policy_breakpoints(self.prompt, self.ineligible)

    @cached_property
    def auto(self) -> Breakpoint | None:
        """The top-level automatic breakpoint, on the block the policy puts it: the last that can carry one."""
        if not self.prompt.auto_breakpoint or not self._points:
            return None
        return Breakpoint(
            segment=max(self._points), ttl=self.prompt.auto_breakpoint, pointer="/cache_control", auto=True
        )

    @cached_property
    def breakpoints(self) -> list[Breakpoint]:
        """Distinct cache positions in prefix order (an automatic one on an explicit one's block is one)."""
        explicit = {b.segment: b for b in self.explicit}
        return [
            explicit.get(i) or Breakpoint(segment=i, ttl=ttl, pointer="/cache_control", auto=True)
            for i, ttl in sorted(self._points.items())
        ]

    @cached_property
    def last_message_start(self) -> int:
        """Index of the first segment of the latest message (len(segments) if there is none)."""
        last = max((s.message_index for s in self.segments if s.message_index is not None), default=None)
        return next(
            (i for i, s in enumerate(self.segments) if last is not None and s.message_index == last), len(self.segments)
        )

    @cached_property
    def previous_end(self) -> int | None:
        """Index of the last block the previous request of this conversation sent: the end of the latest
        user message that an assistant reply follows (None on a first turn)."""
        end = last_user = None
        for i, s in enumerate(self.segments):
            if s.role == "user":
                last_user = i
            elif s.role == "assistant" and last_user is not None:
                end = last_user
        return end

    @cached_property
    def prefix_end(self) -> int:
        """Segments [0, prefix_end) form the prefix a later request of this conversation should reuse:
        up to the last breakpoint (Anthropic) and in every case before the latest message."""
        if self.breakpointed:
            end = self.breakpoints[-1].segment + 1 if self.breakpoints else 0
            return min(end, self.last_message_start)
        return self.last_message_start

    def volatile(self, i: int) -> list[Volatile]:
        """Everything in segment i that looks volatile, evidence or not."""
        if i not in self._volatile:
            self._volatile[i] = list(_scan(self.segments[i], self._extra))
        return self._volatile[i]

    @cached_property
    def _earlier_segments(self) -> dict[str, Segment]:
        return {s.pointer: s for s in self.earlier.segments} if self.earlier is not None else {}

    def earlier_segment(self, seg: Segment) -> Segment | None:
        """The earlier request's block at the same place, when it is the same conversation's block."""
        if self.earlier is None or (self.new_conversation and seg.level == "messages"):
            return None
        return self._earlier_segments.get(seg.pointer)

    def varying(self, i: int) -> list[Volatile]:
        """The volatile values in segment i with evidence that they vary. Sequence mode: those that changed
        since the earlier request (none when the block is byte-identical). Otherwise those the pattern
        itself vouches for (a clock, a per-request id) in the system prompt (system and developer
        messages included)."""
        seg = self.segments[i]
        if not _written_by_app(seg):
            return []
        before = self.earlier_segment(seg)
        if before is not None:
            if before.key == seg.key:
                return []
            old = dict(_strings(before.value, before.pointer))
            return [v._replace(changed=True) for v in self.volatile(i) if v.text not in old.get(v.pointer, "")]
        if seg.level != "system":
            # A tool's documentation holds constants (example times, model ids); message history is sent
            # again as it was written (a time in an earlier message is when it was said). The system
            # prompt is what apps render anew for every request.
            return []
        return [v for v in self.volatile(i) if v.varies]

    def ids(self, i: int) -> list[Volatile]:
        """The ids (a UUID, a session id, a long hex id) in segment i of the system prompt that nothing
        says vary: those `varying` vouches for are volatile-in-prefix's. In sequence mode only where the
        session's earlier request had no such block (its first request): an id the earlier request sent
        too is said once, and one that changed is volatile-in-prefix's."""
        seg = self.segments[i]
        if seg.level != "system" or not _written_by_app(seg) or self.earlier_segment(seg) is not None:
            return []
        names = id_patterns()
        return [v for v in self.volatile(i) if v.name in names and not v.varies]


def block_text(seg: Segment) -> str | None:
    """The text of a text block (None for other kinds)."""
    if seg.kind != "text":
        return None
    return seg.value if isinstance(seg.value, str) else seg.value.get("text") if isinstance(seg.value, dict) else None


def _written_by_app(seg: Segment) -> bool:
    return seg.kind not in PRODUCED_KINDS and seg.role not in PRODUCED_ROLES


def _strings(value: Any, pointer: str) -> Iterator[tuple[str, str]]:
    """(pointer, text) of the string leaves a provider renders as prompt text. Ids and encoded payloads
    (base64 images, signatures) are skipped: they look random but stay the same for the same item."""
    if isinstance(value, str):
        if not value.startswith("data:"):
            yield pointer, value
    elif isinstance(value, dict):
        for k, v in value.items():
            if not (is_id(k) or k in NOT_TEXT_KEYS):
                yield from _strings(v, join_pointer(pointer, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, f"{pointer}/{i}")


@lru_cache(maxsize=8192)
def _find(text: str, extra: tuple[tuple[str, str], ...]) -> tuple[VolatileMatch, ...]:
    """Cached: in a capture each request repeats the history of the one before, string for string."""
    return tuple(find_volatile(text, dict(extra)))


def _scan(seg: Segment, extra: tuple[tuple[str, str], ...]) -> Iterator[Volatile]:
    leaves = list(_strings(seg.value, seg.pointer))
    total = sum(len(t) for _, t in leaves) or 1
    seen = 0
    for pointer, text in leaves:
        for m in _find(text, extra):
            yield Volatile(
                pointer=pointer,
                start=m.start,
                end=m.end,
                name=m.name,
                text=m.text,
                at=(seen + m.start) / total,
                varies=m.varies,
            )
        seen += len(text)
