"""The capture store: one SQLite file (WAL), one row per proxied request, written in one transaction.

Rows hold what lint's sequence mode, replay and report need: request meta, fingerprints, segment token
counts, the redacted request body (none with --no-bodies), status, usage, timings, verdict and cause.
Secrets are removed before a record gets here (prefixguard/proxy/redact.py); this module stores what
it is given. Export is JSON lines, one object per row in the shape of `Record.row()`.

Reading opens the file read-only and changes nothing in it; only the proxy's writer creates the table,
and it refuses a file that holds anything other than a prefixguard capture.
"""
from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

from prefixguard.model.usage import USAGE_FIELDS, Usage
from prefixguard.utils.errors import InputError, check_regular_file, describe, open_input

SCHEMA_VERSION = 5   # 2: tokens_estimated; 3: diagnosis; 4: degraded; 5: attribution and gen_ai.response.*
SQLITE_HEADER = b"SQLite format 3\x00"
SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")  # file names taken as SQLite whatever they hold

_COLUMNS = """
    id TEXT PRIMARY KEY, ts REAL NOT NULL, method TEXT, path TEXT, upstream TEXT, api TEXT, model TEXT,
    tenant TEXT, request TEXT, request_bytes INTEGER, fingerprints BLOB, segments TEXT, status INTEGER,
    error TEXT, prompt_total INTEGER, cache_read INTEGER, cache_write_5m INTEGER, cache_write_1h INTEGER,
    uncached INTEGER, output INTEGER, reported INTEGER, ttft_s REAL, decode_tps REAL, total_s REAL,
    verdict TEXT, cause TEXT, expected_cached INTEGER, expected_reason TEXT, previous_id TEXT,
    reprefill_tokens INTEGER, cost_usd REAL, detail TEXT, tokens_estimated INTEGER NOT NULL DEFAULT 0,
    diagnosis TEXT, degraded INTEGER NOT NULL DEFAULT 0, client TEXT, route TEXT, site TEXT, response_id TEXT,
    response_model TEXT, finish_reasons TEXT
"""


class Record:
    """One proxied request and what became of it: id, ts and path, then any field by name (the others have
    defaults). A plain class: a dataclass would cost every command that reads a store ~7 ms to import."""

    id: str
    ts: float                              # unix seconds when the request arrived
    path: str                              # URL path and query, secrets removed
    method: str = "POST"
    upstream: str | None = None
    api: str | None = None
    model: str | None = None
    tenant: str = ""
    request: str | None = None             # redacted body text (None: --no-bodies or not captured)
    request_bytes: int = 0
    fingerprints: bytes = b""              # Prompt.chain, concatenated
    segments: list[list[Any]]              # [level, pointer, tokens] per segment; [] by default
    status: int | None = None              # HTTP status; None when no response came
    error: str | None = None               # transport error (refused, timeout, cut mid-stream)
    usage: Usage = Usage()
    ttft_s: float | None = None
    decode_tps: float | None = None
    total_s: float | None = None
    verdict: str | None = None
    cause: str | None = None
    expected_cached: int | None = None
    expected_reason: str | None = None
    previous_id: str | None = None         # the earlier request this one was compared with
    reprefill_tokens: int | None = None
    cost_usd: float | None = None          # what the break cost, when one was found
    detail: str | None = None
    tokens_estimated: bool = False         # our token counts (expected, re-prefill) are estimates
    diagnosis: str | None = None           # the provider's own cache diagnosis and our agreement with it (JSON)
    degraded: bool = False                 # judged without the fleet's shared index (it was down)
    client: str | None = None              # "claude-cli 2.0.14": the sender's user agent (attribution.client_of)
    route: str | None = None               # the endpoint, routes.template: no ids, no query
    site: str | None = None                # the call site the caller named (x-prefixguard-site)
    response_id: str | None = None         # what the response says of itself (OTel gen_ai.response.*)
    response_model: str | None = None
    finish_reasons: list[str] | None = None

    def __init__(self, id: str, ts: float, path: str, **fields: Any) -> None:
        self.id, self.ts, self.path, self.segments = id, ts, path, []
        for name, value in fields.items():
            if name not in RECORD_FIELDS:
                raise TypeError(f"Record has no field {name!r}")
            setattr(self, name, value)

    def row(self) -> dict[str, Any]:
        """The export shape (JSON lines) that lint's sequence mode and replay read."""
        try:
            request = json.loads(self.request) if self.request is not None else None
        except (ValueError, RecursionError):
            request = self.request  # not JSON: kept as text
        u = self.usage
        return {
            "schema_version": SCHEMA_VERSION,   # the store's: a row's shape changes with it
            "id": self.id, "ts": self.ts, "method": self.method, "path": self.path, "api": self.api, "model": self.model,
            "tenant": self.tenant, "request": request, "status": self.status,
            "usage": {"prompt_total": u.prompt_total, "cache_read": u.cache_read, "cache_write_5m": u.cache_write_5m,
                      "cache_write_1h": u.cache_write_1h, "uncached": u.uncached, "output": u.output,
                      "reported": u.reported},
            "timings": {"ttft_s": self.ttft_s, "decode_tps": self.decode_tps, "total_s": self.total_s},
            "verdict": self.verdict, "cause": self.cause, "expected_cached": self.expected_cached,
            "tokens_estimated": self.tokens_estimated, "degraded": self.degraded,
            "diagnosis": _json_or_none(self.diagnosis),
            # where the row came from ("import:claude-code": an agent's log, no body) and what the break cost
            "upstream": self.upstream, "detail": self.detail, "reprefill_tokens": self.reprefill_tokens,
            "cost_usd": self.cost_usd,
            # who sent it (report --by) and what the response said of itself
            "client": self.client, "route": self.route, "site": self.site,
            "response": {"id": self.response_id, "model": self.response_model,
                         "finish_reasons": list(self.finish_reasons or ())},
        }


