"""The capture store in one SQLite file (WAL): one row per proxied request, written in one transaction.

Rows hold what lint's sequence mode, replay and report need (capture/record.py: the Record, its columns in
capture/columns.py). Secrets are removed before a record gets here (prefixguard/proxy/redact.py); this
module stores what it is given.

Reading opens the file read-only and changes nothing in it; only the proxy's writer creates the table,
migrates an older one (capture/columns.py) and refuses a file that holds anything other than a capture.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

from prefixguard.capture.columns import (
    ADDED,
    ANALYSED,
    COLUMNS,
    NAMES,
    REQUIRED,
    UPDATED,
    flat,
    legacy_updates,
    record_of,
)
from prefixguard.capture.legacy import UNREAD_LIKE
from prefixguard.capture.record import SCHEMA_VERSION, Record, Rows
from prefixguard.utils.errors import InputError, check_regular_file

SQLITE_HEADER = b"SQLite format 3\x00"
SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")  # file names taken as SQLite whatever they hold
_INSERT = f"INSERT OR REPLACE INTO flows ({', '.join(NAMES)}) VALUES ({', '.join('?' * len(NAMES))})"


def _migrate(db: sqlite3.Connection, columns: set[str]) -> None:
    """Bring a file of an earlier version up to SCHEMA_VERSION: the columns it lacks, then (before 6) its
    cause and diagnosis text moved into their structured columns, in one transaction."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    db.execute("BEGIN IMMEDIATE")  # autocommit connection: the migration is one transaction all the same
    try:
        for name, kind in ADDED.items():
            if columns and name not in columns:
                db.execute(f"ALTER TABLE flows ADD COLUMN {name} {kind}")
        if columns and version < 6:
            old = db.execute(
                "SELECT id, verdict, cause, diagnosis FROM flows WHERE cause IS NOT NULL OR diagnosis IS NOT NULL"
            ).fetchall()
            sets = ", ".join(f"{c} = ?" for c in UPDATED)
            db.executemany(f"UPDATE flows SET {sets} WHERE id = ?", legacy_updates(old))
        if columns and ANALYSED not in columns:
            db.execute(f"UPDATE flows SET {ANALYSED} = 0 WHERE note LIKE ?", (UNREAD_LIKE,))
        db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _not_ours(path: Path, why: str) -> InputError:
    return InputError(f"not a prefixguard capture store ({why})", str(path))


def _check_schema(db: sqlite3.Connection, path: Path) -> set[str]:
    """The flows table's columns; raises InputError when the file is no capture (an empty database
    gives an empty set: the writer may make it one)."""
    try:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        if "flows" not in tables:
            if tables:
                raise _not_ours(path, f"an SQLite file with tables {', '.join(sorted(tables)[:5])} and no flows table")
            return set()
        columns = {r[1] for r in db.execute("PRAGMA table_info(flows)")}
    except sqlite3.DatabaseError as err:
        raise _not_ours(path, str(err)) from None
    missing = REQUIRED - columns
    if missing:
        raise _not_ours(path, f"its flows table lacks {', '.join(sorted(missing)[:5])}")
    return columns


def _header(path: Path) -> bytes:
    with path.open("rb") as f:
        return f.read(len(SQLITE_HEADER))


class Store(Rows):
    """A capture file. Writes come from one thread at a time; reads may run while a proxy writes."""

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        self.path = Path(path)
        if create:
            self._db = self._open_for_writing()
        else:
            self._db = self._open_for_reading()
        self._db.row_factory = sqlite3.Row

    def _open_for_reading(self) -> sqlite3.Connection:
        """Read-only (SQLite's mode=ro): no table, index, pragma or row is ever written."""
        check_regular_file(self.path, "capture file")
        header = _header(self.path)
        if not header:
            raise _not_ours(self.path, "an empty file")
        if header != SQLITE_HEADER:
            raise _not_ours(self.path, "not an SQLite file")
        # A file with no -wal beside it has no writer and nothing unmerged: immutable=1 reads it without
        # creating -wal/-shm files. Beside a live proxy (a -wal exists), mode=ro reads its latest rows.
        resolved = self.path.resolve()
        live = resolved.with_name(resolved.name + "-wal").exists()
        try:
            db = sqlite3.connect(
                f"file:{quote(str(resolved))}?mode=ro{'' if live else '&immutable=1'}",
                uri=True,
                check_same_thread=False,
                isolation_level=None,
            )
        except sqlite3.Error as err:
            raise _not_ours(self.path, str(err)) from None
        try:
            if not _check_schema(db, self.path):
                raise _not_ours(self.path, "an SQLite file with no flows table")
        except InputError:
            db.close()
            raise
        return db

    def _open_for_writing(self) -> sqlite3.Connection:
        """Creates the file or the table when there is none; refuses any other file, changing nothing."""
        if self.path.is_dir():
            raise InputError("is a directory, not a capture file", str(self.path))
        if self.path.exists():  # a FIFO would block SQLite's open, a device take its pages
            check_regular_file(self.path, "capture file")
        if self.path.is_file() and _header(self.path) not in (b"", SQLITE_HEADER):
            raise _not_ours(self.path, "not an SQLite file")
        if self.path.exists() and not os.access(self.path, os.W_OK):
            raise InputError("cannot write the capture file (permission denied)", str(self.path))
        try:
            db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        except sqlite3.Error as err:
            raise InputError(f"cannot open the capture file ({err})", str(self.path)) from None
        try:
            columns = _check_schema(db, self.path)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a crash loses the last flows, never half of one
            db.execute(f"CREATE TABLE IF NOT EXISTS flows ({COLUMNS})")
            db.execute("CREATE INDEX IF NOT EXISTS flows_ts ON flows (ts)")
            _migrate(db, columns)
        except sqlite3.Error as err:
            db.close()
            raise InputError(f"cannot write the capture file ({err})", str(self.path)) from None
        except InputError:
            db.close()
            raise
        return db

    def add(self, rec: Record) -> None:
        """Store one flow: a single INSERT in its own transaction."""
        row = flat(rec)
        with self._db:  # BEGIN ... COMMIT
            self._db.execute(_INSERT, [row[n] for n in NAMES])

    def remove(self, ids: list[str]) -> None:
        """Delete these flows (a spool, once they are in the fleet's store)."""
        with self._db:
            self._db.executemany("DELETE FROM flows WHERE id = ?", [(i,) for i in ids])

    def records(self) -> Iterator[Record]:
        """Every flow in arrival order."""
        try:
            for row in self._db.execute("SELECT * FROM flows ORDER BY ts, rowid"):
                yield record_of(row)
        except sqlite3.DatabaseError as err:
            raise _not_ours(self.path, str(err)) from None
        except InputError as err:
            raise InputError(str(err), str(self.path)) from None

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM flows").fetchone()[0]

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
