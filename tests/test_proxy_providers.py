"""Bedrock ConverseStream (binary AWS EventStream) and a Gemini SSE stream through the real proxy
(mitmproxy + the prefixguard addon): bytes pass unchanged both ways, and the usage is read from the
tapped stream. The Bedrock client is the real boto3 SDK (it checks every frame's CRCs itself)."""
from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import threading
import time
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config

from prefixguard.capture.store import open_store
from prefixguard.proxy.addon import PrefixGuard
from prefixguard.proxy.redact import tenant_of
from prefixguard.proxy.serve import ProxyThread
from prefixguard.wire.eventstream import encode

MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
GEMINI_SSE = "pydantic-ai-gemini/test_google_test_google_model_stream/0001"
SYSTEM = "You are a geography tutor. " * 300  # over Bedrock's 1,024-token minimum for the model


def converse_frames(read: int, write: int) -> bytes:
    events = [("messageStart", {"role": "assistant"}),
              ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Paris"}}),
              ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "."}}),
              ("contentBlockStop", {"contentBlockIndex": 0}),
              ("messageStop", {"stopReason": "end_turn"}),
              ("metadata", {"usage": {"inputTokens": 9, "outputTokens": 2, "totalTokens": 11 + read + write,
                                      "cacheReadInputTokens": read, "cacheWriteInputTokens": write},
                            "metrics": {"latencyMs": 120}})]
    return b"".join(encode({":event-type": n, ":content-type": "application/json", ":message-type": "event"},
                           json.dumps({**p, "p": "abcdefgh"}).encode()) for n, p in events)


class Upstream:
    """Answers ConverseStream with EventStream frames cut into odd chunks (so frames straddle them), and
    Gemini streamGenerateContent?alt=sse with a recorded stream. Keeps the SHA-256 of what it got and sent."""

    def __init__(self, recorded: Path) -> None:
        self.recorded = recorded
        self.seen: dict[str, dict[str, Any]] = {}
        self.turn = 0
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                owner.answer(self)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, h: http.server.BaseHTTPRequestHandler) -> None:
        body = h.rfile.read(int(h.headers.get("content-length") or 0))
        if "/converse-stream" in h.path:
            self.turn += 1
            data = converse_frames(read=0 if self.turn == 1 else 1500, write=1500 if self.turn == 1 else 0)
            ctype, sizes = "application/vnd.amazon.eventstream", (7, 50, 13, 200)
        else:
            data = (self.recorded / f"{GEMINI_SSE}.response.sse").read_bytes()
            ctype, sizes = "text/event-stream", (100, 333)
        self.seen[h.headers.get("x-test-id") or h.path] = {
            "request": hashlib.sha256(body).hexdigest(), "response": hashlib.sha256(data).hexdigest()}
        h.send_response(200)
        h.send_header("content-type", ctype)
        h.send_header("transfer-encoding", "chunked")
        h.end_headers()
        i = k = 0
        while i < len(data):
            piece = data[i:i + sizes[k % len(sizes)]]
            h.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            h.wfile.flush()
            i, k = i + len(piece), k + 1
        h.wfile.write(b"0\r\n\r\n")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def env(shared_data: Path, tmp_path_factory: pytest.TempPathFactory):
    db = tmp_path_factory.mktemp("providers") / "capture.db"
    lines: list[str] = []
    up = Upstream(shared_data / "recorded")
    try:
        with ProxyThread([up.url], addon=PrefixGuard(console=lines.append), store=str(db)) as px:
            yield up, px, db, lines, shared_data / "recorded"
    finally:
        up.close()


