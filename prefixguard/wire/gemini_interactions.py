"""Gemini's Interactions API (POST /v1beta/interactions): generally available since June 2026, the API
Google recommends for new Gemini work (generateContent is kept, as gemini.py).

Prefix order as generateContent's: tools, `system_instruction`, then `input`: a string, one step or a
list of steps (user_input and model_output steps hold content parts; thought, function_call and
function_result steps are the model's and the tools' turns), or a list of content parts. A request may
name an earlier interaction (`previous_interaction_id`, the server keeps its context): that context comes
first, counted as what it left (prefixguard/judge/stored.py), as the Responses API's previous_response_id.
Usage: total_input_tokens (the prompt) holds total_cached_tokens; its cache is Gemini's implicit one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from prefixguard.model.media import IMAGE
from prefixguard.model.prompt import STORED_CONTEXT, Prompt, compact_json
from prefixguard.model.usage import ResponseMeta, Usage
from prefixguard.utils.errors import InputError
from prefixguard.wire import adapter, gemini
from prefixguard.wire.adapter import no_diagnosis, no_diagnostics_field, no_server_calls, same_diagnosis
from prefixguard.wire.jsonspan import Node, Spec
from prefixguard.wire.segments import Builder, expect, wrong_type

API = "gemini-interactions"
SHAPE = "Gemini Interactions (/v1beta/interactions)"
TAIL = None
ENDPOINT = "/v1beta/interactions"
HEADER = None
JSON_ARRAY_STREAM = False
# a stream ends with interaction.completed (interaction.complete before steps; both carry the usage)
FINAL_EVENTS = frozenset({"interaction.completed", "interaction.complete"})
RESPONSE_ID = None  # no cache diagnostics
_SPANS: Spec = {
    "tools": {"[]": None},
    "input": {"[]": None},
    "system_instruction": None,
    "previous_interaction_id": None,
}
# steps that are the model's or a tool's turn, and the kind of part each is
STEP_KINDS = {"function_call": "tool_use", "function_result": "tool_result", "thought": "thinking"}
# whose turn each step, or each kind of part a step becomes, is
STEP_ROLES = {
    "user_input": "user",
    "model_output": "assistant",
    "tool_use": "assistant",
    "thinking": "assistant",
    "tool_result": "tool",
}
MEDIA_PARTS = frozenset(("image", "document", "audio", "video"))
# Fields only an interaction has (a Responses body has `input` too) and the steps only it sends.
_FIELDS = frozenset(("system_instruction", "generation_config", "previous_interaction_id", "agent", "agent_config"))
_STEPS = frozenset(("user_input", "model_output", "function_result", "thought"))
# A thought's signature stands for the model's reasoning; it is no prompt text (gemini.py says why).
_SIGNATURES = frozenset(("signature", "thought_signature"))
_PATH = re.compile(r"/v1(?:beta1?)?/(?:projects/[^/]+/locations/[^/]+/)?interactions(?::createStream)?/?$")


def request(root: Node, out: Builder, headers: Mapping[str, str] | None = None) -> Prompt:
    body = root.value
    tools = expect(root.get("tools"), list, "'tools'")
    for i, tool in enumerate(tools.elements if tools else ()):
        out.add("tools", f"/tools/{i}", "tool", tool)
    system = expect(root.get("system_instruction"), str, "'system_instruction'")
    if system is not None:
        out.add("system", "/system_instruction", "text", system, role="system", header={}, text=system.value)
    stored = expect(root.get("previous_interaction_id"), str, "'previous_interaction_id'")
    if stored is not None and stored.value:  # that interaction's context comes first
        out.add("messages", "/previous_interaction_id", STORED_CONTEXT, stored, tokens_by_rule=0)

    given = expect(root.get("input"), (str, list, dict), "'input'")
    if given is None:
        raise InputError("no 'input'")
    images = False
    if isinstance(given.value, str):
        out.add(
            "messages", "/input", "text", given, role="user", message_index=0, header={"role": "user"}, text=given.value
        )
    else:
        steps = given.elements if isinstance(given.value, list) else [given]
        for si, step in enumerate(steps):
            where = f"/input/{si}" if isinstance(given.value, list) else "/input"
            images = _step(out, step, where, si) or images

    config = body.get("generation_config")
    config = config if isinstance(config, dict) else {}
    settings = {
        "tool_choice": config.get("tool_choice"),
        "thinking": config.get("thinking_level", config.get("thinking_config")),
        "response_schema": body.get("response_format"),
        "images": images,
    }
    model = body.get("model") or body.get("agent")
    return Prompt(API, model if isinstance(model, str) and model else None, out.segments, settings)


def _step(out: Builder, step: Node, where: str, index: int) -> bool:
    """One step (or, in a list of content parts, one part) as parts; whether it held an image."""
    fields = step.value
    if not isinstance(fields, dict):
        raise wrong_type(where, dict, fields)
    kind = fields.get("type")
    if kind in ("user_input", "model_output"):
        role = STEP_ROLES[kind]
        header: dict[str, Any] | None = {"type": kind}
        content = step.get("content")
        if content is None or not isinstance(content.value, (list, str)):
            raise wrong_type(f"{where}/content", list, None if content is None else content.value)
        if isinstance(content.value, str):
            out.add(
                "messages",
                f"{where}/content",
                "text",
                content,
                role=role,
                message_index=index,
                header=header,
                text=content.value,
            )
            return False
        images = False
        for pi, part in enumerate(content.elements):
            images = _part(out, part, f"{where}/content/{pi}", role, index, header) or images
            header = None
        if not content.elements:
            out.add("messages", where, "empty", step, role=role, message_index=index, header=header, whole=True)
        return images
    if kind in STEP_KINDS:
        part_kind = STEP_KINDS[kind]
        shown = {k: v for k, v in fields.items() if k not in _SIGNATURES}
        out.add(
            "messages",
            where,
            part_kind,
            step,
            role=STEP_ROLES[part_kind],
            message_index=index,
            header={"type": kind},
            whole=True,
            text=compact_json(shown),
        )
        return False
    return _part(out, step, where, "user", index, {"type": "user_input"})  # a bare content part: the user's


def _part(out: Builder, part: Node, where: str, role: str, index: int, header: dict[str, Any] | None) -> bool:
    fields = part.value
    if not isinstance(fields, dict):
        raise wrong_type(where, dict, fields)
    kind = fields.get("type")
    if kind == "text":
        text = fields.get("text")
        out.add(
            "messages",
            where,
            "text",
            part,
            role=role,
            message_index=index,
            header=header,
            text=text if isinstance(text, str) else None,
        )
        return False
    if kind in MEDIA_PARTS:  # its mime_type and data, costed as generateContent's inline data is
        costed, text, media = gemini.inline_media(fields)
        out.add("messages", where, costed, part, role=role, message_index=index, header=header, text=text, media=media)
        return costed == IMAGE
    out.add("messages", where, str(kind or "part"), part, role=role, message_index=index, header=header)
    return False


# ---- usage


def usage(raw: Mapping[str, Any] | None) -> Usage:
    """Subset convention: total_cached_tokens is inside total_input_tokens (the prompt)."""
    return gemini.implicit_usage(
        raw, "total_input_tokens", "total_cached_tokens", "total_thought_tokens", "total_output_tokens"
    )


def _interaction(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The interaction a stream event carries (interaction.created, .completed), or a whole response itself."""
    inner = obj.get("interaction")
    return inner if isinstance(inner, Mapping) else obj


