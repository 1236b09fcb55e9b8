"""Google Gemini generateContent / streamGenerateContent (Gemini API and Vertex AI).

Prefix order: tools, then systemInstruction, then contents. No breakpoints: implicit caching keys on
the prefix as sent; an explicit cache is named by `cachedContent` (a resource whose tokens come first
and are read whole). The model is in the path (`models/{model}:generateContent`).
Usage: `usageMetadata`, where cachedContentTokenCount counts INSIDE promptTokenCount (subset
convention); a stream (`?alt=sse`, or a JSON array without it) repeats it on every chunk, the last
one final.
"""

from __future__ import annotations

import binascii
import json
import re
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

from prefixguard.contracts.providers import providers
from prefixguard.model.media import DOCUMENT, IMAGE, UNCOSTED, Media
from prefixguard.model.prompt import Prompt, compact_json
from prefixguard.model.usage import ResponseMeta, Usage
from prefixguard.utils.errors import InputError
from prefixguard.wire import adapter, gemini_thoughts, sent_back
from prefixguard.wire.adapter import no_diagnosis, no_diagnostics_field, no_server_calls, same_diagnosis
from prefixguard.wire.jsonspan import Node, Spec
from prefixguard.wire.segments import Builder, as_int, expect, message_header, wrong_type

API = "gemini"
SHAPE = "Gemini generateContent (models/{m}:generateContent)"
TAIL = None  # the model is in the path: no other endpoint speaks it
ENDPOINT = None
HEADER = None
JSON_ARRAY_STREAM = True  # streamGenerateContent without alt=sse answers one JSON array of chunks
FINAL_EVENTS = adapter.FINAL_EVENTS
RESPONSE_ID = None  # no cache diagnostics on Gemini
_SPANS: Spec = {
    "tools": {"[]": None},
    "contents": {"[]": {"parts": {"[]": None}}, "parts": {"[]": None}},
    "systemInstruction": {"parts": {"[]": None}},
    "system_instruction": {"parts": {"[]": None}},
    "cachedContent": None,
    "cached_content": None,
}
# An app's functions all sit in one Tool object: its declarations are walked (one segment each) only
# when the body holds some, so the other shapes' tools stay leaf values (the fast path).
_DECLARED_SPANS: Spec = {
    **_SPANS,
    "tools": {"[]": {"functionDeclarations": {"[]": None}, "function_declarations": {"[]": None}}},
}
ROLES = {"user": "user", "model": "assistant"}  # Gemini's roles in the Prompt's words
KINDS = {
    "text": "text",
    "inlineData": "media",
    "fileData": "media",
    "functionCall": "tool_use",
    "functionResponse": "tool_result",
    "executableCode": "tool_use",
    "codeExecutionResult": "tool_result",
    "videoMetadata": "video",
}
# The same names as the Python SDK writes them when a client posts its dict as is
_SNAKE = {
    "inline_data": "inlineData",
    "file_data": "fileData",
    "function_call": "functionCall",
    "function_response": "functionResponse",
    "executable_code": "executableCode",
    "code_execution_result": "codeExecutionResult",
}


# A part's thought signature is the model's reasoning encrypted, not text it is shown: never counted as its
# characters (a tool loop's turn that adds a 128-character one, 92 cl100k tokens, and two calls with their
# results bills 78: lmnr-ai/lmnr-python's recorded gemini-3.5-flash-lite run). Where the model's row says so
# (rules/providers.toml thought_signature: Gemini 3), it is billed as the thoughts it holds (gemini_thoughts.py).
_SIGNATURES = frozenset(sent_back.THOUGHT_SIGNATURES)
_SIGNED = frozenset(("text", "tool_use"))  # the model's own parts: a built-in tool's signature holds no thoughts


def is_generation(path: str | None) -> bool:
    return path is not None and _PATH.search(urlsplit(path).path) is not None


