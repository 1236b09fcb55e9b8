"""Attribution for real: the proxy on loopback, the real anthropic SDK under two client versions (one of
which sends a volatile system prompt), the upstream replaying recorded responses; then `report --by
client` names the version that broke the cache. Also the labels' parsing, the metrics' labels, the
spans' gen_ai.response.* attributes, the testing recorder's and the LiteLLM callback's call sites."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest
from helpers.cli import CliRunner

from helpers.proxy import LEGACY, Clock, tenant_rows
from helpers.upstream import Upstream
from prefixguard.capture.attribution import SITE_HEADER, client_family, client_of, site_of
from prefixguard.cli import main
from prefixguard.proxy.addon import PrefixGuard
from prefixguard.proxy.serve import ProxyThread
from prefixguard.schemas import schema
from prefixguard.capture.store import open_store
from prefixguard.testing import Recorder

OLD, NEW = "acme-agent/1.4.0", "acme-agent/1.5.0"   # the release that put the time in its system prompt
SITE = "billing/summarise.py:42"


@pytest.fixture(scope="module")
def capture(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Three calls from each client version, through the real proxy, into one capture."""
    recorded = shared_data / "recorded"
    db = tmp_path_factory.mktemp("attribution") / "capture.db"
    clock = Clock()
    addon = PrefixGuard(clock=clock, console=lambda line: None)
    keys = {OLD: "sk-ant-api03-attrib0001-" + "x" * 24, NEW: "sk-ant-api03-attrib0002-" + "x" * 24}
    with Upstream(recorded) as up, ProxyThread([up.url], addon=addon, store=str(db)) as px:
        for agent, key in keys.items():
            client = anthropic.Anthropic(base_url=px.url, api_key=key, max_retries=0,
                                         default_headers={"User-Agent": agent, SITE_HEADER: SITE})
            for turn in range(3):
                body = json.loads((recorded / LEGACY / "0001.request.json").read_text())
                if agent == NEW:
                    body["system"][0]["text"] = f"Current time: 2026-12-02T16:00:0{turn}Z. " + body["system"][0]["text"]
                # the stable client's later turns are answered by the recording that read the cache
                replay = f"{LEGACY}/000{2 if turn and agent == OLD else 1}"
                client.messages.create(**body, extra_headers={"x-replay": replay, "x-test-id": f"{agent}-{turn}"})
                clock.now += 7
            client.close()
        rows = {agent: tenant_rows(db, key, 3, 30.0) for agent, key in keys.items()}
        seen = dict(up.seen)
    return {"db": db, "rows": rows, "seen": seen}


def test_rows_carry_client_route_site_and_the_response(capture: dict[str, Any]) -> None:
    old, new = capture["rows"][OLD], capture["rows"][NEW]
    assert [r["verdict"] for r in old] == ["cold", "hit", "hit"]
    assert [r["verdict"] for r in new] == ["cold", "miss_prefix_changed", "miss_prefix_changed"]
    assert {r["client"] for r in old} == {"acme-agent 1.4.0"} and {r["client"] for r in new} == {"acme-agent 1.5.0"}
    assert {(r["route"], r["site"]) for r in old + new} == {("/v1/messages", SITE)}
    response = old[0]["response"]
    assert response["id"].startswith("msg_") and response["model"].startswith("claude")
    assert response["finish_reasons"] == ["end_turn"]
    # the proxy read the site header and forwarded it, with every other byte, as the client sent it
    assert capture["seen"][f"{NEW}-1"]["headers"][SITE_HEADER] == SITE
    assert capture["seen"][f"{NEW}-1"]["headers"]["User-Agent"] == NEW


