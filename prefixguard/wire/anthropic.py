"""Anthropic Messages API (POST /v1/messages): request -> segments and settings; usage -> Usage.

Prefix order: tools, then system, then messages. Breakpoints are `cache_control` on blocks and tools
(TTL "5m" unless "1h"); a top-level `cache_control` is the automatic breakpoint. The media of its
blocks: anthropic_media.py; telling its bodies from OpenAI Chat ones: anthropic_detect.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from prefixguard.contracts.providers import providers
from prefixguard.model.diagnosis import MISS, NO_MISS, Diagnosis
from prefixguard.model.prompt import Prompt
from prefixguard.model.usage import ResponseMeta, Usage
from prefixguard.utils.errors import InputError
from prefixguard.wire import adapter, anthropic_server, sent_back
from prefixguard.wire import anthropic_turns as turns
from prefixguard.wire.anthropic_detect import role_messages, score
from prefixguard.wire.anthropic_media import MEDIA_KINDS, block_media, cites, has_image
from prefixguard.wire.anthropic_server import result_tokens
from prefixguard.wire.fields import is_server_result
from prefixguard.wire.jsonspan import ABSENT, Node, PlainMessage, Run, Spec, items
from prefixguard.wire.segments import (
    MESSAGE_CONTENT,
    Builder,
    MessageHeaders,
    as_int,
    expect,
    model_of,
    release,
    wrong_type,
)

API = "anthropic"
SHAPE = "Anthropic Messages (/v1/messages, Bedrock InvokeModel, Vertex rawPredict)"
TAIL = re.compile(r"/messages(?:/compact)?/?$")
ENDPOINT = "/v1/messages"
HEADER = "anthropic-version"  # every Anthropic client sends it
JSON_ARRAY_STREAM = False
FINAL_EVENTS = adapter.FINAL_EVENTS
_SPANS: Spec = {
    "tools": {"[]": None},
    "output_config": {"format": None},
    "output_format": None,
    "system": {"[]": None},
    "messages": {"[]": {"content": {"[]": None}}},
}
DEFAULT_TTL = "5m"


def ttl(value: Any) -> str | None:
    """The breakpoint TTL a part carries, or None."""
    if isinstance(value, dict):
        mark = value.get("cache_control")
        if isinstance(mark, dict):
            value = mark.get("ttl")
            if value is not None and not isinstance(value, str):  # the API answers 400; so do we
                raise InputError(f'cache_control.ttl must be a string such as "1h", got {type(value).__name__}')
            return value or DEFAULT_TTL
    return None


def _part(block: Any, where: str) -> tuple[str, str | None, str | None]:
    """(kind, breakpoint TTL, the text it renders or None to count its JSON) of a system or content block."""
    if isinstance(block, str):
        return "text", None, block
    kind = block.get("type") if isinstance(block, dict) else None
    if not isinstance(kind, str):
        raise InputError(f"{where} must be an object with a 'type'")
    text = block.get("text") if kind == "text" else block.get("thinking") if kind == "thinking" else None
    return kind, ttl(block), text


def request(root: Node, out: Builder, headers: Mapping[str, str] | None) -> Prompt:
    body = root.value
    tools = expect(root.get("tools"), list, "'tools'")
    tool_types = []
    for i, tool in enumerate(tools.elements if tools else ()):
        out.add("tools", f"/tools/{i}", "tool", tool, breakpoint=ttl(tool.value))
        if isinstance(tool.value, dict):
            tool_types.append(str(tool.value.get("type", "")))
    found = turns.output_schema(root)
    if found is not None:  # JSON outputs: the schema is in the prompt, after the tools (rules/encodings.toml)
        out.add("tools", found[0], "schema", found[1], text=found[2])

    system = expect(root.get("system"), (str, list), "'system'")
    if system is not None and isinstance(system.value, str):
        out.add("system", "/system", "text", system, role="system", header={}, text=system.value)
    elif system is not None:
        for i, block in enumerate(system.elements):
            kind, breakpoint, text = _part(block.value, f"/system/{i}")
            out.add(
                "system",
                f"/system/{i}",
                kind,
                block,
                role="system",
                header={} if i == 0 else None,
                breakpoint=breakpoint,
                text=text,
            )

    messages = expect(root.get("messages"), list, "'messages'")
    if messages is None:
        raise InputError("no 'messages' list")
    images = citations = False
    header_of = MessageHeaders("content")
    contract = providers()["anthropic"]
    unrendered, earlier_turn = contract.unrendered_blocks, contract.earlier_turn_blocks
    # nothing before the last compaction block is rendered; an earlier turn's thinking neither (anthropic_turns)
    start = turns.compaction(messages.value, contract.compaction_blocks) if contract.compaction_blocks else None
    latest: int | None = None  # the latest turn's slot, found at the first block that needs it
    for mi, msg in items(messages.elements):
        first = 0  # the first block rendered
        if start is not None:
            if type(msg) is Run or type(msg) is PlainMessage or msg.value is not start[0]:
                continue  # before the compaction block
            first, start = start[1], None
        if type(msg) is Run:  # messages the body read beside this one has the same: its parts, or read now
            if not out.take_run(msg):
                for k, plain in enumerate(msg.messages()):
                    _plain(out, plain, msg.first + k, header_of)
            continue
        if type(msg) is PlainMessage:  # {"role": "...", "content": "..."}: one string part, no marker
            _plain(out, msg, mi, header_of)
            release(messages, mi)
            continue
        fields = msg.value
        if type(fields) is not dict:
            raise InputError(f"/messages/{mi} must be an object")
        role = fields.get("role")
        header = header_of(fields)
        content = msg.get("content") or ABSENT
        parts = content.value
        if type(parts) is str:
            out.add(
                "messages", MESSAGE_CONTENT, "text", content, role=role, message_index=mi, header=header, text=parts
            )
        elif isinstance(parts, list):
            added = 0
            for bi, block in enumerate(content.elements):
                v, where = block.value, f"/messages/{mi}/content/{bi}"
                kind, breakpoint, text = _part(v, where)
                if kind in earlier_turn and role == "assistant" and not breakpoint:  # (one the API refuses: lint's)
                    latest = turns.latest_turn(messages.value) if latest is None else latest
                    if turns.slot(messages.elements, mi) < latest:
                        continue  # an earlier turn's thinking
                if bi < first:  # before the compaction block
                    continue
                if kind in unrendered:  # a breakpoint on it marks where the prompt is by then
                    if breakpoint:
                        out.mark_last(breakpoint)
                    continue
                media, cost = None, None
                if kind in MEDIA_KINDS or (kind == "tool_result" and "content" in v):
                    media, text = block_media(v, kind) or (None, text)
                elif is_server_result(kind):
                    cost = result_tokens(v)
                out.add(
                    "messages",
                    where,
                    kind,
                    block,
                    role=role,
                    message_index=mi,
                    header=None if added else header,
                    breakpoint=breakpoint,
                    text=text,
                    media=media,
                    tokens_by_rule=cost,
                )
                added += 1
                if isinstance(v, dict):  # the membership tests spare two calls on every plain block
                    images = images or kind == "image" or ("content" in v and has_image(v))
                    citations = citations or ("citations" in v and cites(v))
            if not added:
                out.add(
                    "messages", f"/messages/{mi}/content", "empty", content, role=role, message_index=mi, header=header
                )
        elif parts is None:
            out.add(
                "messages", f"/messages/{mi}", "message", msg, role=role, message_index=mi, header=header, whole=True
            )
        else:
            raise wrong_type(f"/messages/{mi}/content", (str, list), parts)
        release(messages, mi)

    tool_choice = body.get("tool_choice")
    output_config = body.get("output_config")
    settings = {
        "thinking": body.get("thinking"),
        "effort": output_config.get("effort") if isinstance(output_config, dict) else None,
        "tool_choice": (
            {k: v for k, v in tool_choice.items() if k != "disable_parallel_tool_use"}
            if isinstance(tool_choice, dict)
            else tool_choice
        ),
        "disable_parallel_tool_use": (
            tool_choice.get("disable_parallel_tool_use") if isinstance(tool_choice, dict) else None
        ),
        "speed": body.get("speed"),
        "web_search": any(t.startswith("web_search") for t in tool_types),
        "web_fetch": any(t.startswith("web_fetch") for t in tool_types),
        "citations": citations,
        "images": images,
        "betas": _betas(headers),
    }
    return Prompt(API, model_of(body), out.segments, settings, auto_breakpoint=ttl(body))


def _plain(out: Builder, msg: PlainMessage, mi: int, header_of: MessageHeaders) -> None:
    """The one part of a plain message: its content string, in the message's place."""
    out.add_text(
        "messages", MESSAGE_CONTENT, "text", msg.content, msg.content_start, msg.role, mi, header_of.of_role(msg.role)
    )


