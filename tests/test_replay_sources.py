"""Trace loaders on the real formats (Mooncake, LMCache, recorded cassettes, the capture store), and
one-line errors with exit 2 on bad input."""
from __future__ import annotations

import json
import shutil
import socket
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from helpers.cli import CliRunner

from prefixguard.cli import main
from prefixguard.utils.errors import InputError
from prefixguard.replay import sources
from prefixguard.capture.store import Record, Store
from prefixguard.model.usage import Usage


def test_mooncake(shared_data: Path) -> None:
    trace = sources.load(shared_data / "mooncake" / "synthetic_trace.jsonl")
    assert trace.kind == "mooncake" and len(trace.requests) == 3993
    first, last = trace.requests[0], trace.requests[-1]
    assert first.ts == 0 and first.input_tokens == 40160 and first.blocks[:3] == [0, 1, 2]
    assert last.ts == pytest.approx(1022025 / 1e3)          # milliseconds in the trace, seconds here
    assert all(r.body is None for r in trace.requests[:10])


def test_lmcache_folder_in_time_order(shared_data: Path) -> None:
    trace = sources.load(shared_data / "lmcache-agent-trace" / "miniswe")
    assert trace.kind == "lmcache" and len(trace.requests) == 402
    assert len({r.session for r in trace.requests}) == 20
    ts = [r.ts for r in trace.requests]
    assert ts == sorted(ts) and ts[0] == 0
    first = trace.requests[0]
    assert first.body["messages"][0]["content"].startswith("<pr_description>")
    assert first.path == "/v1/chat/completions" and first.output_tokens > 0
    one = sources.load(next((shared_data / "lmcache-agent-trace" / "miniswe").glob("*.jsonl")))
    assert len({r.session for r in one.requests}) == 1
    # The agent appends each tool output to its prompt: each call is the previous call's messages plus one.
    for a, b in zip(one.requests, one.requests[1:]):
        assert b.body["messages"][:-1] == a.body["messages"] and b.body["messages"][-1]["role"] == "user"
    raw = [json.loads(line) for line in next((shared_data / "lmcache-agent-trace" / "miniswe").glob("*.jsonl"))
           .read_text().splitlines()]
    latest = max(raw, key=lambda r: r["timestamp"])["input"]
    assert "".join(m["content"] for m in one.requests[-1].body["messages"]) == latest


def test_recorded_cassettes_carry_paths_and_reported_usage(shared_data: Path) -> None:
    folder = shared_data / "recorded" / "pydantic-ai" / "test_cache_test_openrouter_cache_messages_anthropic_real_api"
    trace = sources.load(folder)
    assert trace.kind == "folder" and [r.ref for r in trace.requests] == ["0001.request.json", "0002.request.json"]
    assert all(r.path == "/api/v1/chat/completions" for r in trace.requests)
    # The provider's own numbers: the first call wrote the cache, the second read it.
    assert trace.requests[0].reported.cache_read == 0
    assert trace.requests[1].reported.cache_read > 3000


def test_a_cassette_keeps_the_gaps_its_answers_were_made_at(shared_data: Path) -> None:
    """openllmetry's OpenAI caching cassette was recorded again a year later, appended: its answers' own
    `created` times say so, and replay keeps those gaps (its sim then counts the TTL on them). A cassette
    whose answers do not all say when (Claude's) keeps every request at 0."""
    timed = sources.load(shared_data / "recorded" / "openllmetry" / "test_prompt_caching_test_openai_prompt_caching")
    gaps = [r.ts for r in timed.requests]
    assert gaps[0] == 0.0 and gaps[1] < 60 and gaps[2] - gaps[1] > 300 * 86_400 and gaps[3] - gaps[2] < 60
    untimed = sources.load(shared_data / "recorded" / "openllmetry" / "test_prompt_caching_test_anthropic_prompt_caching_legacy")
    assert [r.ts for r in untimed.requests] == [0.0, 0.0]


def _store(path: Path, shared_data: Path, bodies: bool = True) -> None:
    body = (shared_data / "recorded" / "openllmetry" / "test_prompt_caching_test_anthropic_prompt_caching_legacy"
            / "0001.request.json").read_text()
    with Store(path) as store:
        for i in range(3):
            store.add(Record(id=f"r{i}", ts=1_700_000_000.0 + 30 * (2 - i), path="/v1/messages", api="anthropic",
                             model="claude-3-5-sonnet", tenant="t1", request=body if bodies else None, status=200,
                             usage=Usage(1200, 1100 * (i > 0), 0, 0, 100, 5, True), ttft_s=0.2, decode_tps=50.0,
                             verdict="hit", expected_cached=1100))


