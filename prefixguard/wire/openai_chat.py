"""OpenAI Chat Completions (POST /v1/chat/completions) and compatible servers (vLLM, SGLang, DeepSeek).

Prefix order: tools, the response_format schema, leading system/developer messages, then the rest.
Explicit breakpoints (GPT-5.6+) are `prompt_cache_breakpoint` markers on content parts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from typing import Any
from urllib.parse import unquote

from prefixguard.contracts.providers import cloud_of, providers
from prefixguard.model import templates
from prefixguard.model.prompt import Prompt
from prefixguard.model.usage import ResponseMeta, Usage
from prefixguard.utils.errors import InputError
from prefixguard.wire import adapter, anthropic, anthropic_detect, sent_back, tool_render
from prefixguard.wire.adapter import no_diagnosis, no_diagnostics_field, no_server_calls, same_diagnosis
from prefixguard.wire.fields import reasoning_text
from prefixguard.wire.jsonspan import ABSENT, Node, PlainMessage, Spec
from prefixguard.wire.openai_media import embedded_media, part_media
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

API = "openai-chat"
SHAPE = "OpenAI Chat Completions (/v1/chat/completions)"
# Any prefix or version before it (z.ai /api/coding/paas/v4/..., /openrouter/...); Azure names a deployment.
# Ollama's own chat endpoint (/api/chat) takes the same role messages: a candidate too, the body decides.
TAIL = re.compile(r"(?:(?:/deployments/(?P<model>[^/]+))?/chat/completions(?:/compact)?|/api/chat)/?$")
ENDPOINT = "/v1/chat/completions"
HEADER = None
JSON_ARRAY_STREAM = False
FINAL_EVENTS = adapter.FINAL_EVENTS
RESPONSE_ID = None  # Chat answers carry no diagnostics to ask for
_REASONING: Spec = dict.fromkeys(("reasoning_content", "reasoning", "reasoning_details"))  # [chat_reasoning]
_SPANS: Spec = {
    "tools": {"[]": None},
    "functions": {"[]": None},
    "response_format": None,
    "messages": {"[]": {"content": {"[]": None}, "tool_calls": {"[]": None}, **_REASONING}},
}
SYSTEM_ROLES = ("system", "developer")
PART_KINDS = {"text": "text", "image_url": "image", "input_audio": "audio", "file": "document", "refusal": "text"}


def breakpoint_of(value: Any, options: Any) -> str | None:
    """The TTL of an explicit breakpoint marker on a part ("default" when no TTL is given); also Anthropic-style
    `cache_control`, which OpenAI-compatible gateways (OpenRouter) pass through."""
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("cache_control"), dict):
        return anthropic.ttl(value)
    mark = value.get("prompt_cache_breakpoint")
    if mark is None:
        return None
    ttl = mark.get("ttl") if isinstance(mark, dict) else None
    if ttl is None and isinstance(options, dict):
        ttl = options.get("ttl")
    return str(ttl) if ttl else "default"


def _role(msg: Node) -> Any:
    return msg.role if type(msg) is PlainMessage else msg.value.get("role") if isinstance(msg.value, dict) else None


def add_tools(root: Node, out: Builder) -> None:
    options = root.value.get("prompt_cache_options")
    for key in ("tools", "functions"):  # "functions": the legacy form of tools
        tools = expect(root.get(key), list, f"'{key}'")
        for i, tool in enumerate(tools.elements if tools else ()):
            text = tool_render.renderer(tool.value, out.api, out.model)  # None: counted as its JSON
            out.add("tools", f"/{key}/{i}", "tool", tool, breakpoint=breakpoint_of(tool.value, options), text=text)


def add_format(out: Builder, pointer: str, fmt: Node) -> None:
    """A response format, in the prompt after the tools: as the model reads it where that is known, with the
    API's own tokens around it; else as its JSON."""
    text = tool_render.rendered_format(fmt.value, out.api, out.model)
    seg = out.add("tools", pointer, "schema", fmt, text=text)
    if text is not None and not out.estimated:
        seg.tokens += templates.format_tokens(out.api, out.model)


