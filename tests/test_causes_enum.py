"""The Cause enum (judge/causes.py) is the catalog's [cause.NAME] tables, no more, no less, in order."""
from __future__ import annotations

import tomllib
from pathlib import Path

from prefixguard.judge.causes import CAUSES, Cause

CATALOG = Path(__file__).resolve().parent.parent / "rules" / "catalog.toml"


def test_the_enum_lists_the_catalogs_causes_in_order() -> None:
    with CATALOG.open("rb") as f:
        names = list(tomllib.load(f)["cause"])
    assert [c.value for c in Cause] == names == list(CAUSES)
    assert all(c.name == c.value.upper() for c in Cause)
    assert Cause("volatile_content") == "volatile_content"   # a str: stored and compared as its text
