"""A model's own id, as rules/ name it: what gateways and clouds put around it taken off."""

from __future__ import annotations

import re

_QUALIFIERS = re.compile(r"^(?:[a-z]+\.)+")  # Bedrock's "us.anthropic." / "amazon." before a model id


def own_id(model: str | None) -> str:
    """OpenRouter's "openai/gpt-4o" -> "gpt-4o"; Bedrock's "us.anthropic.claude-sonnet-4-5-v1:0" ->
    "claude-sonnet-4-5-v1:0"; "" for none."""
    return _QUALIFIERS.sub("", (model or "").rsplit("/", 1)[-1])


def same_family(model: str, prefix: str) -> bool:
    """Whether a model id falls under a table's prefix; a gateway's `maker/` is dropped, and dots and
    dashes in version numbers match each other (claude-sonnet-4.6 is claude-sonnet-4-6). Bedrock's
    region and maker qualifiers (us.anthropic.claude-..., amazon.nova-...) are dropped too. A prefix ending in
    a number ends there: gpt-4.1 is not gpt-4-1106-preview."""
    bare, want = model.rpartition("/")[2].lower(), prefix.replace(".", "-").lower()
    names = (name.replace(".", "-") for name in (bare, *_unqualified(bare)))
    ends = want[-1:].isdigit()
    return any(name.startswith(want) and not (ends and name[len(want) : len(want) + 1].isdigit()) for name in names)


def _unqualified(model: str) -> list[str]:
    """The id after each leading dotted qualifier: us.anthropic.claude-x -> anthropic.claude-x, claude-x."""
    parts = model.split(".")
    return [".".join(parts[k:]) for k in range(1, min(len(parts), 3))]
