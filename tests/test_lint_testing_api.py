"""prefixguard.testing and the pytest plugin, end to end: the real anthropic and openai SDKs against a
loopback server that answers with recorded responses (tests/helpers/upstream.py), the recorder under their HTTP
client, lint reading what it wrote, and the plugin failing a test in a pytest run of examples/pytest/."""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import anthropic
import openai
import pytest
from helpers.cli import CliRunner

from prefixguard.cli import main
from prefixguard.testing import PrefixBroken, Recorder, assert_prefix_stable

from helpers.upstream import Upstream

ROOT = Path(__file__).resolve().parents[1]
PAIRS = ROOT / "examples" / "requests" / "anthropic"
SYSTEM = "You are the support agent of Acme Outdoor. Answer briefly. " * 60


def _pair(cause: str) -> tuple[dict, dict]:
    return tuple(json.loads((PAIRS / cause / f"{x}.json").read_text()) for x in "ab")  # type: ignore[return-value]


def test_assert_prefix_stable_explains_the_break():
    a, b = _pair("volatile_content")
    with pytest.raises(PrefixBroken) as err:
        assert_prefix_stable(a, b)
    text = str(err.value)
    assert text.startswith("prefix broken: volatile content") and "/system/" in text and "fix:" in text
    assert err.value.comparison.causes[0] == "volatile_content"
    assert isinstance(err.value, AssertionError)           # pytest shows it as a failed assertion
    assert err.value.verdict.verdict == "miss_prefix_changed" and err.value.verdict.reprefill_tokens > 0
    assert f"{err.value.verdict.reprefill_tokens:,} to prefill again" in text
    a, b = _pair("append_only")
    v = assert_prefix_stable(json.dumps(a), json.dumps(b).encode())
    assert v.verdict == "hit" and v.reused_tokens > 2000 and v.reprefill_tokens == 0


def _lint(path: Path) -> tuple[int, dict]:
    result = CliRunner().invoke(main, ["lint", "--output-format", "json", str(path)])
    return result.exit_code, json.loads(result.stdout)


def test_recorder_under_the_real_sdks(shared_data: Path, tmp_path: Path):
    recorder = Recorder("support")
    with Upstream(shared_data / "recorded") as up:
        claude = anthropic.Anthropic(api_key="test", base_url=up.url, max_retries=0,
                                     default_headers={"x-test-id": "claude"}, http_client=recorder.http_client())
        history = [{"role": "user", "content": "Where is my order?"}]
        for question in ("Can I return it?", "Thanks"):
            reply = claude.messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=history,
                                           system=[{"type": "text", "text": SYSTEM,
                                                    "cache_control": {"type": "ephemeral"}}])
            history += [{"role": "assistant", "content": reply.content[0].text}, {"role": "user", "content": question}]
        gpt = openai.OpenAI(api_key="test", base_url=up.url + "/v1", max_retries=0,
                            default_headers={"x-test-id": "gpt"}, http_client=recorder.http_client())
        gpt.chat.completions.create(model="gpt-4.1", messages=[{"role": "system", "content": SYSTEM},
                                                               {"role": "user", "content": "Hi"}])
        # the bodies recorded are the bytes the server received
        assert hashlib.sha256(recorder.requests[1].body).hexdigest() == up.seen["claude"]["request_sha"]
        assert hashlib.sha256(recorder.requests[2].body).hexdigest() == up.seen["gpt"]["request_sha"]
    assert [r.path for r in recorder.requests] == ["/v1/messages", "/v1/messages", "/v1/chat/completions"]
    assert recorder.bodies()[1]["messages"][:2] == recorder.bodies()[0]["messages"] + [history[1]]
    assert recorder.breaks() == []                       # an append-only conversation
    path = recorder.write(tmp_path)
    assert path == tmp_path / "support.jsonl" and len(path.read_text().splitlines()) == 3
    code, doc = _lint(tmp_path)
    assert code in (0, 1) and doc["requests"] == 3


