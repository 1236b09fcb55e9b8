"""The compare cause taxonomy, read from rules/catalog.toml (`[cause.NAME]`): why a later request does
not reuse an earlier one's cached prefix, in words and with its fix. The catalog is the one source: `Cause`
lists its names as an enum (a str: stored and compared as its text), and tests/test_causes_enum.py keeps
the two equal."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from prefixguard.contracts import ruleset


class Cause(StrEnum):
    """Every cause name of rules/catalog.toml, in its order (these names are part of the JSON output)."""

    APPEND_ONLY = "append_only"
    VOLATILE_CONTENT = "volatile_content"
    TOOLS_REORDERED = "tools_reordered"
    TOOLS_CHANGED = "tools_changed"
    TOOL_SCHEMA_CHANGED = "tool_schema_changed"
    TOOLS_MOVED = "tools_moved"
    KEY_ORDER_CHANGED = "key_order_changed"
    WHITESPACE_CHANGED = "whitespace_changed"
    SYSTEM_CHANGED = "system_changed"
    HISTORY_REWRITTEN = "history_rewritten"
    HISTORY_TRUNCATED = "history_truncated"
    HISTORY_COMPACTED = "history_compacted"
    MODEL_CHANGED = "model_changed"
    SETTING_CHANGED = "setting_changed"
    IMAGES_CHANGED = "images_changed"
    BREAKPOINT_CHANGED = "breakpoint_changed"


def _table() -> dict[str, dict[str, Any]]:
    return ruleset.load("catalog.toml")["cause"]


_CAUSES = _table()
DESCRIPTIONS: dict[str, str] = {name: c["description"] for name, c in _CAUSES.items()}
FIXES: dict[str, str] = {name: c["fix"] for name, c in _CAUSES.items()}  # templates: {what}, {level}
CAUSES = tuple(DESCRIPTIONS)  # the fixed taxonomy, in the catalog's order


def generic_fix(cause: str) -> str:
    """The fix of a cause without a concrete change to name (a rule's help, the demo's table)."""
    return FIXES[cause].format(what="the changing value", level="affected")
