"""The cache-relevant view of one request: ordered segments plus the settings that key the cache.

Every wire adapter (prefixguard/wire/) produces a Prompt; everything downstream (fingerprint, compare,
lint, proxy, replay) reads only this, never a provider's field names.
"""

from __future__ import annotations

import gc
import json
import marshal
from bisect import bisect_left
from collections.abc import Callable
from typing import Any

from prefixguard.contracts.providers import equivalences
from prefixguard.model.fingerprint import Chain

LEVELS = ("tools", "system", "messages")  # the order every provider builds its prefix in


class Segment:
    """One cacheable part of a request: a tool definition, a system block, a message content block.
    A plain class, not a dataclass: `diff` then never imports `dataclasses`, and `inspect` with it, at
    each start (tests/test_cli.py checks).

    A body can hold millions of parts, so a part keeps only what cannot be derived: its pointer may be
    a PointerForm shared by every part of one shape (filled with message_index when read); its key may
    be left out (None) when it is the plain encoding of level, role, header and value, made again when
    read (the fingerprint chain is made while the parts are, so it reads each key once); and its end
    when its text is a string without escapes."""

    __slots__ = (
        "level",
        "_pointer",
        "kind",
        "role",
        "value",
        "start",
        "_end",
        "_key",
        "tokens",
        "message_index",
        "header",
        "_rare",
    )
    level: str  # "tools" | "system" | "messages"
    kind: str  # tool | schema | text | image | document | tool_use | tool_result | thinking | ...
    role: str | None  # message role for level "messages" (and "system"/"developer" messages)
    value: Any  # the parsed JSON of this part
    start: int  # offset of this part in Prompt.text (character offset)
    tokens: int  # token count of this segment (estimated when Prompt.tokens_estimated)
    message_index: int | None  # index of the message this block belongs to (level "messages")
    header: dict[str, Any] | None  # the message's own fields (role, ids) when this part opens one
    # and, kept together in one slot as few parts have them (properties below): breakpoint, media_tokens,
    # estimated

    def __init__(
        self,
        level: str,
        pointer: str,
        kind: str,
        role: str | None,
        value: Any,
        start: int,
        end: int | None,
        key: bytes | None,
        tokens: int = 0,
        breakpoint: str | None = None,
        message_index: int | None = None,
        header: dict[str, Any] | None = None,
        media_tokens: int = 0,
        estimated: bool = False,
    ) -> None:
        self.level, self._pointer, self.kind, self.role, self.value = level, pointer, kind, role, value
        self.start, self._end, self._key, self.tokens = start, end, key, tokens
        self.message_index, self.header = message_index, header
        self._rare = _rare(breakpoint, media_tokens, estimated)

    def __repr__(self) -> str:
        return f"Segment({self.level} {self.pointer} {self.kind}, {self.tokens} tokens)"

    @property
    def pointer(self) -> str:
        """RFC 6901 JSON pointer into the body, e.g. "/messages/3/content/0"."""
        pointer = self._pointer
        return pointer if type(pointer) is str else pointer.format(self.message_index)

    @property
    def breakpoint(self) -> str | None:
        """cache_control TTL on this block: "5m" | "1h" | None."""
        rare = self._rare
        return None if rare is None else rare[0]

    @breakpoint.setter
    def breakpoint(self, ttl: str | None) -> None:
        self._rare = _rare(ttl, self.media_tokens, self.estimated)

    @property
    def media_tokens(self) -> int:
        """Of `tokens`, those of images and documents, by the provider's formula (already in the
        provider's tokens: a tokenizer rescaling leaves them)."""
        rare = self._rare
        return 0 if rare is None else rare[1]

    @media_tokens.setter
    def media_tokens(self, value: int) -> None:
        self._rare = _rare(self.breakpoint, value, self.estimated)

    @property
    def estimated(self) -> bool:
        """A media size or page count could not be read (URL, file id), or the part was too long to
        tokenize in time: its count is an estimate."""
        rare = self._rare
        return False if rare is None else rare[2]

    @estimated.setter
    def estimated(self, value: bool) -> None:
        self._rare = _rare(self.breakpoint, self.media_tokens, value)

    @property
    def end(self) -> int:
        """End offset (exclusive) of this part in Prompt.text. Left out (None) for a string without
        escapes, whose text is its characters between two quotes."""
        end = self._end
        return end if end is not None else self.start + len(self.value) + 2

    @property
    def key(self) -> bytes:
        """What the fingerprint hashes: an exact, key-order-keeping encoding of level, role, message
        header and value (breakpoint markers left out). Marshal format 2 is exact for JSON values, keeps
        key order, writes no back-references (equal values give equal bytes) and runs about 3x faster
        than json.dumps. The header is in only on a message's first part, so moving a block into another
        message changes the key; a whole message holds it in its value (True in the header's place)."""
        key = self._key
        return key if key is not None else encode_key(self.level, self.role, self.header, self.value)

    def with_tokens(self, tokens: int) -> Segment:
        """The same part counted in other tokens (a provider's: prefixguard/judge/scale.py)."""
        out = Segment(
            self.level,
            self._pointer,
            self.kind,
            self.role,
            self.value,
            self.start,
            self._end,
            self._key,
            tokens,
            None,
            self.message_index,
            self.header,
        )
        out._rare = self._rare
        return out

    def plus(self, tokens: int) -> Segment:
        """The same part with tokens a rule adds beyond its content's count (a template's or a provider's text:
        prefixguard/wire/front.py). It carries its key: a later request never takes it for a part of the same
        text alone (segments.Builder's `like`)."""
        out = self.with_tokens(self.tokens + tokens)
        out._key = self.key
        return out

    @property
    def canon(self) -> bytes:
        """What the provider's renderer sees: compact JSON with key order as sent, after level/role/message
        markers. Made when read, not kept: the fingerprint does not need it, and a million parts would
        hold a second copy of the body."""
        opener = "" if self.header is None else "\x1d" + compact_json(self.header)
        body = compact_json(without_markers(self.value))
        return f"\x1e{self.level}\x1f{self.role or ''}{opener}\x1f{body}".encode("utf-8", "surrogatepass")


