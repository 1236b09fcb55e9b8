"""Issue 13 (items 2, 3, 5, 7) and issue 11's closed-stream item, through the real proxy: mitmproxy with
the prefixguard addon, real SDK clients in front, a loopback upstream replaying real recordings behind."""
from __future__ import annotations

import hashlib
import http.server
import json
import os
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from helpers.proxy import OPENAI_STREAM, STREAM, streamable, tenant_rows
from helpers.upstream import Upstream

from prefixguard.proxy.addon import PrefixGuard
from prefixguard.proxy.serve import ProxyThread

LINGER_S = 1.5


class LingeringUpstream(Upstream):
    """Sends every event of a stream, then holds the response open a while before ending it (as a
    provider's connection may): a client that stops at the last event closes first."""

    def _stream(self, h: http.server.BaseHTTPRequestHandler, test_id: str, data: bytes, cut: int,
                gap: float) -> None:
        if not h.headers.get("x-linger"):
            return super()._stream(h, test_id, data, cut, gap)
        h.send_response(200)
        h.send_header("content-type", "text/event-stream; charset=utf-8")
        h.send_header("transfer-encoding", "chunked")
        h.end_headers()
        for event in (e + b"\n\n" for e in data.split(b"\n\n") if e.strip()):
            try:
                h.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                h.wfile.flush()
            except OSError:  # the client went away mid-stream
                return
            time.sleep(gap)
        time.sleep(LINGER_S)
        try:
            h.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass


class Env:
    def __init__(self, upstream: Upstream, proxy: ProxyThread, lines: list[str], db: Path, recorded: Path) -> None:
        self.upstream, self.proxy, self.lines, self.db, self.recorded = upstream, proxy, lines, db, recorded
        self._n = 0

    def key(self) -> str:
        self._n += 1
        return f"sk-ant-api03-harden{self._n:04d}-{'y' * 24}"

    def body(self, cassette: str, n: int = 1) -> dict[str, Any]:
        return json.loads((self.recorded / cassette / f"{n:04d}.request.json").read_text())

    def rows(self, key: str, n: int, timeout: float = 15.0) -> list[dict[str, Any]]:
        return tenant_rows(self.db, key, n, timeout)


@pytest.fixture(scope="module")
def env(shared_data: Path, tmp_path_factory: pytest.TempPathFactory):
    recorded = shared_data / "recorded"
    db = tmp_path_factory.mktemp("harden") / "capture.db"
    lines: list[str] = []
    with LingeringUpstream(recorded) as up:
        addon = PrefixGuard(console=lines.append)
        with ProxyThread([up.url, f"/openai={up.url}"], addon=addon, store=str(db)) as px:
            yield Env(up, px, lines, db, recorded)


# ---- issue 11: a finished stream the client closes is not an error

def test_openai_sdk_closing_after_done_is_not_an_error(env: Env) -> None:
    key = env.key()
    client = openai.OpenAI(base_url=f"{env.proxy.url}/openai/v1", api_key=key, max_retries=0)
    started = time.monotonic()
    chunks = list(client.chat.completions.create(**env.body(OPENAI_STREAM), extra_headers={"x-linger": "1"}))
    client.close()
    assert time.monotonic() - started < LINGER_S  # the SDK stopped at [DONE], before the upstream ended
    assert chunks[-1].usage.prompt_tokens == 364
    [row] = env.rows(key, 1)
    assert row["verdict"] != "error", row
    assert row["status"] == 200
    assert row["usage"]["prompt_total"] == 364 and row["usage"]["reported"]


def test_anthropic_sdk_closing_after_message_stop_is_not_an_error(env: Env) -> None:
    key = env.key()
    client = anthropic.Anthropic(base_url=env.proxy.url, api_key=key, max_retries=0)
    started = time.monotonic()
    with client.messages.stream(**streamable(env.body(STREAM)), extra_headers={"x-linger": "1"}) as s:
        for event in s:
            if event.type == "message_stop":
                break
    client.close()
    assert time.monotonic() - started < LINGER_S
    [row] = env.rows(key, 1)
    assert row["verdict"] != "error", row
    assert (row["usage"]["cache_write_5m"], row["usage"]["output"]) == (1165, 201)


