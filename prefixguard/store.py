"""The capture store: one SQLite file (WAL), one row per proxied request, written in one transaction.

Rows hold what lint's sequence mode, replay and report need: request meta, fingerprints, segment token
counts, the redacted request body (none with --no-bodies), status, usage, timings, verdict and cause.
Secrets are removed before a record gets here (prefixguard/proxy/redact.py); this module stores what
it is given. Export is JSON lines, one object per row in the shape of `Record.row()`.
"""
from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import IO, Any

from prefixguard.errors import InputError
from prefixguard.usage import Usage

SCHEMA_VERSION = 1

_COLUMNS = """
    id TEXT PRIMARY KEY, ts REAL NOT NULL, method TEXT, path TEXT, upstream TEXT, api TEXT, model TEXT,
    tenant TEXT, request TEXT, request_bytes INTEGER, fingerprints BLOB, segments TEXT, status INTEGER,
    error TEXT, prompt_total INTEGER, cache_read INTEGER, cache_write_5m INTEGER, cache_write_1h INTEGER,
    uncached INTEGER, output INTEGER, reported INTEGER, ttft_s REAL, decode_tps REAL, total_s REAL,
    verdict TEXT, cause TEXT, expected_cached INTEGER, expected_reason TEXT, previous_id TEXT,
    reprefill_tokens INTEGER, cost_usd REAL, detail TEXT
"""


@dataclass(slots=True)
class Record:
    """One proxied request and what became of it."""

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
    segments: list[list[Any]] = field(default_factory=list)  # [level, pointer, tokens] per segment
    status: int | None = None              # HTTP status; None when no response came
    error: str | None = None               # transport error (refused, timeout, cut mid-stream)
    usage: Usage = field(default_factory=Usage)
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

    def row(self) -> dict[str, Any]:
        """The export shape (JSON lines) that lint's sequence mode and replay read."""
        try:
            request = json.loads(self.request) if self.request is not None else None
        except ValueError:
            request = self.request  # not JSON: kept as text
        u = self.usage
        return {
            "id": self.id, "ts": self.ts, "path": self.path, "api": self.api, "model": self.model,
            "tenant": self.tenant, "request": request, "status": self.status,
            "usage": {"prompt_total": u.prompt_total, "cache_read": u.cache_read, "cache_write_5m": u.cache_write_5m,
                      "cache_write_1h": u.cache_write_1h, "uncached": u.uncached, "output": u.output,
                      "reported": u.reported},
            "timings": {"ttft_s": self.ttft_s, "decode_tps": self.decode_tps, "total_s": self.total_s},
            "verdict": self.verdict, "cause": self.cause, "expected_cached": self.expected_cached,
        }


_USAGE = tuple(f.name for f in fields(Usage))
_NAMES = tuple(c.split()[0] for c in _COLUMNS.split(",") if c.strip())


def _flat(rec: Record) -> dict[str, Any]:
    out = {f.name: getattr(rec, f.name) for f in fields(Record) if f.name != "usage"}
    out.update(asdict(rec.usage))
    out["segments"] = json.dumps(rec.segments)
    out["reported"] = int(rec.usage.reported)
    return out


def _record(row: sqlite3.Row) -> Record:
    data = dict(row)
    usage = Usage(**{k: data.pop(k) or 0 for k in _USAGE})
    usage.reported = bool(usage.reported)
    data["segments"] = json.loads(data["segments"] or "[]")
    data["fingerprints"] = data["fingerprints"] or b""
    return Record(usage=usage, **data)


class Store:
    """A capture file. Writes come from one thread at a time; reads may run while a proxy writes."""

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        self.path = Path(path)
        if not create and not self.path.is_file():
            raise InputError("no such capture file", str(path))
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a crash loses at most the last flows, never half of one
            self._db.execute(f"CREATE TABLE IF NOT EXISTS flows ({_COLUMNS})")
            self._db.execute("CREATE INDEX IF NOT EXISTS flows_ts ON flows (ts)")
            self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except sqlite3.DatabaseError as err:
            raise InputError(f"not a capture store ({err})", str(path)) from None

    def add(self, rec: Record) -> None:
        """Store one flow: a single INSERT in its own transaction."""
        row = _flat(rec)
        sql = f"INSERT OR REPLACE INTO flows ({', '.join(_NAMES)}) VALUES ({', '.join('?' * len(_NAMES))})"
        with self._db:  # BEGIN ... COMMIT
            self._db.execute(sql, [row[n] for n in _NAMES])

    def records(self) -> Iterator[Record]:
        """Every flow in arrival order."""
        try:
            for row in self._db.execute("SELECT * FROM flows ORDER BY ts, rowid"):
                yield _record(row)
        except sqlite3.DatabaseError as err:
            raise InputError(f"not a capture store ({err})", str(self.path)) from None

    def rows(self) -> Iterator[dict[str, Any]]:
        """Every flow in the export shape (see Record.row)."""
        for rec in self.records():
            yield rec.row()

    def export(self, out: IO[str]) -> int:
        """Write JSON lines; returns the number of rows."""
        n = 0
        for row in self.rows():
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
        return n

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM flows").fetchone()[0]

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_store(path: str | Path, *, create: bool = False) -> Store:
    """Open a capture file (for reading unless create=True)."""
    return Store(path, create=create)


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Rows of an exported capture (capture.jsonl), as written by Store.export."""
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except ValueError as err:
                    raise InputError(f"line {n}: not JSON ({err})", str(path)) from None