def request(root: Node, out: Builder, headers: Mapping[str, str] | None = None) -> Prompt:
    body = root.value
    options = body.get("prompt_cache_options")
    placed = templates.tools_at(API, out.model)  # a chat template that writes the tools elsewhere
    if placed is None:
        add_tools(root, out)
    fmt = expect(root.get("response_format"), dict, "'response_format'")
    if fmt is not None and fmt.value.get("type") != "text" and templates.message_framing(API, out.model).schema:
        add_format(out, "/response_format", fmt)

    messages = expect(root.get("messages"), list, "'messages'")
    if messages is None:
        raise InputError("no 'messages' list")
    images = False
    leading = True
    thinking = templates.chat_reasoning()
    header_of = MessageHeaders("content", "tool_calls", *thinking.fields)
    elements = messages.elements
    last_user = next((mi for mi in range(len(elements) - 1, -1, -1) if _role(elements[mi]) == "user"), -1)
    # "last_user": in the last message where it is the user's, else nowhere (rules/encodings.toml [tool_placement])
    tools_at = last_user if placed and last_user == len(elements) - 1 else None
    for mi, msg in enumerate(messages.elements):
        if mi == tools_at:
            add_tools(root, out)
        # {"role": "...", "content": "..."}: one string part, no marker (a file in its text: the general path)
        if type(msg) is PlainMessage and ";base64," not in msg.content:
            role: Any = msg.role
            leading = leading and role in SYSTEM_ROLES
            kind = "tool_result" if role == "tool" else "text"
            out.add_text(
                "system" if leading else "messages",
                MESSAGE_CONTENT,
                kind,
                msg.content,
                msg.content_start,
                role,
                mi,
                header_of.of_role(role),
            )
            release(messages, mi)
            continue
        fields = msg.value
        if not isinstance(fields, dict):
            raise InputError(f"/messages/{mi} must be an object")
        role = fields.get("role")
        leading = leading and role in SYSTEM_ROLES
        level = "system" if leading else "messages"
        # the header goes on the message's first part only: None once a part has taken it
        header: dict[str, Any] | None = header_of(fields)
        said = next((f for f in thinking.fields if fields.get(f) and isinstance(fields[f], str | list)), None)
        # generated first, it renders before the answer; an earlier turn's is not rendered at all
        if (
            said is not None
            and role == "assistant"
            and not (thinking.dropped_before_last_user_message and mi < last_user)
        ):
            out.add(
                level,
                f"/messages/{mi}/{said}",
                "thinking",
                msg.get(said) or ABSENT,
                role=role,
                message_index=mi,
                header=header,
                text=reasoning_text(fields[said]),
            )
            header = None
        content = msg.get("content") or ABSENT
        parts = content.value
        if isinstance(parts, str):
            embedded = embedded_media(parts)
            out.add(
                level,
                MESSAGE_CONTENT,
                "tool_result" if role == "tool" else "text",
                content,
                role=role,
                message_index=mi,
                header=header,
                text=embedded[1] if embedded else parts,
                media=embedded[0] if embedded else None,
                breakpoint=breakpoint_of(fields, options),
            )
            header = None
        elif isinstance(parts, list):
            for pi, part in enumerate(content.elements):
                v = part.value
                kind = "tool_result" if role == "tool" else _part_kind(v, f"/messages/{mi}/content/{pi}")
                found = part_media(v) if kind in ("image", "document", "audio") or role == "tool" else None
                out.add(
                    level,
                    f"/messages/{mi}/content/{pi}",
                    kind,
                    part,
                    role=role,
                    message_index=mi,
                    header=header,
                    breakpoint=breakpoint_of(v, options),
                    text=v.get("text") if isinstance(v, dict) else None,
                    media=[found] if found else None,
                )
                header = None
                images = images or kind == "image"
        elif parts is not None:
            raise wrong_type(f"/messages/{mi}/content", (str, list), parts)
        calls = msg.get("tool_calls")
        if calls is not None and calls.value is not None:
            if not isinstance(calls.value, list):
                raise wrong_type(f"/messages/{mi}/tool_calls", list, calls.value)
            for ci, call in enumerate(calls.elements):
                out.add(
                    level,
                    f"/messages/{mi}/tool_calls/{ci}",
                    "tool_use",
                    call,
                    role=role,
                    message_index=mi,
                    header=header,
                    text=tool_render.rendered_call(call.value, out.api, out.model),
                )
                header = None
        if header is not None:  # no content at all (null content, refusal, legacy function_call)
            out.add(level, f"/messages/{mi}", "message", msg, role=role, message_index=mi, header=header, whole=True)
        release(messages, mi)

    reasoning = body.get("reasoning")
    settings = {
        "tool_choice": body.get("tool_choice"),
        "parallel_tool_calls": body.get("parallel_tool_calls"),
        "effort": body.get("reasoning_effort") or (reasoning.get("effort") if isinstance(reasoning, dict) else None),
        "prompt_cache_key": body.get("prompt_cache_key"),
        "prompt_cache_retention": body.get("prompt_cache_retention"),
        "prompt_cache_options": options,
        "cache_mode": cache_mode(options),
        "images": images,
    }
    return Prompt(API, model_of(body), out.segments, settings)