def test_capture_store_and_its_export(tmp_path: Path, shared_data: Path) -> None:
    db = tmp_path / "capture.db"
    _store(db, shared_data)
    trace = sources.load(db)
    assert trace.kind == "capture" and [r.ref for r in trace.requests] == ["r2", "r1", "r0"]   # by time
    assert [r.ts for r in trace.requests] == [0, 30, 60]
    r = trace.requests[0]
    assert r.tenant == "t1" and r.body["model"] and r.reported.cache_read == 1100 and r.expected_cached == 1100
    export = tmp_path / "capture.jsonl"
    res = CliRunner().invoke(main, ["capture", "export", str(db)])
    assert res.exit_code == 0, res.output
    export.write_text(res.output)
    again = sources.load(export)
    assert [(x.ref, x.ts, x.body) for x in again.requests] == [(x.ref, x.ts, x.body) for x in trace.requests]


def test_capture_without_bodies_cannot_replay(tmp_path: Path, shared_data: Path) -> None:
    db = tmp_path / "fingerprints.db"
    _store(db, shared_data, bodies=False)
    with pytest.raises(InputError, match="without bodies"):
        sources.load(db)


@pytest.mark.parametrize("content, message", [
    (None, "no such file"),
    ("", "empty trace"),
    ("{not json\n", "line 1: not JSON"),
    ("[1, 2]\n", "expected a JSON object"),
    ('{"foo": 1}\n', "unknown trace format"),
    ('{"timestamp": 0, "input_length": 2000, "hash_ids": [1]}\n', "exceeds its 1 blocks"),
    ('{"timestamp": 0, "input_length": "x", "hash_ids": [1]}\n', "'input_length' missing"),
    (b"\xff\xfe\x00binary", "not UTF-8"),
])
def test_bad_traces_fail_in_one_line(tmp_path: Path, content: str | bytes | None, message: str) -> None:
    path = tmp_path / "trace.jsonl"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(InputError, match=message):
        sources.load(path)
    res = CliRunner().invoke(main, ["replay", str(path)])
    assert res.exit_code == 2
    assert res.output.startswith("prefixguard: error: ") and res.output.count("\n") == 1 and str(path) in res.output
    assert "Traceback" not in res.output


def test_report_rejects_what_is_not_a_capture(tmp_path: Path, shared_data: Path) -> None:
    res = CliRunner().invoke(main, ["report", str(shared_data / "mooncake" / "synthetic_trace.jsonl")])
    assert res.exit_code == 2 and "not a capture export" in res.output and res.output.count("\n") == 1


def test_a_target_that_refuses_stops_the_replay_with_one_line_and_exit_2(shared_data: Path) -> None:
    import socket
    with socket.socket() as s:                 # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    folder = shared_data / "recorded" / "pydantic-ai" / "test_cache_test_openrouter_cache_messages_anthropic_real_api"
    res = CliRunner().invoke(main, ["replay", str(folder), "--target", f"http://127.0.0.1:{port}",
                                         "--format", "json"])
    assert res.exit_code == 2 and not res.stdout   # issue 30: no backoff per request against a wrong --target
    assert res.stderr.count("\n") == 1 and "(connection refused)" in res.stderr


def test_progress_bar_shows_rate_and_eta_on_a_terminal(shared_data: Path) -> None:
    import io

    from rich.console import Console

    from prefixguard.replay.player import replay
    from prefixguard.replay.targets import SimTarget
    buf = io.StringIO()
    requests = sources.load(shared_data / "mooncake" / "synthetic_trace.jsonl").requests[:400]
    replay(requests, SimTarget(), console=Console(file=buf, force_terminal=True, width=120))
    assert "400/400" in buf.getvalue() and "req/s" in buf.getvalue()
    quiet = io.StringIO()
    replay(requests, SimTarget(), console=Console(file=quiet, force_terminal=False))
    assert quiet.getvalue() == ""


def _listening() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    s.settimeout(0.2)
    return s


