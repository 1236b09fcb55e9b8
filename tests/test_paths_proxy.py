"""Issue 27 item 6, through the real proxy (mitmproxy + the addon) on loopback with the real SDKs: a
request is analysed wherever its endpoint lives when its path ends like a known shape and its body has
that shape (z.ai's /api/coding/paas/v4, Azure's deployments, a Cloudflare AI gateway, a /proxy/anthropic
prefix); a request forwarded without analysis is counted by its method and endpoint (no ids, no query,
no key) in the store, on /metrics and in the report."""
from __future__ import annotations

import contextlib
import json
import socket
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
from helpers.cli import CliRunner
from helpers.proxy import LEGACY
from helpers.upstream import Upstream
from prometheus_client.parser import text_string_to_metric_families

from prefixguard.capture.store import open_store
from prefixguard.cli import main
from prefixguard.proxy.addon import PrefixGuard
from prefixguard.proxy.serve import ProxyThread
from prefixguard.utils.errors import InputError
from prefixguard.wire.routes import NO_SHAPE, TOKEN_COUNT

CHAT = "openllmetry/test_prompt_caching_test_openai_prompt_caching/0001"
ACCOUNT, GATEWAY = "0123456789abcdef0123456789abcdef", "team-gw"
KEY = "sk-paths-0001-" + "x" * 24
SECRET = "AIzaSyD-never-stored-0001"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rows_when(db: Path, n: int, timeout: float = 20.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        rows: list[dict[str, Any]] = []
        with contextlib.suppress(InputError):   # the analysis runs behind the flows
            with open_store(db) as store:
                rows = list(store.rows())
        if len(rows) >= n or time.monotonic() > deadline:
            return rows
        time.sleep(0.05)


def unanalysed_metric(url: str) -> dict[tuple[str, str], float]:
    text = httpx.get(url, timeout=10).text
    return {(s.labels["method"], s.labels["path"]): s.value for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == "prefixguard_proxy_unanalysed_requests_total"}


def test_known_shapes_on_any_path_are_analysed_and_the_rest_is_named(shared_data: Path, tmp_path: Path) -> None:
    recorded = shared_data / "recorded"
    chat = json.loads((recorded / CHAT).with_name("0001.request.json").read_text())
    messages = json.loads((recorded / LEGACY / "0001.request.json").read_text())
    db, port = tmp_path / "capture.db", free_port()
    replay = {"x-replay": CHAT}
    with Upstream(recorded) as up, ProxyThread([up.url], addon=PrefixGuard(console=lambda line: None), store=str(db),
                                               metrics_port=port) as px:
        for base in (f"{px.url}/api/coding/paas/v4", f"{px.url}/v1/{ACCOUNT}/{GATEWAY}/openai"):
            with openai.OpenAI(base_url=base, api_key=KEY, max_retries=0, default_headers=replay) as client:
                client.chat.completions.create(**chat)
        with openai.AzureOpenAI(azure_endpoint=px.url, api_version="2024-10-21", api_key=KEY, max_retries=0,
                                default_headers=replay) as azure:
            azure.chat.completions.create(**{**chat, "model": "gpt-4o-prod"})
        with anthropic.Anthropic(base_url=f"{px.url}/proxy/anthropic", api_key=KEY, max_retries=0,
                                 default_headers={"x-replay": f"{LEGACY}/0001"}) as claude:
            claude.messages.create(**messages)
        with httpx.Client(base_url=px.url, headers=replay, timeout=10) as web:
            web.get("/v1/models")
            web.post(f"/v1/embeddings?key={SECRET}", json={"model": "text-embedding-3-small", "input": "hi"})
            web.post("/api/rooms/3/messages", json={"text": "lunch at noon?", "author": 7})  # an app's own endpoint
        rows = rows_when(db, 7)
        metric = unanalysed_metric(f"http://127.0.0.1:{port}/metrics")

    by_path = {r["path"].split("?")[0]: r for r in rows}
    analysed = {"/api/coding/paas/v4/chat/completions": "openai-chat",
                f"/v1/{ACCOUNT}/{GATEWAY}/openai/chat/completions": "openai-chat",
                "/openai/deployments/gpt-4o-prod/chat/completions": "openai-chat",
                "/proxy/anthropic/v1/messages": "anthropic"}
    for path, api in analysed.items():
        row = by_path[path]
        assert row["api"] == api and row["verdict"] and row["usage"]["reported"], row
    assert by_path["/openai/deployments/gpt-4o-prod/chat/completions"]["model"] == "gpt-4o-prod"
    # forwarded, not analysed: a row named by method and endpoint, and the /metrics counter
    named = {(r["method"], r["path"]): r["cause"] for r in rows if r["api"] is None}
    assert named[("GET", "/v1/models")] == named[("POST", "/v1/embeddings")] == NO_SHAPE
    assert "ends like anthropic, but its body is not one" in named[("POST", "/api/rooms/3/messages")]
    assert metric == {("GET", "/v1/models"): 1, ("POST", "/v1/embeddings"): 1, ("POST", "/api/rooms/3/messages"): 1}
    assert SECRET not in json.dumps(rows)
    res = CliRunner().invoke(main, ["report", str(db), "-o", "json"])
    assert res.exit_code == 0, res.output
    infra = json.loads(res.stdout)["infra"]
    assert sorted((u["method"], u["path"], u["requests"]) for u in infra["unanalysed"]) == [
        ("GET", "/v1/models", 1), ("POST", "/api/rooms/3/messages", 1), ("POST", "/v1/embeddings", 1)]
    assert "3 forwarded requests not analysed: " in infra["finding"] and "GET /v1/models (1: no API shape read at this path)" in infra["finding"]
    page = tmp_path / "report.html"
    assert CliRunner().invoke(main, ["report", str(db), "--html", str(page)]).exit_code == 0
    assert "not analysed: POST /v1/embeddings" in page.read_text()


def test_a_token_count_is_named_and_no_turn_of_its_session(tmp_path: Path) -> None:
    """The real SDK counts a prompt at /v1/messages/count_tokens, then sends it (pydantic-ai's recording,
    tests/data/public): the count is forwarded, named as a token count in the store and on /metrics, and
    wrote nothing, so the request after it is predicted to read 0 (the provider read 0 and wrote 1,111)."""
    public = Path(__file__).resolve().parent / "data" / "public"
    name = "pydantic_ai/anthropic_automatic_caching_count_tokens"
    sent = [json.loads((public / name / f"000{n}.request.json").read_text()) for n in (1, 2)]
    db, port = tmp_path / "capture.db", free_port()
    with Upstream(public) as up, ProxyThread([up.url], addon=PrefixGuard(console=lambda line: None), store=str(db),
                                             metrics_port=port) as px:
        with anthropic.Anthropic(base_url=px.url, api_key=KEY, max_retries=0) as claude:
            counted = claude.messages.count_tokens(
                model=sent[0]["model"], system=sent[0]["system"], messages=sent[0]["messages"],
                extra_body={"cache_control": sent[0]["cache_control"]}, extra_headers={"x-replay": f"{name}/0001"})
            claude.messages.create(
                model=sent[1]["model"], system=sent[1]["system"], messages=sent[1]["messages"],
                max_tokens=sent[1]["max_tokens"], extra_body={"cache_control": sent[1]["cache_control"]},
                extra_headers={"x-replay": f"{name}/0002"})
        rows = rows_when(db, 2)
        metric = unanalysed_metric(f"http://127.0.0.1:{port}/metrics")
    assert counted.input_tokens == 1114
    count, create = sorted(rows, key=lambda r: r["api"] is not None)
    assert (count["api"], count["method"], count["path"], count["cause"]) == (
        None, "POST", "/v1/messages/count_tokens", TOKEN_COUNT)
    assert metric == {("POST", "/v1/messages/count_tokens"): 1}
    assert create["api"] == "anthropic" and create["usage"]["cache_write_5m"] == 1111
    assert create["expected_cached"] == 0 and create["verdict"] == "cold", create
    res = CliRunner().invoke(main, ["report", str(db), "-o", "json"])
    assert res.exit_code == 0, res.output
    infra = json.loads(res.stdout)["infra"]
    assert infra["unanalysed"] == [{"method": "POST", "path": "/v1/messages/count_tokens", "requests": 1,
                                    "why": TOKEN_COUNT.removeprefix("not analysed: ")}]
    assert "POST /v1/messages/count_tokens (1: a token count" in infra["finding"]


def test_a_file_uploaded_through_the_proxy_sizes_the_request_that_names_it(shared_data: Path, tmp_path: Path) -> None:
    """POST /v1/files (multipart) reaches the analysis: the image sent later by its id costs what the
    upload holds (640x480), not the documented estimate for an unseen file."""
    import base64

    from prefixguard.model import media
    recorded = shared_data / "recorded"
    name = "crewai/llms_TestAnthropicFileUploadIntegration.test_describe_image_with_file_id"
    folder, db = recorded / name, tmp_path / "capture.db"
    upload = base64.b64decode((folder / "0001.request.txt").read_bytes())
    boundary = upload[2:upload.find(b"\r\n")].decode()
    media.forget_uploads()
    addon = PrefixGuard(console=lambda line: None)
    with Upstream(recorded) as up, ProxyThread([up.url], addon=addon, store=str(db)) as px:
        headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
        with httpx.Client(base_url=px.url, timeout=10, headers=headers) as web:
            web.post("/v1/files?beta=true", content=upload, headers={
                "content-type": f"multipart/form-data; boundary={boundary}", "x-replay": f"{name}/0001"})
            web.post("/v1/messages?beta=true", content=(folder / "0002.request.json").read_bytes(),
                     headers={"content-type": "application/json", "x-replay": f"{name}/0002"})
        rows = rows_when(db, 2)
    sent = next(r for r in rows if r["api"] == "anthropic")
    with open_store(db) as store:
        segments = next(r for r in store.records() if r.id == sent["id"]).segments
    rules = media.rules_for("anthropic", sent["model"])
    image = media.image_tokens(640, 480, rules.image) + rules.image.get("per_image_tokens", 0)
    assert any(tokens == image for _, _, tokens in segments), segments
    media.forget_uploads()