def test_report_by_client_names_the_version_that_broke_the_cache(capture: dict[str, Any]) -> None:
    res = CliRunner().invoke(main, ["report", str(capture["db"]), "--by", "client", "-o", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    import jsonschema
    jsonschema.validate(doc, schema("report"))
    by = doc["by"]
    assert by["label"] == "client"
    worst, other = by["groups"]
    assert worst["client"] == "acme-agent 1.5.0" and worst["requests"] == 3 and worst["misses"] == 2
    assert worst["misses_by_cause"] == [{"cause": "volatile_content", "requests": 2}]
    assert worst["miss_cost_usd"] > 0 and worst["spend_usd"] > 0
    assert other["client"] == "acme-agent 1.4.0" and other["misses"] == 0 and other["hit_rate"] > 0.5
    assert "acme-agent 1.5.0 broke the cached prefix in 2 of its 3 requests" in by["finding"]
    text = CliRunner().invoke(main, ["report", str(capture["db"]), "--by", "client"])
    assert text.exit_code == 0, text.output
    table = text.output[text.output.index("By client:"):]
    first = table.splitlines()[2]
    assert first.split()[:2] == ["acme-agent", "1.5.0"] and "volatile_content 2" in first
    assert "client acme-agent 1.5.0 broke the cached prefix" in table


def test_report_by_site_and_tenant_and_a_bad_label(capture: dict[str, Any]) -> None:
    doc = json.loads(CliRunner().invoke(main, ["report", str(capture["db"]), "--by", "site", "-o", "json"]).output)
    assert [(g["site"], g["requests"], g["misses"]) for g in doc["by"]["groups"]] == [(SITE, 6, 2)]
    doc = json.loads(CliRunner().invoke(main, ["report", str(capture["db"]), "--by", "tenant", "-o", "json"]).output)
    assert sorted(g["misses"] for g in doc["by"]["groups"]) == [0, 2]
    bad = CliRunner().invoke(main, ["report", str(capture["db"]), "--by", "colour"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output


@pytest.mark.parametrize("headers, client", [
    ({"user-agent": "claude-cli/2.0.14 (external, cli)", "x-stainless-lang": "js"}, "claude-cli 2.0.14"),
    ({"user-agent": "Anthropic/Python 0.69.0", "x-stainless-package-version": "0.69.0"}, "anthropic-python 0.69.0"),
    ({"user-agent": "OpenAI/Python 1.109.1"}, "openai-python 1.109.1"),
    ({"user-agent": "litellm/1.77.0"}, "litellm 1.77.0"),
    ({"user-agent": "Mozilla", "x-stainless-lang": "python", "x-stainless-package-version": "0.7.1"},
     "mozilla-python 0.7.1"),
    ({"user-agent": "evil/1.0\x1b[2J"}, "evil 1.0"),
    ({"user-agent": "\x1b[2Jevil"}, "?[2jevil"),
    ({}, ""),
])
def test_client_of_reads_the_user_agent_and_the_sdk_headers(headers: dict[str, str], client: str) -> None:
    assert client_of(headers) == client


def test_client_family_is_the_major_version() -> None:
    assert client_family("claude-cli 2.0.14") == "claude-cli 2"
    assert client_family("anthropic-python 0.69.0") == "anthropic-python 0.69"   # before 1.0 the minor breaks
    assert client_family("") == ""
    assert site_of({SITE_HEADER: "a" * 500}) == "a" * 200 and site_of({}) is None


def test_metrics_carry_client_family_and_route_and_tenant_only_when_asked(capture: dict[str, Any]) -> None:
    pytest.importorskip("prometheus_client") if not os.environ.get("CI") else None
    from prometheus_client import generate_latest

    from prefixguard.telemetry.metrics import ProxyMetrics, opt_in_labels
    with open_store(capture["db"]) as store:
        recs = list(store.records())
    bounded, opted = ProxyMetrics(extra=()), ProxyMetrics(extra=("tenant", "site"))
    for rec in recs:
        bounded.add(rec)
        opted.add(rec)
    text = generate_latest(bounded.registry).decode()
    miss = [line for line in text.splitlines() if line.startswith("prefixguard_proxy_cache_misses_total{")]
    assert len(miss) == 1 and 'client="acme-agent 1"' in miss[0] and 'route="/v1/messages"' in miss[0]
    assert "tenant=" not in text and "site=" not in text
    assert f'site="{SITE}"' in generate_latest(opted.registry).decode()
    assert opt_in_labels("site, tenant") == ("tenant", "site")
    with pytest.raises(ValueError, match="no label colour"):
        opt_in_labels("colour")


def test_spans_carry_the_gen_ai_response_attributes(capture: dict[str, Any]) -> None:
    pytest.importorskip("opentelemetry") if not os.environ.get("CI") else None
    from prefixguard.telemetry.spans import attributes
    with open_store(capture["db"]) as store:
        rec = next(iter(store.records()))
    attrs = attributes(rec)
    assert attrs["gen_ai.response.id"] == rec.response_id and attrs["gen_ai.response.id"].startswith("msg_")
    assert attrs["gen_ai.response.model"] == rec.response_model
    assert attrs["gen_ai.response.finish_reasons"] == ["end_turn"]
    assert attrs["prefixguard.client"] == rec.client and attrs["prefixguard.route"] == "/v1/messages"


def test_the_testing_recorder_names_its_test_as_the_site(shared_data: Path) -> None:
    got: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        got.append(request)
        return httpx.Response(200, json={"id": "msg_1", "type": "message", "role": "assistant", "content": [],
                                         "model": "claude-x", "stop_reason": "end_turn",
                                         "usage": {"input_tokens": 1, "output_tokens": 1}})

    recorder = Recorder("tests/test_app.py::test_summary[é]")
    body = json.loads((shared_data / "recorded" / LEGACY / "0001.request.json").read_text())
    with recorder.http_client(transport=httpx.MockTransport(answer)) as http:
        http.post("http://127.0.0.1:1/v1/messages", json=body)
        http.post("http://127.0.0.1:1/v1/messages", json=body, headers={SITE_HEADER: "mine"})
    assert [r.headers[SITE_HEADER] for r in got] == ["tests/test_app.py::test_summary[\\xe9]", "mine"]
    assert json.loads(next(recorder.rows()))["site"] == recorder.name
    quiet = Recorder("t", site=False)
    with quiet.http_client(transport=httpx.MockTransport(answer)) as http:
        http.post("http://127.0.0.1:1/v1/messages", json=body)
    assert SITE_HEADER not in got[-1].headers


def test_the_litellm_callback_takes_the_site_from_its_metadata(shared_data: Path, tmp_path: Path) -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    litellm = pytest.importorskip("litellm") if not os.environ.get("CI") else __import__("litellm")
    from prefixguard.integrations.litellm import PrefixGuardLogger
    db = tmp_path / "capture.db"
    body = json.loads((shared_data / "recorded" / LEGACY / "0001.request.json").read_text())
    body.pop("model")
    body.pop("stream", None)
    with Upstream(shared_data / "recorded") as up:
        logger = PrefixGuardLogger(str(db))
        litellm.callbacks = [logger]
        try:
            litellm.completion(model="anthropic/claude-3-5-sonnet-20240620", api_base=up.url,
                               api_key="sk-ant-api03-attrib0003-" + "x" * 24,
                               metadata={"prefixguard_site": "checkout.summarise"}, **body)
            deadline = time.monotonic() + 20
            recs: list[Any] = []
            while not recs and time.monotonic() < deadline:
                with open_store(db) as store:
                    recs = list(store.records())
                time.sleep(0.05)
        finally:
            for name in ("callbacks", "input_callback", "success_callback", "failure_callback",
                         "_async_success_callback", "_async_failure_callback"):
                setattr(litellm, name, [c for c in getattr(litellm, name) if c is not logger])
            logger.close()
    [rec] = recs
    assert rec.site == "checkout.summarise" and rec.client.startswith("litellm ") and rec.route == "/v1/messages"


def test_a_postgresql_store_of_schema_4_gets_the_new_columns(tmp_path: Path) -> None:
    pytest.importorskip("psycopg") if not os.environ.get("CI") else None
    import psycopg

    from helpers.fleet_servers import pg_rows, pg_schema
    from prefixguard.capture.columns import DEFINITIONS
    from prefixguard.capture.postgres import PgStore
    from prefixguard.capture.store import Record
    from prefixguard.model.usage import Usage
    new = ("client", "route", "site", "response_id", "response_model", "finish_reasons", "causes", "pointer", "note",
           "diag_status", "diag_level", "diag_label", "diag_missed_tokens", "diag_reusable_tokens", "diag_reason",
           "agreement")
    pg = {"TEXT": "TEXT", "REAL": "DOUBLE PRECISION", "INTEGER": "BIGINT", "BLOB": "BYTEA"}
    v4 = ", ".join(f"{name} {pg[kind]} {rest}".strip() for name, kind, rest in DEFINITIONS if name not in new)
    with pg_schema() as url:
        with psycopg.connect(url, autocommit=True) as conn:   # a table as a schema-4 proxy left it, with a row
            conn.execute(f"CREATE TABLE flows ({v4}, seq BIGSERIAL)")
            conn.execute("INSERT INTO flows (id, ts, path, segments) VALUES ('old', 1.0, '/v1/messages', '[]')")
        store = PgStore(url, create=True, spool=tmp_path / "spool.db")
        store.add(Record(id="new", ts=2.0, path="/v1/messages", usage=Usage(), client="claude-cli 2.0.14",
                         route="/v1/messages", site="tests/a.py::t", response_id="msg_1",
                         response_model="claude-x-1", finish_reasons=["end_turn", "max_tokens"]))
        store.flush()
        store.close()
        rows = {r["id"]: r for r in pg_rows(url)}
    assert rows["old"]["client"] is None and rows["old"]["response"]["finish_reasons"] == []
    assert (rows["new"]["client"], rows["new"]["site"]) == ("claude-cli 2.0.14", "tests/a.py::t")
    assert rows["new"]["response"] == {"id": "msg_1", "model": "claude-x-1", "finish_reasons": ["end_turn", "max_tokens"],
                                       "keys": []}


@pytest.mark.parametrize("recording, api, said", [
    ("openllmetry/test_prompt_caching_test_anthropic_prompt_caching_stream_legacy/0001.response.sse", "anthropic",
     ("msg_017FfRkh9PCC8YbjnhDMrPuK", "claude-3-5-sonnet-20240620", ("end_turn",), None)),
    ("pydantic-ai/test_dbos_test_mcp_tools_not_cached_when_disabled/0001.response.sse", "openai-chat",
     ("chatcmpl-C1KMEUDb1vVwsROQUCZTgG6A6vtWo", "gpt-4o-2024-08-06", ("tool_calls",), 1754432618)),
    ("pydantic-ai-gemini/test_cache_test_google_model_cached_content/0002.response.json", "gemini",
     ("_VQYaqvRGbW6qtsPg4TDoAg", "gemini-2.5-flash", ("STOP",), None)),
    ("pydantic-ai-bedrock/test_bedrock_test_document_url_input/0001.response.json", "bedrock-converse",
     (None, None, ("end_turn",), None)),
    ("crewai/llms_openai_test_openai_responses_api_cached_prompt_tokens/0001.response.json", "openai-responses",
     ("resp_0b352452095088f800698b751350fc8196bd5d8b1a179d27e8", "gpt-4.1-2025-04-14", ("completed",), 1770747155)),
])
def test_each_wire_adapter_reads_the_response_id_model_and_finish_reasons(shared_data: Path, recording: str, api: str,
                                                                           said: tuple[Any, ...]) -> None:
    from prefixguard.wire import parse_response_meta
    assert tuple(parse_response_meta((shared_data / "recorded" / recording).read_bytes(), api))[:4] == said
