"""Amazon Bedrock Converse API (POST /model/{modelId}/converse, /converse-stream).

Prefix order: toolConfig.tools, then system, then messages. A breakpoint is a block of its own,
`{"cachePoint": {"type": "default", "ttl": ...}}`, placed after the part it closes: it marks the part
before it (the same position Anthropic's cache_control on that part would mark) and is no prefix byte.
The model id is in the path, never in the body. Usage (JSON `usage`, the stream's `metadata` event):
inputTokens (neither read nor written) + cacheReadInputTokens + cacheWriteInputTokens = prompt total.

Amazon Nova's own InvokeModel body (/model/{id}/invoke, `schemaVersion: messages-v1`) is this shape, with
the cachePoint a key of the block it closes and the usage named ...InputTokenCount (rules/providers.toml,
`invoke_converse_models`).
"""

from __future__ import annotations

import binascii
import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from prefixguard.contracts.providers import providers
from prefixguard.model.media import DOCUMENT, IMAGE, UNCOSTED, Media
from prefixguard.model.prompt import Prompt, compact_json
from prefixguard.model.usage import ResponseMeta, Usage
from prefixguard.utils.errors import InputError
from prefixguard.wire import adapter, sent_back
from prefixguard.wire.adapter import no_diagnosis, no_diagnostics_field, no_server_calls, same_diagnosis
from prefixguard.wire.anthropic_media import chunks_text, cites
from prefixguard.wire.anthropic_turns import schema_text
from prefixguard.wire.jsonspan import Node, Spec
from prefixguard.wire.segments import Builder, as_int, expect, message_header, wrong_type

API = "bedrock-converse"
SHAPE = "Bedrock Converse (/model/{id}/converse)"
TAIL = None  # the model is in the path: no other endpoint speaks it
ENDPOINT = None
HEADER = None
JSON_ARRAY_STREAM = False
RESPONSE_ID = None  # no cache diagnostics on Bedrock
_SPANS: Spec = {
    "system": {"[]": None},
    "messages": {"[]": {"content": {"[]": None}}},
    "toolConfig": {"tools": {"[]": None}},
    "outputConfig": {"textFormat": None},
}
MARKER = "cachePoint"
KINDS = {
    "text": "text",
    "image": "image",
    "document": "document",
    "video": "video",
    "toolUse": "tool_use",
    "toolResult": "tool_result",
    "reasoningContent": "thinking",
    "guardContent": "text",
    "citationsContent": "text",
    "searchResult": "document",
    "toolSpec": "tool",
    "systemTool": "tool",
}
FINAL_EVENTS = frozenset({"metadata"})  # sent after messageStop: usage and metrics
_FORMATS = {
    "pdf": "application/pdf",
    "txt": "text/plain",
    "md": "text/markdown",
    "html": "text/html",
    "csv": "text/csv",
    "png": "image/png",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
}


def _ttl(block: Any) -> str | None:
    """The TTL of a cachePoint block, or None when the block is content."""
    if not isinstance(block, dict) or MARKER not in block:
        return None
    mark = block[MARKER]
    ttl = mark.get("ttl") if isinstance(mark, dict) else None
    if ttl is not None and not isinstance(ttl, str):
        raise InputError(f'cachePoint.ttl must be a string such as "1h", got {type(ttl).__name__}')
    return ttl or providers()["bedrock"].default_ttl


def _kind(block: Any, where: str) -> str:
    name = next((k for k in block if k != MARKER), None) if isinstance(block, dict) else None
    if name is None:
        raise InputError(f"{where} must be an object with one member naming its kind (text, image, toolUse, ...)")
    return KINDS.get(name, name)


def _media(block: dict[str, Any], kind: str) -> list[Media] | None:
    inner = block.get("image" if kind == "image" else "document")
    if not isinstance(inner, dict):
        return None
    source = inner.get("source")
    data = source.get("bytes") if isinstance(source, dict) else None
    data = data if isinstance(data, str) else None
    mime = _FORMATS.get(str(inner.get("format", "")).lower())
    if kind == "image":
        return [Media(kind=IMAGE, data=data, media_type=mime)]
    text, cited = _text(source, data, mime), cites(inner)
    if text is not None:
        return [Media(kind=DOCUMENT, media_type="text/plain", text=text, cited=cited)]
    return [Media(kind=DOCUMENT, data=data, media_type=mime, cited=cited)]


