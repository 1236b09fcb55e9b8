"""Fleet mode on real servers: the session index in Redis and the capture store in PostgreSQL (the
project's running servers, each test in a key prefix and a schema of its own; see helpers/fleet_servers.py).

- Two analyses sharing Redis, the requests of every recorded session alternating between them, judge
  each request as one analysis alone does (and two that do not share do not).
- Redis flushed mid-run: nothing fails, every row is written; Redis gone: verdicts from the local
  index, marked degraded, one console warning; Redis back: shared again.
- PostgreSQL (a private cluster) stopped mid-run and started again, then restarted while rows keep
  coming: rows spool to SQLite and drain, none lost, none twice.
- Every reader of a .db file reads the postgresql:// URL: capture export (the same rows as SQLite),
  report, replay, lint.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers.bench import load_bench
from helpers.fleet_servers import PrivatePostgres, PrivateRedis, pg_rows, pg_schema, redis_prefix

from prefixguard.capture.store import Record, open_capture
from prefixguard.judge import redis_index
from prefixguard.proxy.analysis import Analyzer

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bench():
    return load_bench("fleet")


@pytest.fixture(scope="module")
def recorded(bench, shared_data: Path):
    found = bench.sessions(shared_data / "recorded")
    assert len(found) > 200
    return found


@pytest.fixture
def index_url():
    with redis_prefix() as url:
        yield url


@pytest.fixture
def store_url():
    with pg_schema() as url:
        yield url



def new_stores(pair: list, tmp_path: Path, *names: str) -> list[Path]:
    """Each analysis of the pair writes to a fresh capture file from now on."""
    paths = [tmp_path / n for n in names]
    for a, p in zip(pair, paths, strict=True):
        a.store.close()
        a.store = open_capture(p, create=True)
    return paths

def test_two_analyses_sharing_redis_judge_every_recorded_session_as_one(bench, recorded, index_url, tmp_path):
    alone, fleet = bench.verdicts(index_url, tmp_path, recorded)
    assert len(alone) == len(fleet) > 500
    assert {k: v for k, v in fleet.items() if v != alone[k]} == {}
    kinds = {v["verdict"] for v in alone.values()}
    assert {"hit", "miss_prefix_changed", "partial", "cold", "no_breakpoint"} <= kinds
    assert not any(v["degraded"] for v in fleet.values())
    # the control: two analyses that share nothing see fragments, and judge otherwise
    split = {}
    for n, (name, folder, trace) in enumerate(recorded):
        paths = [tmp_path / f"split{n}.{k}.db" for k in range(2)]
        pair = [Analyzer(store=str(p)) for p in paths]
        bench.run_session(folder, trace, pair)
        for a in pair:
            a.close()
        split.update({f"{name}#{k}": v for k, v in bench.judged(paths).items()})
    assert sum(split[k] != alone[k] for k in alone) > 50


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The installed console script, on this checkout's code."""
    return subprocess.run([str(Path(sys.executable).with_name("prefixguard")), *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)})


def _longest(recorded):
    return max(recorded, key=lambda s: len(s[2].requests))


