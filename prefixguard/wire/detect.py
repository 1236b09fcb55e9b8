"""Which API shape a request is: from its URL path when that names one (routes.py); from a path whose
tail names one (any prefix or version: gateways, Azure, OpenAI-compatible servers) when the body has that
shape's fields; else from its body's fields. Bodies that are no generation request (a response, a count, a cache creation) are NotARequest,
so lint skips them with a warning instead of failing."""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from prefixguard.utils.errors import InputError, NotARequest
from prefixguard.wire import anthropic, bedrock_converse, gemini, openai_chat, openai_responses, routes

# Body fields only one shape uses, for telling Anthropic from Chat when no URL path is known.
_ANTHROPIC_KEYS = {"system", "anthropic_version", "cache_control", "stop_sequences", "thinking", "top_k",
                   "output_config", "container", "mcp_servers"}
_CHAT_KEYS = {"response_format", "stream_options", "n", "max_completion_tokens", "reasoning_effort",
              "logprobs", "frequency_penalty", "presence_penalty", "parallel_tool_calls", "functions"}
_ANTHROPIC_BLOCKS = {"tool_use", "tool_result", "thinking", "redacted_thinking", "document", "image",
                     "server_tool_use", "search_result"}
_CHAT_PARTS = {"image_url", "input_audio", "file"}
_CHAT_ROLES = {"system", "developer", "tool", "function"}
# Shapes that are not requests of the APIs read here (a response, a count): NotARequest, so that lint
# skips them with a warning instead of failing.
_RESPONSE_OBJECTS = {"response", "chat.completion", "chat.completion.chunk", "list", "model"}
_BEDROCK_KEYS = {"modelId", "inferenceConfig", "toolConfig", "additionalModelRequestFields", "guardrailConfig",
                 "performanceConfig", "promptVariables", "additionalModelResponseFieldPaths"}
_COUNT_PATH = re.compile(r"/(count_tokens|input_tokens)/?$")


def analysable(method: str, path: str | None) -> bool:
    """Whether a request may be one the analysis reads, from its method and path alone (before its
    body arrives): a POST to a path that names a shape, or whose tail does (its body decides)."""
    return method.upper() == "POST" and bool(routes.route(path) or routes.tail(path))


def detect_api(body: dict | None, path: str | None = None) -> str:
    """The API shape: from the URL path when it names one (any prefix before /v1), from its tail when
    the body fits that shape, else from the body."""
    api = _api_of_path(path)
    if api:
        return api
    candidate = routes.tail(path)
    if candidate:
        return _fitting(candidate[0], body, path)
    if gemini.is_cache_creation(path):
        raise NotARequest("a Gemini cachedContents creation (an explicit cache, not a generation)")
    if not isinstance(body, dict):
        raise InputError("unknown API shape: the body is not a JSON object")
    foreign = _foreign(body)
    if foreign:
        raise NotARequest(foreign)
    if "contents" in body and "messages" not in body:
        return gemini.API
    if "messages" in body and _BEDROCK_KEYS & body.keys() or _converse_blocks(body):
        return bedrock_converse.API
    if "messages" in body:
        return anthropic.API if _anthropic_score(body) > 0 else openai_chat.API
    if "input" in body or "instructions" in body:
        return openai_responses.API
    raise NotARequest(f"unknown API shape: no 'messages', 'input' or 'contents' ({routes.known_shapes()})")


def _fitting(api: str, body: Any, path: str | None) -> str:
    """`api` when the body has that shape's fields (a path's tail alone is no proof: an app's own
    /messages endpoint is no Anthropic one); NotARequest naming the endpoint otherwise."""
    if isinstance(body, dict) and not _foreign(body):
        messages = body.get("messages")
        chat = isinstance(messages, list) and all(isinstance(m, dict) and "role" in m for m in messages) \
            and bool(messages) and "contents" not in body
        if api == openai_chat.API and chat:
            return api
        if api == anthropic.API and chat and ("max_tokens" in body or _anthropic_score(body) > 0):
            return api
        if api == openai_responses.API and ("input" in body or "instructions" in body) and "messages" not in body:
            return api
    endpoint = routes.template(path or "")
    raise NotARequest(f"POST {endpoint} ends like {api}, but its body is not one ({routes.known_shapes()})")


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
    return isinstance(first, dict) and "type" not in first and bool(
        first.keys() & {"text", "cachePoint", "image", "document", "toolUse", "toolResult"})


def _foreign(body: dict[str, Any]) -> str | None:
    if body.get("object") in _RESPONSE_OBJECTS or (body.get("type") == "message" and body.get("role") == "assistant"):
        return "an API response"
    if isinstance(body.get("input"), dict) and "model" not in body:
        return "a Bedrock CountTokens body (a count, not a generation)"
    if "contents" in body and {"ttl", "expireTime"} & body.keys():
        return "a Gemini cachedContents creation (an explicit cache, not a generation)"
    return None


def counts_only(api: str, body: dict[str, Any], path: str | None) -> bool:
    """A token-counting request: the count_tokens / input_tokens endpoints, or an Anthropic body without
    max_tokens (which the Messages endpoint rejects and count_tokens takes)."""
    if path and _COUNT_PATH.search(urlsplit(path).path):
        return True
    return api == anthropic.API and "max_tokens" not in body


def _api_of_path(path: str | None) -> str | None:
    found = routes.route(path)
    return found[0] if found else None


def _anthropic_score(body: dict[str, Any]) -> int:
    """Positive: Anthropic Messages; otherwise OpenAI Chat. Weighs fields only one of them has, in
    stages (top-level fields, tools, then messages in order) and stops at the first stage that leans
    one way: a body rarely mixes the two, and reading every message would cost a tenth of a parse."""
    score = len(_ANTHROPIC_KEYS & body.keys()) - len(_CHAT_KEYS & body.keys())
    if score:
        return score
    tools = body.get("tools")
    for tool in tools if isinstance(tools, list) else ():
        if isinstance(tool, dict):
            score += 1 if "input_schema" in tool else -1 if tool.get("type") == "function" else 0
    if score:
        return score
    messages = body.get("messages")
    for msg in messages if isinstance(messages, list) else ():
        if not isinstance(msg, dict):
            continue
        role = msg.get("role")  # a role or type of the wrong JSON type is the adapter's error to report
        score -= (isinstance(role, str) and role in _CHAT_ROLES) + ("tool_calls" in msg)
        content = msg.get("content")
        for part in content if isinstance(content, list) else ():
            kind = part.get("type") if isinstance(part, dict) else None
            if isinstance(kind, str):
                score += (kind in _ANTHROPIC_BLOCKS) - (kind in _CHAT_PARTS)
        if score:
            return score
    return 1 if str(body.get("model", "")).startswith("claude") else 0


def detect(body: dict[str, Any], path: str | None, headers: Mapping[str, str] | None) -> str:
    """A request's API shape: the path first, then the anthropic-version header every Anthropic client sends, then the body."""
    if not _api_of_path(path) and not routes.tail(path) and headers and any(
            k.lower() == "anthropic-version" for k in headers):
        return anthropic.API
    return detect_api(body, path)
