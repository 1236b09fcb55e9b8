"""OpenAI Responses API (POST /v1/responses).

Prefix order: tools, the text.format schema, `instructions`, then `input` (a string, or a list of
items: messages, function calls and their outputs, reasoning, ...). Leading system/developer messages
count as the system level.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from prefixguard.contracts.providers import providers
from prefixguard.model import templates
from prefixguard.model.diagnosis import MISS, NO_MISS, NOT_FOUND, UNAVAILABLE, Diagnosis
from prefixguard.model.media import Media
from prefixguard.model.prompt import STORED_CONTEXT, Prompt, compact_json
from prefixguard.model.usage import ResponseMeta
from prefixguard.utils.errors import InputError
from prefixguard.wire import adapter, openai_chat, tool_render
from prefixguard.wire.jsonspan import ABSENT, Node, Spec
from prefixguard.wire.openai_media import part_media
from prefixguard.wire.segments import Builder, MessageHeaders, as_int, expect, model_of, wrong_type

API = "openai-responses"
SHAPE = "OpenAI Responses (/v1/responses)"
# /responses/compact: a Responses body whose answer is the compacted input, billed (and cached) like a turn
TAIL = re.compile(r"(?:/deployments/(?P<model>[^/]+))?/responses(?:/compact)?/?$")
ENDPOINT = "/v1/responses"
HEADER = None
JSON_ARRAY_STREAM = False
FINAL_EVENTS = adapter.FINAL_EVENTS
_SPANS: Spec = {
    "tools": {"[]": None},
    "input": {"[]": {"content": {"[]": None}}},
    "instructions": None,
    "text": {"format": None},
    "previous_response_id": None,
}
PART_KINDS = {
    "input_text": "text",
    "output_text": "text",
    "text": "text",
    "input_image": "image",
    "input_file": "document",
    "input_audio": "audio",
    "refusal": "text",
}
ITEM_KINDS = {
    "function_call": "tool_use",
    "custom_tool_call": "tool_use",
    "function_call_output": "tool_result",
    "custom_tool_call_output": "tool_result",
    "reasoning": "thinking",
}
ITEM_ROLES = {"tool_use": "assistant", "thinking": "assistant", "tool_result": "tool"}
# An earlier output item sent by its id alone ({"type": "item_reference", "id": ...}, as the AI SDK sends
# them): the API puts the stored item there. Its id says its type; the stub is counted, so a reasoning
# item stands for its reasoning only as far as encrypted_tokens() knows it (an earlier turn's: none).
REFERENCED_KINDS = {"rs_": "thinking", "fc_": "tool_use", "ctc_": "tool_use"}

usage = openai_chat.usage  # same subset convention; input_tokens / input_tokens_details


def request(root: Node, out: Builder, headers: Mapping[str, str] | None = None) -> Prompt:
    body = root.value
    options = body.get("prompt_cache_options")
    openai_chat.add_tools(root, out)
    text = expect(root.get("text"), dict, "'text'")
    fmt = expect(text.get("format"), dict, "/text/format") if text is not None else None
    if fmt is not None and fmt.value.get("type") != "text":
        openai_chat.add_format(out, "/text/format", fmt)

    instructions = expect(root.get("instructions"), (str, list), "'instructions'")
    if instructions is not None:
        out.add(
            "system",
            "/instructions",
            "text",
            instructions,
            role="system",
            header={},
            text=instructions.value if isinstance(instructions.value, str) else None,
        )

    stored = expect(root.get("previous_response_id"), str, "'previous_response_id'")
    if stored is not None and stored.value:  # that response's context comes first: counted where it was seen
        out.add("messages", "/previous_response_id", STORED_CONTEXT, stored, tokens_by_rule=0)

    items = expect(root.get("input"), (str, list), "'input'")
    if items is None and instructions is None:
        raise InputError("no 'input'")
    images = False
    if items is not None and isinstance(items.value, str):
        out.add(
            "messages", "/input", "text", items, role="user", message_index=0, header={"role": "user"}, text=items.value
        )
    elif items is not None:
        leading = stored is None or not stored.value  # after a stored context no input item leads the prompt
        last_user = max(
            (
                ii
                for ii, it in enumerate(items.value)
                if isinstance(it, dict) and it.get("role") == "user" and it.get("type", "message") == "message"
            ),
            default=-1,
        )
        header_of = MessageHeaders("content")
        for ii, item in enumerate(items.elements):
            fields = item.value
            if not isinstance(fields, dict):
                raise InputError(f"/input/{ii} must be an object")
            raw_kind: Any = fields.get("type")
            kind: Any = ITEM_KINDS.get(raw_kind, raw_kind or "message")
            if raw_kind == "item_reference":
                ref = str(fields.get("id", ""))
                kind = next((k for prefix, k in REFERENCED_KINDS.items() if ref.startswith(prefix)), kind)
            role = fields.get("role") or ITEM_ROLES.get(kind)
            leading = leading and role in openai_chat.SYSTEM_ROLES
            level = "system" if leading else "messages"
            header = header_of(fields)
            content = item.get("content") or ABSENT
            parts = content.value
            if parts is not None and not isinstance(parts, (str, list)):
                raise wrong_type(f"/input/{ii}/content", (str, list), parts)
            if parts is None or kind != "message":
                found = _output_media(fields, out.api, out.model) if kind == "tool_result" else None
                added = out.add(
                    level,
                    f"/input/{ii}",
                    kind,
                    item,
                    role=role,
                    message_index=ii,
                    header=header,
                    whole=True,
                    media=found[0] if found else None,
                    text=found[1] if found else tool_render.rendered_call(fields, out.api, out.model),
                    tokens_by_rule=_ruled_tokens(kind, fields, ii < last_user),
                )
                if kind == "additional_tools" and not out.estimated:  # the tools section they are declared in
                    out.segments[-1] = added.plus(templates.added_tools_prompt(API, out.model))
            elif isinstance(parts, str):
                out.add(
                    level,
                    f"/input/{ii}/content",
                    "text",
                    content,
                    role=role,
                    message_index=ii,
                    header=header,
                    text=parts,
                )
            else:
                for pi, part in enumerate(content.elements):
                    pv = part.value
                    if not isinstance(pv, dict) or not isinstance(pv.get("type"), str):
                        raise InputError(f"/input/{ii}/content/{pi} must be an object with a 'type'")
                    named: str = pv["type"]
                    part_kind = PART_KINDS.get(named, named)
                    medium = part_media(pv) if part_kind in ("image", "document", "audio") else None
                    out.add(
                        level,
                        f"/input/{ii}/content/{pi}",
                        part_kind,
                        part,
                        role=role,
                        message_index=ii,
                        header=header if pi == 0 else None,
                        breakpoint=openai_chat.breakpoint_of(pv, options),
                        text=pv.get("text"),
                        media=[medium] if medium else None,
                    )
                    images = images or part_kind == "image"
                if not parts:
                    out.add(level, f"/input/{ii}/content", "empty", content, role=role, message_index=ii, header=header)

    reasoning = body.get("reasoning")
    settings = {
        "tool_choice": body.get("tool_choice"),
        "parallel_tool_calls": body.get("parallel_tool_calls"),
        "effort": reasoning.get("effort") if isinstance(reasoning, dict) else None,
        "prompt_cache_key": body.get("prompt_cache_key"),
        "prompt_cache_retention": body.get("prompt_cache_retention"),
        "prompt_cache_options": options,
        "cache_mode": openai_chat.cache_mode(options),
        "images": images,
    }
    return Prompt(API, model_of(body), out.segments, settings)


def _ruled_tokens(kind: str, item: dict[str, Any], earlier_turn: bool) -> int | None:
    """What an item costs by a rule, not by its text: nothing for a setting (rules/encodings.toml [setting_items]),
    else encrypted_tokens()."""
    return 0 if templates.setting_item(API, kind) else encrypted_tokens(kind, item, earlier_turn)


def encrypted_tokens(kind: str, item: dict[str, Any], earlier_turn: bool) -> int | None:
    """What an encrypted item costs by the rules of rules/providers.toml [openai]: a reasoning item its
    reasoning tokens (encrypted_reasoning), or nothing when an earlier turn's reasoning is dropped (sent whole
    or by its id alone); a compaction item the summary it encrypts (encrypted_compaction); each from the
    length of its encrypted_content, whose text is no prompt text. None: another item, no rule, or no
    encrypted content (count its text)."""
    contract = providers()["openai"]
    rule = {"thinking": contract.encrypted_reasoning, "compaction": contract.encrypted_compaction}.get(kind)
    if rule is None:
        return None
    if earlier_turn and rule.dropped_before_last_user_message:
        return 0
    encrypted = item.get("encrypted_content")
    if not isinstance(encrypted, str):
        return None
    return max(0, round((len(encrypted) - rule.chars_per_item) / rule.chars_per_token))


def _output_media(fields: dict[str, Any], api: str, model: str | None) -> tuple[list[Media], str] | None:
    """A function call's output given as a list of parts: its images and files, and the rest as the model reads
    it (its text parts), or as JSON where that rendering is not known."""
    output = fields.get("output")
    if not isinstance(output, list):
        return None
    found = [(p, m) for p in output if (m := part_media(p)) is not None]
    if not found:
        return None
    kept = [p for p in output if all(p is not q for q, _ in found)]
    rest = {**fields, "output": kept}
    text = tool_render.rendered_call(rest, api, model)
    return [m for _, m in found], compact_json(rest) if text is None else text


def stream_usage(event: Mapping[str, Any], current: dict[str, Any] | None) -> dict[str, Any] | None:
    """Usage arrives with the final response object: response.completed (or .incomplete / .failed)."""
    response = event.get("response")
    if isinstance(response, Mapping) and isinstance(response.get("usage"), Mapping):
        return dict(response["usage"])
    return current


def meta(obj: Mapping[str, Any], current: ResponseMeta) -> ResponseMeta:
    """A whole response, or a stream's response.* event (the response inside). Its status is its finish
    reason (completed, incomplete, failed), the incomplete one's reason when given (max_output_tokens)."""
    response: Mapping[str, Any] = obj["response"] if isinstance(obj.get("response"), Mapping) else obj
    if response.get("object") != "response" and "status" not in response:
        return current
    details = response.get("incomplete_details")
    status = details.get("reason") if isinstance(details, Mapping) and details.get("reason") else response.get("status")
    return current.merged(
        response.get("id"),
        response.get("model"),
        (status,) if status not in ("in_progress", "queued") else (),
        response.get("created_at"),
    )


