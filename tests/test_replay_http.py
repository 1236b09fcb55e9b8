"""Replay's HTTP target against a real loopback HTTP/1.1 server: one kept-alive connection for many
requests, retries that honour retry-after (and are not counted in TTFT), the key from the environment."""
from __future__ import annotations

import gzip
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from prefixguard.replay.http_client import retry_after
from prefixguard.replay.sources import Request
from prefixguard.replay.targets import HttpTarget

BODY = {"model": "gpt-4o-mini", "messages": [{"role": "system", "content": "You are terse. " * 40},
                                             {"role": "user", "content": "hi"}]}


def sse(cached: int) -> bytes:
    events = [{"choices": [{"index": 0, "delta": {"content": "hello"}}]},
              {"choices": [{"index": 0, "delta": {"content": " there"}}]},
              {"choices": [], "usage": {"prompt_tokens": 300, "completion_tokens": 2, "total_tokens": 302,
                                        "prompt_tokens_details": {"cached_tokens": cached}}}]
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, script: list[tuple[int, dict[str, str]]]) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.script = list(script)       # (status, headers) answered in turn; then 200s
        self.connections = 0
        self.gzip = False                # compress answers for clients that accept it
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"        # keep-alive unless the client closes
    server: Server

    def setup(self) -> None:
        super().setup()
        with self.server.lock:
            self.server.connections += 1  # handle() serves every request of one connection

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        with self.server.lock:
            self.server.requests.append({"t": time.monotonic(), "path": self.path, "body": body,
                                         "auth": self.headers.get("authorization")})
            status, headers = self.server.script.pop(0) if self.server.script else (200, {})
        payload = sse(cached=256) if status == 200 else b'{"error": {"type": "rate_limit_error"}}'
        zipped = self.server.gzip and "gzip" in (self.headers.get("accept-encoding") or "")
        if zipped:
            payload = gzip.compress(payload)
        self.send_response(status)
        if zipped:
            self.send_header("content-encoding", "gzip")
        self.send_header("content-type", "text/event-stream" if status == 200 else "application/json")
        self.send_header("content-length", str(len(payload)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def serve():
    servers = []

    def start(script: list[tuple[int, dict[str, str]]] = ()) -> Server:
        server = Server(list(script))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


def request(i: int) -> Request:
    return Request(index=i, ts=float(i), ref=f"r{i}", body=BODY, path="/v1/chat/completions")


@pytest.mark.timeout(60)
def test_requests_share_one_kept_alive_connection(serve) -> None:
    server = serve()
    target = HttpTarget(f"http://127.0.0.1:{server.server_address[1]}", max_tokens=8)
    try:
        outcomes = [target.run(request(i), float(i)) for i in range(5)]
    finally:
        target.close()
    assert [o.error for o in outcomes] == [None] * 5
    assert [o.cache_read for o in outcomes] == [256] * 5 and outcomes[0].prompt_tokens == 300
    assert len(server.requests) == 5
    assert server.connections == 1          # urllib opened one per request
    sent = server.requests[0]["body"]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}


@pytest.mark.timeout(60)
def test_a_compressed_stream_is_read_decoded(serve) -> None:
    server = serve()
    server.gzip = True
    target = HttpTarget(f"http://127.0.0.1:{server.server_address[1]}", max_tokens=8)
    try:
        o = target.run(request(0), 0.0)
    finally:
        target.close()
    assert o.error is None and (o.prompt_tokens, o.cache_read) == (300, 256)


@pytest.mark.timeout(60)
def test_429_is_retried_after_retry_after_and_ttft_excludes_the_wait(serve) -> None:
    server = serve([(429, {"retry-after": "1"}), (503, {"retry-after-ms": "200"})])
    target = HttpTarget(f"http://127.0.0.1:{server.server_address[1]}", max_tokens=8)
    try:
        o = target.run(request(0), 0.0)
    finally:
        target.close()
    assert o.error is None and o.cache_read == 256
    times = [r["t"] for r in server.requests]
    assert len(times) == 3
    assert times[1] - times[0] >= 0.95         # retry-after: 1 (seconds)
    assert 0.19 <= times[2] - times[1] < 0.9   # retry-after-ms: 200 wins over backoff
    assert o.ttft_s is not None and o.ttft_s < 0.9


@pytest.mark.timeout(60)
def test_retries_give_up_with_the_status_and_non_retryable_fail_at_once(serve) -> None:
    server = serve([(429, {"retry-after": "0"})] * 3 + [(400, {})])
    target = HttpTarget(f"http://127.0.0.1:{server.server_address[1]}", max_tokens=8, max_retries=2)
    try:
        gave_up = target.run(request(0), 0.0)
        bad = target.run(request(1), 1.0)
    finally:
        target.close()
    assert gave_up.error.startswith("HTTP 429:") and "after 3 tries" in gave_up.error
    assert bad.error.startswith("HTTP 400:") and "tries" not in bad.error
    assert len(server.requests) == 4


@pytest.mark.timeout(60)
def test_api_key_comes_from_the_environment_unless_a_header_names_one(serve, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    server = serve()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    for headers in ({}, {"Authorization": "Bearer sk-explicit"}):
        target = HttpTarget(url, max_tokens=8, headers=headers)
        try:
            assert target.run(request(0), 0.0).error is None
        finally:
            target.close()
    assert [r["auth"] for r in server.requests] == ["Bearer sk-from-env", "Bearer sk-explicit"]


def test_retry_after_forms() -> None:
    assert retry_after({"retry-after": "2"}, 0) == 2.0
    assert retry_after({"retry-after-ms": "1500", "retry-after": "9"}, 0) == 1.5
    date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    assert 25 < retry_after({"retry-after": date}, 0) <= 30
    assert 0.375 <= retry_after({}, 0) <= 0.625 and 1.5 <= retry_after({}, 2) <= 2.5


def self_signed(folder) -> tuple[str, str]:
    """A certificate for 127.0.0.1 that is its own CA (trusted through SSL_CERT_FILE), and its key."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .add_extension(x509.KeyUsage(True, False, False, False, False, True, False, False, False), True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_path), str(key_path)


class H2Server:
    """A TLS server that offers only HTTP/2 (ALPN h2), built on the h2 library: counts connections and
    the protocol each negotiated."""

    def __init__(self, cert: str, key: str) -> None:
        import socket
        import ssl

        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert, key)
        self.ctx.set_alpn_protocols(["h2"])
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.protocols: list[str | None] = []
        self.requests: list[dict[str, str]] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                raw, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw) -> None:
        import h2.config
        import h2.connection
        import h2.events

        try:
            tls = self.ctx.wrap_socket(raw, server_side=True)
        except OSError:
            return
        self.protocols.append(tls.selected_alpn_protocol())
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        conn.initiate_connection()
        tls.sendall(conn.data_to_send())
        headers: dict[int, dict[str, str]] = {}
        with tls:
            while data := tls.recv(65535):
                for ev in conn.receive_data(data):
                    if isinstance(ev, h2.events.RequestReceived):
                        headers[ev.stream_id] = {k.decode() if isinstance(k, bytes) else k:
                                                 v.decode() if isinstance(v, bytes) else v for k, v in ev.headers}
                    elif isinstance(ev, h2.events.DataReceived):
                        conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                    elif isinstance(ev, h2.events.StreamEnded):
                        self.requests.append(headers.pop(ev.stream_id, {}))
                        payload = sse(cached=256)
                        conn.send_headers(ev.stream_id, [(":status", "200"), ("content-type", "text/event-stream"),
                                                         ("content-length", str(len(payload)))])
                        conn.send_data(ev.stream_id, payload, end_stream=True)
                    elif isinstance(ev, h2.events.ConnectionTerminated):
                        return
                tls.sendall(conn.data_to_send())

    def close(self) -> None:
        self.sock.close()


@pytest.mark.timeout(60)
def test_http2_is_used_where_the_server_offers_it(tmp_path, monkeypatch) -> None:
    cert, key = self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", cert)      # httpx trusts it like any CA bundle
    server = H2Server(cert, key)
    target = HttpTarget(f"https://127.0.0.1:{server.port}", max_tokens=8)
    try:
        outcomes = [target.run(request(i), float(i)) for i in range(3)]
    finally:
        target.close()
        server.close()
    assert target.client.http2
    assert [o.error for o in outcomes] == [None] * 3 and [o.cache_read for o in outcomes] == [256] * 3
    assert server.protocols == ["h2"]              # one connection, HTTP/2, for the three requests
    assert [r[":path"] for r in server.requests] == ["/v1/chat/completions"] * 3


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released): connecting is refused."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timeout(30)
def test_a_refused_connection_is_tried_once_more_then_stops_the_replay() -> None:
    from prefixguard.replay.http_client import Unreachable

    target = HttpTarget(f"http://127.0.0.1:{closed_port()}", max_tokens=8)
    waits: list[float] = []
    target.client._sleep = waits.append
    try:
        with pytest.raises(Unreachable, match="connection refused"):
            target.run(request(0), 0.0)
    finally:
        target.close()
    assert len(waits) == 1 and waits[0] < 1.0


@pytest.mark.timeout(60)
def test_replay_to_a_refused_target_is_one_line_and_exit_2(tmp_path) -> None:
    """Ten requests to a port nothing listens on: one error line and exit 2 in about a second, not
    ~3.5 s of backoff per request (bench/RESULTS.md has the before and after)."""
    from helpers.cli import CliRunner

    from prefixguard.cli import main

    source = tmp_path / "capture.jsonl"
    source.write_text("".join(json.dumps({"id": f"r{i}", "ts": 1_796_256_000 + i, "path": "/v1/chat/completions",
                                          "api": "openai-chat", "model": "gpt-4o-mini", "request": BODY}) + "\n"
                              for i in range(10)))
    url = f"http://127.0.0.1:{closed_port()}"
    started = time.monotonic()
    res = CliRunner().invoke(main, ["replay", str(source), "--target", url, "--ignore-timestamps"])
    took = time.monotonic() - started
    assert res.exit_code == 2, res.output
    assert res.stderr.strip().splitlines() == [
        f"prefixguard: error: cannot connect to {url} (connection refused); is the server running, and is "
        "--target its address?"]
    assert took < 3.0, took