def _betas(headers: Mapping[str, str] | None) -> list[str] | None:
    """Beta features from the anthropic-beta header (None when headers are unknown, e.g. a file)."""
    if headers is None:
        return None
    value = next((v for k, v in headers.items() if k.lower() == "anthropic-beta"), "")
    return sorted({b.strip() for b in value.split(",") if b.strip()})


# ---- usage


def usage(raw: Mapping[str, Any] | None) -> Usage:
    """Additive convention: input_tokens (after the last breakpoint) + creation + read = prompt total.
    A request sampled more than once lists each pass in `iterations` (server-side compaction: the first
    pass summarizes the prompt as sent, the top-level counts are the last pass's, on the compacted
    context); the prompt this request sent is the first pass's. Where the counts are the first pass's own
    (that one, or a stream's first event: FIRST_PASS), first_pass says how long its prompt was."""
    if not isinstance(raw, Mapping):
        return Usage()
    top, passes = raw, raw.get("iterations")
    if isinstance(passes, list) and passes and isinstance(passes[0], Mapping):
        raw = passes[0]
    uncached = as_int(raw.get("input_tokens"))
    read = as_int(raw.get("cache_read_input_tokens"))
    write = as_int(raw.get("cache_creation_input_tokens"))
    w5, w1 = write, 0  # without the TTL split every write is the default 5m one
    split = raw.get("cache_creation")
    if isinstance(split, Mapping):
        s5, s1 = as_int(split.get("ephemeral_5m_input_tokens")), as_int(split.get("ephemeral_1h_input_tokens"))
        if s5 + s1 == write:
            w5, w1 = s5, s1
    reported = raw.get("cache_read_input_tokens") is not None or raw.get("cache_creation_input_tokens") is not None
    return Usage(
        prompt_total=uncached + read + write,
        cache_read=read,
        cache_write_5m=w5,
        cache_write_1h=w1,
        uncached=uncached,
        output=as_int(raw.get("output_tokens")),
        reported=reported,
        first_pass=as_int(raw.get(FIRST_PASS)) or (uncached + read + write if raw is not top else 0),
    )


