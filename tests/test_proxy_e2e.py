"""The proxy for real on loopback: mitmproxy + the prefixguard addon, the real anthropic and openai SDK
clients in front, and behind it an upstream that replays real recorded provider responses."""
from __future__ import annotations

import gzip
import json
import logging
import os
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from helpers.faults import MARKER, FaultyAnalyzer
from helpers.processes import cli_proxy
from helpers.proxy import LEGACY, OPENAI_STREAM, STREAM, TOOLS, Clock, sha, streamable, tenant_rows
from helpers.upstream import Upstream

from prefixguard.capture.store import open_store
from prefixguard.proxy.addon import PrefixGuard
from prefixguard.proxy.redact import tenant_of
from prefixguard.proxy.serve import ProxyThread


class Env:
    def __init__(self, upstream: Upstream, proxy: ProxyThread, addon: PrefixGuard, clock: Clock, lines: list[str],
                 db: Path, recorded: Path) -> None:
        self.upstream, self.proxy, self.addon, self.clock, self.lines = upstream, proxy, addon, clock, lines
        self.db, self.recorded = db, recorded
        self._n = 0

    def key(self) -> str:
        self._n += 1
        return f"sk-ant-api03-test{self._n:04d}-{'x' * 24}"

    def body(self, cassette: str, n: int = 1) -> dict[str, Any]:
        return json.loads((self.recorded / cassette / f"{n:04d}.request.json").read_text())

    def anthropic(self, key: str, **kw: Any) -> anthropic.Anthropic:
        return anthropic.Anthropic(base_url=self.proxy.url, api_key=key, max_retries=0, **kw)

    def rows(self, key: str, n: int, timeout: float = 30.0) -> list[dict[str, Any]]:
        return tenant_rows(self.db, key, n, timeout)


@pytest.fixture(scope="module")
def env(shared_data: Path, tmp_path_factory: pytest.TempPathFactory):
    recorded = shared_data / "recorded"
    db = tmp_path_factory.mktemp("proxy") / "capture.db"
    clock, lines = Clock(), []
    addon = PrefixGuard(clock=clock, console=lines.append, analyzer=FaultyAnalyzer)
    with Upstream(recorded) as up:
        with ProxyThread([up.url, f"/openai={up.url}"], addon=addon, store=str(db)) as px:
            yield Env(up, px, addon, clock, lines, db, recorded)


# ---- byte identity

def test_json_bodies_pass_byte_for_byte(env: Env) -> None:
    # The recorded file as is (indented JSON, key order of the recording): what arrives upstream is it.
    raw = (env.recorded / LEGACY / "0001.request.json").read_bytes()
    key = env.key()
    r = httpx.post(f"{env.proxy.url}/v1/messages", content=raw,
                   headers={"x-api-key": key, "content-type": "application/json", "x-test-id": "raw-json"})
    assert r.status_code == 200
    assert env.upstream.seen["raw-json"]["request_sha"] == sha(raw)
    assert env.upstream.seen["raw-json"]["response_sha"] == sha(r.content)
    assert r.content == env.upstream.recording(f"{LEGACY}/0001")[0]
    [row] = env.rows(key, 1)
    with open_store(env.db) as store:
        [rec] = [r for r in store.records() if r.id == row["id"]]
    assert rec.upstream == env.upstream.url and rec.path == "/v1/messages"  # where it went, as a URL


def test_compressed_bodies_pass_as_sent_and_are_read(env: Env) -> None:
    """A gzip request body and a gzip response: forwarded compressed, byte for byte; the analysis undoes
    the encoding to read the prompt and the usage."""
    raw = gzip.compress((env.recorded / LEGACY / "0001.request.json").read_bytes())
    key = env.key()
    with httpx.stream("POST", f"{env.proxy.url}/v1/messages", content=raw,
                      headers={"x-api-key": key, "content-type": "application/json", "content-encoding": "gzip",
                               "accept-encoding": "gzip", "x-upstream-gzip": "1", "x-test-id": "gzip"}) as r:
        received = b"".join(r.iter_raw())  # as it came, still compressed
    assert r.status_code == 200 and r.headers["content-encoding"] == "gzip"
    assert env.upstream.seen["gzip"]["request_sha"] == sha(raw)
    assert env.upstream.seen["gzip"]["response_sha"] == sha(received)
    [row] = env.rows(key, 1)
    assert row["model"] == env.body(LEGACY)["model"] and row["verdict"] == "cold"
    assert row["usage"]["cache_write_5m"] == 1163  # read from the compressed response