def _kind(part: Any, where: str, resolution: str | None = None) -> tuple[str, str | None, list[Media] | None]:
    """(kind, text to count, media) of one part; resolution: the request's media resolution, which a
    part's own overrides (Gemini 3)."""
    if not isinstance(part, dict):
        raise InputError(f"{where} must be an object (a part: text, inlineData, functionCall, ...)")
    if part.get("thought") is True:
        return "thinking", part.get("text") if isinstance(part.get("text"), str) else None, None
    for key, value in part.items():
        name = _SNAKE.get(key) or key
        kind = KINDS.get(name)
        if kind == "text":
            return "text", value if isinstance(value, str) else None, None
        if kind == "media":
            own = _resolution(part.get("mediaResolution", part.get("media_resolution")))
            return inline_media(value, own or resolution)
        if kind in ("tool_use", "tool_result") and isinstance(value, dict) and "id" in value:
            # the id pairs a call with its result for the client; the model is not shown it, nor billed for it
            # (pydantic-ai's recordings: gemini-2.5-flash's tool loop to the token without its 37-character ids)
            rest = {k: v for k, v in part.items() if k not in _SIGNATURES}
            return kind, compact_json({**rest, key: {k: v for k, v in value.items() if k != "id"}}), None
        if kind:
            return kind, None, None
    return "part", None, None


def _resolution(value: Any) -> str | None:
    """A media resolution as the cost rules name its level: "MEDIA_RESOLUTION_LOW" (or a part's
    {"level": ...}) -> "low"; None when unset or unspecified."""
    if isinstance(value, dict):
        value = value.get("level")
    if not isinstance(value, str):
        return None
    level = value.upper().removeprefix("MEDIA_RESOLUTION_").lower()
    return None if level in ("", "unspecified") else level


def inline_media(ref: Any, resolution: str | None = None) -> tuple[str, str | None, list[Media] | None]:
    if not isinstance(ref, dict):
        return "document", None, [Media(kind=DOCUMENT, detail=resolution)]
    mime = ref.get("mimeType") or ref.get("mime_type")
    mime = mime if isinstance(mime, str) else None
    data = ref.get("data")
    if mime and mime.startswith(("audio/", "video/")):  # no rule here costs them: nothing, as an estimate
        return mime.partition("/")[0], None, [Media(kind=UNCOSTED)]
    kind = IMAGE if mime and mime.startswith("image/") else DOCUMENT
    if isinstance(data, str) and mime and mime.startswith("text/"):
        try:
            return (
                "document",
                None,
                [Media(kind=DOCUMENT, media_type=mime, text=binascii.a2b_base64(data).decode("utf-8", "replace"))],
            )
        except ValueError:
            pass
    return (
        kind,
        None,
        [Media(kind=kind, data=data if isinstance(data, str) else None, media_type=mime, detail=resolution)],
    )


def _parts(
    out: Builder,
    node: Node,
    level: str,
    where: str,
    role: str | None,
    mi: int | None,
    header: dict[str, Any] | None,
    resolution: str | None = None,
) -> bool:
    images = False
    parts = expect(node.get("parts"), list, f"{where}/parts")
    # a turn that sends its thoughts as text has them there: its signatures add none
    elements = parts.elements if parts else ()
    thought_text = any(isinstance(p.value, dict) and p.value.get("thought") is True for p in elements)
    for pi, part in enumerate(elements):
        kind, text, media = _kind(part.value, f"{where}/parts/{pi}", resolution)
        if text is None and media is None and not _SIGNATURES.isdisjoint(part.value):
            text = compact_json({k: v for k, v in part.value.items() if k not in _SIGNATURES})
        seg = out.add(
            level, f"{where}/parts/{pi}", kind, part, role=role, message_index=mi, header=header, text=text, media=media
        )
        sign = sent_back.thought_signature(part.value)
        thoughts = gemini_thoughts.held(sign, out.model) if kind in _SIGNED and not thought_text else 0
        if thoughts:  # the provider's count, not scaled: as media; an estimate until its answer is seen
            seg.tokens, seg.media_tokens, seg.estimated = seg.tokens + thoughts, seg.media_tokens + thoughts, True
        header = None
        images = images or kind == IMAGE
    if header is not None:  # no parts: the whole entry is one segment
        out.add(level, where, "empty", node, role=role, message_index=mi, header=header, whole=True)
    return images


# Explicit caches seen created (POST .../cachedContents): name -> its tokens, as its creation reported.
_CACHED: OrderedDict[str, int] = OrderedDict()
KEEP_CACHED = 10_000
_CREATE = re.compile(r"/cachedContents/?$")