def is_content(event: Mapping[str, Any]) -> bool:
    kind = event.get("type")
    return isinstance(kind, str) and kind.endswith(".delta")


# OpenAI's hosted tools (web search, file search, code interpreter) run between passes too, but what they
# add to the prompt (a search's pages) is in no output item, so a pass's prompt cannot be told from the
# bill: the counts are taken as one prompt's. pydantic-ai's gpt-5 web search read 8,576 over two passes:
# predicted 8,448 so, 9,344 with the bill split evenly between the passes.
server_calls = adapter.no_server_calls


# ---- prompt cache diagnostics (GPT-5.6+, asked with prompt_cache_options.comparison_response_id)

_STATUS = {
    "cache_miss": MISS,
    "cache_hit": NO_MISS,
    "comparison_response_not_found": NOT_FOUND,
    "unavailable": UNAVAILABLE,
}
# The API gives a miss's reason as text: the words that place it in the prefix (checked in this order).
_REASON_LEVELS = (
    ("model", "model"),
    ("service_tier", "model"),
    ("tool", "tools"),
    ("instruction", "system"),
    ("system", "system"),
    ("developer", "system"),
    ("input", "messages"),
    ("message", "messages"),
)


def diagnosis(response: Mapping[str, Any]) -> Diagnosis | None:
    found = response.get("prompt_cache_diagnostics")
    if not isinstance(found, Mapping):
        return None
    kind = str(found.get("type") or "")
    reason = found.get("reason") if isinstance(found.get("reason"), str) else None
    level = next((lv for word, lv in _REASON_LEVELS if reason and word in reason.lower()), None)
    missed, reusable = found.get("cache_missed_tokens"), found.get("comparison_reusable_tokens")
    return Diagnosis(
        status=_STATUS.get(kind, UNAVAILABLE),
        level=level if kind == "cache_miss" else None,
        label=reason or kind,
        missed_tokens=as_int(missed) if missed is not None else None,
        reusable_tokens=as_int(reusable) if reusable is not None else None,
        reason=reason,
    )