def test_recorder_async_client_and_a_break(shared_data: Path, tmp_path: Path):
    recorder = Recorder("async")

    async def conversation(url: str) -> None:
        client = anthropic.AsyncAnthropic(api_key="test", base_url=url, max_retries=0,
                                          http_client=recorder.async_http_client())
        for minute in (1, 2):   # the app renders the time into its cached system prompt
            await client.messages.create(
                model="claude-sonnet-4-5", max_tokens=64,
                system=[{"type": "text", "text": f"{SYSTEM * 2} Now: 2026-12-02T16:0{minute}:00Z",  # over the minimum
                         "cache_control": {"type": "ephemeral"}}],
                messages=[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
                          {"role": "user", "content": f"Question {minute}"}][: 1 + 2 * (minute - 1)])
        await client.close()

    with Upstream(shared_data / "recorded") as up:
        asyncio.run(conversation(up.url))
    (earlier, later, comparison), = recorder.breaks()
    assert (earlier, later, comparison.causes[0]) == (0, 1, "volatile_content")
    assert "between request 1 and request 2 of async" in recorder.explain()
    recorder.write(tmp_path)
    code, doc = _lint(tmp_path)
    assert code == 1 and {"PG101", "PG501"} <= {f["code"] for f in doc["findings"]}


def test_recorder_with_a_mocked_transport_needs_no_network():
    httpx = pytest.importorskip("httpx2")   # the transport flavour the SDKs use today
    calls = []

    def answer(request):
        calls.append(request.url.host)
        return httpx.Response(200, json={"id": "msg", "type": "message", "role": "assistant", "model": "m",
                                         "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
                                         "stop_sequence": None, "usage": {"input_tokens": 3, "output_tokens": 1}})
    recorder = Recorder()
    client = anthropic.Anthropic(api_key="test", base_url="http://api.invalid",
                                 http_client=recorder.http_client(transport=httpx.MockTransport(answer)))
    client.messages.create(model="claude-sonnet-4-5", max_tokens=5, messages=[{"role": "user", "content": "Hi"}])
    client.messages.count_tokens(model="claude-sonnet-4-5", messages=[{"role": "user", "content": "Hi"}])
    assert calls == ["api.invalid", "api.invalid"]
    assert [r.prompt.counts_only for r in recorder.requests] == [False, True]


def test_pytest11_entry_point_is_declared():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    assert project["entry-points"]["pytest11"] == {"prefixguard.pytest_plugin": "prefixguard.pytest_plugin"}
    import prefixguard.pytest_plugin as plugin
    assert callable(plugin.pytest_addoption) and callable(plugin.prefix_recorder)


def _pytest(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "prefixguard.pytest_plugin", *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_plugin_fails_the_example_until_the_fix(tmp_path: Path):
    """examples/pytest: the app renders the time into its system prompt; the plugin fails its test with
    the explanation, the fixed app passes, and --prefixguard-record writes what lint reads."""
    folder = tmp_path / "example"
    shutil.copytree(ROOT / "examples" / "pytest", folder)
    run = _pytest(folder)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "prefix broken between request 1 and request 2" in run.stdout
    assert "volatile content" in run.stdout and "fix: Keep the iso-timestamp" in run.stdout
    shutil.copy(folder / "fixed" / "support_app.py", folder / "support_app.py")
    run = _pytest(folder, "--prefixguard-record", "requests")
    assert run.returncode == 0, run.stdout + run.stderr
    (capture,) = (folder / "requests").iterdir()
    assert len(capture.read_text().splitlines()) == 2
    assert _lint(folder / "requests")[0] == 0
    # the option off: the same broken app passes (the recorder only records)
    shutil.copy(ROOT / "examples" / "pytest" / "support_app.py", folder / "support_app.py")
    (folder / "pytest.ini").write_text("[pytest]\n", "utf-8")
    assert _pytest(folder).returncode == 0
    assert _pytest(folder, "--prefixguard-fail-on-break").returncode == 1
