"""OpenAI Chat Completions (POST /v1/chat/completions), Responses (POST /v1/responses) and the text
Completions (POST /v1/completions): request options, response bodies, SSE events, error bodies.

Usage follows OpenAI's subset convention: cached_tokens is a part of prompt_tokens / input_tokens.
"""

from __future__ import annotations

import time
from typing import Any

from prefixguard.engine.api_common import (
    Options,
    flag,
    integer,
    items,
    kinds,
    model_of,
    new_id,
    number,
    sse,
    strings,
    tools,
)
from prefixguard.model.diagnosis import MISS, NO_MISS, NOT_FOUND, Diagnosis
from prefixguard.model.usage import Usage
from prefixguard.utils.errors import InputError

FINISH = {"stop": "stop", "length": "length"}  # engine finish reason -> Chat finish_reason
ERROR = {
    400: ("invalid_request_error", None),
    404: ("invalid_request_error", "model_not_found"),
    413: ("invalid_request_error", "context_length_exceeded"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
}

CHAT_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
RESPONSES_ROLES = frozenset({"system", "developer", "user", "assistant"})


def error(status: int, message: str) -> dict[str, Any]:
    kind, code = ERROR.get(status, ("server_error", None))
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


class Chat:
    API = "openai-chat"
    CHUNK = "chat.completion.chunk"  # a stream's chunk object

    @staticmethod
    def options(body: dict[str, Any], default_max_tokens: int) -> Options:
        kinds(
            body,
            {
                "messages": (list,),
                "tools": (list,),
                "tool_choice": (str, dict),
                "metadata": (dict,),
                "stream_options": (dict,),
                "reasoning_effort": (str,),
                "response_format": (dict,),
            },
        )
        if body.get("messages") is None:
            raise InputError("'messages' is required")
        items(body, "messages", CHAT_ROLES, role_required=True)
        tools(body)
        if integer(body, "n", 1, minimum=1) != 1:
            raise InputError("'n' must be 1: this server makes one choice per request")
        max_tokens = integer(body, "max_completion_tokens", None, minimum=1)
        return Chat.generation(body, max_tokens or integer(body, "max_tokens", default_max_tokens, minimum=1))

    @staticmethod
    def generation(body: dict[str, Any], max_tokens: int | None) -> Options:
        """The options both of OpenAI's completion APIs take alike (the text one's too)."""
        stream_options = body.get("stream_options") or {}
        if not isinstance(stream_options, dict):
            raise InputError("'stream_options' must be an object")
        return Options(
            model=model_of(body),
            max_tokens=max_tokens,
            temperature=number(body, "temperature", 1.0, low=0.0, high=2.0),
            stream=flag(body, "stream"),
            include_usage=flag(stream_options, "include_usage"),
            seed=integer(body, "seed", None, minimum=-(2**63)),
            stop=strings(body, "stop", most=4),
        )

    @staticmethod
    def usage_json(usage: Usage) -> dict[str, Any]:
        return {
            "prompt_tokens": usage.prompt_total,
            "completion_tokens": usage.output,
            "total_tokens": usage.prompt_total + usage.output,
            "prompt_tokens_details": {"cached_tokens": usage.cache_read, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }

    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.stop_sequence: str | None = None
        self.id = new_id("chatcmpl-")
        self.created = int(time.time())

    def _head(self, kind: str) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": kind,
            "created": self.created,
            "model": self.opts.model,
            "service_tier": "default",
            "system_fingerprint": "fp_prefixguard",
        }

    def body(self, text: str, usage: Usage, finish: str) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None, "annotations": []}
        return {
            **self._head("chat.completion"),
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": FINISH.get(finish, "stop")}
            ],
            "usage": self.usage_json(usage),
        }

    def _choice(self, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> str:
        chunk = {**self._head(self.CHUNK), "choices": [self._choice(delta, finish)]}
        if self.opts.include_usage:
            chunk["usage"] = None  # every chunk but the last carries a null usage, as OpenAI sends
        return sse(chunk)

    def start(self, usage: Usage) -> list[str]:
        return [self._chunk({"role": "assistant", "content": "", "refusal": None})]

    def delta(self, text: str) -> str:
        return self._chunk({"content": text})

    def end(self, usage: Usage, finish: str) -> list[str]:
        frames = [self._chunk({}, FINISH.get(finish, "stop"))]
        if self.opts.include_usage:
            frames.append(sse({**self._head(self.CHUNK), "choices": [], "usage": self.usage_json(usage)}))
        frames.append("data: [DONE]\n\n")
        return frames


class Completions(Chat):
    """The text API: the prompt is continued as it is (no chat template); a choice holds `text`."""

    API = "openai-completions"
    CHUNK = "text_completion"  # the object of an answer and of each chunk of its stream

    @staticmethod
    def options(body: dict[str, Any], default_max_tokens: int) -> Options:
        kinds(body, {"prompt": (str, list), "stream_options": (dict,), "suffix": (str,)})
        prompt = body.get("prompt")
        if not isinstance(prompt, str) and not (isinstance(prompt, list) and len(prompt) == 1):
            raise InputError("'prompt' must be a string: this server makes one completion per request")
        if body.get("echo") or body.get("suffix"):
            raise InputError("'echo' and 'suffix' are not supported: this server continues the prompt as it is")
        if integer(body, "n", 1, minimum=1) != 1 or integer(body, "best_of", 1, minimum=1) != 1:
            raise InputError("'n' and 'best_of' must be 1: this server makes one choice per request")
        return Chat.generation(body, integer(body, "max_tokens", default_max_tokens, minimum=1))

    def __init__(self, opts: Options) -> None:
        super().__init__(opts)
        self.id = new_id("cmpl-")

    def _choice(self, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        return {"text": delta.get("content", ""), "index": 0, "logprobs": None, "finish_reason": finish}

    def body(self, text: str, usage: Usage, finish: str) -> dict[str, Any]:
        choice = self._choice({"content": text}, FINISH.get(finish, "stop"))
        return {**self._head(self.CHUNK), "choices": [choice], "usage": self.usage_json(usage)}

    def start(self, usage: Usage) -> list[str]:
        return []  # no role chunk: a text completion streams its text alone


class Responses:
    API = "openai-responses"

    @staticmethod
    def options(body: dict[str, Any], default_max_tokens: int) -> Options:
        kinds(
            body,
            {
                "input": (str, list),
                "instructions": (str,),
                "tools": (list,),
                "tool_choice": (str, dict),
                "metadata": (dict,),
                "reasoning": (dict,),
                "text": (dict,),
                "previous_response_id": (str,),
            },
        )
        items(body, "input", None, role_required=False)
        listed = body.get("input")
        for i, item in enumerate(listed if isinstance(listed, list) else []):
            if isinstance(item, dict) and item.get("role") is not None and item["role"] not in RESPONSES_ROLES:
                raise InputError(f"'input[{i}]'.role must be one of {', '.join(sorted(RESPONSES_ROLES))}")
        tools(body)
        if body.get("previous_response_id"):
            raise InputError(
                "'previous_response_id' is not supported: this server stores no responses; "
                "send the whole conversation in 'input'"
            )
        return Options(
            model=model_of(body),
            max_tokens=integer(body, "max_output_tokens", default_max_tokens, minimum=1),
            temperature=number(body, "temperature", 1.0, low=0.0, high=2.0),
            stream=flag(body, "stream"),
        )

    @staticmethod
    def usage_json(usage: Usage) -> dict[str, Any]:
        return {
            "input_tokens": usage.prompt_total,
            "input_tokens_details": {"cached_tokens": usage.cache_read},
            "output_tokens": usage.output,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage.prompt_total + usage.output,
        }

    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.stop_sequence: str | None = None
        self.id = new_id("resp_")
        self.item_id = new_id("msg_")
        self.created = int(time.time())
        self.text = ""
        self._seq = 0
        self.diagnosis: Diagnosis | None = None  # set when asked (prompt_cache_options.comparison_response_id)

    @staticmethod
    def compared_with(body: dict[str, Any]) -> str | None:
        options = body.get("prompt_cache_options")
        found = options.get("comparison_response_id") if isinstance(options, dict) else None
        return found if isinstance(found, str) else None

    def _diagnostics(self) -> dict[str, Any]:
        d = self.diagnosis
        if d is None or d.status == NO_MISS:
            return {"type": "cache_hit"}
        if d.status == NOT_FOUND:
            return {"type": "comparison_response_not_found"}
        if d.status != MISS:
            return {"type": "unavailable"}
        return {
            "type": "cache_miss",
            "cache_missed_tokens": d.missed_tokens or 0,
            "reason": d.label,
            "comparison_reusable_tokens": d.reusable_tokens,
        }

    def _response(self, status: str, output: list[dict[str, Any]], usage: Usage | None) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
            "instructions": None,
            "max_output_tokens": self.opts.max_tokens,
            "model": self.opts.model,
            "output": output,
            "parallel_tool_calls": True,
            "previous_response_id": None,
            "reasoning": {"effort": None, "summary": None},
            "store": False,
            "temperature": self.opts.temperature,
            "text": {"format": {"type": "text"}},
            "tool_choice": "auto",
            "tools": [],
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": None if usage is None else self.usage_json(usage),
            "metadata": {},
            **({"prompt_cache_diagnostics": self._diagnostics()} if self.opts.diagnose else {}),
        }

    def _item(self, status: str) -> dict[str, Any]:
        content = [self._part()] if status == "completed" else []
        return {"id": self.item_id, "type": "message", "status": status, "role": "assistant", "content": content}

    def _part(self) -> dict[str, Any]:
        return {"type": "output_text", "annotations": [], "logprobs": [], "text": self.text}

    def _event(self, kind: str, **fields: Any) -> str:
        frame = sse({"type": kind, "sequence_number": self._seq, **fields}, kind)
        self._seq += 1
        return frame

    @staticmethod
    def _status(finish: str) -> str:
        return "incomplete" if finish == "length" else "completed"

    def body(self, text: str, usage: Usage, finish: str) -> dict[str, Any]:
        self.text = text
        return self._response(self._status(finish), [self._item("completed")], usage)

    def start(self, usage: Usage) -> list[str]:
        at = {"item_id": self.item_id, "output_index": 0, "content_index": 0}
        return [
            self._event("response.created", response=self._response("in_progress", [], None)),
            self._event("response.in_progress", response=self._response("in_progress", [], None)),
            self._event("response.output_item.added", output_index=0, item=self._item("in_progress")),
            self._event("response.content_part.added", **at, part=self._part()),
        ]

    def delta(self, text: str) -> str:
        self.text += text
        return self._event(
            "response.output_text.delta", item_id=self.item_id, output_index=0, content_index=0, delta=text, logprobs=[]
        )

    def end(self, usage: Usage, finish: str) -> list[str]:
        at = {"item_id": self.item_id, "output_index": 0, "content_index": 0}
        status = self._status(finish)
        return [
            self._event("response.output_text.done", **at, text=self.text, logprobs=[]),
            self._event("response.content_part.done", **at, part=self._part()),
            self._event("response.output_item.done", output_index=0, item=self._item("completed")),
            self._event(f"response.{status}", response=self._response(status, [self._item("completed")], usage)),
        ]
