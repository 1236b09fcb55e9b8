"""The cache-relevant view of one request: ordered segments plus the settings that key the cache.

Every wire adapter (prefixguard/wire/) produces a Prompt; everything downstream (fingerprint, compare,
lint, proxy, replay) reads only this, never a provider's field names.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from prefixguard.contracts import equivalences

LEVELS = ("tools", "system", "messages")  # the order every provider builds its prefix in


@dataclass(slots=True)
class Segment:
    """One cacheable part of a request: a tool definition, a system block, a message content block."""

    level: str                 # "tools" | "system" | "messages"
    pointer: str               # RFC 6901 JSON pointer into the body, e.g. "/messages/3/content/0"
    kind: str                  # tool | schema | text | image | document | tool_use | tool_result | thinking | ...
    role: str | None           # message role for level "messages" (and "system"/"developer" messages)
    value: Any                 # the parsed JSON of this part
    start: int                 # offset of this part in Prompt.text (character offset)
    end: int                   # end offset (exclusive) in Prompt.text
    key: bytes                 # what the fingerprint hashes: an exact, key-order-keeping encoding of
                               # level, role, message header and value (breakpoint markers left out)
    tokens: int = 0            # token count of this segment (estimated when Prompt.tokens_estimated)
    breakpoint: str | None = None  # cache_control TTL on this block: "5m" | "1h" | None
    message_index: int | None = None  # index of the message this block belongs to (level "messages")
    header: dict[str, Any] | None = None  # the message's own fields (role, ids) when this part opens one
    media_tokens: int = 0      # of `tokens`, those of images and documents, by the provider's formula
                               # (already in the provider's tokens: a tokenizer rescaling leaves them)
    estimated: bool = False    # a media size or page count could not be read (URL, file id): estimate
    _canon: bytes | None = field(default=None, repr=False, compare=False)

    @property
    def canon(self) -> bytes:
        """What the provider's renderer sees: compact JSON with key order as sent, after level/role/message
        markers. Built on first use: the fingerprint does not need it, a renderer or a diff does."""
        if self._canon is None:
            opener = "" if self.header is None else "\x1d" + compact_json(self.header)
            body = compact_json(without_markers(self.value))
            self._canon = f"\x1e{self.level}\x1f{self.role or ''}{opener}\x1f{body}".encode("utf-8", "surrogatepass")
        return self._canon


# Breakpoint markers tell the provider where to write the cache; they are not part of the rendered
# prompt, so they stay out of key and canon (moving one is a breakpoint change, not a content change).
MARKER_KEYS: tuple[str, ...] = tuple(equivalences()["breakpoint-markers"]["keys"])
_MARKERS = frozenset(MARKER_KEYS)

# Compact JSON with key order as sent: what a provider's renderer sees of a value (and what we count).
compact_json = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def without_markers(value: Any) -> Any:
    if isinstance(value, dict) and not _MARKERS.isdisjoint(value):
        return {k: v for k, v in value.items() if k not in MARKER_KEYS}
    return value


@dataclass(slots=True)
class Prompt:
    api: str                              # "anthropic" | "openai-chat" | "openai-responses"
    model: str | None
    segments: list[Segment]
    settings: dict[str, Any] = field(default_factory=dict)  # cache-keying settings: thinking, effort,
                                          # tool_choice, speed, images, prompt_cache_key, betas, ...
    auto_breakpoint: str | None = None    # Anthropic top-level (automatic) cache_control TTL, if any
    text: str = ""                        # the body as decoded text (segment offsets index into it)
    source: str | None = None             # file path or flow id, for messages
    tokens_estimated: bool = False        # True when no tokenizer could load: counts are estimates
    chain: list[bytes] = field(default_factory=list)  # fingerprint chain: chain[i] covers segments 0..i
    counts_only: bool = False             # a token-counting request (count_tokens): nothing generated or cached

    @property
    def estimated(self) -> bool:
        """Some count is an estimate: no tokenizer loaded, or an image or document of unknown size."""
        return self.tokens_estimated or any(s.estimated for s in self.segments)

    @property
    def total_tokens(self) -> int:
        return sum(s.tokens for s in self.segments)

    def byte_offset(self, char_offset: int) -> int:
        """Byte offset in the original body of a character offset in self.text."""
        if self.text.isascii():
            return char_offset
        return len(self.text[:char_offset].encode("utf-8"))
