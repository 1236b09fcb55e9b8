"""Our token counts in the provider's tokens.

We count with cl100k (or an estimate); a provider counts with its own tokenizer, and may add tokens the
body does not show: definitions of its server tools, a gateway's system text, a tool-choice instruction,
a server tool's results. From the latest request of a model whose usage reported its prompt total P for
our count C, the ratio P / C is taken as far as a tokenizer can explain it (MAX_RATIO either way); what
is left over is tokens unseen.

Where the unseen tokens sit, the provider's own figures tell. What a request read plus what it wrote
ends where a read can end (on a breakpoint; for an automatic prefix cache, only a read past all of our
tokens says anything): what it holds beyond our scaled tokens up to there is unseen text IN FRONT
(hidden tool definitions, read with the prefix); the rest sits after every read (a tool-choice
instruction, a server tool's results) and is counted on the last part, where no later request reads
it. Until a read says, all of it is put in front, since every read starts there.

Images and documents are costed by the provider's formula already, so the fit is of the text alone.
Later prompts of that model are scaled by it before a contract judges them, so minimums and expected
reads are in the provider's tokens. The proxy and replay's sim target both learn it this way.
"""
from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate
from typing import NamedTuple

from prefixguard.index import LocalTable, Table
from prefixguard.prompt import Prompt, Segment
from prefixguard.usage import Usage

MAX_RATIO = 1.5     # tokenizers differ by tens of percent, not more: beyond it, tokens are unseen


class _Fit(NamedTuple):
    ratio: float        # the provider's text tokens per one of ours
    unseen: int         # tokens it counts that the body does not show
    front: int = -1     # of them, those in front of the prefix, as a read showed (-1: no read has shown it)


FIT_LIFETIME = 86_400.0  # a fit kept in a shared index outlives a day of silence from its model: refit then


class TokenScale:
    """fits: where the fit of each model is kept (a fleet's shared index, prefixguard/index.py), else here."""

    def __init__(self, fits: Table | None = None) -> None:
        self._fit: Table = fits if fits is not None else LocalTable(1 << 16)   # per model

    def learn(self, prompt: Prompt, usage: Usage, read_ends: Sequence[int] = ()) -> None:
        """Fit the scale to a request whose usage reported its prompt total. read_ends: the segments a
        read of this prompt could end on (the policy's breakpoints, or its last segment)."""
        media = sum(s.media_tokens for s in prompt.segments)
        ours, theirs = prompt.total_tokens - media, usage.prompt_total - media
        if ours <= 0 or theirs <= 0:
            return
        ratio = min(MAX_RATIO, max(1 / MAX_RATIO, theirs / ours))
        unseen = max(0, round(theirs - ratio * ours))
        before = self._fit.get(prompt.model)
        front = _front(prompt, ratio, usage.cache_read + usage.cache_write, read_ends)
        if front is None:  # this read says nothing of where they sit: as the last read said
            front = before.front if isinstance(before, _Fit) else -1
        self._fit.put(prompt.model, _Fit(ratio, unseen, min(front, unseen)), FIT_LIFETIME)
        self._fit.save()

    def scaled(self, prompt: Prompt) -> Prompt:
        """The prompt with segment token counts in the provider's tokens (approximately)."""
        self._fit.load(lambda: [prompt.model], 0.0)  # fits count their lifetime from 0: they need no clock
        fit = self._fit.get(prompt.model)
        if fit is None or not prompt.segments:
            return prompt
        segments = [s.with_tokens(_in_theirs(s, fit.ratio)) for s in prompt.segments]
        front = fit.unseen if fit.front < 0 else fit.front
        if front:
            segments[0] = segments[0].with_tokens(segments[0].tokens + front)
        if fit.unseen > front:
            segments[-1] = segments[-1].with_tokens(segments[-1].tokens + fit.unseen - front)
        return prompt.with_segments(segments)


def _in_theirs(seg: Segment, ratio: float) -> int:
    """A part's tokens in the provider's: its text scaled, its media as costed."""
    return round((seg.tokens - seg.media_tokens) * ratio) + seg.media_tokens


def _front(prompt: Prompt, ratio: float, held: int, read_ends: Sequence[int]) -> int | None:
    """Unseen tokens in front, as the cache this request left shows (`held`: what it read plus what it
    wrote, which ends on the furthest breakpoint written): what that holds past our scaled tokens up to
    the furthest place it can end. None when it shows nothing (nothing held; or it stops short of every
    place a read can end, so it ended early for its own reasons)."""
    if held <= 0:
        return None
    cum = list(accumulate(_in_theirs(s, ratio) for s in prompt.segments))
    reached = [cum[i] for i in read_ends if 0 <= i < len(cum) and cum[i] <= held]
    return held - max(reached) if reached else None
