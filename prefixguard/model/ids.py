"""A model's own id, as rules/ name it: what gateways and clouds put around it taken off."""

from __future__ import annotations

import re

_QUALIFIERS = re.compile(r"^(?:[a-z]+\.)+")  # Bedrock's "us.anthropic." / "amazon." before a model id


def own_id(model: str | None) -> str:
    """OpenRouter's "openai/gpt-4o" -> "gpt-4o"; Bedrock's "us.anthropic.claude-sonnet-4-5-v1:0" ->
    "claude-sonnet-4-5-v1:0"; "" for none."""
    return _QUALIFIERS.sub("", (model or "").rsplit("/", 1)[-1])
