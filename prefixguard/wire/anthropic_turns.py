"""What a Claude conversation renders of itself (rules/providers.toml [anthropic]): nothing before the last
compaction block (its summary stands for what came before it), and an assistant message's thinking only in
the latest turn (an earlier turn's is stripped: a turn starts at a user message that is not tool results
alone, so a tool loop keeps its own); and the schema of a JSON output, as it writes it.

The first two read the messages array's decoded elements (`values`: a plain message's role object, a run's
RUN_VALUE, every other message's dict), in which an element's slot keeps its order."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from prefixguard.wire.jsonspan import RUN_VALUE, Elements, Node


def compaction(values: Sequence[Any], kinds: Sequence[str]) -> tuple[Any, int] | None:
    """(the assistant message holding the last block of `kinds`, that block's index); None when none."""
    for value in reversed(values):
        if type(value) is not dict or value.get("role") != "assistant":
            continue
        content = value.get("content")
        if type(content) is list:
            for bi in range(len(content) - 1, -1, -1):
                block = content[bi]
                if type(block) is dict and block.get("type") in kinds:
                    return value, bi
    return None


def latest_turn(values: Sequence[Any]) -> int:
    """The slot of the last user message that is not tool results alone (a run counts: it holds a user's
    plain message); -1 when none."""
    for k in range(len(values) - 1, -1, -1):
        value = values[k]
        if value is RUN_VALUE:
            return k
        if type(value) is not dict or value.get("role") != "user":
            continue
        content = value.get("content")
        if (
            type(content) is list
            and content
            and all(type(b) is dict and b.get("type") == "tool_result" for b in content)
        ):
            continue
        return k
    return -1


def slot(elements: Sequence[Any], i: int) -> int:
    """Message i's slot in the decoded elements (a run takes one slot for all its messages)."""
    k = elements.slot(i) if type(elements) is Elements else i
    return k if type(k) is int else -1


def output_schema(root: Node) -> tuple[str, Node, str] | None:
    """A JSON output's format (`output_config.format`, or the beta's `output_format`) where it holds a schema:
    its pointer, its node, and the schema as the model reads it (schema_text)."""
    config = root.get("output_config")
    for pointer, node in (
        ("/output_config/format", config and config.get("format")),
        ("/output_format", root.get("output_format")),
    ):
        schema = node.value.get("schema") if node is not None and type(node.value) is dict else None
        if node is not None and type(schema) is dict:
            return pointer, node, schema_text(schema)
    return None


def schema_text(schema: dict[str, Any]) -> str:
    """A JSON output's schema as Claude reads it: indented JSON (the bills of Sonnet and Haiku 4.5 grow with its
    indented length, not its compact one; bench/RESULTS.md)."""
    return json.dumps(schema, indent=2, ensure_ascii=False)