def test_mooncake_to_an_http_server_fails_before_sending_anything(shared_data: Path) -> None:
    trace = shared_data / "mooncake" / "synthetic_trace.jsonl"
    with _listening() as server:
        started = time.monotonic()
        res = CliRunner().invoke(main, ["replay", str(trace), "--target", f"http://127.0.0.1:{server.getsockname()[1]}"])
        took = time.monotonic() - started
        with pytest.raises(socket.timeout):
            server.accept()                    # no request was sent
    assert res.exit_code == 2 and res.output.count("\n") == 1, res.output
    assert str(trace) in res.output and "no request bodies" in res.output
    assert took < 20                            # the trace's first gaps alone last longer than this


def test_a_request_that_cannot_be_built_stops_the_replay_at_once(shared_data: Path, tmp_path: Path) -> None:
    """Three captured rows, the last a minute after the others; the first is no LLM request body the
    export marks as one. The replay stops there, without waiting a minute for the third. (A refused
    connection stops a replay too, since issue 30: the bad row comes first so that none is sent.)"""
    body = json.loads((shared_data / "recorded" / "openllmetry" / "test_prompt_caching_test_anthropic_prompt_caching_legacy"
                       / "0001.request.json").read_text())
    rows = [{"id": "b", "ts": 0, "path": "/v1/messages", "request": {"model": "m"}},
            {"id": "a", "ts": 1, "path": "/v1/messages", "request": body},
            {"id": "c", "ts": 60, "path": "/v1/messages", "request": body}]
    export = tmp_path / "capture.jsonl"
    export.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with _listening() as server:               # closed at once: the first request is refused
        url = f"http://127.0.0.1:{server.getsockname()[1]}"
    started = time.monotonic()
    res = CliRunner().invoke(main, ["replay", str(export), "--target", url])
    took = time.monotonic() - started
    assert res.exit_code == 2 and res.output.count("\n") == 1, res.output
    assert "no 'messages' list" in res.output
    assert took < 30


def test_capture_rows_that_are_no_llm_request_are_skipped(tmp_path: Path, shared_data: Path) -> None:
    db = tmp_path / "capture.db"
    _store(db, shared_data)
    with Store(db) as store:                  # what the proxy stores for a request it could not parse
        store.add(Record(id="emb", ts=1_700_000_100.0, path="/v1/embeddings", request='{"input": "x", "model": "e"}',
                         status=200, note="unknown API shape"))
    trace = sources.load(db)
    assert [r.ref for r in trace.requests] == ["r2", "r1", "r0"] and trace.skipped == 1


def test_a_cassettes_token_count_is_left_out_and_said(tmp_path: Path) -> None:
    """pydantic-ai's count-then-create cassette (tests/data/public): the count is no request to replay; the
    replay says it left one out; a folder of counts alone is a one-line error, exit 2."""
    public = Path(__file__).resolve().parent / "data" / "public"
    folder = public / "pydantic_ai" / "anthropic_automatic_caching_count_tokens"
    trace = sources.load(folder)
    assert [r.ref for r in trace.requests] == ["0002.request.json"] and trace.skipped == 1
    res = CliRunner().invoke(main, ["replay", str(folder), "--target", "sim"])
    assert res.exit_code == 0 and "1 request had no body or no LLM request (a token count, say)" in res.output
    counts = tmp_path / "counts"
    counts.mkdir()
    for name in ("0001.request.json", "0001.response.json", "meta.json"):
        (counts / name).write_bytes((folder / name).read_bytes())
    res = CliRunner().invoke(main, ["replay", str(counts), "--target", "sim"])
    assert res.exit_code == 2 and res.output.count("\n") == 1 and "token counts: nothing to replay" in res.output


@pytest.mark.parametrize("name", ["x.json", "x.db"])
def test_unwritable_results_file_fails_before_the_replay(shared_data: Path, tmp_path: Path, name: str) -> None:
    out = tmp_path / "no" / "such" / name
    res = CliRunner().invoke(main, ["replay", str(shared_data / "mooncake" / "synthetic_trace.jsonl"), "--out", str(out)])
    assert res.exit_code == 2 and res.output.count("\n") == 1, res.output
    assert str(out) in res.output and "no directory" in res.output