def cache_mode(options: Any) -> str | None:
    """ "explicit" when prompt_cache_options asks for explicit breakpoints (GPT-5.6+), else None."""
    return "explicit" if isinstance(options, dict) and options.get("mode") == "explicit" else None


def _part_kind(part: Any, where: str) -> str:
    if not isinstance(part, dict) or not isinstance(part.get("type"), str):
        raise InputError(f"{where} must be an object with a 'type'")
    named: str = part["type"]
    return PART_KINDS.get(named, named)


# ---- usage (shared with the Responses API: same subset convention, other field names)


def usage(raw: Mapping[str, Any] | None) -> Usage:
    """Subset convention: cached (and, GPT-5.6+, written) tokens are inside prompt_tokens/input_tokens,
    unless total_tokens adds them on top (then they are outside it).

    Also DeepSeek's prompt_cache_hit_tokens / prompt_cache_miss_tokens (hit + miss = prompt), and
    vLLM/SGLang's prompt_tokens_details. No cache field at all: reported=False, never a miss.
    """
    if not isinstance(raw, Mapping):
        return Usage()
    prompt = as_int(raw.get("prompt_tokens", raw.get("input_tokens")))
    output = as_int(raw.get("completion_tokens", raw.get("output_tokens")))
    made = raw.get("completion_tokens_details") or raw.get("output_tokens_details")
    reasoning = as_int(made.get("reasoning_tokens")) if isinstance(made, Mapping) else 0
    if reasoning and as_int(raw.get("total_tokens")) == prompt + output + reasoning:
        output += reasoning  # the usage's own sum says the reasoning is outside completion_tokens (xAI)
    details = raw.get("prompt_tokens_details") or raw.get("input_tokens_details")
    details = details if isinstance(details, Mapping) else {}
    cached = details.get("cached_tokens", raw.get("cached_tokens"))
    written = details.get("cache_write_tokens", raw.get("cache_write_tokens"))
    hit, miss = raw.get("prompt_cache_hit_tokens"), raw.get("prompt_cache_miss_tokens")
    if hit is not None or miss is not None:  # DeepSeek
        read, write = as_int(hit), 0
        prompt = prompt or read + as_int(miss)
    else:
        read, write = as_int(cached), as_int(written)
        if read and as_int(raw.get("total_tokens")) == prompt + read + output != prompt + output:
            # the usage's own sum says the read is outside prompt_tokens (a gateway in front of GLM-5.1)
            prompt += read
        if read + write > prompt:
            # Gemini via OpenRouter counts a fresh explicit cache as both written and read: the tokens
            # written are inside the read count, and a request cannot read what it writes itself.
            read = max(min(read - write, prompt - write), 0)
    reported = any(v is not None for v in (cached, written, hit, miss)) or _omits_zero_reads(raw)
    # OpenAI bills writes at one rate whatever the retention: they go in the default (5m) bucket.
    return Usage(
        prompt_total=prompt,
        cache_read=read,
        cache_write_5m=write,
        cache_write_1h=0,
        uncached=max(prompt - read - write, 0),
        output=output,
        reported=reported,
        reasoning=min(reasoning, output),
    )


def _omits_zero_reads(raw: Mapping[str, Any]) -> bool:
    """Whether the usage is that of a provider that leaves its cache field out when it read nothing (Groq):
    its own fields are all there (rules/providers.toml: zero_counts_omitted, usage_marker_fields)."""
    return any(all(k in raw for k in fields) for fields in _zero_omitting_usages())


@cache
def _zero_omitting_usages() -> tuple[tuple[str, ...], ...]:
    return tuple(
        c.usage_marker_fields
        for c in providers().values()
        if API in c.apis and c.zero_counts_omitted and c.usage_marker_fields
    )


