"""What marks an answer when a later request sends it back: the signature of its reasoning (a Claude thinking
block on the Messages API, a reasoningContent block on Converse, a Gemini part's thought signature) and the ids
of its tool calls (Chat). The answer carries them (ResponseMeta.keys) and so does the request that sends it back,
where prefixguard/judge/stored.py counts what the provider bills of it: the reasoning it generated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from xxhash import xxh3_128_hexdigest


def key(mark: str) -> str:
    """A short key for a mark (a signature runs to kilobytes): the same in the answer and the request, and for a
    signature in base64 and in its URL-safe form (a client may send back either)."""
    plain = mark.rstrip("=").replace("-", "+").replace("_", "/")
    return xxh3_128_hexdigest(plain.encode("utf-8", "surrogatepass"))


def signature(block: Any) -> str | None:
    """The signature of a reasoning block, or what stands for one (a redacted block's data); None for any
    other block."""
    if not isinstance(block, Mapping):
        return None
    kind = block.get("type")
    if kind == "thinking" or kind == "redacted_thinking":
        found = block.get("signature") if kind == "thinking" else block.get("data")
    else:
        reasoning = block.get("reasoningContent")
        if not isinstance(reasoning, Mapping):
            return None
        text = reasoning.get("reasoningText")
        found = text.get("signature") if isinstance(text, Mapping) else reasoning.get("redactedContent")
    return found if isinstance(found, str) and found else None


# a Gemini part's thought signature, as the API and as the Python SDK write it
THOUGHT_SIGNATURES = ("thoughtSignature", "thought_signature")


def thought_signature(part: Any) -> str | None:
    """A Gemini part's thought signature, if it carries one."""
    if not isinstance(part, Mapping):
        return None
    return next((part[k] for k in THOUGHT_SIGNATURES if isinstance(part.get(k), str) and part[k]), None)


def signed(blocks: Any) -> tuple[str, ...]:
    """The keys of the reasoning blocks in an answer's content, in order."""
    if not isinstance(blocks, list):
        return ()
    return tuple(key(found) for found in map(signature, blocks) if found)


def streamed(delta: Any) -> tuple[str, ...]:
    """The key a stream's event tells: a signature delta (Messages: `signature_delta`; Converse: a
    reasoningContent delta's `signature`) or a redacted block as it starts."""
    if not isinstance(delta, Mapping):
        return ()
    found = delta.get("signature") if delta.get("type") == "signature_delta" else signature(delta)
    if found is None and isinstance(reasoning := delta.get("reasoningContent"), Mapping):
        found = reasoning.get("signature") or reasoning.get("redactedContent")
    return (key(found),) if isinstance(found, str) and found else ()


def called(calls: Any) -> tuple[str, ...]:
    """The keys of a Chat answer's tool calls (a message's `tool_calls`, or a stream delta's): their ids."""
    if not isinstance(calls, list):
        return ()
    return tuple(key(c["id"]) for c in calls if isinstance(c, Mapping) and isinstance(c.get("id"), str) and c["id"])
