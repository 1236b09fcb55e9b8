"""Telling an Anthropic Messages body from an OpenAI Chat one when no URL path names the shape: the
fields, tool shapes, roles and block types only one of the two uses, weighed by `score`."""

from __future__ import annotations

from typing import Any

# Body fields only one shape uses, for telling Anthropic from Chat when no URL path is known.
_ANTHROPIC_KEYS = {
    "system",
    "anthropic_version",
    "cache_control",
    "stop_sequences",
    "thinking",
    "top_k",
    "output_config",
    "container",
    "mcp_servers",
}
_CHAT_KEYS = {
    "response_format",
    "stream_options",
    "n",
    "max_completion_tokens",
    "reasoning_effort",
    "logprobs",
    "frequency_penalty",
    "presence_penalty",
    "parallel_tool_calls",
    "functions",
}
_ANTHROPIC_BLOCKS = {
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "document",
    "image",
    "server_tool_use",
    "search_result",
}
_CHAT_PARTS = {"image_url", "input_audio", "file"}
_CHAT_ROLES = {"system", "developer", "tool", "function"}


def score(body: dict[str, Any]) -> int:
    """Positive: Anthropic Messages; otherwise OpenAI Chat. Weighs fields only one of them has, in
    stages (top-level fields, tools, then messages in order) and stops at the first stage that leans
    one way: a body rarely mixes the two, and reading every message would cost a tenth of a parse."""
    total = len(_ANTHROPIC_KEYS & body.keys()) - len(_CHAT_KEYS & body.keys())
    if total:
        return total
    tools = body.get("tools")
    for tool in tools if isinstance(tools, list) else ():
        if isinstance(tool, dict):
            total += 1 if "input_schema" in tool else -1 if tool.get("type") == "function" else 0
    if total:
        return total
    messages = body.get("messages")
    # each message read leaves the total at 0 (or it returns): the same object again adds 0 again. Plain
    # messages share one role object per role (jsonspan), so a million of them cost an identity test each
    last = previous = None
    for msg in messages if isinstance(messages, list) else ():
        if msg is last or msg is previous or not isinstance(msg, dict):
            continue
        last, previous = msg, last
        role = msg.get("role")  # a role or type of the wrong JSON type is the adapter's error to report
        total -= (isinstance(role, str) and role in _CHAT_ROLES) + ("tool_calls" in msg)
        content = msg.get("content")
        for part in content if isinstance(content, list) else ():
            kind = part.get("type") if isinstance(part, dict) else None
            if isinstance(kind, str):
                total += (kind in _ANTHROPIC_BLOCKS) - (kind in _CHAT_PARTS)
        if total:
            return total
    return 1 if str(body.get("model", "")).startswith("claude") else 0


def role_messages(body: dict[str, Any]) -> bool:
    """Whether the body's messages are a non-empty list of role objects (Anthropic's and Chat's)."""
    messages = body.get("messages")
    return (
        isinstance(messages, list)
        and bool(messages)
        and all(isinstance(m, dict) and "role" in m for m in messages)
        and "contents" not in body
    )
