"""Model prices: from the maintained `genai-prices` package (its data ships inside it, so this works
offline), with the dated table in rules/providers.toml as the fallback for a model it does not know,
when it is not installed, or when PREFIXGUARD_PRICES=rules asks for the table.

Prices change monthly, so every printed cost names its source and that source's date (`label`).

Importing genai-prices takes ~0.2 s (pydantic models of every provider), more than a whole `diff`: what
was read from it is kept on disk per version of its data and per day (disk_cache.py), so a later run
that prices the same models never imports it.
"""

from __future__ import annotations

import atexit
import os
import re
from datetime import UTC, datetime
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any, NamedTuple

from xxhash import xxh3_64_hexdigest

from prefixguard.utils import disk_cache

PACKAGE = "genai-prices"


class Prices(NamedTuple):
    """USD per million tokens, by token class; `source` and `date` say where they come from."""

    input: float
    output: float
    cache_read: float | None  # None: the source gives no cache price (the contract's multiplier holds)
    cache_write_5m: float | None
    cache_write_1h: float | None
    source: str
    date: str


def _base(value: Any) -> float | None:
    """A price as a float: a tiered price's base tier (prefixguard prices below the long-context tier)."""
    if value is None:
        return None
    from decimal import Decimal  # genai-prices' own type: that package, when read, has imported it

    if not isinstance(value, Decimal):
        value = getattr(value, "base", None)
    return None if value is None else float(value)


@cache
def _memo() -> tuple[str, dict[str, Any]] | None:
    """(file name, what earlier runs read from this genai-prices data today), or None when the package
    is not installed. Found without importing it: its data file's size and mtime name the version."""
    spec = find_spec("genai_prices")
    if spec is None or not spec.origin:
        return None
    data = Path(spec.origin).with_name("data.py")
    try:
        stat = data.stat()
    except OSError:
        return None
    day = datetime.now(UTC).date().isoformat()  # a price can change on a given day: read it anew daily
    name = f"prices-{xxh3_64_hexdigest(f'{data}|{stat.st_size}|{stat.st_mtime_ns}|{day}'.encode())}.json"
    kept = disk_cache.load_json(name)
    return name, kept if isinstance(kept, dict) else {}


_changed = False


def _remembered(key: str, read: Any) -> Any:
    """read() once per key for this data and day, across runs."""
    global _changed
    memo = _memo()
    if memo is None:
        return read()
    if key not in memo[1]:
        memo[1][key] = read()
        _changed = True
    return memo[1][key]


@atexit.register
def _save() -> None:
    memo = _memo() if _changed else None
    if memo is not None:
        disk_cache.save_json(memo[0], memo[1], replaces="prices-*.json")


def package_table() -> tuple[str, str] | None:
    """(source, date) of the installed genai-prices data, or None when it is not installed. The date is
    the latest day its data says prices were checked or updated."""
    table = _remembered("table", _read_table) if _memo() is not None else None
    return tuple(table) if table else None


def _read_table() -> list[str] | None:
    from importlib.metadata import PackageNotFoundError, version  # not at import: it costs ~12 ms

    try:
        from genai_prices import data

        pkg = f"{PACKAGE} {version(PACKAGE)}"
    except (ImportError, PackageNotFoundError):
        return None
    days = []
    for provider in data.providers:
        for text in [provider.price_comments] + [m.price_comments for m in provider.models]:
            days += re.findall(r"(?:checked|updated)[^0-9]{0,20}(20\d\d-\d\d-\d\d)", text or "", re.I)
    return [pkg, max(days, default="undated")]


def from_package(pid: str | None, model: str | None) -> Prices | None:
    """Today's prices of a model from genai-prices, or None (not installed, unknown model or provider).
    pid: the provider's id there (its contract's `prices_id`; None: a provider it does not price)."""
    if os.environ.get("PREFIXGUARD_PRICES", "").lower() in ("rules", "toml") or not model:
        return None
    table = package_table()
    if table is None or pid is None:
        return None
    values = _remembered(f"{pid}/{model}", lambda: _read_prices(pid, model))
    if values is None:
        return None
    price_in, price_out, read, write_5m, write_1h = values
    return Prices(
        input=price_in,
        output=price_out,
        cache_read=read,
        cache_write_5m=write_5m,
        cache_write_1h=write_1h,
        source=table[0],
        date=table[1],
    )


def _read_prices(pid: str, model: str) -> list[float | None] | None:
    from genai_prices.data_snapshot import get_snapshot

    try:
        _, info = get_snapshot().find_provider_model(model.rpartition("/")[2], None, pid, None)
        price = info.get_prices(datetime.now(UTC))
    except (LookupError, ValueError):
        return None
    values = [
        _base(getattr(price, k, None))
        for k in ("input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok", "cache_write_1h_mtok")
    ]
    return None if not values[0] or values[1] is None else values


def summary() -> str:
    """Where costs come from, for a banner: the package with its date, else the TOML table."""
    table = None if os.environ.get("PREFIXGUARD_PRICES", "").lower() in ("rules", "toml") else package_table()
    if table is None:
        return "rules/providers.toml"
    return f"{table[0]}, {table[1]} (rules/providers.toml for models it lacks)"