def test_client_closing_before_the_last_event_is_still_an_error(env: Env) -> None:
    key = env.key()
    client = anthropic.Anthropic(base_url=env.proxy.url, api_key=key, max_retries=0)
    slow = {"x-linger": "1", "x-upstream-gap": "0.05"}
    with client.messages.stream(**streamable(env.body(STREAM)), extra_headers=slow) as s:
        for event in s:
            if event.type == "message_start":
                break
    client.close()
    [row] = env.rows(key, 1)
    assert row["verdict"] == "error"


# ---- item 3: no secret in the SQLite file, its WAL, the export or the detail column

SECRETS = {
    "anthropic": "sk-ant-api03-" + "Qw3rTy" * 12 + "-AA",
    "openai": "sk-proj-" + "Zx9" * 16,
    "aws": "AKIA" + "IOSFODNN7EXAMPL1",
    "google": "AIza" + "SyD" * 11 + "Xy",
    "github": "ghp_" + "a1B2" * 9,
    "slack": "xoxb-" + "1234567890-abcdefghij",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
}


def escaped(secret: str) -> str:
    """The key as a JSON body may write it: its first letter as \\u escape, a '/' escape inside."""
    return f"\\u{ord(secret[0]):04x}" + secret[1:]


def test_keys_of_known_formats_never_stored(env: Env) -> None:
    key = env.key()
    body = env.body(LEGACY_JSON)
    body["system"] = [{"type": "text", "text": "system prompt " * 50}]
    text = " ".join(f"{name}: {secret}" for name, secret in SECRETS.items())
    body["messages"][0]["content"] = [{"type": "text", "text": "tool result: " + text}]
    # the same keys JSON-escaped, in a second message (an SDK that escapes '/' or non-letters)
    body["messages"].append({"role": "user", "content": "PLACEHOLDER"})
    raw = json.dumps(body).replace('"PLACEHOLDER"', f'"again {" ".join(escaped(s) for s in SECRETS.values())}"')
    assert json.loads(raw)["messages"][1]["content"].startswith("again sk-ant-")
    path = "/v1/messages?subscription-key=subkey123456&code=authcode98765&beta=true"
    r = httpx.post(env.proxy.url + path, content=raw, headers={"x-api-key": key, "content-type": "application/json"})
    assert r.status_code == 200
    # a second request whose system prompt changed by a pasted key: the detail column describes the change
    body2 = json.loads(raw)
    body2["system"] = [{"type": "text", "text": "system prompt " * 50 + SECRETS["openai"]}]
    r = httpx.post(env.proxy.url + "/v1/messages", json=body2, headers={"x-api-key": key})
    assert r.status_code == 200
    rows = env.rows(key, 2)
    assert len(rows) == 2
    export = subprocess_export(env.db)
    files = b"".join(p.read_bytes() for p in env.db.parent.glob(env.db.name + "*"))
    with sqlite3.connect(f"file:{env.db}?mode=ro", uri=True) as con:
        details = " ".join(str(d) for (d,) in con.execute("SELECT detail FROM flows"))
    for name, secret in [*SECRETS.items(), ("subscription-key", "subkey123456"), ("code", "authcode98765")]:
        assert secret not in export, name
        assert secret.encode() not in files, name
        assert secret not in details, name
        assert not any(secret in line for line in env.lines), name
    assert "beta=true" in export and "[redacted]" in export
    assert "[redacted]" in details and "Zx9" not in details  # the changed system prompt, its excerpt cut short


def subprocess_export(db: Path) -> str:
    from helpers.cli import CliRunner

    from prefixguard.cli import main
    result = CliRunner().invoke(main, ["capture", "export", str(db)])
    assert result.exit_code == 0, result.stderr
    return result.stdout


LEGACY_JSON = "openllmetry/test_prompt_caching_test_anthropic_prompt_caching_legacy"


# ---- item 5: streams on every path, on the module's proxy (tests below start their own)

def test_event_stream_on_a_path_not_analysed_passes_chunk_by_chunk(env: Env) -> None:
    # /v1/other is no LLM path: before, mitmproxy buffered its whole SSE answer
    slow = {"x-linger": "1", "x-upstream-gap": "0.3", "x-replay": STREAM + "/0001"}
    body = json.dumps({"stream": True}).encode()
    started = time.monotonic()
    with httpx.stream("POST", env.proxy.url + "/v1/other", content=body, headers=slow, timeout=30) as r:
        first = next(r.iter_raw())
        first_at = time.monotonic() - started
    assert first.startswith(b"event:")
    assert first_at < 1.0  # the first event, not the whole stream (several seconds)


# ---- item 2: every flow gets a row