def is_cache_creation(path: str | None, method: str = "POST") -> bool:
    return method == "POST" and path is not None and _CREATE.search(urlsplit(path).path) is not None


def remember_cached(response: bytes) -> bool:
    """Remember an explicit cache's tokens from its creation's response; False when unreadable."""
    try:
        doc = json.loads(response)
    except (ValueError, UnicodeDecodeError):
        return False
    meta = doc.get("usageMetadata") if isinstance(doc, dict) else None
    name = doc.get("name") if isinstance(doc, dict) else None
    if not isinstance(name, str) or not isinstance(meta, dict) or not as_int(meta.get("totalTokenCount")):
        return False
    _CACHED[name] = as_int(meta["totalTokenCount"])
    while len(_CACHED) > KEEP_CACHED:
        _CACHED.popitem(last=False)
    return True


def request(root: Node, out: Builder, headers: Mapping[str, str] | None = None) -> Prompt:
    body = root.value
    key = "cachedContent" if "cachedContent" in body else "cached_content"
    named = expect(root.get(key), str, f"'{key}'")
    if named is not None:  # the explicit cache comes first, read whole: its tokens as its creation said
        seg = out.add("tools", f"/{key}", "cached_content", named)
        seg.tokens = _CACHED.get(named.value, 0)
        seg.estimated = named.value not in _CACHED
    tools = expect(root.get("tools"), list, "'tools'")
    for i, tool in enumerate(tools.elements if tools else ()):
        field = next((k for k in ("functionDeclarations", "function_declarations") if k in tool.members), None)
        declared = tool.get(field) if field else None
        if declared is not None and isinstance(declared.value, list) and len(tool.value) == 1:
            for j, fn in enumerate(declared.elements):  # one segment per function: a reorder is seen as one
                out.add("tools", f"/tools/{i}/{field}/{j}", "tool", fn)
        else:
            out.add("tools", f"/tools/{i}", "tool", tool)

    key = "systemInstruction" if "systemInstruction" in body else "system_instruction"
    system = expect(root.get(key), (dict, str), f"'{key}'")
    if system is not None and isinstance(system.value, str):
        out.add("system", f"/{key}", "text", system, role="system", header={}, text=system.value)
    elif system is not None:
        _parts(out, system, "system", f"/{key}", "system", None, message_header(system.value, "parts"))

    gen = body.get("generationConfig") or body.get("generation_config")
    gen = gen if isinstance(gen, dict) else {}
    resolution = _resolution(gen.get("mediaResolution", gen.get("media_resolution")))
    contents = expect(root.get("contents"), (list, dict), "'contents'")
    if contents is None:
        raise InputError("no 'contents' list")
    images = False
    entries = contents.elements if isinstance(contents.value, list) else [contents]
    for mi, entry in enumerate(entries):
        if not isinstance(entry.value, dict):
            raise wrong_type(f"/contents/{mi}", dict, entry.value)
        where = f"/contents/{mi}" if isinstance(contents.value, list) else "/contents"
        role = ROLES.get(entry.value.get("role") or "user", entry.value.get("role"))  # "model": its replies
        header = message_header(entry.value, "parts")
        images = _parts(out, entry, "messages", where, role, mi, header, resolution) or images

    cached = body.get("cachedContent", body.get("cached_content"))
    settings = {
        "tool_choice": body.get("toolConfig", body.get("tool_config")),
        "thinking": gen.get("thinkingConfig", gen.get("thinking_config")),
        "response_schema": gen.get("responseSchema", gen.get("responseJsonSchema")),
        "cached_content": cached if isinstance(cached, str) else None,
        "images": images,
    }
    return Prompt(API, _model(body), out.segments, settings)


def _model(body: dict[str, Any]) -> str | None:
    """GenerateContentRequest's own `model` ("models/gemini-2.5-pro"), in a file or a batch item; on the
    wire the path names it."""
    model = body.get("model")
    return model.rpartition("/")[2] if isinstance(model, str) and model else None


# ---- usage


def usage(raw: Mapping[str, Any] | None) -> Usage:
    """Subset convention: cachedContentTokenCount is inside promptTokenCount."""
    return implicit_usage(
        raw, "promptTokenCount", "cachedContentTokenCount", "thoughtsTokenCount", "candidatesTokenCount"
    )