def _text(source: Any, data: str | None, mime: str | None) -> str | None:
    """A plain-text document's text: sent as text, as chunks of content, or as the bytes of a text file."""
    if isinstance(source, dict) and isinstance(source.get("text"), str):
        return source["text"]
    if isinstance(source, dict) and isinstance(source.get("content"), list):
        return chunks_text(source["content"])
    if data is not None and mime == "text/plain":
        try:
            return binascii.a2b_base64(data).decode("utf-8", "replace")
        except ValueError:
            return None
    return None


def _blocks(
    out: Builder,
    node: Node,
    level: str,
    where: str,
    *,
    role: str | None = None,
    message_index: int | None = None,
    header: dict[str, Any] | None = None,
) -> tuple[bool, bool]:
    """Add each content block of a list as a segment; a cachePoint marks the segment before it.
    Returns whether any block was images, and whether any cites (a document with citations enabled)."""
    images = cites = False
    for bi, block in enumerate(node.elements):
        value, at = block.value, f"{where}/{bi}"
        ttl = _ttl(value)
        if ttl is not None and len(value) == 1:
            out.mark_last(ttl)  # a point with nothing before it caches nothing
            continue
        kind = _kind(value, at)
        text = value.get("text") if kind == "text" and isinstance(value.get("text"), str) else None
        if kind == "thinking":
            text = _reasoning_text(value)
        media = _media(value, kind) if kind in (IMAGE, DOCUMENT) else None
        if kind == "video":  # no rule here costs it: nothing, as an estimate (never its base64)
            media = [Media(kind=UNCOSTED)]
        nested = _result_media(value) if kind == "tool_result" else None
        if nested is not None:
            media, text = nested
        seg = out.add(
            level, at, kind, block, role=role, message_index=message_index, header=header, text=text, media=media
        )
        seg.breakpoint = ttl  # a cachePoint inside the block it closes (Nova's InvokeModel body)
        header = None
        images = images or kind == "image" or bool(nested and any(m.kind == IMAGE for m in nested[0]))
        cites = cites or any(m.cited for m in media or ())
    return images, cites


def _reasoning_text(block: dict[str, Any]) -> str | None:
    """The text a reasoningContent block renders: its reasoning, as the Messages API's thinking block renders
    its `thinking` (the signature beside it is not read); None (its JSON counted) for redacted reasoning."""
    reasoning = block.get("reasoningContent")
    said = reasoning.get("reasoningText") if isinstance(reasoning, dict) else None
    text = said.get("text") if isinstance(said, dict) else None
    return text if isinstance(text, str) else None


def _result_media(block: dict[str, Any]) -> tuple[list[Media], str] | None:
    """The images and documents inside a toolResult, and the JSON of the rest of it (counted as
    text); None when it holds none."""
    result = block.get("toolResult")
    if not isinstance(result, dict) or not isinstance(inner := result.get("content"), list):
        return None
    found = [b for b in inner if isinstance(b, dict) and len(b) == 1 and next(iter(b)) in ("image", "document")]
    items = [m for b in found for m in (_media(b, KINDS[next(iter(b))]) or [])]
    if not items:
        return None
    rest = {"toolResult": {**result, "content": [b for b in inner if b not in found]}}
    return items, compact_json(rest)


