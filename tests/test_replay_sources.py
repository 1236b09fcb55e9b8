"""Trace loaders on the real formats (Mooncake, LMCache, recorded cassettes, the capture store), and
one-line errors with exit 2 on bad input."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from prefixguard.cli import main
from prefixguard.errors import InputError
from prefixguard.replay import sources
from prefixguard.store import Record, Store
from prefixguard.usage import Usage


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
    assert res.output.startswith("Error: ") and res.output.count("\n") == 1 and str(path) in res.output
    assert "Traceback" not in res.output


def test_report_rejects_what_is_not_a_capture(tmp_path: Path, shared_data: Path) -> None:
    res = CliRunner().invoke(main, ["report", str(shared_data / "mooncake" / "synthetic_trace.jsonl")])
    assert res.exit_code == 2 and "not a capture export" in res.output and res.output.count("\n") == 1


def test_a_target_that_refuses_fails_each_request_and_exits_1(shared_data: Path) -> None:
    import socket
    with socket.socket() as s:                 # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    folder = shared_data / "recorded" / "pydantic-ai" / "test_cache_test_openrouter_cache_messages_anthropic_real_api"
    res = CliRunner().invoke(main, ["replay", str(folder), "--target", f"http://127.0.0.1:{port}",
                                         "--format", "json"])
    assert res.exit_code == 1
    doc = json.loads(res.stdout)
    assert (doc["requests"], doc["errors"]) == (0, 2)
    assert res.stderr.startswith("Error: the target failed 2 requests") and "Connection refused" in res.stderr


def test_progress_bar_shows_rate_and_eta_on_a_terminal(shared_data: Path) -> None:
    import io

    from rich.console import Console

    from prefixguard.replay.run import replay
    from prefixguard.replay.targets import SimTarget
    buf = io.StringIO()
    requests = sources.load(shared_data / "mooncake" / "synthetic_trace.jsonl").requests[:400]
    replay(requests, SimTarget(), console=Console(file=buf, force_terminal=True, width=120))
    assert "400/400" in buf.getvalue() and "req/s" in buf.getvalue()
    quiet = io.StringIO()
    replay(requests, SimTarget(), console=Console(file=quiet, force_terminal=False))
    assert quiet.getvalue() == ""