def test_unwritable_html_report_fails_in_one_line(tmp_path: Path, shared_data: Path) -> None:
    db = tmp_path / "capture.db"
    _store(db, shared_data)
    html = tmp_path / "no" / "report.html"
    res = CliRunner().invoke(main, ["report", str(db), "--html", str(html)])
    assert res.exit_code == 2 and res.output.count("\n") == 1, res.output
    assert str(html) in res.output


def test_default_policy_is_auto_for_a_capture_only(tmp_path: Path, shared_data: Path) -> None:
    db = tmp_path / "capture.db"
    _store(db, shared_data)
    capture = json.loads(CliRunner().invoke(main, ["replay", str(db), "--format", "json"]).output)
    mooncake = json.loads(CliRunner().invoke(main, ["replay", str(shared_data / "mooncake" / "synthetic_trace.jsonl"),
                                                    "--limit", "20", "--format", "json"]).output)
    assert (capture["policy"], mooncake["policy"]) == ("auto", "radix")
    forced = json.loads(CliRunner().invoke(main, ["replay", str(db), "--policy", "radix", "--format", "json"]).output)
    assert forced["policy"] == "radix"


@pytest.fixture
def estimating(monkeypatch: pytest.MonkeyPatch):
    """PREFIXGUARD_TOKENIZER=estimate for one test; the real tokenizer again after it."""
    from prefixguard.model import tokens
    monkeypatch.setenv("PREFIXGUARD_TOKENIZER", "estimate")
    tokens.reset()
    yield
    monkeypatch.undo()
    tokens.reset()


def test_estimated_counts_are_said_in_replay_output(shared_data: Path, tmp_path: Path, estimating: None) -> None:
    session = min((shared_data / "lmcache-agent-trace" / "miniswe").glob("*.jsonl"), key=lambda f: f.stat().st_size)
    doc = json.loads(CliRunner().invoke(main, ["replay", str(session), "--limit", "5", "--format", "json"]).output)
    assert doc["tokens_estimated"] is True      # the answers' lengths were counted by the estimate
    text = CliRunner().invoke(main, ["replay", str(session), "--limit", "5"]).output
    assert "token counts are estimates" in text.lower()
    # A capture's prompts are counted by the engine's chat template (cl100k_base), never estimated.
    db = tmp_path / "capture.db"
    _store(db, shared_data)
    doc = json.loads(CliRunner().invoke(main, ["replay", str(db), "--format", "json"]).output)
    assert doc["tokens_estimated"] is False
    assert "estimate" not in CliRunner().invoke(main, ["replay", str(db)]).output


def _timed_copy(src: Path, dst: Path, times: dict[int, str], key: str = "date") -> Path:
    """A copy of a recorded cassette whose meta.json keeps each answer's time as a recorder would."""
    shutil.copytree(src, dst)
    meta = json.loads((dst / "meta.json").read_text())
    for call in meta["interactions"]:
        if call["n"] in times:
            call[key] = times[call["n"]]
    (dst / "meta.json").write_text(json.dumps(meta))
    return dst


@pytest.mark.parametrize(("key", "times"), [
    ("date", {1: "Fri, 20 Feb 2026 01:16:47 GMT", 2: "Fri, 20 Feb 2026 01:22:47 GMT"}),
    ("recorded_at", {1: "2026-02-20T01:16:47Z", 2: "2026-02-20T01:22:47"}),
])
def test_a_cassette_that_kept_its_answers_times_replays_with_their_gaps(
    shared_data: Path, tmp_path: Path, key: str, times: dict[int, str]
) -> None:
    """Claude's answers say nothing of when they were made, but a recorder that keeps the response's Date header
    (or its own recorded_at) does: the requests keep those gaps, and the trace says when it started (an
    ISO time without a zone is UTC). A call without a time, or with one that is none, leaves it untimed."""
    src = shared_data / "recorded" / "openllmetry" / "test_prompt_caching_test_anthropic_prompt_caching_legacy"
    trace = sources.load(_timed_copy(src, tmp_path / "timed", times, key))
    assert [r.ts for r in trace.requests] == [0.0, 360.0]
    assert trace.started == datetime(2026, 2, 20, 1, 16, 47, tzinfo=UTC).timestamp()
    for n, broken in enumerate(({1: times[1]}, {1: times[1], 2: "last Friday"})):
        trace = sources.load(_timed_copy(src, tmp_path / f"half{n}", broken, key))
        assert [r.ts for r in trace.requests] == [0.0, 0.0] and trace.started is None
