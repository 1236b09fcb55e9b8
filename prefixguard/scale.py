"""Our token counts in the provider's tokens.

We count with cl100k (or an estimate); a provider counts with its own tokenizer and adds its template's
tokens. Its reported prompt total for a request, over our count of the same request, gives a ratio per
model; later prompts of that model are scaled by it before a contract judges them, so minimums and
expected reads are in the provider's tokens. The proxy and replay's sim target both learn it this way.
"""
from __future__ import annotations

from dataclasses import replace

from prefixguard.prompt import Prompt
from prefixguard.usage import Usage

MAX_RATIO = 2.0   # bound on the ratio: one wrong report must not skew every later prediction


class TokenScale:
    def __init__(self) -> None:
        self._ratio: dict[str | None, float] = {}   # model -> provider prompt tokens / our count

    def learn(self, prompt: Prompt, usage: Usage) -> None:
        """Take the ratio from a request whose usage reported its prompt total."""
        if usage.prompt_total and prompt.total_tokens:
            self._ratio[prompt.model] = min(MAX_RATIO, max(1 / MAX_RATIO, usage.prompt_total / prompt.total_tokens))

    def scaled(self, prompt: Prompt) -> Prompt:
        """The prompt with segment token counts in the provider's tokens (approximately)."""
        ratio = self._ratio.get(prompt.model, 1.0)
        if ratio == 1.0:
            return prompt
        return replace(prompt, segments=[replace(s, tokens=round(s.tokens * ratio)) for s in prompt.segments])