def test_sdk_json_and_sse_bytes_identical(env: Env) -> None:
    client = env.anthropic(env.key())
    body = env.body(LEGACY)
    r = client.messages.with_raw_response.create(**body, extra_headers={"x-test-id": "sdk-json"})
    assert sha(r.http_request.read()) == env.upstream.seen["sdk-json"]["request_sha"]
    assert sha(r.http_response.content) == env.upstream.seen["sdk-json"]["response_sha"]
    assert r.parse().usage.cache_creation_input_tokens == 1163

    with client.messages.with_streaming_response.create(**body, stream=True,
                                                        extra_headers={"x-test-id": "sdk-sse"}) as s:
        streamed = b"".join(s.iter_bytes())
        sent = s.http_request.read()
    assert sha(sent) == env.upstream.seen["sdk-sse"]["request_sha"]
    assert sha(streamed) == env.upstream.seen["sdk-sse"]["response_sha"]
    client.close()


def test_openai_stream_by_path_prefix_and_usage_from_stream(env: Env) -> None:
    key = env.key()
    client = openai.OpenAI(base_url=f"{env.proxy.url}/openai/v1", api_key=key, max_retries=0)
    body = env.body(OPENAI_STREAM)
    chunks = list(client.chat.completions.create(**body, extra_headers={"x-test-id": "oai-sse"}))
    client.close()
    assert chunks[-1].usage.prompt_tokens == 364
    assert env.upstream.seen["oai-sse"]["path"] == "/v1/chat/completions"  # the prefix was routed and removed
    [row] = env.rows(key, 1)
    assert row["api"] == "openai-chat" and row["model"] == "gpt-4o"
    assert row["usage"] == {"prompt_total": 364, "cache_read": 0, "cache_write_5m": 0, "cache_write_1h": 0,
                            "uncached": 364, "output": 40, "reported": True, "reasoning": 0, "server_calls": 0, "server_added": 0, "first_pass": 0}
    assert row["timings"]["ttft_s"] > 0 and row["timings"]["total_s"] >= row["timings"]["ttft_s"]


def test_anthropic_stream_usage_and_decode_rate(env: Env) -> None:
    key = env.key()
    client = env.anthropic(key)
    with client.messages.stream(**streamable(env.body(STREAM)), extra_headers={"x-upstream-gap": "0.002"}) as s:
        text = s.get_final_text()
    client.close()
    assert text.startswith("Here are concise summaries")
    [row] = env.rows(key, 1)
    u = row["usage"]
    # message_start carries the prompt side, message_delta the final output count
    assert (u["cache_write_5m"], u["cache_read"], u["uncached"], u["output"]) == (1165, 0, 4, 201)
    t = row["timings"]
    assert 0 < t["ttft_s"] < t["total_s"]
    assert t["decode_tps"] > 0


# ---- verdicts

def test_stable_prefix_within_then_after_ttl(env: Env) -> None:
    key = env.key()
    client = env.anthropic(key)
    body = env.body(LEGACY)
    client.messages.create(**body)                                           # the provider writes
    env.clock.now += 60
    client.messages.create(**body, extra_headers={"x-replay": f"{LEGACY}/0002"})  # and reads
    env.clock.now += 301                                                     # past the 5m TTL
    client.messages.create(**body)                                           # writes again
    client.close()
    rows = env.rows(key, 3)
    assert [r["verdict"] for r in rows] == ["cold", "hit", "miss_ttl_expired"]
    assert rows[1]["expected_cached"] > 1000 and rows[1]["usage"]["cache_read"] == 1163
    assert rows[2]["expected_cached"] == 0


