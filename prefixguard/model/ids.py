"""A model's own id, as rules/ name it: what gateways and clouds put around it taken off, and a later version of a
family than the rules name read as the latest they name (contracts/ruleset.py as_named)."""

from __future__ import annotations

import re

from prefixguard.contracts.ruleset import as_named

_QUALIFIERS = re.compile(r"^(?:[a-z]+\.)+")  # Bedrock's "us.anthropic." / "amazon." before a model id


def own_id(model: str | None) -> str:
    """OpenRouter's "openai/gpt-4o" -> "gpt-4o"; Bedrock's "us.anthropic.claude-sonnet-4-5-v1:0" ->
    "claude-sonnet-4-5-v1:0"; gpt-6-astra -> gpt-5.6-astra while gpt-5.6 is the latest the rules name; "" for none."""
    return as_named(_QUALIFIERS.sub("", (model or "").rsplit("/", 1)[-1]))