def stream_diagnosis(event: Mapping[str, Any], current: Diagnosis | None) -> Diagnosis | None:
    """Streaming: with the final response object (response.completed)."""
    response = event.get("response")
    return (diagnosis(response) or current) if isinstance(response, Mapping) else current


RESPONSE_ID = re.compile(rb'"id"\s*:\s*"(resp_[A-Za-z0-9_-]{1,200})"')  # JSON, or response.created


def diagnostics_field(previous_id: str, body: Mapping[str, Any]) -> tuple[str, Any] | None:
    """None when the body sets prompt_cache_options itself (its bytes are left as they are)."""
    return None if "prompt_cache_options" in body else ("prompt_cache_options", {"comparison_response_id": previous_id})


def is_final(event: Mapping[str, Any]) -> bool:
    return False  # response.completed and the like (FINAL_EVENTS) end a stream


# ---- routing and detection (the Adapter protocol)

_V1 = re.compile(r"/v1/responses/?$")


def route(path: str) -> tuple[str, str | None] | None:
    return (API, None) if _V1.search(path) else None


def foreign(body: dict[str, Any] | None, path: str) -> str | None:
    return "an API response" if isinstance(body, dict) and body.get("object") == "response" else None


def claims(body: dict[str, Any]) -> bool:
    return "input" in body or "instructions" in body


def fits(body: dict[str, Any]) -> bool:
    return claims(body) and "messages" not in body


counts_only = adapter.never_counts


def spans(text: str) -> Spec:
    return _SPANS
