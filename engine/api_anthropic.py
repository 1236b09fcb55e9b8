"""Anthropic Messages (POST /v1/messages): request options, response body, SSE events, error bodies.

Usage follows Anthropic's additive convention: input_tokens (neither read nor written) +
cache_creation_input_tokens + cache_read_input_tokens = all prompt tokens.
"""

from __future__ import annotations

from typing import Any

from prefixguard.contracts.providers import providers
from prefixguard.engine.api_common import (
    Options,
    flag,
    integer,
    items,
    kinds,
    model_of,
    new_id,
    number,
    parts,
    sse,
    strings,
    tools,
)
from prefixguard.model.diagnosis import MISS, NO_MISS, Diagnosis
from prefixguard.model.prompt import Prompt
from prefixguard.model.usage import Usage
from prefixguard.utils.errors import InputError

STOP_REASON = {"stop": "end_turn", "length": "max_tokens", "stop_sequence": "stop_sequence"}
ERROR_TYPE = {
    400: "invalid_request_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}

# "system" mid-conversation too: the API takes it (recorded: pydantic-ai test_anthropic_mid_conversation_system_*)
ROLES = frozenset({"user", "assistant", "system"})


def error(status: int, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": ERROR_TYPE.get(status, "api_error"), "message": message}}


def _prewarm_refused(body: dict[str, Any]) -> str | None:
    """Why a pre-warming request (max_tokens 0) is refused, as the API refuses it: streamed, with
    thinking on, or with a tool forced (shared/reference/provider-caching.md)."""
    thinking, choice = body.get("thinking"), body.get("tool_choice")
    if flag(body, "stream"):
        return "streamed"
    if isinstance(thinking, dict) and thinking.get("type") not in (None, "disabled"):
        return "with thinking on"
    if isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
        return "with a tool forced"
    return None


def check(prompt: Prompt) -> None:
    """What the API refuses with a 400 that the wire adapter accepts: too many breakpoints."""
    limit = providers()["anthropic"].max_breakpoints or 0
    marks = sum(1 for s in prompt.segments if s.breakpoint) + bool(prompt.auto_breakpoint)
    if marks > limit:
        raise InputError(f"A maximum of {limit} blocks with cache_control may be provided. Found {marks}.")


def check_body(body: dict[str, Any]) -> None:
    """The fields the Messages API types (shared with count_tokens), each of its type."""
    kinds(
        body,
        {
            "messages": (list,),
            "system": (str, list),
            "tools": (list,),
            "tool_choice": (dict,),
            "metadata": (dict,),
            "thinking": (dict,),
            "stop_sequences": (list, str),
            "cache_control": (dict,),
        },
    )
    if body.get("messages") is None:
        raise InputError("'messages' is required")
    items(body, "messages", ROLES, role_required=True)
    parts(body.get("system"), "'system'")
    tools(body)


class Messages:
    """One message being answered, as a whole body or as the stream of events."""

    API = "anthropic"
    MAX_STOP_SEQUENCES = 8192

    @staticmethod
    def options(body: dict[str, Any], default_max_tokens: int) -> Options:
        check_body(body)
        max_tokens = integer(body, "max_tokens", None, minimum=0)
        if max_tokens is None:
            raise InputError("'max_tokens' is required")
        if max_tokens == 0 and _prewarm_refused(body):
            raise InputError(f"'max_tokens': 0 pre-warms the cache, which cannot be done {_prewarm_refused(body)}")
        return Options(
            model=model_of(body),
            max_tokens=max_tokens,
            temperature=number(body, "temperature", 1.0, low=0.0, high=1.0),
            stream=flag(body, "stream"),
            stop=strings(body, "stop_sequences", most=Messages.MAX_STOP_SEQUENCES),
        )

    @staticmethod
    def usage_json(usage: Usage) -> dict[str, Any]:
        return {
            "input_tokens": usage.uncached,
            "cache_creation_input_tokens": usage.cache_write,
            "cache_read_input_tokens": usage.cache_read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": usage.cache_write_5m,
                "ephemeral_1h_input_tokens": usage.cache_write_1h,
            },
            "output_tokens": usage.output,
            "service_tier": "standard",
        }

    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.id = new_id("msg_")
        self.stop_sequence: str | None = None  # the one that ended the text, if any
        self.diagnosis: Diagnosis | None = None  # set when the request asked (diagnostics.previous_message_id)

    @staticmethod
    def compared_with(body: dict[str, Any]) -> str | None:
        """The earlier response a request asks its cache diagnosis against."""
        asked = body.get("diagnostics")
        found = asked.get("previous_message_id") if isinstance(asked, dict) else None
        return found if isinstance(found, str) else None

    def _diagnostics(self) -> dict[str, Any]:
        d = self.diagnosis
        if d is None or d.status == NO_MISS:
            return {"cache_miss_reason": None}
        if d.status != MISS:
            return {"cache_miss_reason": {"type": d.label or "unavailable"}}
        return {"cache_miss_reason": {"type": d.label, "cache_missed_input_tokens": d.missed_tokens or 0}}

    def _stop_reason(self, finish: str) -> str:
        return STOP_REASON.get(finish, "end_turn")

    def _message(self, content: list[dict[str, Any]], usage: Usage, finish: str | None) -> dict[str, Any]:
        message = {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.opts.model,
            "content": content,
            "stop_reason": self._stop_reason(finish) if finish else None,
            "stop_sequence": self.stop_sequence,
            "usage": self.usage_json(usage),
        }
        if self.opts.diagnose:  # on the message, and on message_start when streaming, as the API puts it
            message["diagnostics"] = self._diagnostics()
        return message

    def body(self, text: str, usage: Usage, finish: str) -> dict[str, Any]:
        # max_tokens 0 pre-warms: the prompt is read and written to the cache, and no content comes back
        content = [{"type": "text", "text": text}] if self.opts.max_tokens else []
        return self._message(content, usage, finish)

    def start(self, usage: Usage) -> list[str]:
        block = {"type": "text", "text": ""}
        return [
            sse({"type": "message_start", "message": self._message([], usage, None)}, "message_start"),
            sse({"type": "content_block_start", "index": 0, "content_block": block}, "content_block_start"),
            sse({"type": "ping"}, "ping"),
        ]

    def delta(self, text: str) -> str:
        return sse(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
            "content_block_delta",
        )

    def end(self, usage: Usage, finish: str) -> list[str]:
        # message_delta repeats the cumulative usage, the prompt's counts included, as the API does now.
        tail = self.usage_json(usage)
        del tail["cache_creation"], tail["service_tier"]
        delta = {"stop_reason": self._stop_reason(finish), "stop_sequence": self.stop_sequence}
        return [
            sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
            sse({"type": "message_delta", "delta": delta, "usage": tail}, "message_delta"),
            sse({"type": "message_stop"}, "message_stop"),
        ]
