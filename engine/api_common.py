"""What the three API shapes share: generation options, field checks, SSE framing, ids."""
from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any

from prefixguard.errors import InputError


@dataclass(frozen=True, slots=True)
class Options:
    """How to generate, read from a request body (the prompt itself comes from the wire adapter)."""

    model: str
    max_tokens: int
    temperature: float = 1.0
    stream: bool = False
    include_usage: bool = False    # OpenAI Chat: stream_options.include_usage
    seed: int | None = None
    stop: tuple[str, ...] = ()     # stop sequences: the text ends before the first one generated
    diagnose: bool = False         # the request asked for the provider's cache diagnosis


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


def sse(data: dict[str, Any], event: str | None = None) -> str:
    """One server-sent event; `event:` named where the provider names it."""
    body = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return f"event: {event}\ndata: {body}\n\n" if event else f"data: {body}\n\n"


def new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(12)
