"""What the three API shapes share: generation options, field checks, SSE framing, ids."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any

from prefixguard.utils.errors import InputError


@dataclass(frozen=True, slots=True)
class Options:
    """How to generate, read from a request body (the prompt itself comes from the wire adapter)."""

    model: str
    max_tokens: int
    temperature: float = 1.0
    stream: bool = False
    include_usage: bool = False  # OpenAI Chat: stream_options.include_usage
    seed: int | None = None
    stop: tuple[str, ...] = ()  # stop sequences: the text ends before the first one generated
    diagnose: bool = False  # the request asked for the provider's cache diagnosis


def model_of(body: dict[str, Any]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InputError("'model' is required and must be a non-empty string")
    return model


def integer(body: dict[str, Any], key: str, default: int | None, *, minimum: int = 0) -> int | None:
    value = body.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(f"'{key}' must be an integer >= {minimum}, got {json.dumps(value)}")
    return value


def number(body: dict[str, Any], key: str, default: float, *, low: float, high: float) -> float:
    value = body.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise InputError(f"'{key}' must be a number from {low} to {high}, got {json.dumps(value)}")
    return float(value)


def flag(body: dict[str, Any], key: str) -> bool:
    value = body.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InputError(f"'{key}' must be a boolean, got {json.dumps(value)}")
    return value


def strings(body: dict[str, Any], key: str, *, most: int) -> tuple[str, ...]:
    """A string or a list of non-empty strings (stop sequences), at most `most` of them."""
    value = body.get(key)
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) and v for v in items) or len(items) > most:
        raise InputError(f"'{key}' must be a list of at most {most} non-empty strings, got {json.dumps(value)}")
    return tuple(items)


def kinds(body: dict[str, Any], expected: dict[str, tuple[type, ...]]) -> None:
    """Each field present (and not null) is of one of its JSON types, as the APIs' schemas say."""
    for key, types in expected.items():
        value = body.get(key)
        if value is not None and (not isinstance(value, types) or isinstance(value, bool) and bool not in types):
            names = " or ".join(_JSON_NAMES[t] for t in types)
            raise InputError(f"'{key}' must be {names}, got {_shown(value)}")


def items(body: dict[str, Any], key: str, roles: frozenset[str] | None, *, role_required: bool) -> None:
    """A list of messages (or input items): each an object whose role, where it has one, is one of the
    API's; whose content is a string, null or a list of objects with a string type, a text part's text a
    string."""
    value = body.get(key)
    if not isinstance(value, list):
        return
    for i, item in enumerate(value):
        where = f"'{key}[{i}]'"
        if not isinstance(item, dict):
            raise InputError(f"{where} must be an object, got {_shown(item)}")
        role = item.get("role")
        if "role" in item or role_required:
            if not isinstance(role, str) or (roles is not None and role not in roles):
                allowed = ", ".join(sorted(roles)) if roles else "a string"
                raise InputError(f"{where}.role must be one of {allowed}, got {_shown(role)}")
        parts(item.get("content"), f"{where}.content")


def parts(content: Any, where: str) -> None:
    """Content: a string, null, or a list of objects each with a string type (a text part's text a string)."""
    if content is None or isinstance(content, str):
        return
    if not isinstance(content, list):
        raise InputError(f"{where} must be a string or a list of content blocks, got {_shown(content)}")
    for j, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise InputError(f"{where}[{j}] must be an object with a string 'type', got {_shown(block)}")
        if (
            "text" in block
            and block["type"] in ("text", "input_text", "output_text")
            and not isinstance(block["text"], str)
        ):
            raise InputError(f"{where}[{j}].text must be a string, got {_shown(block['text'])}")
        if block["type"] in ("image", "document") and "source" in block and not isinstance(block["source"], dict):
            raise InputError(f"{where}[{j}].source must be an object, got {_shown(block['source'])}")


def tools(body: dict[str, Any]) -> None:
    """Tools: a list of objects; a name, where one is given, a string."""
    for i, tool in enumerate(body.get("tools") or []):
        if not isinstance(tool, dict):
            raise InputError(f"'tools[{i}]' must be an object, got {_shown(tool)}")
        if "name" in tool and not isinstance(tool["name"], str):
            raise InputError(f"'tools[{i}].name' must be a string, got {_shown(tool['name'])}")


_JSON_NAMES = {
    dict: "an object",
    list: "a list",
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "a boolean",
}


def _shown(value: Any) -> str:
    """A value as an error message quotes it: short, whatever its size or depth."""
    if isinstance(value, (dict, list)):
        return f"{type(value).__name__} of {len(value)}"
    small = not isinstance(value, int) or isinstance(value, bool) or abs(value) < 10**30
    text = repr(value) if small else "a huge integer"
    return text if len(text) <= 60 else text[:57] + "..."


def sse(data: dict[str, Any], event: str | None = None) -> str:
    """One server-sent event; `event:` named where the provider names it."""
    body = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return f"event: {event}\ndata: {body}\n\n" if event else f"data: {body}\n\n"


def new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(12)
