"""The capture table's columns, shared by both stores (capture/sqlite.py, capture/postgres.py): their
names and types, a Record flattened into them and read back, and what a migration adds and rewrites.

Version 6 stores a verdict's cause and the provider's diagnosis in columns of their own (causes as a JSON
list of names, pointer, note; diag_* and agreement), and whether the request was analysed (`analysed`).
The version-1 columns `cause` and `diagnosis` stay in the table for older readers but are written empty:
a writer moves an old row's text into the new columns (`legacy_updates`), a read-only reader converts it
as it reads (capture/legacy.py). A column added since (`reasoning`: how many of a response's output tokens
were reasoning, in the usage; `server_calls`: the tools the provider ran itself between passes, with
`server_added` and `first_pass`: what their results added and the first pass's prompt; `response_keys`: what
marks the answer when a later request sends it back) is added by the writer, and read as 0 (or none) from a file
without it; adding a field is not a new version.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from prefixguard.capture.legacy import split_cause, split_diagnosis, unread_note
from prefixguard.capture.record import RECORD_FIELDS, Record
from prefixguard.judge.names import VerdictName
from prefixguard.model.diagnosis import Diagnosis
from prefixguard.model.usage import USAGE_FIELDS, Usage
from prefixguard.utils.errors import InputError

COLUMNS = """
    id TEXT PRIMARY KEY, ts REAL NOT NULL, method TEXT, path TEXT, upstream TEXT, api TEXT, model TEXT,
    tenant TEXT, request TEXT, request_bytes INTEGER, fingerprints BLOB, segments TEXT, status INTEGER,
    error TEXT, prompt_total INTEGER, cache_read INTEGER, cache_write_5m INTEGER, cache_write_1h INTEGER,
    uncached INTEGER, output INTEGER, reported INTEGER, ttft_s REAL, decode_tps REAL, total_s REAL,
    verdict TEXT, cause TEXT, expected_cached INTEGER, expected_reason TEXT, previous_id TEXT,
    reprefill_tokens INTEGER, cost_usd REAL, detail TEXT, tokens_estimated INTEGER NOT NULL DEFAULT 0,
    diagnosis TEXT, degraded INTEGER NOT NULL DEFAULT 0, client TEXT, route TEXT, site TEXT, response_id TEXT,
    response_model TEXT, finish_reasons TEXT, causes TEXT, pointer TEXT, note TEXT, diag_status TEXT,
    diag_level TEXT, diag_label TEXT, diag_missed_tokens INTEGER, diag_reusable_tokens INTEGER, diag_reason TEXT,
    agreement TEXT, analysed INTEGER NOT NULL DEFAULT 1, reasoning INTEGER, server_calls INTEGER,
    server_added INTEGER, first_pass INTEGER, response_keys TEXT
