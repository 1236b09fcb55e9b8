"""Real Redis and PostgreSQL for the fleet tests: the project's running servers (URLs from
PREFIXGUARD_TEST_REDIS / PREFIXGUARD_TEST_POSTGRES), each test run in a key prefix and a schema of its
own, removed afterwards. Outages are never staged on those shared servers: a private redis-server
process is flushed or stopped instead, and PostgreSQL is reached through a loopback forwarder that a
test cuts and restores (a server restart as the client sees it: connections dropped, then refused)."""
from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

REDIS = os.environ.get("PREFIXGUARD_TEST_REDIS", "redis://127.0.0.1:6379/0")
POSTGRES = os.environ.get("PREFIXGUARD_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


def unavailable(what: str, err: BaseException) -> None:
    """Skip with one line, except under CI, where a missing server fails the run."""
    message = f"{what} not reachable: {type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def redis_prefix(url: str = REDIS) -> Iterator[str]:
    """An index URL whose keys live under a fresh prefix; the keys are deleted afterwards."""
    import redis
    try:
        client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        client.ping()
    except Exception as err:  # noqa: BLE001 - any failure to reach it
        unavailable(f"Redis at {url}", err)
    prefix = f"pgtest-{secrets.token_hex(4)}:"
    try:
        yield f"{url}?prefix={prefix}"
    finally:
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        for i in range(0, len(keys), 500):
            client.delete(*keys[i:i + 500])
        client.close()


@contextmanager
def pg_schema(url: str = POSTGRES) -> Iterator[str]:
    """A store URL whose tables live in a fresh schema; the schema is dropped afterwards."""
    import psycopg
    try:
        admin = psycopg.connect(url, autocommit=True, connect_timeout=3)
    except Exception as err:  # noqa: BLE001
        unavailable(f"PostgreSQL at {url}", err)
    schema = f"pgtest_{secrets.token_hex(4)}"
    admin.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in url else "?"
    try:
        yield f"{url}{sep}options=-csearch_path%3D{schema}"
    finally:
        admin.execute(f"DROP SCHEMA {schema} CASCADE")
        admin.close()


def pg_rows(store_url: str) -> list[dict]:
    from prefixguard.store import open_capture
    with open_capture(store_url) as store:
        return list(store.rows())


class PrivateRedis:
    """A redis-server of this test's own (no persistence): FLUSHALL or stop it as the test needs."""

    def __init__(self) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            unavailable("redis-server", FileNotFoundError("redis-server not on PATH"))
        self.exe, self.port = exe, free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None

    def start(self) -> PrivateRedis:
        import redis
        self.proc = subprocess.Popen([self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        client.close()
        return self

    def flushall(self) -> None:
        import redis
        with redis.Redis.from_url(self.url) as client:
            client.flushall()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


class Forwarder:
    """A loopback TCP forwarder to a server: `cut()` drops every connection and refuses new ones (the
    server down), `restore()` listens again on the same port (the server back)."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.port = free_port()
        self._conns: list[socket.socket] = []
        self._server: socket.socket | None = None
        self._lock = threading.Lock()

    def restore(self) -> None:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port))
        server.listen(64)
        self._server = server
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            if self._server is not server:  # accepted as it was being cut
                client.close()
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        if self._server is not None:
            try:
                self._server.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread: close alone would not
            except OSError:
                pass
            self._server.close()
            self._server = None
        with self._lock:
            conns, self._conns = self._conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


class Balancer:
    """A round-robin HTTP load balancer on loopback, as a fleet runs in front of its proxies: request i
    goes to backends[i % n], whole (these tests' answers are short). `delay`: seconds the upstream
    (tests/upstream.py) waits before answering, as an LLM does: a proxy hands a flow's end to its
    analysis within 50 ms, and a real answer takes longer than that. `before(n)`: called before request
    n goes on (a test waits there for the analysis of the ones before, as seconds-long answers would)."""

    def __init__(self, backends: list[str], delay: float = 0.0, before: Callable[[int], None] | None = None) -> None:
        import http.server

        import httpx

        self.backends, self.count = backends, 0
        lock = threading.Lock()
        balancer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                with lock:
                    n = balancer.count
                    backend = balancer.backends[n % len(balancer.backends)]
                    balancer.count += 1
                if before is not None:
                    before(n)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
                if delay:
                    headers["x-upstream-delay"] = str(delay)
                r = httpx.post(backend + self.path, content=body, headers=headers, timeout=30)
                self.send_response(r.status_code)
                for k, v in r.headers.items():
                    if k.lower() not in ("content-length", "transfer-encoding", "connection", "content-encoding"):
                        self.send_header(k, v)
                self.send_header("content-length", str(len(r.content)))
                self.end_headers()
                self.wfile.write(r.content)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Balancer:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
