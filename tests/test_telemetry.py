"""OpenTelemetry spans and Prometheus metrics from the proxy, for real: mitmproxy with the addon, the
anthropic and openai SDKs in front, the recorded-response upstream behind, a real OTLP/HTTP receiver
(protobuf decoded with opentelemetry-proto) and /metrics read with prometheus-client's own parser."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from google.protobuf.json_format import ParseDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from prometheus_client.parser import text_string_to_metric_families

from helpers.otlp_receiver import OtlpReceiver
from prefixguard.proxy.addon import PrefixGuard
from prefixguard.proxy.serve import ProxyThread
from prefixguard.capture.store import open_store
from helpers.proxy import LEGACY, OPENAI_STREAM, Clock, sha, tenant_rows
from helpers.upstream import Upstream

ROOT = Path(__file__).resolve().parent.parent
PG = [str(Path(sys.executable).with_name("prefixguard"))]  # the installed console script


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def samples(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a /metrics page, parsed by prometheus-client: (name, sorted labels) -> value."""
    text = httpx.get(url, timeout=10).text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def total(found: dict, name: str, **labels: str) -> float:
    return sum(v for (n, ls), v in found.items() if n == name and set(labels.items()) <= set(ls))


@pytest.fixture(scope="module")
def traffic(shared_data: Path, tmp_path_factory: pytest.TempPathFactory):
    """Three calls through a proxy that exports spans and serves metrics: a cold Anthropic call, the same
    call with a new timestamp in its system prompt (a miss), an OpenAI stream."""
    recorded = shared_data / "recorded"
    db = tmp_path_factory.mktemp("telemetry") / "capture.db"
    port, clock = free_port(), Clock()
    key = "sk-ant-api03-telemetry0001-" + "x" * 24
    with OtlpReceiver() as receiver, Upstream(recorded) as up:
        addon = PrefixGuard(clock=clock, console=lambda line: None)
        with ProxyThread([up.url, f"/openai={up.url}"], addon=addon, store=str(db), otlp_endpoint=receiver.url,
                         metrics_port=port) as px:
            client = anthropic.Anthropic(base_url=px.url, api_key=key, max_retries=0)
            for stamp in ("2026-12-02T16:00:00Z", "2026-12-02T16:00:07Z"):
                body = json.loads((recorded / LEGACY / "0001.request.json").read_text())
                body["system"][0]["text"] = f"Current time: {stamp}. " + body["system"][0]["text"]
                client.messages.create(**body)
                clock.now += 7
            client.close()
            gpt = openai.OpenAI(base_url=f"{px.url}/openai/v1", api_key=key, max_retries=0)
            list(gpt.chat.completions.create(**json.loads((recorded / OPENAI_STREAM / "0001.request.json").read_text())))
            gpt.close()
            rows = tenant_rows(db, key, 3, 20)
            spans = receiver.wait(3)
            metrics = samples(f"http://127.0.0.1:{port}/metrics")
        with open_store(db) as store:
            miss = next(r for r in store.records() if r.verdict == "miss_prefix_changed")
        from urllib.parse import urlsplit
        yield {"rows": rows, "spans": spans, "metrics": metrics, "db": db, "miss": miss,
               "upstream_port": urlsplit(up.url).port}


def test_one_genai_span_per_call_with_the_verdict(traffic: dict[str, Any]) -> None:
    rows, spans = traffic["rows"], traffic["spans"]
    assert len(spans) == 3
    by_verdict = {s.attributes["prefixguard.verdict"]: s for s in spans}
    cold, miss = by_verdict["cold"], by_verdict["miss_prefix_changed"]
    assert {s.resource["service.name"] for s in spans} == {"prefixguard-proxy"}
    assert {s.scope for s in spans} == {"prefixguard"}
    assert cold.kind == 3  # SPAN_KIND_CLIENT
    model = rows[0]["model"]
    assert miss.name == f"chat {model}"
    a = miss.attributes
    assert (a["gen_ai.system"], a["gen_ai.provider.name"], a["gen_ai.request.model"]) == ("anthropic", "anthropic", model)
    u = rows[1]["usage"]
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (u["prompt_total"], u["output"])
    assert a["gen_ai.usage.cache_read.input_tokens"] == u["cache_read"]
    assert a["gen_ai.usage.cache_creation.input_tokens"] == u["cache_write_5m"] + u["cache_write_1h"] > 0
    assert (a["prefixguard.cause"], a["prefixguard.pointer"]) == ("volatile_content", "/system/0")
    rec = traffic["miss"]
    assert a["prefixguard.reprefill_tokens"] == rec.reprefill_tokens > 0
    assert a["prefixguard.miss_cost_usd"] == pytest.approx(rec.cost_usd) and rec.cost_usd > 0
    assert a["prefixguard.expected_cached_tokens"] == rows[1]["expected_cached"]
    assert a["http.response.status_code"] == 200 and a["server.address"] == "127.0.0.1"
    # the GenAI conventions' conditionally required attributes: the port beside the address, streaming or not
    assert a["server.port"] == traffic["upstream_port"] and a["gen_ai.request.stream"] is False
    assert a["gen_ai.usage.cache_write.input_tokens"] == a["gen_ai.usage.cache_creation.input_tokens"]
    assert a["gen_ai.response.time_to_first_chunk"] == pytest.approx(rows[1]["timings"]["ttft_s"])
    # the span lasts what the call lasted, at the time it was made
    assert miss.start_ns == int(rows[1]["ts"] * 1e9)
    assert (miss.end_ns - miss.start_ns) / 1e9 == pytest.approx(rows[1]["timings"]["total_s"], abs=1e-6)
    stream = by_verdict[rows[2]["verdict"]]
    assert stream.attributes["gen_ai.system"] == "openai" and stream.attributes["prefixguard.decode_tokens_per_second"] > 0
    assert stream.attributes["gen_ai.usage.input_tokens"] == 364
    assert stream.attributes["gen_ai.request.stream"] is True


