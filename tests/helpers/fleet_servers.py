"""Real Redis and PostgreSQL for the fleet tests: the project's running servers (URLs from
PREFIXGUARD_TEST_REDIS / PREFIXGUARD_TEST_POSTGRES), each test run in a key prefix and a schema of its
own, removed afterwards. Outages are never staged on those shared servers: a private redis-server
process is flushed or stopped instead, and a private PostgreSQL cluster (initdb in a temporary folder)
is stopped and restarted for real."""
from __future__ import annotations

import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

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
    from prefixguard.capture.store import open_capture
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


def pg_bindir() -> Path | None:
    """The folder of initdb and pg_ctl: pg_config's, else the newest /usr/lib/postgresql/*/bin."""
    found = []
    if pg_config := shutil.which("pg_config"):
        try:
            found.append(Path(subprocess.run([pg_config, "--bindir"], capture_output=True, text=True,
                                             timeout=5, check=True).stdout.strip()))
        except (OSError, subprocess.SubprocessError):
            pass
    versions = Path("/usr/lib/postgresql").glob("*/bin")
    found += sorted(versions, key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0, reverse=True)
    return next((d for d in found if (d / "initdb").is_file() and (d / "pg_ctl").is_file()), None)


class PrivatePostgres:
    """A PostgreSQL cluster of this test's own (trust auth, 127.0.0.1, a free port, a temporary folder),
    to stop, start and restart for real. PostgreSQL refuses to run as root: as root it runs as the
    `postgres` system user (through runuser). `close()` stops it and removes its folder."""

    def __init__(self) -> None:
        bindir = pg_bindir()
        if bindir is None:
            unavailable("PostgreSQL server binaries",
                        FileNotFoundError("no initdb/pg_ctl (pg_config --bindir, /usr/lib/postgresql/*/bin)"))
        self.bindir, self.port, self.as_user = bindir, free_port(), []
        if os.geteuid() == 0:
            runuser = shutil.which("runuser")
            try:
                owner = pwd.getpwnam("postgres")
            except KeyError as err:
                unavailable("the postgres system user (PostgreSQL does not run as root)", err)
            if runuser is None:
                unavailable("runuser", FileNotFoundError("runuser not on PATH (needed to run PostgreSQL as postgres)"))
            self.as_user = [runuser, "-u", "postgres", "--"]
        self.dir = Path(tempfile.mkdtemp(prefix="pg-"))  # short: the socket path must fit in 107 bytes
        if self.as_user:
            os.chown(self.dir, owner.pw_uid, owner.pw_gid)
        self.data = self.dir / "data"
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        try:
            self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync", timeout=60)
        except BaseException:
            self.close()
            raise

    def _run(self, exe: str, *args: str, timeout: float = 15) -> None:
        done = subprocess.run([*self.as_user, str(self.bindir / exe), *args], capture_output=True, text=True,
                              timeout=timeout, cwd=self.dir)
        if done.returncode:
            log = self.dir / "log"
            tail = log.read_text(errors="replace")[-2000:] if log.is_file() else ""
            raise RuntimeError(f"{exe} {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}\n{tail}")

    def _ctl(self, action: str, *args: str) -> None:
        # -l: the server's output goes to a file, not to a pipe of ours that would stay open
        self._run("pg_ctl", action, "-D", str(self.data), "-l", str(self.dir / "log"), "-w", "-t", "10", *args,
                  timeout=20)

    def start(self) -> PrivatePostgres:
        self._ctl("start", "-o", f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1")
        return self

    def stop(self) -> None:
        self._ctl("stop", "-m", "fast")        # as an operator stops it: sessions ended, connections dropped

    def restart(self) -> None:
        self._ctl("restart", "-m", "fast")

    def close(self) -> None:
        if (self.data / "postmaster.pid").is_file():
            try:
                self._ctl("stop", "-m", "immediate")
            except (RuntimeError, subprocess.SubprocessError):
                pass
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> PrivatePostgres:
        try:
            return self.start()
        except BaseException:  # a server that did not start still leaves a folder (and maybe a process)
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()


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