def _output_schema(root: Node) -> tuple[Node, str] | None:
    """A JSON output's format (`outputConfig.textFormat`, its schema a JSON string in structure.jsonSchema) and
    the schema as Claude reads it (anthropic_turns.schema_text); None where it holds none."""
    config = root.get("outputConfig")
    fmt = config.get("textFormat") if config is not None else None
    spec = fmt.value.get("structure") if fmt is not None and isinstance(fmt.value, dict) else None
    named = spec.get("jsonSchema") if isinstance(spec, dict) else None
    schema = named.get("schema") if isinstance(named, dict) else None
    try:
        parsed = json.loads(schema) if isinstance(schema, str) else schema
    except ValueError:
        return None
    if fmt is None or not isinstance(parsed, dict):
        return None
    return fmt, schema_text(parsed)


def request(root: Node, out: Builder, headers: Mapping[str, str] | None = None) -> Prompt:
    body = root.value
    config = expect(root.get("toolConfig"), dict, "'toolConfig'")
    tools = expect(config.get("tools"), list, "/toolConfig/tools") if config is not None else None
    if tools is not None:
        _blocks(out, tools, "tools", "/toolConfig/tools")
    output = _output_schema(root)
    if output is not None:  # JSON outputs: the schema is in the prompt after the tools, as on the Messages API
        out.add("tools", "/outputConfig/textFormat", "schema", output[0], text=output[1])

    system = expect(root.get("system"), list, "'system'")
    if system is not None:
        _blocks(out, system, "system", "/system", role="system", header={})

    messages = expect(root.get("messages"), list, "'messages'")
    if messages is None and system is None:
        raise InputError("no 'messages' list")
    images = cites = False
    for mi, msg in enumerate(messages.elements if messages else ()):
        if not isinstance(msg.value, dict):
            raise InputError(f"/messages/{mi} must be an object")
        role = msg.value.get("role")
        header = message_header(msg.value, "content")
        content = msg.get("content")
        if content is None or not isinstance(content.value, list):
            raise wrong_type(f"/messages/{mi}/content", list, None if content is None else content.value)
        before = len(out.segments)
        found = _blocks(out, content, "messages", f"/messages/{mi}/content", role=role, message_index=mi, header=header)
        images, cites = images or found[0], cites or found[1]
        if len(out.segments) == before:
            out.add("messages", f"/messages/{mi}/content", "empty", content, role=role, message_index=mi, header=header)

    extra = body.get("additionalModelRequestFields")
    extra = extra if isinstance(extra, dict) else {}
    thinking = extra.get("thinking") or extra.get("reasoning_config") or extra.get("reasoningConfig")
    choice = config.value.get("toolChoice") if config is not None else None
    perf = body.get("performanceConfig")
    settings = {
        "thinking": thinking,
        "effort": extra["output_config"].get("effort") if isinstance(extra.get("output_config"), dict) else None,
        "tool_choice": choice,
        "speed": perf.get("latency") if isinstance(perf, dict) else None,
        "guardrail": body.get("guardrailConfig"),
        "images": images,
        "citations": cites,
    }
    model = body.get("modelId")  # in the path on the wire; an SDK call's arguments dumped to a file hold it
    return Prompt(API, model if isinstance(model, str) else None, out.segments, settings)


# ---- usage


def usage(raw: Mapping[str, Any] | None) -> Usage:
    """Additive, like Anthropic's: inputTokens excludes what was read from or written to the cache.
    cacheDetails (when sent) splits the writes by TTL."""
    if not isinstance(raw, Mapping):
        return Usage()
    uncached = as_int(raw.get("inputTokens"))
    read = as_int(raw.get("cacheReadInputTokens", raw.get("cacheReadInputTokenCount")))
    write = as_int(raw.get("cacheWriteInputTokens", raw.get("cacheWriteInputTokenCount")))
    by_ttl = {"5m": 0, "1h": 0}
    details = raw.get("cacheDetails")
    for item in details if isinstance(details, list) else ():
        if isinstance(item, Mapping) and item.get("ttl") in by_ttl:
            by_ttl[item["ttl"]] += as_int(item.get("inputTokens"))
    w5, w1 = (by_ttl["5m"], by_ttl["1h"]) if sum(by_ttl.values()) == write else (write, 0)
    reported = any(
        raw.get(k) is not None
        for k in (
            "cacheReadInputTokens",
            "cacheWriteInputTokens",
            "cacheReadInputTokenCount",
            "cacheWriteInputTokenCount",
        )
    )
    return Usage(
        prompt_total=uncached + read + write,
        cache_read=read,
        cache_write_5m=w5,
        cache_write_1h=w1,
        uncached=uncached,
        output=as_int(raw.get("outputTokens")),
        reported=reported,
    )


