"""The compare cause taxonomy, read from rules/catalog.toml (`[cause.NAME]`): why a later request does
not reuse an earlier one's cached prefix, in words and with its fix. The catalog is the one source."""
from __future__ import annotations

from typing import Any

from prefixguard.contracts import ruleset


def _table() -> dict[str, dict[str, Any]]:
    return ruleset.load("catalog.toml")["cause"]


_CAUSES = _table()
DESCRIPTIONS: dict[str, str] = {name: c["description"] for name, c in _CAUSES.items()}
FIXES: dict[str, str] = {name: c["fix"] for name, c in _CAUSES.items()}   # templates: {what}, {level}
CAUSES = tuple(DESCRIPTIONS)  # the fixed taxonomy: these names are part of the JSON output


def generic_fix(cause: str) -> str:
    """The fix of a cause without a concrete change to name (a rule's help, the demo's table)."""
    return FIXES[cause].format(what="the changing value", level="affected")
