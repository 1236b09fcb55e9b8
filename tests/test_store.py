"""The capture store: a real SQLite file in WAL mode, one transaction per flow, JSONL export."""
from __future__ import annotations

import hashlib
import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.cli import CliRunner

from prefixguard.capture.store import SCHEMA_VERSION, Record, Store, check_writable_store, open_store, read_jsonl
from prefixguard.cli import main
from prefixguard.model.usage import Usage
from prefixguard.utils.errors import InputError

ROW_KEYS = ["schema_version", "id", "ts", "method", "path", "api", "model", "tenant", "request", "status", "usage",
            "timings", "verdict", "cause", "causes", "pointer", "expected_cached", "tokens_estimated", "degraded",
            "analysed", "diagnosis", "upstream", "detail", "reprefill_tokens", "cost_usd", "client", "route", "site",
            "response"]


def record(i: int, body: str | None = '{"model": "m", "messages": [], "z": 1, "a": 2}') -> Record:
    return Record(id=f"f{i}", ts=1_700_000_000.0 + i, path="/v1/messages", api="anthropic", model="claude-x",
                  tenant="abc123", request=body, request_bytes=len(body or ""), fingerprints=b"\x01" * 32,
                  segments=[["system", "/system", 12], ["messages", "/messages/0/content", 30]], status=200,
                  usage=Usage(42, 30, 10, 0, 2, 7, True), ttft_s=0.25, decode_tps=80.0, total_s=1.5,
                  verdict="hit", expected_cached=30, expected_reason="hit")


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
                            "uncached": 2, "output": 7, "reported": True, "reasoning": 0,
                            "server_calls": 0, "server_added": 0, "first_pass": 0}
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
from prefixguard.capture.store import Store
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
    assert bad.exit_code == 2 and "not a prefixguard capture store" in bad.output and "Traceback" not in bad.output
    with pytest.raises(InputError):
        open_store(junk)
    jsonl = tmp_path / "bad.jsonl"
    jsonl.write_text('{"id": 1}\nnope\n')
    with pytest.raises(InputError, match="line 2"):
        list(read_jsonl(jsonl))
    assert not (tmp_path / "none.db").exists()  # reading never creates a capture file


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tables(path: Path) -> list[str]:
    con = sqlite3.connect(path)
    try:
        return sorted(r[0] for r in con.execute("SELECT name FROM sqlite_master"))
    finally:
        con.close()


@pytest.fixture()
def not_captures(tmp_path: Path) -> dict[str, Path]:
    """Files that are no capture: another program's SQLite file, an empty file, text, binary."""
    foreign = tmp_path / "other.db"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE x (a)")
    con.execute("INSERT INTO x VALUES (1)")
    con.commit()
    con.close()
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite at all" * 100)
    binary = tmp_path / "bin.db"
    binary.write_bytes(bytes(range(256)) * 64)
    return {"foreign": foreign, "empty": empty, "junk": junk, "binary": binary}


@pytest.mark.parametrize("kind, why", [("foreign", "tables x and no flows table"), ("empty", "an empty file"),
                                       ("junk", "not an SQLite file"), ("binary", "not an SQLite file")])
def test_reading_a_file_that_is_no_capture_changes_nothing(not_captures: dict[str, Path], kind: str,
                                                           why: str) -> None:
    path = not_captures[kind]
    before = digest(path)
    with pytest.raises(InputError, match=f"^{path}: not a prefixguard capture store \\(.*{why}"):
        open_store(path)
    for command in (["capture", "export"], ["report"], ["replay"]):
        res = CliRunner().invoke(main, [*command, str(path)])
        assert res.exit_code == 2 and res.output.count("\n") == 1, (command, res.output)
        assert "not a prefixguard capture store" in res.output and str(path) in res.output
    assert digest(path) == before
    assert sorted(p.name for p in path.parent.iterdir()) == sorted(p.name for p in not_captures.values())
    if kind == "foreign":
        assert tables(path) == ["x"]


@pytest.mark.parametrize("kind", ["foreign", "junk", "binary"])
def test_writing_refuses_a_file_that_is_no_capture(not_captures: dict[str, Path], kind: str) -> None:
    path = not_captures[kind]
    before = digest(path)
    with pytest.raises(InputError, match="not a prefixguard capture store"):
        check_writable_store(path)
    with pytest.raises(InputError, match="not a prefixguard capture store"):
        Store(path)
    assert digest(path) == before


