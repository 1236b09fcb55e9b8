"""Our token counts in the provider's tokens.

We count with cl100k (or an estimate); a provider counts with its own tokenizer (a ratio), and adds
tokens the body does not show (an offset): definitions of its server tools, a gateway's system text.
A provider's prompt total P for our count C is taken as P = ratio * C + offset, per model: the ratio
from two reported requests of different lengths (a session grows, so the second response gives it), or
from one alone as far as a tokenizer can explain it (MAX_RATIO); the offset is the rest, in front.
Later prompts are scaled by it before a contract judges them, so minimums and expected reads are in the
provider's tokens. The proxy and replay's sim target both learn it this way.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from prefixguard.prompt import Prompt
from prefixguard.usage import Usage

MAX_RATIO = 1.5     # tokenizers differ by tens of percent, not more: a wider fit is noise
MIN_SPREAD = 0.1    # two prompts whose counts differ by less than this fraction give no ratio


@dataclass(slots=True)
class _Fit:
    ours: int            # our count of the latest reported prompt
    theirs: int          # the provider's total for it
    ratio: float = 1.0


class TokenScale:
    def __init__(self) -> None:
        self._fit: dict[str | None, _Fit] = {}   # per model

    def learn(self, prompt: Prompt, usage: Usage) -> None:
        """Fit the scale to a request whose usage reported its prompt total. Images and documents are
        costed by the provider's formula already: the fit is of the text alone."""
        media = sum(s.media_tokens for s in prompt.segments)
        ours, theirs = prompt.total_tokens - media, usage.prompt_total - media
        if ours <= 0 or theirs <= 0:
            return
        last = self._fit.get(prompt.model)
        if last and abs(ours - last.ours) >= MIN_SPREAD * max(ours, last.ours):
            ratio = (theirs - last.theirs) / (ours - last.ours)
        else:  # one report: the tokenizer explains what a tokenizer can, the rest is tokens unseen
            ratio = theirs / ours
        self._fit[prompt.model] = _Fit(ours, theirs, min(MAX_RATIO, max(1 / MAX_RATIO, ratio)))

    def scaled(self, prompt: Prompt) -> Prompt:
        """The prompt with segment token counts in the provider's tokens (approximately); the tokens it
        adds unseen go to the first segment, since every read starts there."""
        fit = self._fit.get(prompt.model)
        if fit is None or not prompt.segments:
            return prompt
        offset = fit.theirs - fit.ratio * fit.ours
        ratio = fit.ratio if offset >= 0 else fit.theirs / fit.ours  # we count more than it does: scale down
        segments = [replace(s, tokens=round((s.tokens - s.media_tokens) * ratio) + s.media_tokens)
                    for s in prompt.segments]
        if offset > 0:
            segments[0] = replace(segments[0], tokens=segments[0].tokens + round(offset))
        return replace(prompt, segments=segments)