def test_server_side_miss_when_stable_prefix_is_not_read(env: Env) -> None:
    key = env.key()
    client = env.anthropic(key)
    body = env.body(LEGACY)
    client.messages.create(**body)
    client.messages.create(**body)  # same prefix, within TTL, and the provider reports no read
    client.close()
    assert [r["verdict"] for r in env.rows(key, 2)] == ["cold", "miss_server_side"]


def test_timestamped_system_prompt(env: Env) -> None:
    key = env.key()
    client = env.anthropic(key)
    verdicts = []
    for stamp in ("2026-12-02T16:00:00Z", "2026-12-02T16:00:07Z"):
        body = env.body(LEGACY)
        body["system"][0]["text"] = f"Current time: {stamp}. " + body["system"][0]["text"]
        # a slow upstream: the request-side verdict is ready when the response headers come back
        r = client.messages.with_raw_response.create(**body, extra_headers={"x-upstream-delay": "0.5"})
        verdicts.append(r.headers.get("x-prefixguard-verdict"))
        env.clock.now += 7
    client.close()
    assert verdicts == ["cold", "miss_prefix_changed"]
    rows = env.rows(key, 2)
    assert rows[1]["verdict"] == "miss_prefix_changed"
    assert rows[1]["cause"].startswith("volatile_content") and "/system/0" in rows[1]["cause"]


def test_reordered_tools(env: Env) -> None:
    key = env.key()
    client = env.anthropic(key)
    body = env.body(LEGACY)
    body["tools"] = env.body(TOOLS)["tools"]
    client.messages.create(**body)
    body["tools"] = body["tools"][1:] + body["tools"][:1]
    r = client.messages.with_raw_response.create(**body, extra_headers={"x-upstream-delay": "0.5"})
    client.close()
    assert r.headers["x-prefixguard-verdict"] == "miss_prefix_changed"
    assert r.headers["x-prefixguard-cause"] == "tools_reordered at /tools/0"
    row = env.rows(key, 2)[1]
    assert (row["verdict"], row["cause"]) == ("miss_prefix_changed", "tools_reordered at /tools/0")


# ---- failures reach the client as they would directly, and are recorded

def test_upstream_500(env: Env) -> None:
    key = env.key()
    client = env.anthropic(key)
    with pytest.raises(anthropic.InternalServerError) as err:
        client.messages.create(**env.body(LEGACY), extra_headers={"x-upstream-status": "500"})
    client.close()
    direct = anthropic.Anthropic(base_url=env.upstream.url, api_key=key, max_retries=0)
    with pytest.raises(anthropic.InternalServerError) as err_direct:
        direct.messages.create(**env.body(LEGACY), extra_headers={"x-upstream-status": "500"})
    direct.close()
    assert err.value.body == err_direct.value.body
    [row] = env.rows(key, 1)
    assert (row["status"], row["verdict"], row["cause"]) == (500, "error", "http 500")


def test_upstream_timeout(env: Env) -> None:
    key = env.key()
    client = env.anthropic(key, timeout=0.5)
    with pytest.raises(anthropic.APITimeoutError):
        client.messages.create(**env.body(LEGACY), extra_headers={"x-upstream-delay": "2"})
    client.close()
    [row] = env.rows(key, 1)
    assert row["status"] is None and row["verdict"] == "error"


def test_stream_cut_midway(env: Env) -> None:
    key = env.key()
    body = streamable(env.body(STREAM))
    headers = {"x-upstream-cut": "6"}

    def read(base: str) -> type[BaseException]:
        client = anthropic.Anthropic(base_url=base, api_key=key, max_retries=0)
        try:
            with client.messages.stream(**body, extra_headers=headers) as s:
                s.get_final_text()
        except Exception as err:  # noqa: BLE001 - the type is what we compare
            return type(err)
        finally:
            client.close()
        raise AssertionError("the stream was cut but the client saw no error")

    assert read(env.proxy.url) is read(env.upstream.url)
    [row] = env.rows(key, 1)
    assert row["verdict"] == "error" and row["status"] == 200
    assert row["usage"]["cache_write_5m"] == 1165  # what arrived before the cut is still read


