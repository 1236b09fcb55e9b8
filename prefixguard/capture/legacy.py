"""The capture formats before schema version 6, read once into typed fields: a cause stored as text
("a+b at /pointer" for a miss_prefix_changed, free text otherwise) and a diagnosis stored as JSON text.

Only the store's migration (capture/columns.py: a writer rewrites old rows in place, a read-only reader
converts them as it reads) and the reader of old JSONL exports (capture/reader.py) call this module;
tests/test_stored_formats.py keeps every other module from parsing those formats back.
"""

from __future__ import annotations

import json
from typing import Any

from prefixguard.judge.names import VerdictName
from prefixguard.model.diagnosis import Diagnosis
from prefixguard.wire.routes import NOT_ANALYSED

# The notes of requests forwarded unread, as SQL LIKE matches them (a file written before `analysed`).
UNREAD_LIKE = NOT_ANALYSED + "%"


def split_cause(verdict: str | None, text: str | None) -> tuple[tuple[str, ...], str | None, str | None]:
    """(causes, pointer, note) of an old cause column: a miss_prefix_changed's change, else free text."""
    if not text:
        return (), None, None
    if verdict == VerdictName.MISS_PREFIX_CHANGED:
        names, _, where = text.partition(" at ")
        return tuple(n for n in names.split("+") if n), where or None, None
    return (), None, text


def split_diagnosis(text: str | None) -> tuple[Diagnosis | None, str | None]:
    """(diagnosis, agreement) of an old diagnosis column; (None, None) for none or what is not one."""
    try:
        data = json.loads(text) if text else None
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(data, dict) or not isinstance(data.get("status"), str):
        return None, None
    fields = {k: v for k, v in data.items() if k in Diagnosis._fields}
    try:
        diag = Diagnosis(**fields)
    except TypeError:
        return None, None
    agreement = data.get("agreement")
    return diag, agreement if isinstance(agreement, str) else None


def unread_note(note: Any) -> bool:
    """Whether a note written before the `analysed` field says the request was forwarded unread."""
    return isinstance(note, str) and note.startswith(NOT_ANALYSED)


def upgrade_row(row: dict[str, Any]) -> dict[str, Any]:
    """An export row written before version 6 (no "causes", no "analysed"), given the structured fields."""
    if "causes" in row and "analysed" in row:
        return row
    cause = row.get("cause")
    out = {**row, "analysed": row.get("analysed", not unread_note(cause))}
    if "causes" not in row:
        causes, pointer, _ = split_cause(row.get("verdict"), cause if isinstance(cause, str) else None)
        out |= {"causes": list(causes), "pointer": pointer}
    return out