def test_flushall_mid_run_and_redis_down_then_back(bench, recorded, tmp_path, monkeypatch, capfd):
    monkeypatch.setattr(redis_index, "RETRY_S", 0.2)
    _, folder, trace = _longest(recorded)
    n = len(trace.requests)
    server = PrivateRedis().start()
    try:
        paths = [tmp_path / "a.db", tmp_path / "b.db"]
        pair = [Analyzer(store=str(p), index=server.url) for p in paths]
        half = type(trace)(trace.kind, trace.source, trace.requests[: n // 2])
        bench.run_session(folder, half, pair)
        server.flushall()                     # every shared key gone, mid-session
        rest = type(trace)(trace.kind, trace.source, trace.requests)
        bench.run_session(folder, rest, pair)  # the same requests again (ids 0..n-1 replace the first rows)
        rows = bench.judged(paths)
        assert len(rows) == n and not any(r["degraded"] for r in rows.values())
        assert rows["0"]["previous_id"] is None  # after the flush, the first request found nothing before it

        server.stop()                         # Redis gone: judged locally, marked degraded, said once
        paths = new_stores(pair, tmp_path, "c.db", "d.db")
        bench.run_session(folder, half, pair)
        rows = bench.judged(paths)
        assert len(rows) == n // 2 and all(r["degraded"] for r in rows.values())
        assert all(r["verdict"] for r in rows.values() if r["expected_reason"])
        err = capfd.readouterr().err
        # one per analysis
        assert sum("session index" in line and "unreachable" in line for line in err.splitlines()) == 2

        server.start()                        # back on the same port: shared again
        time.sleep(0.3)
        paths = new_stores(pair, tmp_path, "e.db", "f.db")
        bench.run_session(folder, half, pair)
        rows = bench.judged(paths)
        assert len(rows) == n // 2 and not any(r["degraded"] for r in rows.values())
        for a in pair:
            a.close()
    finally:
        server.stop()


def _records(n: int, start: int = 0) -> list[Record]:
    return [Record(id=f"flow-{i}", ts=1000.0 + i, path="/v1/messages", api="anthropic", model="claude-sonnet-4-5",
                   tenant="t",
                   request=json.dumps({"model": "claude-sonnet-4-5",
                                       "messages": [{"role": "user", "content": f"hi {i}"}]}),
                   fingerprints=bytes([i % 256]) * 16, segments=[["messages", "/messages/0/content", 3]], status=200,
                   verdict="cold") for i in range(start, start + n)]


def _drained(store, within: float = 15.0) -> None:
    """Wait (bounded) until the spool is empty: drained while running, not only at close."""
    deadline = time.monotonic() + within
    while store.spooled and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store.spooled == 0


def test_postgres_restart_mid_run_loses_no_row_and_duplicates_none(tmp_path, capfd):
    from prefixguard.capture.postgres import PgStore
    spool = tmp_path / "spool.db"
    with PrivatePostgres() as server:             # a cluster of this test's own: stopped and restarted for real
        store = PgStore(server.url, create=True, spool=spool)
        try:
            for rec in _records(100):
                store.add(rec)
            store.flush()
            assert len(pg_rows(server.url)) == 100
            server.stop()                         # pg_ctl stop: sessions ended, then connections refused
            for rec in _records(100, 100):
                store.add(rec)
            store.flush()
            assert store.spooled == 100 and spool.is_file()
            server.start()                        # back
            for rec in _records(100, 200) + _records(50, 150):  # new rows, and 50 the spool holds too
                store.add(rec)
            store.flush()
            _drained(store)
            # pg_ctl restart while rows keep coming: some in the batch the server drops, some refused
            writer = threading.Thread(target=lambda: [(store.add(r), time.sleep(0.005)) for r in _records(300, 300)])
            writer.start()
            time.sleep(0.3)
            server.restart()
            writer.join(10)
            store.flush()
            _drained(store)
        finally:
            store.close()
        rows = pg_rows(server.url)
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)) == 600
    assert ids == [f"flow-{i}" for i in range(600)]           # in arrival order
    assert rows[150] == _records(1, 150)[0].row() and rows[450] == _records(1, 450)[0].row()  # the rows as given
    assert not spool.exists()                                 # drained, then removed
    err = capfd.readouterr().err.splitlines()
    down = sum("capture store" in line and "unreachable" in line for line in err)
    back = sum("capture store" in line and "is back; draining" in line for line in err)
    assert 1 <= down == back <= 2, err                        # each outage said once, and its end


def test_rows_are_those_of_sqlite_and_every_reader_takes_the_url(bench, recorded, store_url, tmp_path):
    _, folder, trace = _longest(recorded)
    lite = tmp_path / "capture.db"
    for target in (str(lite), store_url):
        analyzer = Analyzer(store=target)
        bench.run_session(folder, trace, [analyzer])
        analyzer.close()

    exported = [cli("capture", "export", t) for t in (str(lite), store_url)]
    assert all(r.returncode == 0 for r in exported), [r.stderr for r in exported]
    assert exported[0].stdout == exported[1].stdout and exported[0].stdout.count("\n") == len(trace.requests)
    reports = [cli("report", t, "--format", "json") for t in (str(lite), store_url)]
    assert all(r.returncode == 0 for r in reports), [r.stderr for r in reports]
    a, b = (json.loads(r.stdout) for r in reports)
    a.pop("source", None), b.pop("source", None)
    assert a == b
    replays = [cli("replay", t) for t in (str(lite), store_url)]
    assert all(r.returncode == 0 for r in replays), [r.stderr for r in replays]
    tables = [r.stdout[r.stdout.index("┏"):] for r in replays]   # the title names the source
    assert tables[0] == tables[1] and "as is" in tables[0]
    (tmp_path / "capture.jsonl").write_text(exported[0].stdout)
    lints = [cli("lint", "--format", "json", "--select", "ALL", t, cwd=tmp_path) for t in ("capture.jsonl", store_url)]
    assert lints[0].returncode == lints[1].returncode and lints[0].returncode in (0, 1), [r.stderr for r in lints]
    codes = [[(f["code"], f["line"]) for f in json.loads(r.stdout)["findings"]] for r in lints]
    assert codes[0] == codes[1]


