"""The capture store: a real SQLite file in WAL mode, one transaction per flow, JSONL export."""
from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from prefixguard.cli import main
from prefixguard.errors import InputError
from prefixguard.store import Record, Store, open_store, read_jsonl
from prefixguard.usage import Usage

ROW_KEYS = ["id", "ts", "path", "api", "model", "tenant", "request", "status", "usage", "timings", "verdict",
            "cause", "expected_cached"]


def record(i: int, body: str | None = '{"model": "m", "messages": [], "z": 1, "a": 2}') -> Record:
    return Record(id=f"f{i}", ts=1_700_000_000.0 + i, path="/v1/messages", api="anthropic", model="claude-x",
                  tenant="abc123", request=body, request_bytes=len(body or ""), fingerprints=b"\x01" * 32,
                  segments=[["system", "/system", 12], ["messages", "/messages/0/content", 30]], status=200,
                  usage=Usage(42, 30, 10, 0, 2, 7, True), ttft_s=0.25, decode_tps=80.0, total_s=1.5,
                  verdict="hit", cause=None, expected_cached=30, expected_reason="hit")


def test_roundtrip_and_export_shape(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with Store(db) as store:
        for i in range(3):
            store.add(record(i))
    with open_store(db) as store:
        assert len(store) == 3
        [first] = [r for r in store.records() if r.id == "f0"]
        rows = list(store.rows())
    assert first.segments[1] == ["messages", "/messages/0/content", 30] and first.fingerprints == b"\x01" * 32
    assert first.usage == Usage(42, 30, 10, 0, 2, 7, True)
    assert [r["id"] for r in rows] == ["f0", "f1", "f2"]
    row = rows[0]
    assert list(row) == ROW_KEYS
    assert list(row["request"]) == ["model", "messages", "z", "a"]  # key order as sent
    assert row["usage"] == {"prompt_total": 42, "cache_read": 30, "cache_write_5m": 10, "cache_write_1h": 0,
                            "uncached": 2, "output": 7, "reported": True}
    assert row["timings"] == {"ttft_s": 0.25, "decode_tps": 80.0, "total_s": 1.5}


def test_wal_mode_and_reader_while_writer_open(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    writer = Store(db)
    writer.add(record(0))
    assert writer._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with open_store(db) as reader:       # a second connection sees committed rows while the writer lives
        assert [r["id"] for r in reader.rows()] == ["f0"]
    writer.add(record(1))
    with open_store(db) as reader:
        assert len(reader) == 2
    writer.close()


def test_killed_writer_leaves_whole_rows_only(tmp_path: Path) -> None:
    """SIGKILL while a process writes flows as fast as it can: every row is all there or not there."""
    db = tmp_path / "c.db"
    script = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from test_store import record
from prefixguard.store import Store
s = Store({str(db)!r})
for i in range(10**9):
    s.add(record(i))
"""
    proc = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            time.sleep(0.2)
            try:
                if sqlite3.connect(db).execute("SELECT count(*) FROM flows").fetchone()[0] > 20:
                    break
            except sqlite3.OperationalError:  # not created yet
                pass
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    with open_store(db) as store:
        rows = list(store.rows())
    assert len(rows) > 20
    assert all(r == {**record(int(r["id"][1:])).row()} for r in rows)


def test_no_bodies_and_non_json_body(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with Store(db) as store:
        store.add(record(0, body=None))
        store.add(record(1, body="not json"))
    with open_store(db) as store:
        rows = list(store.rows())
    assert rows[0]["request"] is None and rows[1]["request"] == "not json"


def test_cli_export(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with Store(db) as store:
        store.add(record(0))
        store.add(record(1))
    result = CliRunner().invoke(main, ["capture", "export", str(db)])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["f0", "f1"]
    out = tmp_path / "capture.jsonl"
    out.write_text(result.output)
    assert [r["id"] for r in read_jsonl(out)] == ["f0", "f1"]


def test_bad_inputs_are_one_line_errors(tmp_path: Path) -> None:
    missing = CliRunner().invoke(main, ["capture", "export", str(tmp_path / "none.db")])
    assert missing.exit_code == 2 and "no such capture file" in missing.output
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite at all" * 100)
    bad = CliRunner().invoke(main, ["capture", "export", str(junk)])
    assert bad.exit_code == 2 and "not a capture store" in bad.output and "Traceback" not in bad.output
    with pytest.raises(InputError):
        open_store(junk)
    jsonl = tmp_path / "bad.jsonl"
    jsonl.write_text('{"id": 1}\nnope\n')
    with pytest.raises(InputError, match="line 2"):
        list(read_jsonl(jsonl))
    assert not (tmp_path / "none.db").exists()  # reading never creates a capture file