def stream_usage(event: Mapping[str, Any], current: dict[str, Any] | None) -> dict[str, Any] | None:
    """ConverseStream: the `metadata` event carries usage (its EventStream :event-type is the type)."""
    raw = event.get("usage")
    if event.get("type") == "metadata" and isinstance(raw, Mapping):
        return dict(raw)
    return current


def is_content(event: Mapping[str, Any]) -> bool:
    return event.get("type") == "contentBlockDelta"


def meta(obj: Mapping[str, Any], current: ResponseMeta) -> ResponseMeta:
    """Converse names no id or model in its body (the id is the x-amzn-requestid header): its stopReason, on
    the whole body or the stream's messageStop event, and the signatures of its reasoning (the body's message,
    or a contentBlockDelta)."""
    output = obj.get("output")
    message = output.get("message") if isinstance(output, Mapping) else None
    content = message.get("content") if isinstance(message, Mapping) else None
    keys = sent_back.signed(content) or sent_back.streamed(obj.get("delta"))
    return current.merged(reasons=(obj.get("stopReason"),), keys=keys)


def is_final(event: Mapping[str, Any]) -> bool:
    return False  # metadata (FINAL_EVENTS) ends a stream


# this provider gives no account of its misses
diagnosis, stream_diagnosis, diagnostics_field = no_diagnosis, same_diagnosis, no_diagnostics_field
server_calls = no_server_calls  # no tool of its own runs between passes


# ---- routing and detection (the Adapter protocol)

_PATH = re.compile(r"/model/([^/]+)/(?:converse|converse-stream)/?$")
# Top-level fields only Converse has
_KEYS = {
    "modelId",
    "inferenceConfig",
    "toolConfig",
    "additionalModelRequestFields",
    "guardrailConfig",
    "performanceConfig",
    "promptVariables",
    "additionalModelResponseFieldPaths",
}


_INVOKE = re.compile(r"/model/([^/]+)/(?:invoke|invoke-with-response-stream)/?$")  # Bedrock InvokeModel


def route(path: str) -> tuple[str, str | None] | None:
    found = _PATH.search(path)
    if found:
        return API, unquote(found.group(1))
    found = _INVOKE.search(path)  # a model whose own body is this shape (Nova's; Claude's: anthropic.py)
    model = unquote(found.group(1)) if found else ""
    return (API, model) if model and any(m in model for m in providers()["bedrock"].invoke_converse_models) else None


def foreign(body: dict[str, Any] | None, path: str) -> str | None:
    if isinstance(body, dict) and isinstance(body.get("input"), dict) and "model" not in body:
        return "a Bedrock CountTokens body (a count, not a generation)"
    return None


def claims(body: dict[str, Any]) -> bool:
    return "messages" in body and bool(_KEYS & body.keys()) or _converse_blocks(body)


fits = adapter.no_tail
counts_only = adapter.never_counts


def spans(text: str) -> Spec:
    return _SPANS


def _converse_blocks(body: dict[str, Any]) -> bool:
    """Converse content blocks have no 'type': the first block of system or of the first message is
    {"text": ...} or {"cachePoint": ...} alone; the model is in the path, never in the body."""
    system, messages = body.get("system"), body.get("messages")
    if "model" in body or isinstance(system, str):
        return False
    first = system[0] if isinstance(system, list) and system else None
    if first is None and isinstance(messages, list) and messages and isinstance(messages[0], dict):
        content = messages[0].get("content")
        first = content[0] if isinstance(content, list) and content else None
    return (
        isinstance(first, dict)
        and "type" not in first
        and bool(first.keys() & {"text", "cachePoint", "image", "document", "toolUse", "toolResult"})
    )
