"""Fleet mode for real: `prefixguard proxy` processes sharing one Redis index and one PostgreSQL store
(the project's running servers, a key prefix and a schema of this test's own), behind a round-robin
load balancer, with the real SDK agent of the demo and an upstream that replays recorded answers.

- The demo agent's sessions (as written, and fixed) through two proxies give the verdicts and causes
  they get through one proxy alone.
- `kill -9` of one proxy mid-run: the other carries on; no row either served is lost.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from helpers.fleet_servers import Balancer, pg_rows, pg_schema, redis_prefix
from helpers.processes import listening
from helpers.upstream import Upstream

from prefixguard.capture.store import open_capture
from prefixguard.proxy.redact import tenant_of
from prefixguard.replay import sources

ROOT = Path(__file__).resolve().parent.parent
AGENT = ROOT / "prefixguard" / "cli" / "demo_app.py"
LATENCY_S = 0.2   # how long the upstream takes to answer: an LLM's answer takes longer than a proxy's hand-off
pytestmark = pytest.mark.slow


@contextmanager
def proxy(upstream: str, *args: str, output: list[str] | None = None) -> Iterator[tuple[str, subprocess.Popen]]:
    """`prefixguard proxy` in a subprocess: (its URL, the process). Stopped with SIGINT unless killed."""
    exe = Path(sys.executable).with_name("prefixguard")
    proc = subprocess.Popen([str(exe), "proxy", "--port", "0", "--upstream", upstream, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        yield listening(proc), proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=30)
        if output is not None:
            output += rest.splitlines()


def rows_of(store: str, tenant: str, n: int, timeout: float = 20.0) -> list[dict]:
    """The tenant's rows in arrival order, once n are there (the analysis writes behind the flows)."""
    deadline = time.monotonic() + timeout
    while True:
        if store.startswith("postgresql://"):
            rows = pg_rows(store)
        else:
            with open_capture(store) as s:
                rows = list(s.rows())
        mine = [r for r in rows if r["tenant"] == tenant]
        if len(mine) >= n or time.monotonic() > deadline:
            return mine
        time.sleep(0.1)


@pytest.fixture(scope="module")
def fleet(shared_data: Path):
    with redis_prefix() as index, pg_schema() as store, Upstream(shared_data / "recorded") as up:
        yield index, store, up


def stored_count(store: str) -> int:
    with open_capture(store) as s:
        return len(s)


def warm(store: str, up: Upstream, proxies: list[str]) -> None:
    """One request through each proxy, each stored before the next is sent: their analysis processes are up (a
    proxy judges in the order its analysis runs, and one still starting would judge a session's first request
    last), and the shared token scale learnt from them in the order one proxy would learn it."""
    key = f"sk-ant-api03-warmup-{'x' * 24}"
    tenant = tenant_of({"x-api-key": key})
    before = len(rows_of(store, tenant, 0))  # an earlier test's warm-ups, in the module's shared store
    for n, url in enumerate(proxies, before + 1):
        assert httpx.post(url + "/v1/messages", json={"model": "claude-sonnet-4-5", "max_tokens": 1,
                                                      "messages": [{"role": "user", "content": "hi"}]},
                          headers={"x-api-key": key}, timeout=30).status_code == 200
        assert len(rows_of(store, tenant, n)) == n