def _rare(breakpoint: str | None, media_tokens: int, estimated: bool) -> tuple[str | None, int, bool] | None:
    """Segment._rare: None when the part has none of them (most parts)."""
    return None if breakpoint is None and not media_tokens and not estimated else (breakpoint, media_tokens, estimated)


class PointerForm(str):
    """The pointer of every part of one shape ("/messages/{}/content"), its message index left to fill
    in: one string for a million parts, each made only when read (Segment.pointer)."""

    __slots__ = ()


# The pointer of a text prompt's pieces (the text Completions API: one string read in pieces, each cut where the
# next one starts, prefixguard/wire/openai_completions.py): a piece that holds all of an earlier one and more
# goes on from it, and text put inside one is an edit of that text.
TEXT_PIECES = "/prompt"


def encode_key(level: str, role: str | None, header: dict[str, Any] | bool | None, value: Any) -> bytes:
    """A part's key (Segment.key): header True for a part that is a whole message."""
    return marshal.dumps((level, role, header, value), 2)


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


# A context the provider stored and a request names by id (OpenAI's previous_response_id): one part, billed
# as that context (prefixguard/judge/stored.py).
STORED_CONTEXT = "stored_context"


class Prompt:
    """A request as the cache sees it (a plain class, as Segment)."""

    __slots__ = (
        "api",
        "model",
        "segments",
        "settings",
        "auto_breakpoint",
        "text",
        "source",
        "tokens_estimated",
        "chain",
        "counts_only",
        "front",
        "after",
    )
    api: str  # the shape it was read as: "anthropic", "openai-chat", ... (prefixguard/wire/adapters.py)
    model: str | None
    segments: list[Segment]
    settings: dict[str, Any]  # cache-keying settings: thinking, effort,
    # tool_choice, speed, images, prompt_cache_key, betas, ...
    auto_breakpoint: str | None  # Anthropic top-level (automatic) cache_control TTL, if any
    text: str  # the body as decoded text (segment offsets index into it)
    source: str | None  # file path or flow id, for messages
    tokens_estimated: bool  # True when no tokenizer could load: counts are estimates
    chain: Chain  # fingerprint chain: chain[i] covers segments 0..i
    counts_only: bool  # a token-counting request (count_tokens): nothing generated or cached
    # of the first part's tokens, those the provider puts before every request of the model (its own system
    # text), as a read has shown (prefixguard/judge/scale.py), or by rule (its tool-use or citations prompt:
    # prefixguard/wire/front.py); 0 where neither says
    front: int
    # tokens the provider adds after every part (the reply's opening, a tool-choice instruction), as the scale
    # places them: in the total, on no part, so no breakpoint's read covers them
    after: int

    def __init__(
        self,
        api: str,
        model: str | None,
        segments: list[Segment],
        settings: dict[str, Any] | None = None,
        auto_breakpoint: str | None = None,
        text: str = "",
        source: str | None = None,
        tokens_estimated: bool = False,
        chain: Chain | None = None,
        counts_only: bool = False,
        front: int = 0,
        after: int = 0,
    ) -> None:
        self.api, self.model, self.segments, self.settings = api, model, segments, {} if settings is None else settings
        self.auto_breakpoint, self.text = auto_breakpoint, text
        self.source, self.tokens_estimated = source, tokens_estimated
        self.chain, self.counts_only = Chain() if chain is None else chain, counts_only
        self.front, self.after = front, after

    def __repr__(self) -> str:
        return f"Prompt({self.api} {self.model}, {len(self.segments)} segments)"

    def with_segments(
        self, segments: list[Segment], front: int | None = None, after: int | None = None, chain: Chain | None = None
    ) -> Prompt:
        """The same request with other segments: recounted (prefixguard/judge/scale.py), with its front and
        what follows its parts where given; or other parts, with their own fingerprint chain."""
        return Prompt(
            self.api,
            self.model,
            segments,
            self.settings,
            self.auto_breakpoint,
            self.text,
            self.source,
            self.tokens_estimated,
            self.chain if chain is None else chain,
            self.counts_only,
            self.front if front is None else front,
            self.after if after is None else after,
        )

    @property
    def estimated(self) -> bool:
        """Some count is an estimate: no tokenizer loaded, or an image or document of unknown size."""
        return self.tokens_estimated or any(s.estimated for s in self.segments)

    @property
    def total_tokens(self) -> int:
        return sum(s.tokens for s in self.segments) + self.after

    def marked(self) -> dict[int, str]:
        """Segment index -> TTL of each part's own breakpoint marker. Read from the slot the rare fields
        share, not through Segment.breakpoint: the policies and compare ask it of every part, several
        times a request."""
        return {i: rare[0] for i, seg in enumerate(self.segments) if (rare := seg._rare) is not None and rare[0]}

    def byte_offset(self, char_offset: int) -> int:
        """Byte offset in the original body of a character offset in self.text."""
        if self.text.isascii():
            return char_offset
        return len(self.text[:char_offset].encode("utf-8", "surrogatepass"))  # an escaped lone surrogate is valid JSON