"""
# (name, SQLite type, the rest of its definition) of each column
DEFINITIONS = tuple(
    tuple(c.split(maxsplit=2)) + ("",) * (3 - len(c.split(maxsplit=2))) for c in COLUMNS.split(",") if c.strip()
)
NAMES = tuple(d[0] for d in DEFINITIONS)
LEGACY = ("cause", "diagnosis")  # version-1 text columns, written empty since version 6
_DIAG = {
    "diag_status": "status",
    "diag_level": "level",
    "diag_label": "label",
    "diag_missed_tokens": "missed_tokens",
    "diag_reusable_tokens": "reusable_tokens",
    "diag_reason": "reason",
}
_STRUCTURED = ("causes", "pointer", "note", *_DIAG, "agreement")
# Added to a table that lacks it, then set from the note of each row its writer left unread (legacy.py).
ANALYSED = "analysed"
# Columns a file of an earlier version lacks, with their type: the writer adds them.
ADDED = {
    name: f"{kind} {rest}".strip()
    for name, kind, rest in DEFINITIONS
    if name
    in (
        "tokens_estimated",
        "diagnosis",
        "degraded",
        "client",
        "route",
        "site",
        "response_id",
        "response_model",
        "finish_reasons",
        *_STRUCTURED,
        ANALYSED,
        "reasoning",
        "server_calls",
        "server_added",
        "first_pass",
        "response_keys",
    )
}
REQUIRED = frozenset(NAMES) - set(ADDED)  # what any capture's table has had since version 1

# Python types each column's SQLite type may hold (a foreign writer can store any type in any column).
_KINDS = {"TEXT": (str,), "REAL": (int, float), "INTEGER": (int,), "BLOB": (bytes,)}
KINDS = {name: _KINDS[kind] for name, kind, _ in DEFINITIONS}


def flat(rec: Record) -> dict[str, Any]:
    """The record as column values (NAMES), the legacy columns empty."""
    out = {name: getattr(rec, name) for name in RECORD_FIELDS if name in KINDS}
    out.update(rec.usage._asdict())
    out["segments"] = json.dumps(rec.segments)
    out["reported"] = int(rec.usage.reported)
    out["tokens_estimated"] = int(rec.tokens_estimated)
    out["degraded"] = int(rec.degraded)
    out["analysed"] = int(rec.analysed)
    out["finish_reasons"] = json.dumps(list(rec.finish_reasons)) if rec.finish_reasons else None
    out["response_keys"] = json.dumps(list(rec.response_keys)) if rec.response_keys else None
    out["verdict"] = None if rec.verdict is None else str(rec.verdict)  # the name, whatever enum adapter a driver has
    out["causes"] = json.dumps([str(c) for c in rec.causes]) if rec.causes else None
    out["cause"] = out["diagnosis"] = None
    diag = rec.diagnosis
    for column, field in _DIAG.items():
        out[column] = getattr(diag, field) if diag is not None else None
    return out


def record_of(row: Mapping[str, Any]) -> Record:
    """A Record from a row of either store (column name -> value); InputError on a value of the wrong type."""
    data = {k: row[k] for k in row.keys() if k in KINDS}
    for name, value in data.items():
        if value is not None and not isinstance(value, KINDS[name]):
            raise InputError(
                f"row {data.get('id')!r}: column {name} holds {type(value).__name__}, "
                f"expected {KINDS[name][0].__name__}"
            )
    counts: dict[str, Any] = {k: data.pop(k, 0) or 0 for k in USAGE_FIELDS}  # a file from before `reasoning` lacks it
    usage = Usage(**counts | {"reported": bool(counts["reported"])})
    data["segments"] = _json(data, "segments", "[]", list)
    data["fingerprints"] = data["fingerprints"] or b""
    data["tokens_estimated"] = bool(data.get("tokens_estimated"))
    data["degraded"] = bool(data.get("degraded"))
    analysed = data.pop("analysed", None)
    reasons = _json(data, "finish_reasons", "null", (list, type(None)), strict=False)
    data["finish_reasons"] = [r for r in reasons if isinstance(r, str)] if reasons else None
    keys = _json(data, "response_keys", "null", (list, type(None)), strict=False)
    data["response_keys"] = [k for k in keys if isinstance(k, str)] if keys else None
    cause, diagnosis = data.pop("cause", None), data.pop("diagnosis", None)  # version 5's text, if any
    verdict = data.get("verdict")
    if verdict is not None:
        if verdict not in VerdictName.__members__.values():
            raise InputError(f"row {data.get('id')!r}: column verdict holds {verdict!r}, no verdict")
        data["verdict"] = VerdictName(verdict)
    data["causes"] = tuple(c for c in _json(data, "causes", "[]", list) if isinstance(c, str))
    status = data.pop("diag_status", None)
    diag_fields = {field: data.pop(column, None) for column, field in _DIAG.items() if column != "diag_status"}
    data["diagnosis"] = (
        Diagnosis(status=status, **diag_fields | {"label": diag_fields["label"] or ""}) if status else None
    )
    if cause is not None:  # a row of a version-5 file, read as it is (a reader changes nothing)
        data["causes"], data["pointer"], data["note"] = split_cause(verdict, cause)
    if diagnosis is not None:
        data["diagnosis"], data["agreement"] = split_diagnosis(diagnosis)
    # a file written before the column, read as it is: its note says whether the request was read
    data["analysed"] = bool(analysed) if analysed is not None else not unread_note(data.get("note"))
    return Record(usage=usage, **data)


def _json(data: dict[str, Any], name: str, empty: str, kind: Any, strict: bool = True) -> Any:
    """A column holding JSON (segments, finish_reasons, causes); InputError when it is not (strict)."""
    try:
        found = json.loads(data.get(name) or empty)
    except (ValueError, RecursionError):
        found = None
    if not isinstance(found, kind):
        if strict:
            raise InputError(f"row {data.get('id')!r}: column {name} is not a JSON {kind.__name__}")
        return None
    return found


UPDATED = (*_STRUCTURED, "cause", "diagnosis")  # the columns `legacy_updates` sets, then the row's id


def legacy_updates(rows: Iterable[tuple[str, str | None, str | None, str | None]]) -> list[tuple[Any, ...]]:
    """For rows (id, verdict, cause, diagnosis) written before version 6: the values of UPDATED, then the id."""
    out = []
    for rid, verdict, cause, diagnosis in rows:
        causes, pointer, note = split_cause(verdict, cause)
        diag, agreement = split_diagnosis(diagnosis)
        values = {
            "causes": json.dumps(list(causes)) if causes else None,
            "pointer": pointer,
            "note": note,
            "agreement": agreement,
            "cause": None,
            "diagnosis": None,
        }
        for column, field in _DIAG.items():
            values[column] = getattr(diag, field) if diag is not None else None
        out.append((*(values[c] for c in UPDATED), rid))
    return out