def test_writable_store_checks(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is a directory"):
        check_writable_store(tmp_path)
    with pytest.raises(InputError, match="cannot open"):
        check_writable_store(tmp_path / "no" / "such" / "dir.db")
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    check_writable_store(empty)          # an empty file becomes a capture, as a new one does
    new = tmp_path / "new.db"
    check_writable_store(new)
    for path in (empty, new):
        with open_store(path) as store:
            assert len(store) == 0
    with Store(new) as store:            # and a capture stays one: its rows are kept
        store.add(record(0))
    check_writable_store(new)
    with open_store(new) as store:
        assert len(store) == 1


def test_reading_a_capture_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with Store(db) as store:
        store.add(record(0))
    before = digest(db)
    with open_store(db) as store:
        assert [r["id"] for r in store.rows()] == ["f0"]
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            store._db.execute("DELETE FROM flows")
    for command in (["capture", "export"], ["report"], ["replay"]):
        res = CliRunner().invoke(main, [*command, str(db)])
        assert res.exit_code == 0, (command, res.output)
    assert digest(db) == before


V1_COLUMNS = """
    id TEXT PRIMARY KEY, ts REAL NOT NULL, method TEXT, path TEXT, upstream TEXT, api TEXT, model TEXT,
    tenant TEXT, request TEXT, request_bytes INTEGER, fingerprints BLOB, segments TEXT, status INTEGER,
    error TEXT, prompt_total INTEGER, cache_read INTEGER, cache_write_5m INTEGER, cache_write_1h INTEGER,
    uncached INTEGER, output INTEGER, reported INTEGER, ttft_s REAL, decode_tps REAL, total_s REAL,
    verdict TEXT, cause TEXT, expected_cached INTEGER, expected_reason TEXT, previous_id TEXT,
    reprefill_tokens INTEGER, cost_usd REAL, detail TEXT
"""


def test_a_version_1_capture_is_read_as_is_and_upgraded_by_the_writer(tmp_path: Path) -> None:
    db = tmp_path / "v1.db"
    con = sqlite3.connect(db)
    con.execute(f"CREATE TABLE flows ({V1_COLUMNS})")
    con.execute("INSERT INTO flows (id, ts, path, segments, prompt_total, reported) "
                "VALUES ('old', 1.0, '/v1/messages', '[]', 10, 1)")
    con.execute("PRAGMA user_version=1")
    con.commit()
    con.close()
    before = digest(db)
    with open_store(db) as store:
        [old] = store.rows()
    assert old["id"] == "old" and old["tokens_estimated"] is False and old["usage"]["prompt_total"] == 10
    assert digest(db) == before
    with Store(db) as store:
        rec = record(1)
        rec.tokens_estimated = True
        store.add(rec)
        assert store._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    with open_store(db) as store:
        assert [(r["id"], r["tokens_estimated"]) for r in store.rows()] == [("old", False), ("f1", True)]


def test_a_version_4_capture_gets_the_attribution_columns_from_the_writer(tmp_path: Path) -> None:
    db = tmp_path / "v4.db"
    con = sqlite3.connect(db)
    v4 = V1_COLUMNS.rstrip().rstrip(",") + (", tokens_estimated INTEGER NOT NULL DEFAULT 0, diagnosis TEXT, "
                                           "degraded INTEGER NOT NULL DEFAULT 0")
    con.execute(f"CREATE TABLE flows ({v4})")
    con.execute("INSERT INTO flows (id, ts, path, segments) VALUES ('old', 1.0, '/v1/messages', '[]')")
    con.execute("PRAGMA user_version=4")
    con.commit()
    con.close()
    with open_store(db) as store:   # read as is: the new columns read as none
        [old] = store.rows()
    assert old["client"] is None and old["site"] is None and old["response"]["finish_reasons"] == []
    with Store(db) as store:
        rec = record(1)
        rec.client, rec.route, rec.site = "claude-cli 2.0.14", "/v1/messages", "tests/test_x.py::test_y"
        rec.response_id, rec.response_model, rec.finish_reasons = "msg_1", "claude-x-20250101", ["end_turn"]
        rec.response_keys = ["5f0c9a1e0b7d4c2a"]  # what marks the answer when sent back: a column since added too
        store.add(rec)
        assert store._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    with open_store(db) as store:
        rows = list(store.rows())
    assert [(r["id"], r["client"], r["site"]) for r in rows] == [("old", None, None),
                                                                ("f1", "claude-cli 2.0.14", "tests/test_x.py::test_y")]
    assert rows[1]["route"] == "/v1/messages"
    assert rows[1]["response"] == {"id": "msg_1", "model": "claude-x-20250101", "finish_reasons": ["end_turn"],
                                   "keys": ["5f0c9a1e0b7d4c2a"]}
    assert rows[0]["response"]["keys"] == []


def test_read_jsonl_names_the_line_of_binary_or_non_json(tmp_path: Path) -> None:
    good = json.dumps(record(0).row())
    cases = {"latin1.jsonl": (good + "\n").encode() + "caf\xe9\n".encode("latin-1"),
             "binary.jsonl": (good + "\n").encode() + bytes(range(128, 256)),
             "text.jsonl": (good + "\nnope\n").encode(),
             "list.jsonl": (good + "\n[1, 2]\n").encode()}
    for name, data in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(InputError, match=f"^{path}: line 2: ") as err:
            list(read_jsonl(path))
        assert "\n" not in str(err.value)
        for command in (["report", str(path)], ["replay", str(path)]):
            res = CliRunner().invoke(main, command)
            assert res.exit_code == 2 and res.output.count("\n") == 1, (command, res.output)
            assert str(path) in res.output and "line 2" in res.output


# A version-5 capture: its cause and diagnosis stored as text, as the proxy and the log importer wrote them.
V5_ROWS = [
    ("miss", "miss_prefix_changed", "volatile_content+tools_changed at /system/0",
     '{"status":"miss","level":"system","label":"system_changed","missed_tokens":1200,"reusable_tokens":null,'
     '"reason":"the system prompt changed","agreement":"agree"}'),
    ("note", "hit", "note: volatile_content at /system/0 cost nothing", None),
    ("error", "error", "http 500", None),
    ("imported", "miss_prefix_changed", "history_compacted",
     '{"status":"no_miss","level":null,"label":"","missed_tokens":null,"reusable_tokens":null,"reason":null,'
     '"agreement":"only_us"}'),
    ("unread", None, "not analysed: unknown API shape", None),
    ("plain", "cold", None, None),
]


def _v5_capture(path: Path) -> None:
    from prefixguard.capture.columns import DEFINITIONS
    v6 = {"causes", "pointer", "note", "diag_status", "diag_level", "diag_label", "diag_missed_tokens",
          "diag_reusable_tokens", "diag_reason", "agreement", "analysed"}
    con = sqlite3.connect(path)
    con.execute(f"CREATE TABLE flows ({', '.join(' '.join(d).strip() for d in DEFINITIONS if d[0] not in v6)})")
    for i, (rid, verdict, cause, diagnosis) in enumerate(V5_ROWS):
        con.execute("INSERT INTO flows (id, ts, path, segments, verdict, cause, diagnosis, reprefill_tokens) "
                    "VALUES (?, ?, '/v1/messages', '[]', ?, ?, ?, ?)", (rid, float(i), verdict, cause, diagnosis, 9))
    con.execute("PRAGMA user_version=5")
    con.commit()
    con.close()


def test_a_version_5_capture_reads_the_same_and_the_writer_moves_its_text_into_columns(tmp_path: Path) -> None:
    from prefixguard.judge.verdict import PrefixChange, VerdictName
    from prefixguard.model.diagnosis import Diagnosis

    db = tmp_path / "v5.db"
    _v5_capture(db)
    before = digest(db)
    with open_store(db) as store:   # read-only: converted as read, the file untouched
        old_rows = list(store.rows())
        old_records = {r.id: r for r in store.records()}
    assert digest(db) == before
    by_id = {r["id"]: r for r in old_rows}
    for rid, verdict, cause, diagnosis in V5_ROWS:   # the export says what version 5's said
        assert by_id[rid]["verdict"] == verdict and by_id[rid]["cause"] == cause, rid
        assert by_id[rid]["diagnosis"] == (json.loads(diagnosis) if diagnosis else None), rid
    assert (by_id["miss"]["causes"], by_id["miss"]["pointer"]) == (["volatile_content", "tools_changed"], "/system/0")
    assert by_id["imported"]["causes"] == ["history_compacted"] and by_id["imported"]["pointer"] is None
    assert [by_id[i]["causes"] for i in ("note", "error", "unread", "plain")] == [[], [], [], []]
    miss = old_records["miss"]
    assert miss.verdict is VerdictName.MISS_PREFIX_CHANGED and miss.note is None
    assert miss.change == PrefixChange(("volatile_content", "tools_changed"), "/system/0")
    assert miss.diagnosis == Diagnosis("miss", "system", "system_changed", 1200, None, "the system prompt changed")
    assert miss.agreement == "agree" and old_records["error"].note == "http 500"
    assert [r.id for r in old_records.values() if not r.analysed] == ["unread"]
    assert [r["id"] for r in old_rows if r["analysed"] is False] == ["unread"]

    with Store(db) as store:   # the writer migrates in place, in one transaction
        assert store._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 6
        stored = {r[0]: r[1:] for r in store._db.execute(
            "SELECT id, cause, diagnosis, causes, pointer, note, diag_status, diag_level, agreement FROM flows")}
    assert stored["miss"] == (None, None, '["volatile_content", "tools_changed"]', "/system/0", None, "miss", "system",
                              "agree")
    assert stored["note"] == (None, None, None, None, "note: volatile_content at /system/0 cost nothing", None, None,
                              None)
    assert stored["plain"] == (None,) * 8
    with Store(db) as store:
        assert [tuple(r) for r in store._db.execute("SELECT id FROM flows WHERE analysed = 0")] == [("unread",)]
    with open_store(db) as store:
        assert list(store.rows()) == old_rows   # and reads the same after


def test_a_new_record_is_stored_in_its_columns_and_read_back_typed(tmp_path: Path) -> None:
    from prefixguard.judge.verdict import PrefixChange, Verdict, VerdictName
    from prefixguard.model.diagnosis import Diagnosis

    rec = record(0)
    change = PrefixChange(("key_order_changed",), "/tools/1")
    rec.judged(Verdict(VerdictName.MISS_PREFIX_CHANGED, str(change), 10, 30, 0.01, change))
    rec.diagnosis, rec.agreement = Diagnosis("miss", "tools", "tools_changed", 30), "agree"
    with Store(tmp_path / "c.db") as store:
        store.add(rec)
        raw = store._db.execute("SELECT verdict, cause, diagnosis, causes, pointer, note, diag_label "
                                "FROM flows").fetchone()
    assert tuple(raw) == ("miss_prefix_changed", None, None, '["key_order_changed"]', "/tools/1", None, "tools_changed")
    with open_store(tmp_path / "c.db") as store:
        [back] = store.records()
        [row] = store.rows()
    assert back.verdict is VerdictName.MISS_PREFIX_CHANGED and back.change == change and back.diagnosis == rec.diagnosis
    assert row["cause"] == "key_order_changed at /tools/1" and row["causes"] == ["key_order_changed"]
    assert row["diagnosis"] == {**Diagnosis("miss", "tools", "tools_changed", 30)._asdict(), "agreement": "agree"}


def test_a_version_6_file_from_before_the_analysed_column_gets_it_from_its_notes(tmp_path: Path) -> None:
    db = tmp_path / "early6.db"
    with Store(db) as store:
        store.add(record(0))
        store.add(Record(id="fwd", ts=1.0, path="/v1/models", method="GET", note="not analysed: no API shape read",
                         analysed=False))
        store._db.execute("ALTER TABLE flows DROP COLUMN analysed")   # as written before the column
    with open_store(db) as store:   # read-only: the note tells
        assert {r.id: r.analysed for r in store.records()} == {"f0": True, "fwd": False}
    with Store(db) as store:        # the writer adds the column and sets it from the notes
        found = [tuple(r) for r in store._db.execute("SELECT id, analysed FROM flows ORDER BY id")]
    assert found == [("f0", 1), ("fwd", 0)]
    with open_store(db) as store:
        assert {r["id"]: r["analysed"] for r in store.rows()} == {"f0": True, "fwd": False}


def test_an_unknown_verdict_in_a_store_is_a_one_line_error(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with Store(db) as store:
        store.add(record(0))
        store._db.execute("UPDATE flows SET verdict = 'maybe'")
    with open_store(db) as store, pytest.raises(InputError, match="column verdict holds 'maybe'"):
        list(store.records())


def test_an_export_of_version_5_is_read_with_its_causes(tmp_path: Path) -> None:
    from prefixguard.capture.reader import read_capture

    row = record(0).row() | {"schema_version": 5, "verdict": "miss_prefix_changed",
                             "cause": "tools_changed at /tools/2"}
    del row["causes"], row["pointer"], row["analysed"]
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps(row) + "\n")
    [read] = read_capture(path)
    assert (read["causes"], read["pointer"]) == (["tools_changed"], "/tools/2")
    assert read["cause"] == "tools_changed at /tools/2" and read["analysed"] is True
    unread = {**row, "id": "f1", "api": None, "verdict": None, "cause": "not analysed: no API shape read"}
    path.write_text(json.dumps(unread) + "\n")
    assert read_capture(path)[0]["analysed"] is False
