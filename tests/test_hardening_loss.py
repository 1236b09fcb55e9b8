"""Issue 28, item 4: no completed response goes unrecorded when either process is killed (-9) under
load. The proxy runs as a user starts it (`prefixguard proxy --store`), clients on loopback send real
recorded requests, each with its own key (so each has its own tenant in the store), for a bounded
count; midway the analysis process (or the proxy itself) is killed. Every response a client received
whole must then have its row."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from helpers.processes import listening
from helpers.upstream import Upstream

from prefixguard.capture.store import open_store
from prefixguard.proxy.redact import tenant_of
from prefixguard.utils.errors import InputError

LEGACY_JSON = "openllmetry/test_prompt_caching_test_anthropic_prompt_caching_legacy"
CLIENTS = 6
PER_CLIENT = 40        # 240 requests in all: bounded in count and, with the timeouts below, in time


def start_proxy(upstream: str, db: Path) -> subprocess.Popen:
    exe = Path(sys.executable).with_name("prefixguard")
    return subprocess.Popen([str(exe), "proxy", "--port", "0", "--upstream", upstream, "--store", str(db), "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def children(pid: int) -> list[int]:
    """The child processes of pid, by each of its threads (a thread that ends while they are read has none)."""
    found = []
    for thread in Path(f"/proc/{pid}/task").iterdir():
        try:
            found += [int(c) for c in thread.joinpath("children").read_text().split()]
        except FileNotFoundError:  # the thread ended after it was listed
            continue
    return found


def the_worker(pid: int, seconds: float = 30.0, killed: tuple[int, ...] = ()) -> int:
    """The proxy's one analysis worker, waiting for the supervisor to have started it (after a kill, a
    loaded machine takes a while to start the next, and the killed one may still be listed until it is
    reaped: a worker killed before is never the one)."""
    deadline = time.monotonic() + seconds
    while len(found := [c for c in children(pid) if c not in killed]) != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    [worker] = found
    return worker


def load(url: str, body: dict, kill: threading.Event, at: int, now: Callable[[], None] | None = None) -> list[str]:
    """Send CLIENTS x PER_CLIENT requests; set `kill` once `at` have completed (and call `now` at once, in
    the client's thread, the moment a response has come). The keys of those whose response came back
    whole (status 200 and a JSON body)."""
    done: list[str] = []
    lock = threading.Lock()

    def client(n: int) -> None:
        with httpx.Client(timeout=10) as http:
            for i in range(PER_CLIENT):
                key = f"sk-ant-api03-loss-{n:02d}-{i:03d}-" + "z" * 20
                try:
                    r = http.post(url + "/v1/messages", json=body, headers={"x-api-key": key})
                    if r.status_code == 200 and json.loads(r.content):
                        with lock:
                            done.append(key)
                            if len(done) >= at and not kill.is_set():
                                kill.set()
                                if now is not None:   # within microseconds of the response: its hand-off is in flight
                                    now()
                except (httpx.HTTPError, ValueError):   # the proxy was killed under this request
                    return

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return done


def stored_tenants(db: Path) -> set[str]:
    try:
        with open_store(db) as store:
            return {r["tenant"] for r in store.rows()}
    except InputError:
        return set()


def wait_for_rows(db: Path, keys: list[str], seconds: float) -> set[str]:
    """The keys of `keys` with no row yet, waiting up to `seconds` for the analysis to catch up."""
    want = {tenant_of({"x-api-key": k}): k for k in keys}
    deadline = time.monotonic() + seconds
    while True:
        missing = set(want) - stored_tenants(db)
        if not missing or time.monotonic() > deadline:
            return {want[t] for t in missing}
        time.sleep(0.3)


@pytest.fixture
def body(shared_data: Path) -> dict:
    return json.loads((shared_data / "recorded" / LEGACY_JSON / "0001.request.json").read_text())


@pytest.mark.parametrize("pad", [0, 80 << 10], ids=["small", "over-64KB"])   # the spooler thread's path too
def test_kill_9_of_the_analysis_loses_no_row(shared_data: Path, tmp_path: Path, body: dict, pad: int) -> None:
    if pad:
        body = body | {"metadata": {"user_id": "x" * pad}}
    db = tmp_path / "c.db"
    with Upstream(shared_data / "recorded") as up:
        proxy = start_proxy(up.url, db)
        try:
            url = listening(proxy)
            kill = threading.Event()
            killed: list[int] = []

            def killer() -> None:
                for _ in range(2):   # twice: the second worker inherits the first's unfinished flows
                    if not kill.wait(60):
                        return
                    kill.clear()
                    worker = the_worker(proxy.pid, killed=tuple(killed))
                    os.kill(worker, signal.SIGKILL)
                    killed.append(worker)

            t = threading.Thread(target=killer)
            t.start()
            done = load(url, body, kill, at=60)
            kill.set()
            t.join(timeout=30)
            assert len(killed) == 2 and len(done) == CLIENTS * PER_CLIENT
            missing = wait_for_rows(db, done, 60)
        finally:
            proxy.send_signal(signal.SIGINT)
            proxy.communicate(timeout=30)
    assert not missing, f"{len(missing)} of {len(done)} completed responses have no row"


def test_kill_9_of_the_proxy_loses_no_row(shared_data: Path, tmp_path: Path, body: dict) -> None:
    db = tmp_path / "c.db"
    with Upstream(shared_data / "recorded") as up:
        proxy = start_proxy(up.url, db)
        try:
            url = listening(proxy)
            worker = the_worker(proxy.pid)
            done = load(url, body, threading.Event(), at=120, now=lambda: os.kill(proxy.pid, signal.SIGKILL))
            proxy.wait(timeout=30)
            # the analysis, orphaned, reads what the proxy had not sent down the pipe from the spool, then ends
            deadline = time.monotonic() + 60
            while Path(f"/proc/{worker}").exists() and time.monotonic() < deadline:
                try:
                    if Path(f"/proc/{worker}/stat").read_text().split()[2] == "Z":
                        break
                except OSError:
                    break
                time.sleep(0.2)
            missing = wait_for_rows(db, done, 10)
        finally:
            if proxy.poll() is None:
                proxy.kill()
            proxy.communicate(timeout=30)
    assert len(done) >= 120
    assert not missing, f"{len(missing)} of {len(done)} completed responses have no row"



# ---- the hand-over itself, on a Worker with an analysis that counts: every flow once

class Counting:
    """An analysis that writes each flow it stores to a log (unpickled by the worker process from here)."""

    def __init__(self, log: str) -> None:
        self.log = log

    def request(self, flow: object) -> None:
        return None

    def finish(self, resp: object) -> None:
        time.sleep(0.002)   # slow enough that the kill lands with flows in flight and in the pipe
        with open(self.log, "a") as f:
            f.write(f"{resp.id}\n")

    def secrets_of(self, flow_id: str) -> list[str]:
        return []

    def close(self) -> None:
        pass


def test_a_killed_analysis_hands_every_flow_over_once(tmp_path: Path) -> None:
    import asyncio

    from prefixguard.proxy.analysis import packed
    from prefixguard.proxy.worker import Worker

    log = tmp_path / "stored.log"
    ids = [f"flow-{i:04d}" for i in range(300)]

    async def scenario() -> None:
        worker = Worker(Counting, {"log": str(log)}, lambda *a: None)
        first = worker.pid
        for i, flow in enumerate(ids):
            worker.submit("request", packed("request", id=flow, ts=1.0, sent=0.0, path="/v1/messages",
                                            upstream=("http", "x", 80), fields=(), routed=None),
                          b"{}" * (i % 3000), None, 0.005)
            if i >= 5:   # each flow ends five requests later: some are always open
                worker.submit("finish", packed("finish", id=ids[i - 5], status=200, headers_at=0.0, ended_at=0.0,
                                               encoding=None, error=None, chunks=None), b"", None, 0.05, durable=True)
            if i == 150:   # once the analysis is busy storing, with flows open and others in the pipe
                deadline = time.monotonic() + 60
                while (not log.exists() or len(log.read_text().split()) < 60) and time.monotonic() < deadline:
                    await asyncio.sleep(0.01)
                os.kill(worker.pid, signal.SIGKILL)
                while worker.alive and time.monotonic() < deadline + 10:   # seen when its pipes close
                    await asyncio.sleep(0.01)
            if not worker.alive:   # as the addon's _start does
                resend = worker.unfinished()
                worker.release()
                worker = Worker(Counting, {"log": str(log)}, lambda *a: None, resend)
            await asyncio.sleep(0.001)
        for flow in ids[-5:]:
            worker.submit("finish", packed("finish", id=flow, status=200, headers_at=0.0, ended_at=0.0,
                                           encoding=None, error=None, chunks=None), b"", None, 0.05, durable=True)
        assert worker.pid != first   # the kill was seen and the analysis replaced
        await worker.close()

    asyncio.run(asyncio.wait_for(scenario(), 120))
    stored = log.read_text().split()
    assert set(stored) == set(ids)
    # at most the one flow stored in the instant of the kill
    assert len(stored) - len(set(stored)) <= 1, [f for f in set(stored) if stored.count(f) > 1]


# ---- HTTP/1.1 chunked trailers (item 9): the message passes whole, never a hang or an empty answer

ANSWER = json.dumps({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                     "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
                     "usage": {"input_tokens": 12, "output_tokens": 1}}).encode()
REQUEST = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 5,
                      "messages": [{"role": "user", "content": "hi"}]}).encode()


def chunked(head: bytes, body: bytes, trailers: bool) -> bytes:
    announce = b"trailer: x-checksum\r\n" if trailers else b""
    return (head + b"transfer-encoding: chunked\r\n" + announce + b"\r\n" + b"%x\r\n%s\r\n0\r\n" % (len(body), body)
            + (b"x-checksum: c2hhMjU2\r\n" if trailers else b"") + b"\r\n")


def read_message(sock: socket.socket) -> bytes:
    """One chunked HTTP/1.1 message from `sock`, to its last chunk (raises on timeout or early close)."""
    data = b""
    while not (b"\r\n\r\n" in data and data.endswith(b"0\r\n\r\n")):
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError(f"closed before the message ended: {data[-80:]!r}")
        data += chunk
    return data


class TrailerUpstream:
    """A raw loopback HTTP/1.1 server: keeps each request's bytes, answers chunked, with trailers when
    the request asks (x-answer-trailers: 1)."""

    def __init__(self) -> None:
        self.got: list[bytes] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._connection, args=(conn,), daemon=True).start()

    def _connection(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        with conn:
            try:
                while True:
                    request = read_message(conn)
                    self.got.append(request)
                    conn.sendall(chunked(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n", ANSWER,
                                         b"x-answer-trailers: 1" in request))
            except (OSError, AssertionError):
                return


def test_chunked_trailers_pass_through(tmp_path: Path) -> None:
    """Trailers on the request, the response or both, on a path analysed and one not: each message
    reaches the other side whole and ended (two on one connection), its trailer fields dropped."""
    from prefixguard.proxy.addon import PrefixGuard
    from prefixguard.proxy.serve import ProxyThread

    up = TrailerUpstream()
    db = tmp_path / "c.db"
    keys = []
    with ProxyThread([up.url], addon=PrefixGuard(console=lambda _: None), store=str(db)) as px:
        for path in ("/v1/messages", "/v1/other"):
            for request_trailers, response_trailers in ((True, False), (False, True), (True, True)):
                key = f"sk-ant-trailers-{path[4:]}-{request_trailers:d}{response_trailers:d}-{'z' * 20}"
                keys += [key] if path == "/v1/messages" else []
                head = (f"POST {path} HTTP/1.1\r\nhost: x\r\nx-api-key: {key}\r\ncontent-type: application/json\r\n"
                        f"x-answer-trailers: {response_trailers:d}\r\n").encode()
                with socket.create_connection(("127.0.0.1", px.port), timeout=10) as sock:
                    for _ in range(2):   # two on one connection: the first ended where it should
                        sent = len(up.got)
                        sock.sendall(chunked(head, REQUEST, request_trailers))
                        answer = read_message(sock)
                        assert answer.startswith(b"HTTP/1.1 200") and ANSWER in answer, answer
                        assert b"x-checksum: c2hh" not in answer
                        assert len(up.got) == sent + 1 and REQUEST in up.got[-1]
                        assert b"x-checksum: c2hh" not in up.got[-1]
    assert not wait_for_rows(db, keys, 15)   # the analysed flows were stored
