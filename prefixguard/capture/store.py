"""The capture store's one interface: `open_capture` opens a SQLite file (capture/sqlite.py) or a fleet's
PostgreSQL store (capture/postgres.py) for reading or writing; both hold `Record`s (capture/record.py) in
the same columns (capture/columns.py) and export them as JSON lines, one object per row in the shape of
`Record.row()`, which `read_jsonl` reads back.

Reading opens a store read-only and changes nothing in it; only the proxy's writer creates the table,
migrates an older one, and refuses a file that holds anything other than a prefixguard capture.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prefixguard.capture.record import RECORD_FIELDS, SCHEMA_VERSION, Record, Rows
from prefixguard.capture.sqlite import SQLITE_HEADER, SQLITE_SUFFIXES, Store
from prefixguard.utils.errors import InputError, describe, open_input

# What callers import from here (the interface); each has its one home named above.
__all__ = [
    "RECORD_FIELDS",
    "SCHEMA_VERSION",
    "SQLITE_HEADER",
    "SQLITE_SUFFIXES",
    "Record",
    "Rows",
    "Store",
    "check_writable_store",
    "is_capture_url",
    "json_lines",
    "open_capture",
    "open_store",
    "read_jsonl",
]


def is_capture_url(target: str | Path) -> bool:
    """A PostgreSQL capture store's URL rather than a file."""
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


def open_capture(target: str | Path, *, create: bool = False) -> Any:
    """THE opener of a capture store for every reader and writer: a postgresql:// URL (the fleet's
    store, capture/postgres.py) or a SQLite file (capture/sqlite.py). Both give add, records, rows, export,
    len, close."""
    if is_capture_url(target):
        try:
            from prefixguard.capture.postgres import PgStore
        except ImportError:
            raise InputError(
                "a postgresql:// store needs psycopg: pip install '.[fleet]' in a clone of the prefixguard repository"
            ) from None
        return PgStore(str(target), create=create)
    return Store(target, create=create)


def open_store(path: str | Path, *, create: bool = False) -> Store:
    """Open a capture file: read-only, or for writing (creating it) with create=True.
    Raises InputError naming the file when it is not a prefixguard capture (or cannot be written)."""
    return Store(path, create=create)


def check_writable_store(path: str | Path) -> None:
    """Raise InputError now, not at the first flow, when `path` cannot be the proxy's --store: a
    directory, a file that is not SQLite, another program's SQLite file, or no permission. A new or
    empty file gets the capture table (what the proxy would do at its first flow). A postgresql:// URL:
    the server must answer, and gets the table."""
    if is_capture_url(path):
        from prefixguard.capture.postgres import check_server

        check_server(str(path))
        return
    Store(path, create=True).close()


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Rows of an exported capture (capture.jsonl), as written by Store.export."""
    for _, row in json_lines(path):
        yield row


def json_lines(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of a JSON lines file. A line that is not UTF-8,
    not JSON or not an object raises InputError naming the file and the line."""
    with open_input(path) as f:
        for n, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise InputError(f"line {n}: not UTF-8 text", str(path)) from None
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as err:
                raise InputError(f"line {n}: not JSON ({describe(err)})", str(path)) from None
            except RecursionError:
                raise InputError(f"line {n}: JSON nested too deeply", str(path)) from None
            if not isinstance(row, dict):
                raise InputError(f"line {n}: expected a JSON object, got {type(row).__name__}", str(path))
            yield n, row
