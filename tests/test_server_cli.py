"""`prefixguard engine serve`: --port 0 prints the real port and serves; bad input is one line, exit 2."""
from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys

import httpx
import pytest

SERVE = [sys.executable, "-c", "from prefixguard.cli import main; main()", "engine", "serve"]


@pytest.mark.slow
def test_port_zero_prints_the_real_port_and_serves() -> None:
    proc = subprocess.Popen([*SERVE, "--port", "0", "--cache-policy", "auto"], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        url = re.search(r"listening on (http://\S+)", line).group(1)
        assert httpx.get(url + "/health", timeout=30).json()["cache_policy"] == "auto"
        # a model name it does not serve: 404 in the provider's shape, as the APIs answer (not echoed)
        ask = {"max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}
        for model, code in (("claude-sonnet-4-5", 200), ("tiny", 200), ("claude-nonesuch-1", 404)):
            got = httpx.post(url + "/v1/messages", json={"model": model, **ask}, timeout=60)
            assert got.status_code == code, (model, got.text)
        missing = got.json()
        assert missing["type"] == "error" and missing["error"]["type"] == "not_found_error"
        chat = httpx.post(url + "/v1/chat/completions", json={"model": "nonesuch", **ask}, timeout=60)
        assert chat.status_code == 404 and chat.json()["error"]["code"] == "model_not_found"
        # max_tokens 0 pre-warms the cache; the API refuses it streamed, with thinking on, or a tool forced
        assert httpx.post(url + "/v1/messages", json={"model": "tiny", **ask, "max_tokens": 0}, timeout=60).json()[
            "content"] == []
        for extra in ({"stream": True}, {"thinking": {"type": "enabled", "budget_tokens": 1024}},
                      {"tool_choice": {"type": "any"}, "tools": [{"name": "t", "input_schema": {"type": "object"}}]}):
            refused = httpx.post(url + "/v1/messages", json={"model": "tiny", **ask, "max_tokens": 0, **extra},
                                 timeout=60)
            assert refused.status_code == 400 and "pre-warms" in refused.json()["error"]["message"], extra
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def test_a_taken_port_is_a_usage_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([*SERVE, "--port", str(port)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr and "Traceback" not in done.stderr


def test_unknown_model_and_policy_are_usage_errors() -> None:
    done = subprocess.run([*SERVE, "--model", "huge", "--port", "0"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "unknown model preset 'huge'" in done.stderr and "Traceback" not in done.stderr
    done = subprocess.run([*SERVE, "--cache-policy", "cohere"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "cohere" in done.stderr