RECORD_FIELDS = tuple(Record.__annotations__)


_NAMES = tuple(c.split()[0] for c in _COLUMNS.split(",") if c.strip())
_ADDED = {"tokens_estimated": "INTEGER NOT NULL DEFAULT 0",   # columns a version-1 file lacks
          "diagnosis": "TEXT",                              # and a version-2 one
          "degraded": "INTEGER NOT NULL DEFAULT 0",          # and a version-3 one
          **{name: "TEXT" for name in ("client", "route", "site", "response_id", "response_model",
                                       "finish_reasons")}}    # and a version-4 one


def _json_or_none(text: str | None) -> Any:
    try:
        return json.loads(text) if text else None
    except (ValueError, RecursionError):
        return None


def _flat(rec: Record) -> dict[str, Any]:
    out = {name: getattr(rec, name) for name in RECORD_FIELDS if name != "usage"}
    out.update(rec.usage._asdict())
    out["segments"] = json.dumps(rec.segments)
    out["reported"] = int(rec.usage.reported)
    out["tokens_estimated"] = int(rec.tokens_estimated)
    out["degraded"] = int(rec.degraded)
    out["finish_reasons"] = json.dumps(list(rec.finish_reasons)) if rec.finish_reasons else None
    return out


# Python types each column's SQLite type may hold (a foreign writer can store any type in any column).
_KINDS = {"TEXT": (str,), "REAL": (int, float), "INTEGER": (int,), "BLOB": (bytes,)}
_COLUMN_KINDS = {c.split()[0]: _KINDS[c.split()[1]] for c in _COLUMNS.split(",") if c.strip()}


def _record(row: sqlite3.Row) -> Record:
    data = {k: row[k] for k in row.keys() if k in _NAMES}
    for name, value in data.items():
        if value is not None and not isinstance(value, _COLUMN_KINDS[name]):
            raise InputError(f"row {data.get('id')!r}: column {name} holds {type(value).__name__}, "
                             f"expected {_COLUMN_KINDS[name][0].__name__}")
    counts = {k: data.pop(k) or 0 for k in USAGE_FIELDS}
    usage = Usage(**counts | {"reported": bool(counts["reported"])})
    try:
        data["segments"] = json.loads(data["segments"] or "[]")
    except (ValueError, RecursionError):
        raise InputError(f"row {data.get('id')!r}: column segments is not JSON") from None
    data["fingerprints"] = data["fingerprints"] or b""
    data["tokens_estimated"] = bool(data.get("tokens_estimated"))
    data["degraded"] = bool(data.get("degraded"))
    data["finish_reasons"] = _reasons(data.get("finish_reasons"))
    return Record(usage=usage, **data)