def agent(base_url: str, key: str, fixed: bool) -> None:
    done = subprocess.run([sys.executable, str(AGENT), "--base-url", base_url, "--api-key", key,
                           *(["--fixed"] if fixed else [])], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_demo_agent_through_two_proxies_is_judged_as_through_one(fleet, tmp_path):
    """The agent's sessions through a balancer over two proxies; then the very bytes it sent (its system
    prompt holds the time: a second run would send others), in the same order, through one proxy alone."""
    index, store, up = fleet
    keys = {fixed: f"sk-ant-api03-fleet{int(fixed)}-{'x' * 24}" for fixed in (False, True)}
    lines: list[str] = []
    with proxy(up.url, "--index", index, "--store", store, output=lines) as (a, _), \
            proxy(up.url, "--index", index, "--store", store, output=lines) as (b, _):
        warm(store, up, [a, b])
        stored = stored_count(store)

        def settled(n: int) -> None:
            """Request n goes on once the n before it are analysed and stored: a session whose answers
            take longer than the proxies' analysis lags, whatever the load on this machine."""
            deadline = time.monotonic() + 30
            while stored_count(store) < stored + n and time.monotonic() < deadline:
                time.sleep(0.02)

        lb = Balancer([a, b], delay=LATENCY_S, before=settled).__enter__()
        for fixed, key in keys.items():
            agent(lb.url, key, fixed)
        lb.__exit__()
        assert lb.count >= 16   # 4 turns per SDK, 2 SDKs, 2 runs
    sent = {fixed: rows_of(store, tenant_of({"x-api-key": key}), 8) for fixed, key in keys.items()}
    single = str(tmp_path / "one.db")
    with proxy(up.url, "--store", single) as (one, _):
        warm(single, up, [one, one])  # the same traffic: the warm-ups teach the model's token scale too
        for fixed, key in keys.items():
            for row in sent[fixed]:
                auth = {"x-api-key": key} if row["api"] == "anthropic" else {"authorization": f"Bearer {key}"}
                r = httpx.post(one + row["path"], content=json.dumps(row["request"]).encode(), timeout=30,
                               headers={**auth, "content-type": "application/json", "x-upstream-delay": str(LATENCY_S)})
                assert r.status_code == 200
    for fixed, key in keys.items():
        tenant = tenant_of({"x-api-key": key})
        shared = sent[fixed]
        alone = rows_of(single, tenant, len(shared))
        assert len(alone) == len(shared) >= 8
        assert [r["request"] for r in alone] == [r["request"] for r in shared]
        judged = [[(r["verdict"], r["cause"], r["expected_cached"]) for r in rows] for rows in (alone, shared)]
        assert judged[0] == judged[1], fixed
        assert not any(r["degraded"] for r in shared)
        if not fixed:   # the agent as written breaks its prefix
            assert any(v == "miss_prefix_changed" for v, _, _ in judged[0])
    assert not any("unreachable" in line for line in lines)


def test_kill_9_of_one_proxy_loses_no_row(fleet, shared_data):
    index, store, up = fleet
    recorded = shared_data / "recorded"
    folder = recorded / "openllmetry" / "test_prompt_caching_test_anthropic_prompt_caching_legacy"
    trace = sources.load(folder)
    requests = trace.requests * 4              # one session, long enough to kill a proxy in its middle
    key = f"sk-ant-api03-kill9-{'x' * 24}"
    tenant = tenant_of({"x-api-key": key})
    served: dict[str, list[str]] = {"a": [], "b": []}
    with proxy(up.url, "--index", index, "--store", store) as (a, killed), \
            proxy(up.url, "--index", index, "--store", store) as (b, _):
        warm(store, up, [a, b])
        for i, req in enumerate(requests):
            name = "a" if i % 2 == 0 and killed.poll() is None else "b"
            url = a if name == "a" else b
            test_id = f"kill9-{i}"
            r = httpx.post(url + (req.path or "/v1/messages"), json=req.body, timeout=30,
                           headers={"x-api-key": key, "x-test-id": test_id,
                                    "x-replay": f"openllmetry/{folder.name}/{req.ref[:4]}"})
            assert r.status_code == 200
            served[name].append(test_id)
            if i == len(requests) // 2:
                time.sleep(0.5)                # what it served is handed to its analysis (batched within 50 ms)
                killed.kill()                  # SIGKILL, mid-run
                killed.wait()
        assert served["a"] and len(served["b"]) > len(served["a"])
        rows = rows_of(store, tenant, len(requests))
    assert len(rows) == len(requests) and len({r["id"] for r in rows}) == len(requests)
    assert all(r["status"] == 200 and r["verdict"] for r in rows)