def test_prometheus_counters_and_histograms(traffic: dict[str, Any]) -> None:
    rows, m = traffic["rows"], traffic["metrics"]
    assert total(m, "prefixguard_proxy_requests_total") == 3
    assert total(m, "prefixguard_proxy_requests_total", code="200", provider="anthropic") == 2
    assert not any("status" in dict(labels) for _, labels in m)  # `code`, as Prometheus names it
    assert total(m, "prefixguard_proxy_prompt_tokens_total") == sum(r["usage"]["prompt_total"] for r in rows)
    assert total(m, "prefixguard_proxy_cached_tokens_total") == sum(r["usage"]["cache_read"] for r in rows)
    assert total(m, "prefixguard_proxy_cache_misses_total", cause="volatile_content") == 1
    assert total(m, "prefixguard_proxy_reprefill_tokens_total", cause="volatile_content") == traffic["miss"].reprefill_tokens
    assert total(m, "prefixguard_proxy_miss_cost_usd_total") == pytest.approx(traffic["miss"].cost_usd)
    assert total(m, "prefixguard_proxy_time_to_first_token_seconds_count") == 3
    assert total(m, "prefixguard_proxy_decode_tokens_per_second_count") >= 1
    assert total(m, "prefixguard_proxy_analysis_lag_seconds_count") == 3
    assert not any(n.endswith("hit_rate") for n, _ in m)   # derived with rate(), not a since-start gauge


def test_unreachable_collector_leaves_traffic_untouched(shared_data: Path, tmp_path: Path) -> None:
    recorded = shared_data / "recorded"
    dead = free_port()  # nothing listens there
    raw = (recorded / LEGACY / "0001.request.json").read_bytes()
    key = "sk-ant-api03-telemetry0002-" + "x" * 24
    with Upstream(recorded) as up, ProxyThread([up.url], addon=PrefixGuard(console=lambda line: None),
                                               store=str(tmp_path / "c.db"),
                                               otlp_endpoint=f"http://127.0.0.1:{dead}") as px:
        times = []
        for i in range(5):
            started = time.monotonic()
            r = httpx.post(f"{px.url}/v1/messages", content=raw, timeout=10,
                           headers={"x-api-key": key, "content-type": "application/json", "x-test-id": f"dead{i}"})
            times.append(time.monotonic() - started)
            assert r.status_code == 200
            assert up.seen[f"dead{i}"]["request_sha"] == sha(raw) and up.seen[f"dead{i}"]["response_sha"] == sha(r.content)
        rows = tenant_rows(tmp_path / "c.db", key, 5, 20)
    assert len(rows) == 5 and all(r["verdict"] for r in rows)
    assert max(times[1:]) < 1.0   # export attempts (3 s timeout each) happen beside the traffic


def test_capture_export_otlp_json(traffic: dict[str, Any]) -> None:
    out = subprocess.run([*PG, "capture", "export", "-o", "otlp-json",
                          str(traffic["db"])], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == 1  # one ExportTraceServiceRequest per line (otlpjsonfile)
    doc = json.loads(out.stdout)
    spans = [s for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    assert len(spans) == 3
    for s in spans:  # OTLP/JSON: ids in hex, enums as numbers, 64-bit integers as strings
        assert len(s["traceId"]) == 32 and len(s["spanId"]) == 16 and int(s["traceId"], 16)
        assert s["kind"] == 3 and s["startTimeUnixNano"].isdigit()
        s["traceId"], s["spanId"] = "", ""  # protobuf's JSON reader takes bytes in base64 only
    ParseDict(doc, ExportTraceServiceRequest())  # every field is one of OTLP's own
    miss = next(s for s in spans if {"key": "prefixguard.verdict", "value": {"stringValue": "miss_prefix_changed"}}
                in s["attributes"])
    attrs = {a["key"]: a["value"] for a in miss["attributes"]}
    assert attrs["prefixguard.cause"] == {"stringValue": "volatile_content"}
    assert attrs["gen_ai.usage.input_tokens"] == {"intValue": str(traffic["rows"][1]["usage"]["prompt_total"])}


def test_bad_otlp_endpoint_and_metrics_port_in_use_are_one_line(tmp_path: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*PG, "proxy", "--upstream", "http://127.0.0.1:9",
                               "--port", "0", *args], capture_output=True, text=True, timeout=60, cwd=ROOT)
    bad = run("--otlp-endpoint", "localhost:4318")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--otlp-endpoint must be an http(s) URL" in bad.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        busy = run("--metrics-port", str(taken.getsockname()[1]))
    assert busy.returncode == 2 and busy.stderr.count("\n") == 1 and "cannot listen" in busy.stderr