FIRST_PASS = "prefixguard_first_pass"  # kept in a stream's raw usage: its first event's prompt total


def stream_usage(event: Mapping[str, Any], current: dict[str, Any] | None) -> dict[str, Any] | None:
    """Raw usage after one SSE event: message_start gives it, message_delta updates it (cumulative)."""
    kind = event.get("type")
    if kind == "message_start":
        message = event.get("message")
        raw = message.get("usage") if isinstance(message, Mapping) else None
        if not isinstance(raw, Mapping):
            return current
        first = usage(raw).prompt_total  # the first pass's own counts, before any server tool ran
        return {**raw, FIRST_PASS: first}
    if kind == "message_delta" and isinstance(event.get("usage"), Mapping):
        merged = dict(current or {})
        merged.update((k, v) for k, v in event["usage"].items() if v is not None)
        return merged
    return current


server_calls = anthropic_server.server_calls  # web search, web fetch, code execution, an MCP connector's


def is_content(event: Mapping[str, Any]) -> bool:
    return event.get("type") == "content_block_delta"


def meta(obj: Mapping[str, Any], current: ResponseMeta) -> ResponseMeta:
    """A whole message, or a stream's message_start (the message), message_delta (its stop_reason) and the
    events that sign its thinking (a signature_delta, a redacted block's start)."""
    message = obj.get("message") if obj.get("type") == "message_start" else obj
    if isinstance(message, Mapping):
        keys = sent_back.signed(message.get("content"))
        current = current.merged(message.get("id"), message.get("model"), (message.get("stop_reason"),), keys=keys)
    delta = obj.get("delta")
    if obj.get("type") == "message_delta" and isinstance(delta, Mapping):
        return current.merged(reasons=(delta.get("stop_reason"),))
    keys = sent_back.streamed(delta or obj.get("content_block"))
    return current.merged(keys=keys) if keys else current


