"""OpenAI Completions, the text API (POST /v1/completions), as vLLM, SGLang, llama.cpp and Ollama serve it: a
`prompt` the model continues, with no chat template around it. Its answer counts as a Chat answer does.

The prompt is its own prefix, so a request that extends an earlier prompt shares all of it but its last words.
It is read in pieces, each ending where the pre-tokenizers of byte-level BPE (cl100k_base, o200k_base) split too:
at each line that opens with neither a space nor a slash (o200k_base takes a slash after a line break with it), and
before one word in eight or so after a space (those whose CRC-32 ends in three zero bits). A piece's tokens are then
those of the same characters in the whole prompt. The cuts depend on the text
around them alone: an extended prompt keeps every piece of the earlier one but its last, and after text put in
front (a timestamp) the pieces fall in step again within a few words, so the change is found where it is.
A list of several prompts (a batch of requests) and a prompt of token ids are not analysed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from zlib import crc32

from prefixguard.model.prompt import TEXT_PIECES, Prompt
from prefixguard.utils.errors import InputError, TooLarge
from prefixguard.wire import adapter, openai_chat
from prefixguard.wire.adapter import no_diagnosis, no_diagnostics_field, no_server_calls, same_diagnosis
from prefixguard.wire.jsonspan import Node, Spec
from prefixguard.wire.segments import Builder, model_of

API = "openai-completions"
SHAPE = "OpenAI Completions (/v1/completions)"
TAIL = re.compile(r"(?<!/chat)/completions/?$")  # any prefix or version (Ollama's /v1, a gateway's)
ENDPOINT = "/v1/completions"
HEADER = None
JSON_ARRAY_STREAM = False
FINAL_EVENTS = adapter.FINAL_EVENTS
RESPONSE_ID = None
_SPANS: Spec = {"prompt": None}
_CUTS = re.compile(r"(?<=\n)[^\s/]| [^\W\d_]\w*")  # where a piece may start: a line, a word after a space


def pieces(text: str) -> list[tuple[int, int]]:
    """(start, end) of the prompt's pieces, in order."""
    cuts = [m.start() for m in _CUTS.finditer(text) if m.start() and (text[m.start()] != " " or _cut(m[0]))]
    return list(zip([0, *cuts], [*cuts, len(text)], strict=True))


def _cut(word: str) -> bool:
    return not crc32(word.encode("utf-8", "surrogatepass")) & 7


def request(root: Node, out: Builder, headers: Mapping[str, str] | None = None) -> Prompt:
    from prefixguard import wire  # the package's ceiling, read when asked (its import reads this module)

    body = root.value
    prompt = root.get("prompt") or Node(None, 0, 0)
    value = prompt.value
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str):
        prompt, value = Node(value[0], prompt.start, prompt.end), value[0]  # a batch of one: that prompt
    if isinstance(value, str):
        # a string with no escapes spans its characters between two quotes: each piece its own span
        plain = prompt.end - prompt.start == len(value) + 2
        spans = pieces(value)
        ceiling = wire.MAX_PARTS  # the analysis's ceiling on parts, a text prompt's pieces counted too
        if ceiling and len(spans) > ceiling:
            raise TooLarge(
                f"too large to analyse: {len(spans)} pieces of text, over the ceiling of {ceiling} "
                "(PREFIXGUARD_MAX_PARTS sets it)"
            )
        for i, (a, b) in enumerate(spans):
            at = (prompt.start + 1 + a, prompt.start + 1 + b) if plain else (prompt.start, prompt.end)
            header = {"role": "user"} if i == 0 else None  # one message, the user's: its header on the first piece
            out.add(
                "messages",
                TEXT_PIECES,
                "text",
                Node(value[a:b], *at),
                role="user",
                message_index=0,
                header=header,
                text=value[a:b],
            )
    elif isinstance(value, list) and value and not all(isinstance(p, str) for p in value):
        raise InputError("a prompt of token ids: its text is not sent, so it is not analysed here")
    elif isinstance(value, list) and value:
        raise InputError(f"a batch of {len(value)} prompts: each is a request of its own, not analysed here")
    else:
        raise InputError("no 'prompt' string")
    settings = {"echo": body.get("echo"), "suffix": body.get("suffix"), "best_of": body.get("best_of")}
    return Prompt(API, model_of(body), out.segments, settings)


# ---- responses: a Chat answer's usage and fields; a choice holds `text` where Chat's holds a message


usage, stream_usage, meta, is_final = (
    openai_chat.usage,
    openai_chat.stream_usage,
    openai_chat.meta,
    openai_chat.is_final,
)


def is_content(event: Mapping[str, Any]) -> bool:
    return any(isinstance(c, Mapping) and c.get("text") for c in event.get("choices") or ())


diagnosis, stream_diagnosis, diagnostics_field = no_diagnosis, same_diagnosis, no_diagnostics_field
server_calls = no_server_calls


# ---- routing and detection (the Adapter protocol)

_V1 = re.compile(r"/v1/completions/?$")
_ANSWERS = {"text_completion", "list", "model"}


def route(path: str) -> tuple[str, str | None] | None:
    return (API, None) if _V1.search(path) else None


def foreign(body: dict[str, Any] | None, path: str) -> str | None:
    return "an API response" if isinstance(body, dict) and body.get("object") in _ANSWERS else None


def claims(body: dict[str, Any]) -> bool:
    return "prompt" in body and "model" in body  # asked after the shapes with messages, input or contents


def fits(body: dict[str, Any]) -> bool:
    return "prompt" in body


counts_only = adapter.never_counts


def spans(text: str) -> Spec:
    return _SPANS