def test_a_url_that_is_no_store_is_one_line_exit_2(store_url, tmp_path):
    empty = cli("capture", "export", store_url)            # a schema with no flows table
    assert empty.returncode == 2 and "no flows table" in empty.stderr and "Traceback" not in empty.stderr
    down = cli("report", "postgresql://postgres@127.0.0.1:1/test")
    assert down.returncode == 2 and "cannot reach the PostgreSQL store" in down.stderr
    assert len(down.stderr.strip().splitlines()) == 1
    bad = cli("proxy", "--upstream", "http://127.0.0.1:9", "--port", "0", "--index", "http://nope")
    assert bad.returncode == 2 and "expected a redis:// URL" in bad.stderr


def test_a_request_read_back_from_redis_keeps_no_secret_and_compares_as_in_one_process(index_url):
    """The index keeps each part redacted (a hash in place of a redacted part's key): a proxy that reads
    an earlier request from Redis, not from its own memory, judges the next one as one process does
    when the change lies outside the secret-bearing parts, and finds nothing of the secrets there."""
    import zlib

    import redis

    from prefixguard.judge.session import Sessions
    from prefixguard.judge.state import open_index
    from prefixguard.wire import parse_request

    key = "sk-ant-api03-" + "Fl33tK3y" * 8
    pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----"

    def body(n: int, system: str) -> bytes:
        turns = [{"role": "user", "content": f"turn {i}: deploy with {key}"} if i % 2 == 0 else
                 {"role": "assistant", "content": f"done {i}"} for i in range(2 * n + 1)]
        return json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 8,
                           "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
                           "messages": turns}).encode()

    systems = [f"Rules.\n{pem}\nAlways answer briefly. " * 20, f"Rules.\n{pem}\nAlways answer briefly. " * 20,
               f"Rules v2 at {time.time()}.\n{pem}\n" * 20, f"Rules v2 at {time.time()}.\n{pem}\n" * 20]
    prompts = [parse_request(body(n, s), path="/v1/messages") for n, s in enumerate(systems)]
    alone = Sessions()
    writer, reader = open_index(index_url), open_index(index_url)   # two proxies: no shared memory
    shared = [Sessions(index=writer.sessions()), Sessions(index=reader.sessions())]
    for n, prompt in enumerate(prompts):
        one = alone.observe(prompt, n, "tenant", 1000.0 + n)
        fleet = shared[n % 2].observe(prompt, n, "tenant", 1000.0 + n)
        reader.decoded.clear()  # each look-up decodes what Redis holds
        writer.decoded.clear()
        assert (fleet.earlier, fleet.broken, fleet.new_conversation) == (one.earlier, one.broken, one.new_conversation)
        if one.comparison is not None:
            assert fleet.comparison.causes == one.comparison.causes
            assert fleet.comparison.divergence == one.comparison.divergence
            assert fleet.comparison.reused_tokens == one.comparison.reused_tokens
    url, prefix = index_url.split("?prefix=")
    client = redis.Redis.from_url(url)
    held = b"".join(zlib.decompress(client.get(k)) for k in client.scan_iter(match=f"{prefix}*:e:*"))
    client.close()
    assert len(held) > 1000 and b"[redacted]" in held
    assert key[10:30].encode() not in held and b"MIIEvQIBADANBgkq" not in held
    writer.close()
    reader.close()


