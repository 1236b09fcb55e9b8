"""The fleet's capture store in PostgreSQL: the same rows as the SQLite store (capture/sqlite.py), for
many proxies at once.

Writing: `add` only queues the record; a thread writes the queue in batches (one transaction each,
through a psycopg pool), off the analysis and never on the request path. Row ids are flow ids and an
insert of an id already there changes nothing, so a batch written twice (sent, then its answer lost)
is stored once. When the server cannot be reached, batches go to a local SQLite spool
(PREFIXGUARD_SPOOL_DIR, else ~/.cache/prefixguard) and are drained into the server once it answers
again (also by the next proxy started on this machine), then removed from the spool: nothing lost,
nothing twice.

Schema: the table `flows` with the SQLite store's columns (plus `seq`, the order rows arrived in) and
`prefixguard_meta` holding the schema version; an older table is migrated by adding what it lacks.
The URL chooses database and schema (`?options=-csearch_path%3Dname`).
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from xxhash import xxh3_64_hexdigest

from prefixguard.capture.columns import ADDED, ANALYSED, DEFINITIONS, NAMES, UPDATED, flat, legacy_updates, record_of
from prefixguard.capture.legacy import UNREAD_LIKE
from prefixguard.capture.record import SCHEMA_VERSION, Record, Rows
from prefixguard.capture.sqlite import Store
from prefixguard.utils.errors import InputError

BATCH = 500  # rows per transaction at most
WAIT_S = 0.2  # a row waits this long for others to share its transaction
RETRY_S = 2.0  # a server that failed is tried again this much later
CONNECT_TIMEOUT_S = 3  # a server that does not answer in this long is down
_TYPES = {"TEXT": "TEXT", "REAL": "DOUBLE PRECISION", "INTEGER": "BIGINT", "BLOB": "BYTEA"}


def _pg_columns() -> str:
    return ", ".join(f"{name} {_TYPES[kind]} {rest}".strip() for name, kind, rest in DEFINITIONS)


_TEXT = tuple(name for name, kind, _ in DEFINITIONS if kind == "TEXT")
_INSERT = (
    f"INSERT INTO flows ({', '.join(NAMES)}) VALUES ({', '.join(['%s'] * len(NAMES))}) ON CONFLICT (id) DO NOTHING"
)
_UPGRADE = f"UPDATE flows SET {', '.join(f'{c} = %s' for c in UPDATED)} WHERE id = %s"


def _values(rec: Record) -> list[Any]:
    row = flat(rec)
    for name in _TEXT:  # PostgreSQL text holds no NUL character (SQLite's does): the one change made
        if isinstance(row[name], str) and "\x00" in row[name]:
            row[name] = row[name].replace("\x00", "\ufffd")
    return [row[n] for n in NAMES]


def _safe(url: str) -> str:
    """The URL without its password, for messages."""
    head, at, tail = url.rpartition("@")
    if not at:
        return url
    scheme, _, userinfo = head.partition("://")
    return f"{scheme}://{userinfo.split(':')[0]}@{tail}"


def _first_line(err: Exception) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


def _connect(url: str) -> Any:
    import psycopg

    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
    except (psycopg.Error, ValueError) as err:
        raise InputError(f"cannot reach the PostgreSQL store ({_first_line(err)})", _safe(url)) from None


def migrate(conn: Any) -> None:
    """Create or bring up to date the capture table (one proxy at a time: an advisory lock)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(8142026)")
        conn.execute("CREATE TABLE IF NOT EXISTS prefixguard_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute(f"CREATE TABLE IF NOT EXISTS flows ({_pg_columns()}, seq BIGSERIAL)")
        conn.execute("CREATE INDEX IF NOT EXISTS flows_ts ON flows (ts)")
        unmarked = (
            conn.execute(
                "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
                "AND table_name = 'flows' AND column_name = %s",
                (ANALYSED,),
            ).fetchone()
            is None
        )
        for name, kind in ADDED.items():  # a table written by an earlier version
            conn.execute(f"ALTER TABLE flows ADD COLUMN IF NOT EXISTS {name} {kind.replace('INTEGER', 'BIGINT')}")
        found = conn.execute("SELECT value FROM prefixguard_meta WHERE name = 'schema_version'").fetchone()
        if found is None or int(found[0]) < 6:  # version 5's cause and diagnosis text, into their columns
            old = conn.execute(
                "SELECT id, verdict, cause, diagnosis FROM flows WHERE cause IS NOT NULL OR diagnosis IS NOT NULL"
            ).fetchall()
            with conn.cursor() as cur:
                cur.executemany(_UPGRADE, legacy_updates(old))
        if unmarked:  # a table written before the column: its unread requests are known by their note
            conn.execute(f"UPDATE flows SET {ANALYSED} = 0 WHERE note LIKE %s", (UNREAD_LIKE,))
        conn.execute(
            "INSERT INTO prefixguard_meta VALUES ('schema_version', %s) "
            "ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value",
            (str(SCHEMA_VERSION),),
        )


def check_server(url: str) -> None:
    """InputError now, before the proxy listens, when the store's server cannot be reached or written."""
    import psycopg

    with _connect(url) as conn:
        try:
            migrate(conn)
        except psycopg.Error as err:
            raise InputError(f"cannot write the PostgreSQL store ({_first_line(err)})", _safe(url)) from None


def _count(conn: Any) -> int:
    found = conn.execute("SELECT COUNT(*) FROM flows").fetchone()
    return int(found[0]) if found else 0


def spool_path(url: str) -> Path:
    folder = Path(os.environ.get("PREFIXGUARD_SPOOL_DIR") or Path.home() / ".cache" / "prefixguard")
    return folder / f"spool-{xxh3_64_hexdigest(url.encode())}.db"


class PgStore(Rows):
    """A capture store in PostgreSQL: a writer (create=True) or a reader."""

    def __init__(self, url: str, *, create: bool = False, spool: str | Path | None = None, warn: Any = None) -> None:
        self.url = url
        self.path = _safe(url)  # what messages name
        self._conn: Any = None  # a reader's connection (psycopg's)
        self._thread: threading.Thread | None = None
        if not create:
            self._conn = _connect(url)
            self._check_readable()
            return
        import logging

        from psycopg_pool import ConnectionPool

        logging.getLogger("psycopg.pool").setLevel(logging.ERROR)  # an outage is said once, by us, not per retry

        self.spool_path = Path(spool) if spool else spool_path(url)
        self._spool: Store | None = None
        self.warn = warn or (lambda line: print(line, file=sys.stderr, flush=True))
        self._down = False
        self._retry_at = 0.0
        self._migrated = False
        self._pool = ConnectionPool(
            url,
            min_size=1,
            max_size=2,
            open=False,
            timeout=CONNECT_TIMEOUT_S,
            kwargs={"connect_timeout": CONNECT_TIMEOUT_S},
            check=ConnectionPool.check_connection,
        )
        self._pool.open(wait=False)
        self._queue: queue.SimpleQueue[Record | None] = queue.SimpleQueue()
        self._added = self._handled = 0  # rows queued, rows written or spooled (one writer thread each)
        self._in_spool = 0  # rows in the spool (the writer thread counts them)
        self._thread = threading.Thread(target=self._write_loop, name="prefixguard-pgstore", daemon=True)
        self._thread.start()

    # ---- writing
    def add(self, rec: Record) -> None:
        """Queue one flow; it is written within WAIT_S (or spooled while the server is down)."""
        self._added += 1
        self._queue.put(rec)

    def _write_loop(self) -> None:
        if self.spool_path.is_file():
            self._spool = Store(self.spool_path)  # rows an earlier run could not write
            self._in_spool = len(self._spool)
        done = False
        while not done:
            batch: list[Record] = []
            timeout: float | None = RETRY_S if self._spool is not None else None  # a spool: drain it now and then
            deadline = None
            while len(batch) < BATCH:
                try:
                    item = self._queue.get(timeout=timeout)
                except queue.Empty:
                    break
                if item is None:
                    done = True
                    break
                batch.append(item)
                deadline = deadline or time.monotonic() + WAIT_S
                timeout = max(0.0, deadline - time.monotonic())
            self._drain()
            if batch and not self._write(batch):
                for rec in batch:
                    self._spooled().add(rec)
                self._in_spool = len(self._spooled())  # an id spooled twice is one row
            self._handled += len(batch)
        self._retry_at = 0.0  # closing: one more try, whenever the last failure was
        self._drain()

    def _spooled(self) -> Store:
        if self._spool is None:
            self.spool_path.parent.mkdir(parents=True, exist_ok=True)
            self._spool = Store(self.spool_path)
        return self._spool

    def _write(self, batch: list[Record]) -> bool:
        """One transaction; False when the server could not take it."""
        import psycopg
        from psycopg_pool import PoolTimeout

        if self._down and time.monotonic() < self._retry_at:
            return False
        try:
            with self._pool.connection() as conn:
                if not self._migrated:
                    migrate(conn)
                    self._migrated = True
                with conn.transaction(), conn.cursor() as cur:
                    cur.executemany(_INSERT, [_values(r) for r in batch])
        except (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout, OSError) as err:
            self._retry_at = time.monotonic() + RETRY_S
            if not self._down:
                self._down = True
                reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
                self.warn(
                    f"prefixguard warning: capture store {self.path} unreachable ({reason}); rows go to "
                    f"{self.spool_path} until it is back"
                )
            return False
        if self._down:
            self._down = False
            self.warn(f"prefixguard: capture store {self.path} is back; draining {self.spool_path}")
        return True

    def _drain(self) -> None:
        """Move the spool's rows into the server, a batch at a time; each batch leaves the spool only
        once the server has it."""
        if self._spool is None:
            return
        while True:
            batch = []
            for rec in self._spool.records():
                batch.append(rec)
                if len(batch) >= BATCH:
                    break
            if not batch:
                self._spool.close()
                self._spool = None
                try:
                    self.spool_path.unlink()
                except OSError:
                    pass
                return
            if not self._write(batch):
                return
            self._spool.remove([r.id for r in batch])
            self._in_spool = len(self._spool)

    def flush(self, timeout: float = 30.0) -> None:
        """Wait until what was added so far is written (or spooled)."""
        end = time.monotonic() + timeout
        while self._handled < self._added and time.monotonic() < end:
            time.sleep(0.01)

    @property
    def spooled(self) -> int:
        """Rows waiting in the spool (read from any thread: the spool itself is the writer's)."""
        return self._in_spool

    # ---- reading
    def _check_readable(self) -> None:
        import psycopg

        try:
            found = self._conn.execute("SELECT to_regclass('flows') IS NOT NULL").fetchone()[0]
        except psycopg.Error as err:
            self.close()
            raise InputError(f"not a prefixguard capture store ({_first_line(err)})", self.path) from None
        if not found:
            self.close()
            raise InputError("not a prefixguard capture store (no flows table)", self.path)

    def records(self) -> Iterator[Record]:
        """Every flow in arrival order."""
        from psycopg.rows import dict_row

        with self._conn.cursor(row_factory=dict_row) as cur:
            cur.execute("SELECT * FROM flows ORDER BY ts, seq")
            for row in cur:
                try:
                    yield record_of(row)
                except InputError as err:
                    raise InputError(str(err), self.path) from None

    def __len__(self) -> int:
        if self._conn is None:
            with self._pool.connection() as conn:
                return _count(conn)
        return _count(self._conn)

    def close(self) -> None:
        """A writer writes (or spools) everything queued first."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
            return
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None
            if self._spool is not None:
                self._spool.close()
                self._spool = None
            self._pool.close()

    def __enter__(self) -> PgStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