def rows_of(db: Path, tenant: str, n: int, timeout: float = 15.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        rows = []
        with contextlib.suppress(Exception):  # the store may not exist yet: the analysis runs behind
            with open_store(db) as store:
                rows = [r for r in store.rows() if r["tenant"] == tenant]
        if len(rows) >= n or time.monotonic() > deadline:
            return rows
        time.sleep(0.05)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.mark.slow
def test_converse_stream_through_the_proxy(env) -> None:
    up, px, db, lines, _ = env
    client = boto3.client("bedrock-runtime", endpoint_url=px.url, region_name="us-east-1",
                          aws_access_key_id="AKIDPREFIXGUARDTEST", aws_secret_access_key="not-a-secret",
                          config=Config(retries={"max_attempts": 1}, read_timeout=20))
    request = {"modelId": MODEL, "system": [{"text": SYSTEM}, {"cachePoint": {"type": "default"}}],
               "messages": [{"role": "user", "content": [{"text": "Capital of France?"}]}]}
    got = []
    for _ in range(2):
        events = list(client.converse_stream(**request)["stream"])  # the SDK checks both CRCs of each frame
        text = "".join(e["contentBlockDelta"]["delta"]["text"] for e in events if "contentBlockDelta" in e)
        got.append(next(e["metadata"]["usage"] for e in events if "metadata" in e))
        assert text == "Paris."
    # byte identity: the raw bytes through httpx, the same ones the SDK read
    raw = json.dumps({k: v for k, v in request.items() if k != "modelId"}).encode()
    with httpx.stream("POST", f"{px.url}/model/{MODEL.replace(':', '%3A')}/converse-stream", content=raw,
                      headers={"content-type": "application/json", "x-test-id": "converse-raw",
                               "authorization": "AWS4-HMAC-SHA256 Credential=AKIDPREFIXGUARDTEST/20261203/"
                                                "us-east-1/bedrock/aws4_request, Signature=00"}) as r:
        received = b"".join(r.iter_raw())
    assert up.seen["converse-raw"] == {"request": sha(raw), "response": sha(received)}
    # usage read from the tapped frames, as the SDK read it; one tenant across SigV4 signatures
    rows = rows_of(db, tenant_of({"authorization": "AWS4-HMAC-SHA256 Credential=AKIDPREFIXGUARDTEST/x"}), 3)
    assert [r["api"] for r in rows] == ["bedrock-converse"] * 3 and rows[0]["model"] == MODEL
    for row, usage in zip(rows, got, strict=False):   # the third row: the raw request
        assert (row["usage"]["cache_read"], row["usage"]["cache_write_5m"], row["usage"]["uncached"]) == \
            (usage["cacheReadInputTokens"], usage["cacheWriteInputTokens"], usage["inputTokens"])
        assert row["usage"]["reported"] and row["timings"]["ttft_s"] is not None
    assert rows[1]["verdict"] == "hit" and rows[1]["expected_cached"] > 1000
    assert any(MODEL in ln and "read 1500" in ln for ln in lines)


@pytest.mark.slow
def test_gemini_sse_stream_through_the_proxy(env) -> None:
    up, px, db, lines, recorded = env
    raw = (recorded / "pydantic-ai-gemini/test_google_test_google_model_stream/0001.request.json").read_bytes()
    key = "AIzaSyPrefixguardTestKey0000000000000000"
    with httpx.stream("POST", f"{px.url}/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", content=raw,
                      headers={"content-type": "application/json", "x-goog-api-key": key, "x-test-id": "gemini"}) as r:
        received = b"".join(r.iter_raw())
    sent = (recorded / f"{GEMINI_SSE}.response.sse").read_bytes()
    assert received == sent and up.seen["gemini"] == {"request": sha(raw), "response": sha(sent)}
    [row] = rows_of(db, tenant_of({"x-goog-api-key": key}), 1)
    last = [json.loads(x[6:]) for x in sent.decode().splitlines() if x.startswith("data: ")][-1]["usageMetadata"]
    assert row["api"] == "gemini" and row["model"] == "gemini-2.5-pro"
    assert row["usage"]["prompt_total"] == last["promptTokenCount"] and row["usage"]["reported"]
    assert row["usage"]["cache_read"] == last.get("cachedContentTokenCount", 0) and row["timings"]["ttft_s"] is not None