# ---- cache diagnostics (asked with diagnostics.previous_message_id)

_MISS_LEVELS = {
    "model_changed": "model",
    "system_changed": "system",
    "tools_changed": "tools",
    "messages_changed": "messages",
}
_NO_COMPARISON = {"previous_message_not_found": "not_found", "unavailable": "unavailable"}


def diagnosis(message: Mapping[str, Any]) -> Diagnosis | None:
    """A response message's `diagnostics`: None when not asked; cache_miss_reason null means no miss
    found (or the comparison still pending: the API cannot tell them apart)."""
    found = message.get("diagnostics")
    if not isinstance(found, Mapping):
        return None
    reason = found.get("cache_miss_reason")
    if not isinstance(reason, Mapping):
        return Diagnosis(status=NO_MISS, label="none")
    kind = str(reason.get("type") or "")
    missed = reason.get("cache_missed_input_tokens")
    missed = as_int(missed) if missed is not None else None
    if kind in _NO_COMPARISON:
        return Diagnosis(status=_NO_COMPARISON[kind], label=kind)
    return Diagnosis(status=MISS, level=_MISS_LEVELS.get(kind), label=kind, missed_tokens=missed)


def stream_diagnosis(event: Mapping[str, Any], current: Diagnosis | None) -> Diagnosis | None:
    """Streaming: the diagnosis comes on message_start, inside its message."""
    if event.get("type") == "message_start" and isinstance(event.get("message"), Mapping):
        return diagnosis(event["message"]) or current
    return current


RESPONSE_ID = re.compile(rb'"id"\s*:\s*"(msg_[A-Za-z0-9_-]{1,200})"')  # a message's id (JSON or message_start)


def diagnostics_field(previous_id: str, body: Mapping[str, Any]) -> tuple[str, Any] | None:
    """The body member that asks for a diagnosis against an earlier response (the proxy's opt-in);
    None when the body has one already."""
    return None if "diagnostics" in body else ("diagnostics", {"previous_message_id": previous_id})


def is_final(event: Mapping[str, Any]) -> bool:
    return False  # message_stop (FINAL_EVENTS) ends a stream


# ---- routing and detection (the Adapter protocol)

_V1 = re.compile(r"/v1/messages/?$")
_INVOKE = re.compile(r"/model/([^/]+)/(?:invoke|invoke-with-response-stream)/?$")  # Bedrock InvokeModel
_RAW = re.compile(r"/publishers/anthropic/models/([^/:]+):(?:rawPredict|streamRawPredict)$")  # Vertex AI


def route(path: str) -> tuple[str, str | None] | None:
    if _V1.search(path):
        return API, None
    found = _INVOKE.search(path)
    if found:  # InvokeModel takes any maker's own body: only a Claude model's is a Messages one
        model = unquote(found.group(1))
        return (API, model) if "anthropic" in model or "claude" in model else None
    found = _RAW.search(path)
    return (API, unquote(found.group(1))) if found else None


def foreign(body: dict[str, Any] | None, path: str) -> str | None:
    if isinstance(body, dict) and body.get("type") == "message" and body.get("role") == "assistant":
        return "an API response"
    return None


def claims(body: dict[str, Any]) -> bool:
    return "messages" in body and score(body) > 0


def fits(body: dict[str, Any]) -> bool:
    return role_messages(body) and ("max_tokens" in body or score(body) > 0)


def counts_only(body: dict[str, Any]) -> bool:
    """A body without max_tokens: the Messages endpoint rejects it, count_tokens takes it."""
    return "max_tokens" not in body


def spans(text: str) -> Spec:
    return _SPANS