@pytest.mark.slow
def test_cli_proxy_with_upstream_refused(env: Env, tmp_path: Path) -> None:
    """`prefixguard proxy --port 0` in its own process, in front of a port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    db = tmp_path / "refused.db"
    key = env.key()
    with cli_proxy(["--upstream", dead, "--store", str(db), "--quiet", "--no-bodies"]) as url:
        client = anthropic.Anthropic(base_url=url, api_key=key, max_retries=0)
        with pytest.raises(anthropic.APIStatusError) as err:
            client.messages.create(**env.body(LEGACY))
        client.close()
    assert err.value.status_code == 502  # what a proxy answers for "could not reach the server"
    with pytest.raises(anthropic.APIConnectionError):  # and what the client sees without one
        anthropic.Anthropic(base_url=dead, api_key=key, max_retries=0).messages.create(**env.body(LEGACY))
    with open_store(db) as store:
        [row] = list(store.rows())
    assert row["verdict"] == "error" and "connect" in row["cause"].lower() and row["status"] is None
    assert row["request"] is None and row["model"] == "claude-3-5-sonnet-20240620"  # --no-bodies: no body kept


def test_failing_analysis_leaves_the_flow_untouched(env: Env, caplog: pytest.LogCaptureFixture) -> None:
    key = env.key()
    client = env.anthropic(key)
    json_body, sse_body = env.body(LEGACY), streamable(env.body(STREAM))
    for b in (json_body, sse_body):
        b["messages"][0]["content"][0]["text"] += MARKER.decode()  # the analysis raises on this request
    with caplog.at_level(logging.WARNING, logger="prefixguard.proxy"):
        r = client.messages.with_raw_response.create(**json_body, extra_headers={"x-test-id": "broken"})
        with client.messages.with_streaming_response.create(**sse_body, stream=True,
                                                            extra_headers={"x-test-id": "broken-sse"}) as s:
            streamed = b"".join(s.iter_bytes())
        sent = s.http_request.read()
        env.rows(key, 2)
    client.close()
    assert r.status_code == 200 and r.headers["x-prefixguard-verdict"] in ("pending", "unknown")
    assert sha(r.http_request.read()) == env.upstream.seen["broken"]["request_sha"]
    assert sha(r.http_response.content) == env.upstream.seen["broken"]["response_sha"]
    assert sha(sent) == env.upstream.seen["broken-sse"]["request_sha"]
    assert sha(streamed) == env.upstream.seen["broken-sse"]["response_sha"]
    assert "injected failure" in caplog.text and key not in caplog.text


def test_killed_analysis_process_is_replaced(env: Env) -> None:
    key = env.key()
    client = env.anthropic(key)
    client.messages.create(**env.body(LEGACY))
    env.rows(key, 1)
    old = env.addon._worker.pid
    os.kill(old, signal.SIGKILL)
    time.sleep(0.3)
    r = client.messages.with_raw_response.create(**env.body(LEGACY), extra_headers={"x-test-id": "after-kill"})
    assert r.status_code == 200 and sha(r.http_response.content) == env.upstream.seen["after-kill"]["response_sha"]
    for _ in range(3):  # the flows that met the dead process pass unanalysed; a new process takes the next
        client.messages.create(**env.body(LEGACY))
    client.close()
    assert env.addon._worker.pid != old
    assert len(env.rows(key, 2)) >= 2


def test_flows_pass_unanalysed_while_the_analysis_is_behind(env: Env, caplog: pytest.LogCaptureFixture,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import prefixguard.proxy.addon as addon_module
    key = env.key()
    client = env.anthropic(key)
    monkeypatch.setattr(addon_module, "MAX_BACKLOG", 100)  # less than one request: always "behind"
    with caplog.at_level(logging.WARNING, logger="prefixguard.proxy"):
        for i in range(3):
            r = client.messages.with_raw_response.create(**env.body(LEGACY), extra_headers={"x-test-id": f"behind-{i}"})
            seen = env.upstream.seen[f"behind-{i}"]
            assert r.status_code == 200 and sha(r.http_response.content) == seen["response_sha"]
    assert caplog.text.count("new flows pass unanalysed") == 1  # said once, not per flow
    monkeypatch.undo()
    client.messages.create(**env.body(LEGACY))  # caught up: analysed again
    client.close()
    assert len(env.rows(key, 1)) == 1


@pytest.mark.slow
def test_50_concurrent_streams_each_attributed(env: Env) -> None:
    keys = [env.key() for _ in range(50)]
    body = streamable(env.body(STREAM))
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            client = anthropic.Anthropic(base_url=env.proxy.url, api_key=keys[i], max_retries=0)
            replay = f"{STREAM}/{'0002' if i % 2 else '0001'}"
            with client.messages.stream(**body, extra_headers={"x-replay": replay, "x-upstream-output": str(100 + i),
                                                                "x-upstream-gap": "0.001"}) as s:
                final = s.get_final_message()
            assert final.usage.output_tokens == 100 + i
            client.close()
        except BaseException as err:  # noqa: BLE001 - reported by the main thread
            errors.append(err)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    for i, key in enumerate(keys):
        [row] = env.rows(key, 1)
        assert row["usage"]["output"] == 100 + i
        assert row["usage"]["cache_read"] == (1165 if i % 2 else 0)
        assert row["verdict"] == ("hit" if i % 2 else "cold")


def test_no_secret_in_store_or_console(env: Env) -> None:
    key = env.key()
    body = env.body(LEGACY)
    body["metadata"] = {"user_id": "u1"}
    body["api_key"] = key                    # a key pasted into a body field
    body["messages"][0]["content"][0]["text"] += f"\nmy key is {key}"  # and into the prompt
    r = httpx.post(f"{env.proxy.url}/v1/messages?key={key}&beta=true", json=body,
                   headers={"authorization": f"Bearer {key}", "cookie": f"session={key}"})
    assert r.status_code == 200
    env.rows(key, 1)
    with open_store(env.db) as store:
        exported = "".join(json.dumps(row) for row in store.rows())
    files = b"".join(p.read_bytes() for p in env.db.parent.glob(env.db.name + "*"))
    assert key not in exported and key.encode() not in files
    assert not any(key in line for line in env.lines)
    row = next(r for r in env.rows(key, 1))
    assert "beta=true" in row["path"] and row["request"]["metadata"] == {"user_id": "u1"}


@pytest.mark.slow
def test_mitmdump_script_in_forward_mode(env: Env, tmp_path: Path) -> None:
    """The same addon loaded by mitmdump itself, as a regular (forward) proxy, with mitmproxy saving the
    flows as well (it deep-copies each flow's metadata, where the addon keeps its notes)."""
    from mitmproxy.io import FlowReader
    db, saved = tmp_path / "fwd.db", tmp_path / "flows.mitm"
    addon_file = Path(__file__).resolve().parent.parent / "prefixguard" / "proxy" / "addon.py"
    key = env.key()
    printed: list[str] = []
    with cli_proxy(["--listen-host", "127.0.0.1", "--listen-port", "0", "-s", str(addon_file), "-w", str(saved),
                    "--set", f"prefixguard_store={db}", "--set", "prefixguard_headers=false"], "mitmdump",
                   printed) as url:
        with httpx.Client(proxy=url) as client:
            r = client.post(f"{env.upstream.url}/v1/messages", json=env.body(LEGACY), headers={"x-api-key": key})
        assert r.status_code == 200 and r.content == env.upstream.recording(f"{LEGACY}/0001")[0]
        assert not any(h.startswith("x-prefixguard") for h in r.headers)  # turned off
    with open_store(db) as store:
        [row] = list(store.rows())
    assert row["tenant"] == tenant_of({"x-api-key": key}) and row["verdict"] == "cold"
    # the console line, printed by the analysis process into the proxy's output; never the key
    [line] = [x for x in printed if x.startswith("prefixguard ") and row["tenant"] in x]
    assert " cold " in line and key not in "\n".join(printed)
    with saved.open("rb") as f:
        [flow] = list(FlowReader(f).stream())
    assert flow.response.content == r.content