def test_every_flow_gets_a_row(env: Env) -> None:
    key = env.key()
    body = env.body(LEGACY_JSON)
    raw = json.dumps(body)
    for n, text in enumerate([
        raw.replace('"claude-3-5-sonnet-20240620"', '"\\ud800claude"'),   # lone surrogate in the model
        raw.replace('"text": "', '"text": "\\udc00 ', 1),                  # ... and in content
    ]):
        assert text != raw, n
        r = httpx.post(env.proxy.url + "/v1/messages", content=text, headers={"x-api-key": key})
        assert r.status_code == 200
    rows = env.rows(key, 2)
    assert len(rows) == 2
    assert any("\ufffd" in (r["model"] or "") for r in rows)


def test_a_200_body_that_is_not_json_gets_a_row_with_the_error(shared_data: Path, tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    lines: list[str] = []
    up = Upstream(shared_data / "recorded", body=b'{"id": "msg_1", "usage": {"input_tokens": 3,')
    with up, ProxyThread([up.url], addon=PrefixGuard(console=lines.append), store=str(db)) as px:
        key = "sk-ant-api03-notjson-" + "z" * 20
        r = httpx.post(px.url + "/v1/messages", json=json.loads((shared_data / "recorded" / LEGACY_JSON /
                                                                  "0001.request.json").read_text()),
                       headers={"x-api-key": key})
        assert r.status_code == 200 and r.content.startswith(b"{")
        [row] = tenant_rows(db, key, 1, 15)
    assert row["verdict"] == "error" and "not valid JSON" in row["cause"]
    assert any("error" in line for line in lines)


def test_warnings_reach_the_cli_console_and_a_killed_analysis_is_reaped(shared_data: Path, tmp_path: Path) -> None:
    from helpers.processes import cli_proxy
    out: list[str] = []
    body = json.loads((shared_data / "recorded" / LEGACY_JSON / "0001.request.json").read_text())
    with Upstream(shared_data / "recorded") as up:
        with cli_proxy(["--upstream", up.url, "--store", str(tmp_path / "c.db")], output=out) as url:
            assert httpx.post(url + "/v1/messages", json=body, headers={"x-api-key": "k" * 20}).status_code == 200
            proxy_pid = next(int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()
                             and _cmdline(p).endswith(f"--port 0 --upstream {up.url} --store {tmp_path / 'c.db'}"))
            [worker] = _children(proxy_pid)
            os.kill(worker, signal.SIGKILL)
            time.sleep(0.5)
            assert not Path(f"/proc/{worker}").exists()  # reaped at once, no zombie until exit
            for _ in range(2):
                assert httpx.post(url + "/v1/messages", json=body, headers={"x-api-key": "k" * 20}).status_code == 200
            time.sleep(0.5)
    assert any("analysis process ended" in line for line in out), out


def _cmdline(p: Path) -> str:
    try:
        return p.joinpath("cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def _children(pid: int) -> list[int]:
    return [int(c) for t in Path(f"/proc/{pid}/task").iterdir() for c in t.joinpath("children").read_text().split()]


def test_large_json_response_streams_and_is_still_read(shared_data: Path, tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    recorded = shared_data / "recorded"
    answer = json.loads((recorded / LEGACY_JSON / "0001.response.json").read_text())
    answer["content"][0]["text"] = "x" * (3 << 20)  # over STREAM_OVER
    up = Upstream(recorded, body=json.dumps(answer).encode())
    with up, ProxyThread([up.url], addon=PrefixGuard(console=lambda _: None), store=str(db)) as px:
        key = "sk-ant-api03-large-" + "z" * 20
        request = json.loads((recorded / LEGACY_JSON / "0001.request.json").read_text())
        request["messages"][0]["content"][0]["text"] += " word" * (300 << 10)  # a 1.5 MB request: streamed up too
        sent = json.dumps(request).encode()
        r = httpx.post(px.url + "/v1/messages", content=sent, headers={"x-api-key": key, "x-test-id": "big-up"},
                       timeout=60)
        assert r.status_code == 200 and len(r.content) > 3 << 20
        assert up.seen["big-up"]["request_sha"] == hashlib.sha256(sent).hexdigest()  # byte for byte
        [row] = tenant_rows(db, key, 1, 15)
    assert row["model"] and row["verdict"] != "error"
    assert row["usage"]["reported"] and row["usage"]["prompt_total"] == sum(
        answer["usage"].get(k) or 0 for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"))


# ---- item 6: start-up failures; item 7: a 304 is no error

@pytest.mark.parametrize("args", [["--port", "BUSY"], ["--host", "no.such.host.invalid"], ["--host", "999.1.1.1"]])
def test_proxy_start_up_failure_is_one_line_exit_2(args: list[str]) -> None:
    import socket
    import subprocess
    import sys
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        args = [str(busy.getsockname()[1]) if a == "BUSY" else a for a in args]
        exe = Path(sys.executable).with_name("prefixguard")
        done = subprocess.run([str(exe), "proxy", "--upstream", "http://127.0.0.1:9", *args],
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("prefixguard: error: ") and ("in use" in line or "no address" in line)


def test_a_bad_analysis_priority_is_one_line_exit_2() -> None:
    import subprocess
    import sys
    exe = Path(sys.executable).with_name("prefixguard")
    env = {**os.environ, "PREFIXGUARD_ANALYSIS_NICE": "-5"}
    done = subprocess.run([str(exe), "proxy", "--upstream", "http://127.0.0.1:9", "--port", "0"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "prefixguard: error: PREFIXGUARD_ANALYSIS_NICE must be a whole number from 0 to 19, not '-5'"]


@pytest.mark.parametrize("setting, policy, nice", [(None, os.SCHED_IDLE, 0), ("4", os.SCHED_BATCH, 4)])
def test_the_analysis_runs_on_the_cpu_time_the_traffic_leaves(monkeypatch: pytest.MonkeyPatch, setting: str | None,
                                                             policy: int, nice: int) -> None:
    # Idle by default; a batch job at the nice value PREFIXGUARD_ANALYSIS_NICE gives where rows must keep up.
    if setting is None:
        monkeypatch.delenv("PREFIXGUARD_ANALYSIS_NICE", raising=False)
    else:
        monkeypatch.setenv("PREFIXGUARD_ANALYSIS_NICE", setting)
    addon = PrefixGuard(console=lambda _: None)
    with ProxyThread(["http://127.0.0.1:9"], addon=addon):
        pid = addon._worker.pid
        deadline = time.monotonic() + 30
        while os.sched_getscheduler(pid) != policy:
            assert time.monotonic() < deadline, os.sched_getscheduler(pid)  # the process lowers itself as it starts
            time.sleep(0.05)
        assert int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16]) == nice
        os.kill(pid, signal.SIGKILL)  # an idle process ends only when the cores are free: the other worker's load


def test_not_modified_is_not_an_error(tmp_path: Path) -> None:
    from prefixguard.capture.store import open_store
    from prefixguard.proxy.analysis import Analyzer, FlowState, Response
    analyzer = Analyzer(store=str(tmp_path / "c.db"))
    body = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
    analyzer.request(FlowState(id="f", ts=1.0, sent=0.0, path="/v1/messages", upstream=("http", "x", 80),
                               body=body.encode()))
    analyzer.finish(Response(id="f", status=304, headers_at=0.1, ended_at=0.2, body=b""))
    analyzer.close()
    with open_store(tmp_path / "c.db") as store:
        [row] = store.rows()
    assert row["status"] == 304 and row["verdict"] == "not_reported"


# ---- item 1: a request with more parts than the ceiling is not analysed, and says so

def test_too_large_a_request_is_recorded_not_analysed(shared_data: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREFIXGUARD_MAX_PARTS", "500")  # read by the analysis process at its start
    db = tmp_path / "c.db"
    lines: list[str] = []
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": "ok"} for i in range(1001)]
    big = {"model": "claude-sonnet-4-5", "max_tokens": 5, "messages": msgs}
    small = {"model": "claude-sonnet-4-5", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    with Upstream(shared_data / "recorded") as up, \
            ProxyThread([up.url], addon=PrefixGuard(console=lines.append), store=str(db)) as px:
        for key, body in (("big-" + "k" * 20, big), ("small-" + "k" * 20, small)):
            assert httpx.post(px.url + "/v1/messages", json=body, headers={"x-api-key": key}).status_code == 200
        [row] = tenant_rows(db, "big-" + "k" * 20, 1, 15)
        [other] = tenant_rows(db, "small-" + "k" * 20, 1, 15)
    assert row["cause"].startswith("not analysed: too large") and row["request"] is None
    assert row["analysed"] is False and other["analysed"] is True
    assert other["verdict"] and other["api"] == "anthropic"  # the next flow is analysed as usual
    assert any("not analysed: too large" in line for line in lines)