def implicit_usage(
    raw: Mapping[str, Any] | None, prompt_key: str, cached_key: str, thoughts_key: str, output_key: str
) -> Usage:
    """A Gemini usage (generateContent's, or an interaction's under its own names): the cached count inside
    the prompt's. Gemini leaves out counts that are zero (rules/providers.toml: gemini.zero_counts_omitted),
    so a usage with a prompt count reports the cache even without the cached field."""
    if not isinstance(raw, Mapping):
        return Usage()
    prompt = as_int(raw.get(prompt_key))
    read = min(as_int(raw.get(cached_key)), prompt)
    reasoning = as_int(raw.get(thoughts_key))
    omitted = providers()["gemini"].zero_counts_omitted
    reported = raw.get(cached_key) is not None or (omitted and raw.get(prompt_key) is not None)
    return Usage(
        prompt_total=prompt,
        cache_read=read,
        uncached=prompt - read,
        output=as_int(raw.get(output_key)) + reasoning,
        reported=reported,
        reasoning=reasoning,
    )


def stream_usage(event: Mapping[str, Any], current: dict[str, Any] | None) -> dict[str, Any] | None:
    """Each chunk repeats usageMetadata so far; the last one is the final count."""
    raw = event.get("usageMetadata")
    return dict(raw) if isinstance(raw, Mapping) else current


def is_content(event: Mapping[str, Any]) -> bool:
    for cand in event.get("candidates") or ():
        content = cand.get("content") if isinstance(cand, Mapping) else None
        if isinstance(content, Mapping) and any(
            isinstance(p, Mapping) and (p.get("text") or len(p) > 1 or "functionCall" in p)
            for p in content.get("parts") or ()
        ):
            return True
    return False


def meta(obj: Mapping[str, Any], current: ResponseMeta) -> ResponseMeta:
    """A whole response or a stream chunk: responseId, modelVersion, each candidate's finishReason (last chunk)."""
    cands = obj.get("candidates")
    reasons = tuple(c.get("finishReason") for c in cands if isinstance(c, Mapping)) if isinstance(cands, list) else ()
    first = cands[0] if isinstance(cands, list) and cands else None  # its thoughts' signature is in its parts
    content = first.get("content") if isinstance(first, Mapping) else None
    parts = content.get("parts") if isinstance(content, Mapping) else None
    signs = map(sent_back.thought_signature, parts if isinstance(parts, list) else ())
    keys = tuple(sent_back.key(sign) for sign in signs if sign)
    return current.merged(obj.get("responseId"), obj.get("modelVersion"), reasons, keys=keys)


def is_final(event: Mapping[str, Any]) -> bool:
    return any(isinstance(c, Mapping) and c.get("finishReason") for c in event.get("candidates") or ())


# this provider gives no account of its misses
diagnosis, stream_diagnosis, diagnostics_field = no_diagnosis, same_diagnosis, no_diagnostics_field
server_calls = no_server_calls  # no tool of its own runs between passes


# ---- routing and detection (the Adapter protocol)

_PATH = re.compile(r"/models/([^/:]+):(?:generateContent|streamGenerateContent)$")
_PUBLISHER = re.compile(r"/publishers/([^/]+)/models/[^/:]+:[A-Za-z]+$")  # Vertex AI names the model's maker


def route(path: str) -> tuple[str, str | None] | None:
    found = _PATH.search(path)
    if not found:
        return None
    publisher = _PUBLISHER.search(path)
    return (API, unquote(found.group(1))) if not publisher or publisher.group(1) == "google" else None


def foreign(body: dict[str, Any] | None, path: str) -> str | None:
    if is_cache_creation(path) or isinstance(body, dict) and "contents" in body and {"ttl", "expireTime"} & body.keys():
        return "a Gemini cachedContents creation (an explicit cache, not a generation)"
    return None


def claims(body: dict[str, Any]) -> bool:
    return "contents" in body and "messages" not in body


fits = adapter.no_tail
counts_only = adapter.never_counts


def spans(text: str) -> Spec:
    declared = '"functionDeclarations"' in text or '"function_declarations"' in text
    return _DECLARED_SPANS if declared else _SPANS