# Ollama's own chat endpoint (/api/chat) counts at the top level of its answer and of its stream's last line: the
# whole prompt, the output and, where its server says it, the prompt's tokens read from its cache (left out when 0).
# Source: https://github.com/ollama/ollama/blob/main/docs/api.md (prompt_eval_count, eval_count) and api.Metrics
# (prompt_eval_cached_count), read 2026-12-06.
_OLLAMA_COUNTS = {"prompt_eval_count": "prompt_tokens", "eval_count": "completion_tokens"}


def stream_usage(event: Mapping[str, Any], current: dict[str, Any] | None) -> dict[str, Any] | None:
    """The include_usage final chunk (choices: []) carries usage; some servers send it on every chunk; Ollama's
    /api/chat, its counts at the top level (its usage in Chat's names)."""
    raw = event.get("usage")
    if isinstance(raw, Mapping):
        return dict(raw)
    if "prompt_eval_count" not in event:
        return current
    counts: dict[str, Any] = {name: event[k] for k, name in _OLLAMA_COUNTS.items() if k in event}
    if "prompt_eval_cached_count" in event:
        counts["prompt_tokens_details"] = {"cached_tokens": event["prompt_eval_cached_count"]}
    return counts


def is_content(event: Mapping[str, Any]) -> bool:
    message = event.get("message")  # Ollama's /api/chat stream: a message each line
    if isinstance(message, Mapping) and any(message.get(k) for k in ("content", "tool_calls", "thinking")):
        return True
    for choice in event.get("choices") or ():
        delta = choice.get("delta") if isinstance(choice, Mapping) else None
        if isinstance(delta, Mapping) and any(
            delta.get(k) for k in ("content", "tool_calls", "reasoning_content", "reasoning", "refusal")
        ):
            return True
    return False


def meta(obj: Mapping[str, Any], current: ResponseMeta) -> ResponseMeta:
    """A whole completion, or a chunk: each names the id and model; a choice's finish_reason comes once."""
    choices = obj.get("choices")
    reasons = (
        tuple(c.get("finish_reason") for c in choices if isinstance(c, Mapping)) if isinstance(choices, list) else ()
    )
    reasons += (obj["done_reason"],) if isinstance(obj.get("done_reason"), str) else ()  # Ollama's /api/chat
    first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], Mapping) else {}
    said = first.get("message") or first.get("delta")  # a completion's message, a chunk's delta
    keys = sent_back.called(said.get("tool_calls")) if isinstance(said, Mapping) else ()
    return current.merged(obj.get("id"), obj.get("model"), reasons, obj.get("created"), keys=keys)


def is_final(event: Mapping[str, Any]) -> bool:
    return event.get("done") is True  # Ollama's /api/chat stream's last line (Chat's ends with `data: [DONE]`)


# this provider gives no account of its misses
diagnosis, stream_diagnosis, diagnostics_field = no_diagnosis, same_diagnosis, no_diagnostics_field
server_calls = no_server_calls  # no tool of its own runs between passes


# ---- routing and detection (the Adapter protocol)

_V1 = re.compile(r"/v1/chat/completions/?$")
# objects of OpenAI's answers (and its listings), never a request
_ANSWERS = {"chat.completion", "chat.completion.chunk", "list", "model"}


_INVOKE = re.compile(r"/model/([^/]+)/(?:invoke|invoke-with-response-stream)/?$")  # Bedrock InvokeModel


def route(path: str) -> tuple[str, str | None] | None:
    if _V1.search(path):
        return API, None
    found = _INVOKE.search(path)  # a maker whose models take a Chat body there (Claude's: anthropic.py)
    model = unquote(found.group(1)) if found else ""
    return (API, model) if cloud_of(model) else None


def foreign(body: dict[str, Any] | None, path: str) -> str | None:
    return "an API response" if isinstance(body, dict) and body.get("object") in _ANSWERS else None


def claims(body: dict[str, Any]) -> bool:
    return "messages" in body  # asked after Anthropic, which claims the messages bodies that lean its way


def fits(body: dict[str, Any]) -> bool:
    return anthropic_detect.role_messages(body)


counts_only = adapter.never_counts


def spans(text: str) -> Spec:
    return _SPANS
