"""The registered adapters: one module per API shape, each an Adapter (adapter.py).

The order is detection's: a body at a path that names no shape is the first adapter's that claims it
(Gemini's contents, then Converse's blocks, then a messages body that leans Anthropic's way, then Chat,
then a Gemini interaction's input, then Responses, then a text completion's prompt). Adding a shape is
adding its module here.
"""

from __future__ import annotations

from prefixguard.utils.errors import InputError
from prefixguard.wire import (
    anthropic,
    bedrock_converse,
    gemini,
    gemini_interactions,
    openai_chat,
    openai_completions,
    openai_responses,
)
from prefixguard.wire.adapter import Adapter

ADAPTERS: tuple[Adapter, ...] = (
    gemini,
    bedrock_converse,
    anthropic,
    openai_chat,
    gemini_interactions,
    openai_responses,
    openai_completions,
)
BY_API: dict[str, Adapter] = {a.API: a for a in ADAPTERS}
APIS: tuple[str, ...] = tuple(BY_API)  # the shapes by name, as error messages list them


def adapter_for(api: str) -> Adapter:
    """The adapter of a shape; InputError naming the shapes when there is none."""
    try:
        return BY_API[api]
    except KeyError:
        raise InputError(f"unknown API {api!r} (one of {', '.join(APIS)})") from None
