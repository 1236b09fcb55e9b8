"""The LiteLLM callback for real: the litellm SDK calls the recorded-response upstream on loopback, the
callback runs the proxy's analysis in-process, and the capture store holds the rows and verdicts."""
from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of LiteLLM's price list from the internet
litellm = pytest.importorskip("litellm") if not os.environ.get("CI") else __import__("litellm")

from helpers.otlp_receiver import OtlpReceiver  # noqa: E402
from helpers.proxy import LEGACY, OPENAI_STREAM, STREAM  # noqa: E402
from helpers.upstream import Upstream  # noqa: E402

from prefixguard.capture.store import open_store  # noqa: E402
from prefixguard.integrations.litellm import PrefixGuardLogger  # noqa: E402
from prefixguard.proxy.redact import tenant_of  # noqa: E402

CLAUDE = "anthropic/claude-3-5-sonnet-20240620"
KEY = "sk-ant-api03-litellm0001-" + "x" * 24


def request(recorded: Path, cassette: str) -> dict[str, Any]:
    body = json.loads((recorded / cassette / "0001.request.json").read_text())
    body.pop("model")
    body.pop("stream", None)
    return body


def rows_of(db: Path, n: int, timeout: float = 20.0) -> list[Any]:
    """The store's records once n are written (LiteLLM runs sync callbacks on its own threads)."""
    deadline = time.monotonic() + timeout
    while True:
        with open_store(db) as store:
            recs = list(store.records())
        if len(recs) >= n or time.monotonic() > deadline:
            return recs
        time.sleep(0.05)


@pytest.fixture()
def setup(shared_data: Path, tmp_path: Path):
    db = tmp_path / "capture.db"
    lines: list[str] = []
    with OtlpReceiver() as receiver, Upstream(shared_data / "recorded") as up:
        logger = PrefixGuardLogger(str(db), otlp_endpoint=receiver.url, console=lines.append)
        litellm.callbacks = [logger]
        try:
            yield up, db, shared_data / "recorded", lines, receiver, logger
        finally:  # LiteLLM copies its callbacks into lists of its own: out of each of them
            for name in ("callbacks", "input_callback", "success_callback", "failure_callback",
                         "_async_success_callback", "_async_failure_callback"):
                setattr(litellm, name, [c for c in getattr(litellm, name) if c is not logger])
            logger.close()


def test_sdk_calls_get_the_proxys_verdicts(setup) -> None:
    up, db, recorded, lines, receiver, logger = setup
    for stamp in ("2026-12-02T16:00:00Z", "2026-12-02T16:00:07Z"):
        body = request(recorded, LEGACY)
        body["system"][0]["text"] = f"Current time: {stamp}. " + body["system"][0]["text"]
        litellm.completion(model=CLAUDE, api_base=up.url, api_key=KEY, **body)
    chunks = list(litellm.completion(model="openai/gpt-4o", api_base=up.url + "/v1", api_key=KEY, stream=True,
                                     **request(recorded, OPENAI_STREAM)))
    assert chunks
    recs = rows_of(db, 3)
    assert [r.verdict for r in recs[:2]] == ["cold", "miss_prefix_changed"]
    cold, miss, stream = recs
    assert miss.cause.startswith("volatile_content") and "/system/0" in miss.cause
    assert miss.previous_id == cold.id and miss.reprefill_tokens > 0 and miss.cost_usd > 0
    assert (cold.api, cold.path, cold.upstream) == ("anthropic", "/v1/messages", up.url)
    # the provider's own body, read as the proxy reads it
    assert cold.usage.cache_write_5m == 1163 and cold.usage.reported
    assert cold.tenant == tenant_of({"x-api-key": KEY})               # the same tenant the proxy gives that key
    assert (stream.api, stream.path, stream.model) == ("openai-chat", "/v1/chat/completions", "gpt-4o")
    assert stream.usage.prompt_total == 364 and stream.usage.reported
    assert 0 < stream.ttft_s <= stream.total_s
    assert KEY not in json.dumps([r.row() for r in recs]) and KEY not in "".join(lines)
    assert len(lines) == 3 and "miss_prefix_changed" in lines[1]
    spans = receiver.wait(3)   # the same telemetry as the proxy's
    assert sorted(s.attributes["prefixguard.verdict"] for s in spans) == sorted(r.verdict for r in recs)
    assert {s.resource["service.name"] for s in spans} == {"prefixguard-litellm"}


def test_async_stream_failure_each_once(setup) -> None:
    up, db, recorded, lines, _, _ = setup

    async def calls() -> None:
        reply = await litellm.acompletion(model=CLAUDE, api_base=up.url, api_key=KEY, **request(recorded, LEGACY))
        assert reply.usage.prompt_tokens == 1167
        stream = await litellm.acompletion(model=CLAUDE, api_base=up.url, api_key=KEY, stream=True,
                                           **request(recorded, STREAM))
        async for _ in stream:
            pass
        with pytest.raises(litellm.InternalServerError):
            await litellm.acompletion(model="openai/gpt-4o", api_base=up.url + "/v1", api_key=KEY, max_retries=0,
                                      messages=[{"role": "user", "content": "hi"}],
                                      extra_headers={"x-upstream-status": "500"})
        deadline = time.monotonic() + 20   # LiteLLM's logging tasks run on this loop after each call returns
        while len(rows_of(db, 3, timeout=0)) < 3 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
    asyncio.run(calls())
    recs = rows_of(db, 3)
    assert len(recs) == 3        # each call analysed once, though LiteLLM has sync and async hooks
    plain, streamed, failed = sorted(recs, key=lambda r: r.ts)
    assert plain.usage.prompt_total == 1167 and plain.verdict == "cold"
    # LiteLLM's assembled usage, in OpenAI's shape: the prompt total and reads, not Anthropic's writes
    assert (streamed.usage.prompt_total, streamed.usage.cache_read, streamed.usage.output) == (1169, 0, 201)
    assert streamed.ttft_s is not None and streamed.ttft_s <= streamed.total_s
    assert (failed.status, failed.verdict) == (500, "error") and "InternalServerError" in failed.error


def test_a_failing_analysis_never_reaches_the_caller(setup, caplog: pytest.LogCaptureFixture) -> None:
    up, db, recorded, _, _, logger = setup
    logger.analyzer.store.close()           # every write now fails
    reply = litellm.completion(model=CLAUDE, api_base=up.url, api_key=KEY, **request(recorded, LEGACY))
    assert reply.usage.prompt_tokens == 1167
    deadline = time.monotonic() + 10
    while "analysis of LiteLLM call" not in caplog.text and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "analysis of LiteLLM call" in caplog.text


def test_litellm_proxy_handler_from_the_environment(tmp_path: Path) -> None:
    """LiteLLM's proxy names `prefixguard.integrations.litellm.handler` in its config: one callback per
    process, configured by the environment, made on first use."""
    import subprocess
    import sys

    code = ("import litellm, prefixguard.integrations.litellm as m; h = m.handler; "
            "assert h is m.handler and isinstance(h, litellm.integrations.custom_logger.CustomLogger); "
            "print(h.analyzer.store.path, h.analyzer.telemetry.metrics is not None)")
    port = str(__import__("test_telemetry").free_port())
    env = {**os.environ, "PREFIXGUARD_STORE": str(tmp_path / "env.db"), "PREFIXGUARD_METRICS_PORT": port}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [str(tmp_path / "env.db"), "True"]
