"""Issue 13 (items 2, 3, 5, 7) and issue 11's closed-stream item, through the real proxy: mitmproxy with
the prefixguard addon, real SDK clients in front, a loopback upstream replaying real recordings behind."""
from __future__ import annotations

import http.server
import json
import logging
import sqlite3
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from prefixguard.proxy.addon import PrefixGuard
from prefixguard.proxy.run import ProxyThread
from test_proxy_e2e import OPENAI_STREAM, STREAM, streamable, tenant_rows
from upstream import Upstream

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