def stream_usage(event: Mapping[str, Any], current: dict[str, Any] | None) -> dict[str, Any] | None:
    raw = _interaction(event).get("usage")
    return dict(raw) if isinstance(raw, Mapping) else current


def is_content(event: Mapping[str, Any]) -> bool:
    kind = event.get("event_type", event.get("type"))
    return isinstance(kind, str) and kind.endswith(".delta")


def meta(obj: Mapping[str, Any], current: ResponseMeta) -> ResponseMeta:
    """A whole interaction, or a stream event carrying one: its id, model, status and creation time."""
    found = _interaction(obj)
    status = found.get("status")
    made = found.get("created")
    try:
        when = datetime.fromisoformat(made.replace("Z", "+00:00")).timestamp() if isinstance(made, str) else None
    except ValueError:
        when = None
    return current.merged(
        found.get("id"), found.get("model"), (status,) if status not in (None, "in_progress") else (), when
    )


def is_final(event: Mapping[str, Any]) -> bool:
    return event.get("event_type") in FINAL_EVENTS


# this provider gives no account of its misses
diagnosis, stream_diagnosis, diagnostics_field = no_diagnosis, same_diagnosis, no_diagnostics_field
server_calls = no_server_calls  # its built-in tools' passes are not told apart in its usage


# ---- routing and detection (the Adapter protocol)


def route(path: str) -> tuple[str, str | None] | None:
    return (API, None) if _PATH.search(path) else None


def foreign(body: dict[str, Any] | None, path: str) -> str | None:
    if isinstance(body, dict) and body.get("object") == "interaction":
        return "an API response"
    return None


def claims(body: dict[str, Any]) -> bool:
    """`input` with a field only an interaction has, or a step only it sends (asked before Responses)."""
    if "input" not in body or "messages" in body:
        return False
    items = body["input"] if isinstance(body["input"], list) else [body["input"]]
    return bool(_FIELDS & body.keys()) or any(isinstance(i, dict) and i.get("type") in _STEPS for i in items)


fits = adapter.no_tail
counts_only = adapter.never_counts


def spans(text: str) -> Spec:
    return _SPANS