def _reasons(text: str | None) -> list[str] | None:
    """The finish_reasons column (a JSON list of strings); anything else reads as none."""
    found = _json_or_none(text)
    return [r for r in found if isinstance(r, str)] if isinstance(found, list) else None


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
    missing = set(_NAMES) - set(_ADDED) - columns
    if missing:
        raise _not_ours(path, f"its flows table lacks {', '.join(sorted(missing)[:5])}")
    return columns


def _header(path: Path) -> bytes:
    with path.open("rb") as f:
        return f.read(len(SQLITE_HEADER))


class Rows:
    """What every capture store gives from its records(): rows in the export shape, and the export."""

    def records(self) -> Iterator[Record]:
        raise NotImplementedError

    def rows(self) -> Iterator[dict[str, Any]]:
        """Every flow in the export shape (see Record.row)."""
        for rec in self.records():
            yield rec.row()

    def export(self, out: IO[str]) -> int:
        """Write JSON lines; returns the number of rows."""
        n = 0
        for row in self.rows():
            line = json.dumps(row, ensure_ascii=False) + "\n"
            try:
                out.write(line)
            except UnicodeEncodeError:   # a lone surrogate the store accepted (from an escaped \ud800): ASCII escapes keep it
                out.write(json.dumps(row) + "\n")
            n += 1
        return n


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
            db = sqlite3.connect(f"file:{quote(str(resolved))}?mode=ro{'' if live else '&immutable=1'}", uri=True,
                                 check_same_thread=False, isolation_level=None)
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
        if self.path.exists():   # a FIFO would block SQLite's open, a device take its pages
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
            db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a crash loses at most the last flows, never half of one
            db.execute(f"CREATE TABLE IF NOT EXISTS flows ({_COLUMNS})")
            db.execute("CREATE INDEX IF NOT EXISTS flows_ts ON flows (ts)")
            for name, kind in _ADDED.items():
                if columns and name not in columns:   # a file from an earlier version
                    db.execute(f"ALTER TABLE flows ADD COLUMN {name} {kind}")
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except sqlite3.Error as err:
            db.close()
            raise InputError(f"cannot write the capture file ({err})", str(self.path)) from None
        except InputError:
            db.close()
            raise
        return db

    def add(self, rec: Record) -> None:
        """Store one flow: a single INSERT in its own transaction."""
        row = _flat(rec)
        sql = f"INSERT OR REPLACE INTO flows ({', '.join(_NAMES)}) VALUES ({', '.join('?' * len(_NAMES))})"
        with self._db:  # BEGIN ... COMMIT
            self._db.execute(sql, [row[n] for n in _NAMES])

    def remove(self, ids: list[str]) -> None:
        """Delete these flows (a spool, once they are in the fleet's store)."""
        with self._db:
            self._db.executemany("DELETE FROM flows WHERE id = ?", [(i,) for i in ids])

    def records(self) -> Iterator[Record]:
        """Every flow in arrival order."""
        try:
            for row in self._db.execute("SELECT * FROM flows ORDER BY ts, rowid"):
                yield _record(row)
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


def is_capture_url(target: str | Path) -> bool:
    """A PostgreSQL capture store's URL rather than a file."""
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


def open_capture(target: str | Path, *, create: bool = False) -> Any:
    """THE opener of a capture store for every reader and writer: a postgresql:// URL (the fleet's
    store, prefixguard/capture/pgstore.py) or a SQLite file. Both give add, records, rows, export, len, close."""
    if is_capture_url(target):
        try:
            from prefixguard.capture.pgstore import PgStore
        except ImportError:
            raise InputError("a postgresql:// store needs psycopg: pip install '.[fleet]' in a clone of the prefixguard repository") from None
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
        from prefixguard.capture.pgstore import check_server
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
