"""Reading a capture, the proxy's record of traffic: its SQLite store or the store's JSONL export, as
export-shaped rows (dicts) checked for the JSON types readers rely on. The one reader of captures for
replay, report and the demo; lint reads the same rows line by line (it reports line:column)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from prefixguard.capture.legacy import upgrade_row
from prefixguard.capture.sqlite import SQLITE_HEADER, SQLITE_SUFFIXES
from prefixguard.capture.store import is_capture_url, open_capture, read_jsonl
from prefixguard.utils.errors import InputError, check_regular_file


def read_capture(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a capture store (SQLite, or a fleet's PostgreSQL by URL) or of its JSONL export, oldest
    first, in the export shape."""
    if is_capture_url(path):
        with open_capture(path) as store:
            rows = list(store.rows())
        p = store.path
    elif _sqlite_file(p := Path(path)):
        with open_capture(p) as store:
            rows = list(store.rows())
    else:
        rows = list(read_jsonl(p))
        if rows and not (isinstance(rows[0], dict) and "request" in rows[0]):
            raise InputError("not a capture export: rows have no 'request'", str(p))
    for n, row in enumerate(rows, 1):
        check_row(row, f"{p}: row {n}")
    rows = [upgrade_row(row) for row in rows]  # an export before version 6: its cause text, structured once
    return sorted(rows, key=lambda r: r.get("ts") or 0)


# The export's fields that readers use, and the JSON types each may have (None: null or absent).
ROW_TYPES: dict[str, tuple[type, ...]] = {
    "id": (str, int),
    "ts": (int, float),
    "path": (str,),
    "api": (str,),
    "model": (str,),
    "tenant": (str,),
    "request": (dict, str),
    "status": (int,),
    "usage": (dict,),
    "timings": (dict,),
    "verdict": (str,),
    "cause": (str,),
    "causes": (list,),
    "pointer": (str,),
    "expected_cached": (int,),
    "upstream": (str,),
    "detail": (str,),
    "reprefill_tokens": (int,),
    "cost_usd": (int, float),
    "diagnosis": (dict,),
}
_NUMBERS = (int, float)


def check_row(row: dict[str, Any], where: str) -> None:
    """Raise InputError when a capture row holds a field of the wrong JSON type (a hand-edited or
    foreign file), so readers never meet a string where they add seconds or a list where they look
    up a key."""
    for key, kinds in ROW_TYPES.items():
        value = row.get(key)
        if value is not None and (not isinstance(value, kinds) or isinstance(value, bool)):
            raise InputError(
                f"{where}: '{key}' is {type(value).__name__}, expected {' or '.join(k.__name__ for k in kinds)} or null"
            )
    if any(not isinstance(c, str) for c in row.get("causes") or ()):
        raise InputError(f"{where}: 'causes' holds a non-string, expected cause names")
    for key, value in row.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(f"{where}: '{key}' is {value}, expected a finite number")
    for table in ("usage", "timings"):
        for key, value in (row.get(table) or {}).items():
            if value is None or (key == "reported" and (isinstance(value, bool) or not isinstance(value, float))):
                continue
            if not isinstance(value, _NUMBERS) or isinstance(value, bool):
                raise InputError(f"{where}: '{table}.{key}' is {type(value).__name__}, expected a number")
            if not math.isfinite(value) or value < 0:
                raise InputError(f"{where}: '{table}.{key}' is {value}, expected a finite number of at least 0")


def _sqlite_file(p: Path) -> bool:
    """A regular file (InputError otherwise) that is SQLite or named like it."""
    check_regular_file(p, "capture file")
    return is_sqlite(p)


def is_sqlite(p: Path) -> bool:
    """An SQLite file, or one named like one (so an empty or broken .db is called no capture store)."""
    if p.suffix in SQLITE_SUFFIXES:
        return True
    with p.open("rb") as f:
        return f.read(len(SQLITE_HEADER)) == SQLITE_HEADER
