"""One verdict per request, shown the same everywhere: ONE sequence of requests, each answered with the usage
its provider's contract predicts, goes through the real proxy (mitmproxy, a loopback upstream, a real SQLite
store), `report`, `diff`, the testing API and the pytest plugin; every surface must name the same verdict
with the same reused and re-prefilled tokens."""
from __future__ import annotations

import hashlib
import http.server
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers.cli import CliRunner
from helpers.proxy import Clock, tenant_rows

from prefixguard.cli import main
from prefixguard.judge.policies import Expected, make_policy, policy_name
from prefixguard.proxy.addon import PrefixGuard
from prefixguard.proxy.serve import ProxyThread
from prefixguard.testing import PrefixBroken, assert_prefix_stable
from prefixguard.wire import parse_request

ROOT = Path(__file__).resolve().parents[1]
KEY = "sk-ant-api03-verdicts0001-" + "x" * 24
WARM_KEY = "sk-ant-api03-verdicts0002-" + "x" * 24
UPSTREAM_DELAY_S = 1.0   # the request-side verdict is ready long before the response headers


def _tool(i: int) -> dict[str, Any]:
    return {"name": f"tool_{i}", "description": f"Tool number {i} looks up records of kind {i}. " * 40,
            "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}


def _body(stamp: str, turns: int) -> dict[str, Any]:
    """Tools (cached, over the minimum), a cached system prompt that renders the time, `turns` questions."""
    tools = [_tool(i) for i in range(4)]
    tools[-1]["cache_control"] = {"type": "ephemeral"}
    messages: list[dict[str, Any]] = []
    for k in range(turns):
        messages.append({"role": "user", "content": f"Question {k}: where is order {1000 + k}?"})
        if k < turns - 1:
            messages.append({"role": "assistant", "content": f"Order {1000 + k} shipped."})
    system = "You are the support agent of Acme Outdoor. Refunds within thirty days. " * 90 + f"Now: {stamp}."
    return {"model": "claude-sonnet-4-5", "max_tokens": 64, "tools": tools,
            "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}], "messages": messages}


# An append-only turn (a hit), then the time re-rendered in the cached system prompt (a break).
BODIES = [json.dumps(_body("2026-12-04T10:00:00Z", 1)).encode(), json.dumps(_body("2026-12-04T10:00:00Z", 2)).encode(),
          json.dumps(_body("2026-12-04T10:05:00Z", 3)).encode()]
GAP_S = 10.0


def _contracted_usage(bodies: list[bytes], t0: float) -> list[Expected]:
    """What the provider reports for each request when it keeps its contract, A then B then C."""
    prompts = [parse_request(b) for b in bodies]
    policy = make_policy(policy_name(prompts[0].api, prompts[0].model))
    return [policy.commit(p, t0 + GAP_S * i) for i, p in enumerate(prompts)]


def _answer(e: Expected) -> bytes:
    return json.dumps({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                       "content": [{"type": "text", "text": "Shipped."}], "stop_reason": "end_turn",
                       "stop_sequence": None,
                       "usage": {"input_tokens": e.uncached, "cache_read_input_tokens": e.cache_read,
                                 "cache_creation_input_tokens": e.cache_write, "output_tokens": 2}}).encode()


class _Upstream:
    """A loopback provider that answers each known body with its contracted usage, after a delay."""

    def __init__(self, answers: dict[str, bytes]) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                time.sleep(UPSTREAM_DELAY_S)
                out = answers[hashlib.sha256(body).hexdigest()]
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _console(line: str) -> tuple[str, int, int]:
    """(verdict, reused, re-prefilled) of a console line: "... 200 hit read 3481 write 0 of 3509 ..."."""
    m = re.search(r" 200 (\w+) .*?read (\d+) write \d+ of \d+", line)
    assert m, line
    again = re.search(r"re-prefill ~?(\d+) tok", line)
    return m.group(1), int(m.group(2)), int(again.group(1)) if again else 0


PLUGIN_TEST = '''
import json
from pathlib import Path
try:
    import httpx2 as httpx
except ImportError:
    import httpx

def test_the_sequence(prefix_recorder):
    answer = lambda request: httpx.Response(200, json={"usage": {"input_tokens": 1, "output_tokens": 1}})
    client = prefix_recorder.http_client(transport=httpx.MockTransport(answer))
    for raw in json.loads(Path("bodies.json").read_text()):
        client.post("https://api.anthropic.invalid/v1/messages", content=raw.encode())
'''


def _plugin(tmp_path: Path) -> str:
    """The pytest plugin's account of the sequence: a pytest run that records it and fails on a break."""
    folder = tmp_path / "app"
    folder.mkdir()
    (folder / "bodies.json").write_text(json.dumps([b.decode() for b in BODIES]))
    (folder / "test_app.py").write_text(PLUGIN_TEST)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                          "prefixguard.pytest_plugin", "--prefixguard-fail-on-break"], cwd=folder,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    return run.stdout


@pytest.mark.slow
def test_one_sequence_one_verdict_on_every_surface(tmp_path: Path) -> None:
    clock = Clock()
    t0 = clock.now
    expected = _contracted_usage(BODIES, t0)
    answers = {hashlib.sha256(b).hexdigest(): _answer(e) for b, e in zip(BODIES, expected)}
    db, lines = tmp_path / "capture.db", []
    upstream = _Upstream(answers)
    headers = []
    try:
        with ProxyThread([upstream.url], addon=PrefixGuard(clock=clock, console=lines.append), store=str(db)) as px:
            def send(raw: bytes, key: str) -> httpx.Headers:
                r = httpx.post(f"{px.url}/v1/messages", content=raw, timeout=30,
                               headers={"x-api-key": key, "anthropic-version": "2023-06-01",
                                        "content-type": "application/json"})
                assert r.status_code == 200
                return r.headers
            # another tenant's first request, until its row is stored: the analysis process is up
            send(BODIES[0], WARM_KEY)
            tenant_rows(db, WARM_KEY, 1, 60.0)
            for i, raw in enumerate(BODIES):
                clock.now = t0 + GAP_S * i
                headers.append(send(raw, KEY))
            rows = tenant_rows(db, KEY, 3, 30.0)
    finally:
        upstream.close()

    # the one verdict of each request: the stored row
    stored = [(r["verdict"], r["usage"]["cache_read"], r["reprefill_tokens"] or 0) for r in rows]
    assert [s[0] for s in stored] == ["cold", "hit", "miss_prefix_changed"]
    assert stored[1][1] > 0 and stored[2][1] > 0 and stored[2][2] > 0  # C reads the tools, writes the system again
    cause = rows[2]["cause"]
    assert cause == "volatile_content at /system/0"

    # the response header the proxy added (sent before the usage existed: the contract's verdict)
    said = [(h["x-prefixguard-verdict"], int(h["x-prefixguard-expected-cached"]),
             int(h.get("x-prefixguard-reprefill-tokens", 0))) for h in headers]
    assert said == stored
    assert headers[2]["x-prefixguard-cause"] == cause

    # the console line of each request
    deadline = time.monotonic() + 30
    while len(lines) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(lines) == 4 and [_console(line) for line in lines[-3:]] == stored
    assert f"({cause})" in lines[-1]

    # report: the break counted once with its re-prefill; the requests it lists carry the same verdict
    res = CliRunner().invoke(main, ["report", str(db), "-o", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    [brk] = doc["causes"]
    assert (brk["name"], brk["requests"], brk["reprefill_tokens"]) == ("volatile_content", 1, stored[2][2])
    assert brk["example"]["request"] == rows[2]["id"]
    for row, (name, reused, again) in zip(rows, stored):
        listed = doc["listed"].get(row["id"])
        if listed is not None:
            assert (listed["verdict"], listed["reused_tokens"], listed["reprefill_tokens"]) == (name, reused, again)
    assert rows[2]["id"] in doc["listed"]
    assert doc["fields"]["verdicts"] == {"cold": 2, "hit": 1, "miss_prefix_changed": 1}  # with the other tenant's

    # diff of each request against the one before it
    files = []
    for i, raw in enumerate(BODIES):
        files.append(tmp_path / f"{i}.json")
        files[-1].write_bytes(raw)
    for i in (1, 2):
        res = CliRunner().invoke(main, ["diff", str(files[i - 1]), str(files[i]), "-o", "json"])
        assert res.exit_code == (1 if i == 2 else 0), res.output
        d = json.loads(res.output)
        v = d["verdict"]
        assert (v["verdict"], v["reused_tokens"], v["reprefill_tokens"]) == stored[i]
        assert (d["reused_tokens"], d["reprefill_tokens"], d["broken"]) == (stored[i][1], stored[i][2], i == 2)
        assert i == 1 or v["cause"] == cause

    # the testing API
    v = assert_prefix_stable(BODIES[0], BODIES[1])
    assert (v.verdict, v.reused_tokens, v.reprefill_tokens) == stored[1]
    with pytest.raises(PrefixBroken) as err:
        assert_prefix_stable(BODIES[1], BODIES[2])
    v = err.value.verdict
    assert (v.verdict, v.reused_tokens, v.reprefill_tokens, v.cause) == (*stored[2], cause)

    # the pytest plugin: the test that sent the sequence fails with the same verdict and numbers
    out = _plugin(tmp_path)
    assert f"verdict: miss_prefix_changed ({cause})" in out
    assert f"{stored[2][1]:,} tokens reused, {stored[2][2]:,} to prefill again" in out
    assert "between request 2 and request 3" in out and "between request 1 and request 2" not in out
