"""Our token counts in the provider's tokens.

We count with cl100k (or an estimate); a provider counts with its own tokenizer, and may add tokens the
body does not show: definitions of its server tools, a gateway's system text. From the latest request of
a model whose usage reported its prompt total P for our count C, the ratio P / C is taken as far as a
tokenizer can explain it (MAX_RATIO either way); what is left over is tokens unseen, put in front,
since every read starts there. Images and documents are costed by the provider's formula already, so
the fit is of the text alone. Later prompts of that model are scaled by it before a contract judges
them, so minimums and expected reads are in the provider's tokens. The proxy and replay's sim target
both learn it this way.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from prefixguard.index import LocalTable, Table
from prefixguard.prompt import Prompt
from prefixguard.usage import Usage

MAX_RATIO = 1.5     # tokenizers differ by tens of percent, not more: beyond it, tokens are unseen


@dataclass(frozen=True, slots=True)
class _Fit:
    ratio: float        # the provider's text tokens per one of ours
    unseen: int         # tokens it counts that the body does not show


FIT_LIFETIME = 86_400.0  # a fit kept in a shared index outlives a day of silence from its model: refit then


class TokenScale:
    """fits: where the fit of each model is kept (a fleet's shared index, prefixguard/index.py), else here."""

    def __init__(self, fits: Table | None = None) -> None:
        self._fit: Table = fits if fits is not None else LocalTable(1 << 16)   # per model

    def learn(self, prompt: Prompt, usage: Usage) -> None:
        """Fit the scale to a request whose usage reported its prompt total."""
        media = sum(s.media_tokens for s in prompt.segments)
        ours, theirs = prompt.total_tokens - media, usage.prompt_total - media
        if ours <= 0 or theirs <= 0:
            return
        ratio = min(MAX_RATIO, max(1 / MAX_RATIO, theirs / ours))
        self._fit.put(prompt.model, _Fit(ratio, max(0, round(theirs - ratio * ours))), FIT_LIFETIME)
        self._fit.save()

    def scaled(self, prompt: Prompt) -> Prompt:
        """The prompt with segment token counts in the provider's tokens (approximately)."""
        self._fit.load(lambda: [prompt.model], 0.0)  # fits count their lifetime from 0: they need no clock
        fit = self._fit.get(prompt.model)
        if fit is None or not prompt.segments:
            return prompt
        segments = [replace(s, tokens=round((s.tokens - s.media_tokens) * fit.ratio) + s.media_tokens)
                    for s in prompt.segments]
        if fit.unseen:
            segments[0] = replace(segments[0], tokens=segments[0].tokens + fit.unseen)
        return replace(prompt, segments=segments)
