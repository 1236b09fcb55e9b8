"""Gemini's thought signatures: the thoughts a signature sent back holds, which Gemini 3 bills as prompt tokens
(rules/providers.toml `thought_signature`). As the answer that made it billed them where that answer was seen (the
proxy reads every Gemini answer; a recording's are read with it), else by the signature's size."""

from __future__ import annotations

import re
from collections import OrderedDict

from xxhash import xxh3_64_hexdigest

from prefixguard.contracts.providers import thought_signature

KEEP = 10_000  # signatures remembered, the oldest forgotten first
# The signature of each answer seen -> the thoughts that answer billed.
_THOUGHTS: OrderedDict[str, int] = OrderedDict()
_SIGNED_IN = re.compile(rb'"thought_?[sS]ignature"\s*:\s*"([A-Za-z0-9+/_=-]+)"')
_THOUGHT_COUNT = re.compile(rb'"thoughts_?[tT]oken_?[cC]ount"\s*:\s*(\d+)')


def billed(model: str | None) -> bool:
    """Whether the model bills a signature sent back (its row says how): its answers' are worth remembering."""
    return thought_signature("gemini", model) is not None


def held(sign: str | None, model: str | None) -> tuple[int, bool]:
    """(the thoughts a signature holds, whether that is an estimate), where the model's row bills them ((0, False)
    elsewhere, or for no signature)."""
    rule = thought_signature("gemini", model)
    if rule is None or sign is None:
        return 0, False
    known = _THOUGHTS.get(_key(sign))
    if known is not None:
        return known, False
    return max(0, round((len(sign) - rule.chars_per_item) / rule.chars_per_token)), True


def remember(answer: bytes) -> bool:
    """Remember what an answer's thought signature holds: the thoughts it billed (its usage's last
    thoughtsTokenCount), for the request that sends the signature back. Whole JSON, SSE or a JSON array of
    chunks alike; False where it holds no signature, or several (whose shares its count does not tell)."""
    signs = {_key(m.decode()) for m in _SIGNED_IN.findall(answer)}
    counts = _THOUGHT_COUNT.findall(answer)
    if len(signs) != 1 or not counts:
        return False
    _THOUGHTS[signs.pop()] = int(counts[-1])
    while len(_THOUGHTS) > KEEP:
        _THOUGHTS.popitem(last=False)
    return True


def _key(sign: str) -> str:
    """One key for a signature in base64 and in its URL-safe form (a client may send back either)."""
    return xxh3_64_hexdigest(sign.rstrip("=").replace("-", "+").replace("_", "/").encode())
