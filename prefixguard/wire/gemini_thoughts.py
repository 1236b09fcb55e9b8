"""Gemini's thought signatures: the thoughts a signature sent back holds, which Gemini 3 bills as prompt tokens
(rules/providers.toml `thought_signature`), estimated by the signature's size. Where the answer that made it was seen
(the proxy reads every answer; a recording's are read with it), prefixguard/judge/stored.py counts what that answer
billed instead."""

from __future__ import annotations

from prefixguard.contracts.providers import thought_signature


def held(sign: str | None, model: str | None) -> int:
    """The thoughts a signature holds by its size, where the model's row bills them (0 elsewhere, or for no
    signature)."""
    rule = thought_signature("gemini", model)
    if rule is None or sign is None:
        return 0
    return max(0, round((len(sign) - rule.chars_per_item) / rule.chars_per_token))