def test_a_shared_prefix_policy_fetches_the_pieces_of_one_part_and_reads_as_one_process(index_url):
    """A prefix policy keeps an entry every 128 characters of each part. Sharing them in Redis, a look-up
    fetches the parts' entries first, then the pieces of the one part its match ends in (a 400 KB prompt
    fetched every piece of every part: bench/fleet.py --big 400, bench/RESULTS.md); it reads what
    one process reads, inside that part too."""
    from prefixguard.judge.policies import make_policy
    from prefixguard.judge.state import open_index
    from prefixguard.wire import parse_request

    def chat(system: str, user: str):
        return parse_request(json.dumps({"model": "gpt-4.1", "messages": [
            {"role": "system", "content": system}, {"role": "user", "content": user}]}), path="/v1/chat/completions")

    rules = " ".join(f"rule {i}: reconcile ledger {i} against statement {i}." for i in range(400))
    first, edited = chat(rules, "Which entries differ?"), chat(rules[:9000] + " (revised)" + rules[9000:], "Which?")
    index = open_index(index_url)
    shared, alone = make_policy("openai", index.table("p:openai", 3600.0)), make_policy("openai")
    for policy in (shared, alone):
        policy.commit(first, 1000.0)
    fetched: list[int] = []
    mget = index.client.mget
    index.client.mget = lambda keys: fetched.append(len(keys)) or mget(keys)
    try:
        got = shared.lookup(edited, 1010.0)
    finally:
        index.client.mget = mget
    assert got == alone.lookup(edited, 1010.0) and 1024 < got.cache_read < first.segments[0].tokens
    pieces = len(rules) // 128  # of the system part, where the match ends
    assert len(fetched) == 2 and fetched[0] <= 4 * len(first.segments) and fetched[1] <= pieces + 1
    index.close()


def test_a_postgresql_store_of_schema_5_reads_the_same_and_is_migrated(store_url, tmp_path):
    import psycopg

    from prefixguard.capture.columns import DEFINITIONS
    from prefixguard.capture.postgres import PgStore
    from prefixguard.model.diagnosis import Diagnosis
    v6 = {"causes", "pointer", "note", "diag_status", "diag_level", "diag_label", "diag_missed_tokens",
          "diag_reusable_tokens", "diag_reason", "agreement"}
    pg = {"TEXT": "TEXT", "REAL": "DOUBLE PRECISION", "INTEGER": "BIGINT", "BLOB": "BYTEA"}
    v5 = ", ".join(f"{name} {pg[kind]} {rest}".strip() for name, kind, rest in DEFINITIONS if name not in v6)
    diagnosis = ('{"status":"miss","level":"tools","label":"tools_changed","missed_tokens":40,"reusable_tokens":null,'
                 '"reason":null,"agreement":"disagree"}')
    with psycopg.connect(store_url, autocommit=True) as conn:   # as a schema-5 proxy left it
        conn.execute("CREATE TABLE prefixguard_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("INSERT INTO prefixguard_meta VALUES ('schema_version', '5')")
        conn.execute(f"CREATE TABLE flows ({v5}, seq BIGSERIAL)")
        conn.execute("INSERT INTO flows (id, ts, path, segments, verdict, cause, diagnosis) VALUES "
                     "('a', 1.0, '/v1/messages', '[]', 'miss_prefix_changed', 'system_changed at /system/1', %s), "
                     "('b', 2.0, '/v1/messages', '[]', 'partial', 'read 10 of ~40 expected', NULL)", (diagnosis,))
    before = pg_rows(store_url)   # a reader changes nothing: the text is converted as read
    assert [(r["cause"], r["causes"], r["pointer"]) for r in before] == [
        ("system_changed at /system/1", ["system_changed"], "/system/1"), ("read 10 of ~40 expected", [], None)]
    assert before[0]["diagnosis"] == json.loads(diagnosis)
    store = PgStore(store_url, create=True, spool=tmp_path / "spool.db")   # the writer migrates
    store.add(Record(id="c", ts=3.0, path="/v1/messages", verdict="cold"))
    store.flush()
    store.close()
    with psycopg.connect(store_url, autocommit=True) as conn:
        raw = conn.execute("SELECT id, cause, diagnosis, causes, pointer, note, diag_level, agreement FROM flows "
                           "ORDER BY ts").fetchall()
        version = conn.execute("SELECT value FROM prefixguard_meta WHERE name = 'schema_version'").fetchone()[0]
    assert version == "6"
    assert raw[:2] == [("a", None, None, '["system_changed"]', "/system/1", None, "tools", "disagree"),
                       ("b", None, None, None, None, "read 10 of ~40 expected", None, None)]
    after = pg_rows(store_url)
    assert after[:2] == before and after[2]["verdict"] == "cold"
    with open_capture(store_url) as reader:
        assert next(reader.records()).diagnosis == Diagnosis("miss", "tools", "tools_changed", 40)