class PausedGc:
    """The cyclic garbage collector held off while a request's parts are built or walked: they are up
    to millions of acyclic objects, none of them garbage, and every collection would walk them all
    again (a third of the time of reading a million-message body, two fifths of diffing two)."""

    def __enter__(self) -> None:
        self.was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *_: object) -> None:
        if self.was_enabled:
            gc.enable()


def part_finder(segments: list[Segment]) -> Callable[[str], Segment | None]:
    """pointer -> the segment at it (None: none there), found without a pointer string for every part:
    the parts that hold their own pointer are kept in a dict, and one whose pointer has a shared form
    is found by its message index, by bisection (message indexes only grow along the segments; a
    pointer missed that way is looked for in every part)."""
    own: dict[str, Segment] = {}
    forms: set[str] = set()
    for seg in segments:
        pointer = seg._pointer
        if type(pointer) is str:
            own[pointer] = seg  # the last part of a pointer, as a dict of them all keeps
        else:
            forms.add(pointer)
    ends = [form.partition("{}")[::2] for form in forms]

    def find(pointer: str) -> Segment | None:
        found = own.get(pointer)
        if found is not None or not ends:
            return found
        for head, tail in ends:
            middle = pointer[len(head) : len(pointer) - len(tail)]
            if not (pointer.startswith(head) and pointer.endswith(tail) and middle.isdigit()):
                continue
            index = int(middle)
            i = bisect_left(segments, index, key=_order)
            while i < len(segments) and segments[i].message_index == index:
                if segments[i].pointer == pointer:
                    return segments[i]
                i += 1
            return next((s for s in segments if s.pointer == pointer), None)
        return None

    return find


def _order(seg: Segment) -> int:
    return -1 if seg.message_index is None else seg.message_index
