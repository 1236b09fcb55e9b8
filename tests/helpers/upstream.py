"""A loopback upstream that answers like the providers: it replays real recorded responses
(shared/data/recorded, JSON and SSE) and records what it received, for tests and the proxy benchmark.

Which recording answers: the request header `x-replay: <cassette folder>/<NNNN>` (relative to
recorded/), else a default per API path and stream flag. Knobs, also request headers:
  x-upstream-status: 500     answer with this status and a provider-shaped error body
  x-upstream-delay: 2.5      wait this many seconds before the response headers
  x-upstream-cut: 3          send only the first 3 SSE events, then drop the connection
  x-upstream-output: 42      report this many output tokens (to tell concurrent responses apart)
  x-upstream-gap: 0.01       seconds between SSE events (default 0)
Every request is kept in `seen` by its `x-test-id` header: the SHA-256 of the body received and of the
response body sent.
"""
from __future__ import annotations

import gzip
import hashlib
import http.server
import json
import re
import socket
import threading
import time
from pathlib import Path
from typing import Any

DEFAULTS = {  # (path suffix, streamed) -> recording
    ("/v1/messages", False): "openllmetry/test_prompt_caching_test_anthropic_prompt_caching_legacy/0001",
    ("/v1/messages", True): "openllmetry/test_prompt_caching_test_anthropic_prompt_caching_stream_legacy/0001",
    ("/v1/chat/completions", False): "openllmetry/test_prompt_caching_test_openai_prompt_caching/0001",
    ("/v1/chat/completions", True): "pydantic-ai/test_dbos_test_mcp_tools_not_cached_when_disabled/0001",
}
ERRORS = {
    "/v1/messages": {"type": "error", "error": {"type": "api_error", "message": "Internal server error"}},
    "/v1/chat/completions": {"error": {"message": "The server had an error", "type": "server_error",
                                       "param": None, "code": None}},
}
_OUTPUT = re.compile(rb'"(output_tokens|completion_tokens)":\s*\d+')


class Upstream:
    def __init__(self, recorded: Path, body: bytes | None = None) -> None:
        self.recorded = recorded
        self.fixed_body = body          # answer every JSON request with these bytes (benchmarks)
        self.seen: dict[str, dict[str, Any]] = {}
        self.count = 0
        self._lock = threading.Lock()
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body leave at once, as from a real server

            def do_POST(self) -> None:
                owner._answer(self)

            def log_message(self, *args: Any) -> None:
                pass

        class Server(http.server.ThreadingHTTPServer):
            request_queue_size = 256  # 50 clients connecting at once must not be refused

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Upstream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def recording(self, name: str) -> tuple[bytes, bool]:
        """(body, is_sse) of a recorded response."""
        base = self.recorded / name
        sse = base.with_name(base.name + ".response.sse")
        if sse.exists():
            return sse.read_bytes(), True
        return base.with_name(base.name + ".response.json").read_bytes(), False

    def _answer(self, h: http.server.BaseHTTPRequestHandler) -> None:
        body = h.rfile.read(int(h.headers.get("content-length") or 0))
        path = h.path.split("?")[0]
        test_id = h.headers.get("x-test-id") or str(self.count)
        with self._lock:
            self.count += 1
            self.seen[test_id] = {"request_sha": hashlib.sha256(body).hexdigest(), "path": h.path,
                                  "headers": dict(h.headers)}
        if delay := float(h.headers.get("x-upstream-delay") or 0):
            time.sleep(delay)
        status = int(h.headers.get("x-upstream-status") or 200)
        if status != 200:
            kind = next((k for k in ERRORS if path.endswith(k)), "/v1/messages")
            return self._send(h, test_id, status, json.dumps(ERRORS[kind]).encode(), "application/json")
        try:
            streamed = bool(json.loads(body).get("stream"))
        except ValueError:
            streamed = False
        if self.fixed_body is not None and not streamed:
            return self._send(h, test_id, 200, self.fixed_body, "application/json")
        name = h.headers.get("x-replay") or next(v for (p, s), v in DEFAULTS.items()
                                                  if path.endswith(p) and s == streamed)
        data, sse = self.recording(name)
        if out := h.headers.get("x-upstream-output"):
            data = _OUTPUT.sub(lambda m: b'"' + m.group(1) + b'":' + out.encode(), data)
        if not sse:
            gzip_it = bool(h.headers.get("x-upstream-gzip"))  # a compressed answer, as providers may send
            return self._send(h, test_id, 200, gzip.compress(data) if gzip_it else data, "application/json",
                              "gzip" if gzip_it else None)
        if data.lstrip()[:1] == b"{":  # JSON lines (Ollama's /api/chat): a line a chunk, as Ollama sends them
            return self._stream(h, test_id, data, 0, 0.0, "application/x-ndjson", b"\n")
        self._stream(h, test_id, data, int(h.headers.get("x-upstream-cut") or 0),
                     float(h.headers.get("x-upstream-gap") or 0))

    def _send(self, h: http.server.BaseHTTPRequestHandler, test_id: str, status: int, data: bytes,
              ctype: str, encoding: str | None = None) -> None:
        self.seen[test_id]["response_sha"] = hashlib.sha256(data).hexdigest()
        h.send_response(status)
        h.send_header("content-type", ctype)
        if encoding:
            h.send_header("content-encoding", encoding)
        h.send_header("content-length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _stream(self, h: http.server.BaseHTTPRequestHandler, test_id: str, data: bytes, cut: int,
                gap: float, ctype: str = "text/event-stream; charset=utf-8", end: bytes = b"\n\n") -> None:
        events = [e + end for e in data.split(end) if e.strip()]
        sent = events[:cut] if cut else events
        self.seen[test_id]["response_sha"] = hashlib.sha256(b"".join(sent)).hexdigest()
        h.send_response(200)
        h.send_header("content-type", ctype)
        h.send_header("transfer-encoding", "chunked")
        h.end_headers()
        for event in sent:
            h.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            h.wfile.flush()
            if gap:
                time.sleep(gap)
        if cut:  # drop the connection without the last chunk: the client sees a truncated body
            h.connection.shutdown(socket.SHUT_RDWR)
            h.close_connection = True
            return
        h.wfile.write(b"0\r\n\r\n")
