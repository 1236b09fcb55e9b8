"""One OpenTelemetry span per LLM call, from its capture record: GenAI semantic-convention attributes
plus prefixguard's verdict. Spans go live over OTLP/HTTP (`Spans`), or into OTLP-JSON for offline
import (`otlp_json`); both build them with the SDK and encode them with the OTLP exporter's own encoder."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from prefixguard.capture.store import Record
from prefixguard.contracts.providers import provider_for
from prefixguard.judge.names import VerdictName
from prefixguard.telemetry import names as n

EXPORT_TIMEOUT_S = 3.0  # an unreachable collector costs the analysis process this much per batch, at most
BATCH_DELAY_MS = 1000  # spans leave at least this often
ID_FIELDS = ("traceId", "spanId", "parentSpanId")  # bytes that OTLP/JSON writes in hex, not base64


def attributes(rec: Record) -> dict[str, Any]:
    """The span attributes of one record (None values left out: OTel drops them with a warning)."""
    provider = provider_for(rec.api, rec.model) if rec.api else "unknown"
    u = rec.usage
    host, port = _server(rec.upstream)
    out: dict[str, Any] = {
        n.GEN_AI_OPERATION: "chat",
        n.GEN_AI_SYSTEM: provider,
        n.GEN_AI_PROVIDER: provider,
        n.GEN_AI_REQUEST_MODEL: rec.model,
        n.HTTP_STATUS: rec.status,
        n.SERVER_ADDRESS: host,
        n.SERVER_PORT: port,
        n.GEN_AI_REQUEST_STREAM: streamed(rec),
        n.GEN_AI_TTFT: rec.ttft_s,
        n.PG_DECODE_TPS: rec.decode_tps,
        n.PG_VERDICT: rec.verdict,
        n.PG_EXPECTED_CACHED: rec.expected_cached,
        n.PG_TENANT: rec.tenant or None,
        n.PG_ESTIMATED: rec.tokens_estimated,
        n.GEN_AI_RESPONSE_ID: rec.response_id,
        n.GEN_AI_RESPONSE_MODEL: rec.response_model,
        n.GEN_AI_FINISH_REASONS: list(rec.finish_reasons) if rec.finish_reasons else None,
        n.PG_CLIENT: rec.client,
        n.PG_ROUTE: rec.route,
        n.PG_SITE: rec.site,
    }
    if u.reported or u.output:
        out |= {
            n.GEN_AI_INPUT_TOKENS: u.prompt_total,
            n.GEN_AI_OUTPUT_TOKENS: u.output,
            n.GEN_AI_CACHE_READ: u.cache_read,
            n.GEN_AI_CACHE_CREATION: u.cache_write,
            n.GEN_AI_CACHE_WRITE: u.cache_write,
        }
    if rec.verdict == VerdictName.MISS_PREFIX_CHANGED:
        out |= {n.PG_CAUSE: "+".join(rec.causes), n.PG_POINTER: rec.pointer}
    else:
        out[n.PG_CAUSE] = rec.cause
    if rec.reprefill_tokens:
        out |= {n.PG_REPREFILL: rec.reprefill_tokens, n.PG_MISS_COST: rec.cost_usd}
    if rec.verdict == VerdictName.ERROR or rec.error:
        out[n.ERROR_TYPE] = str(rec.status) if rec.status and rec.status >= 400 else "transport"
    return {k: v for k, v in out.items() if v is not None}


_DEFAULT_PORTS = {"http": 80, "https": 443}
# Streaming calls whose body says nothing of it: the endpoint streams (Bedrock, Gemini)
_STREAM_PATHS = ("/converse-stream", "/invoke-with-response-stream", ":streamGenerateContent")


def _server(upstream: str | None) -> tuple[str | None, int | None]:
    """server.address and server.port of the upstream URL (its scheme's port when it names none);
    nothing for a row that came from no server (an imported agent log: "import:claude-code")."""
    if not upstream:
        return None, None
    parts = urlsplit(upstream)
    if not parts.hostname:
        return None, None
    try:
        port = parts.port
    except ValueError:
        port = None
    return parts.hostname, port or _DEFAULT_PORTS.get(parts.scheme)


def streamed(rec: Record) -> bool | None:
    """Whether the call streamed: the endpoint (Bedrock, Gemini) or the body's "stream" (Anthropic,
    OpenAI); None when the row keeps no body (--no-bodies, an imported log) and the path does not say."""
    if any(marker in rec.path for marker in _STREAM_PATHS):
        return True
    if rec.request is None:
        return None
    try:
        body = json.loads(rec.request)
    except (ValueError, RecursionError):
        return None
    return body.get("stream") is True if isinstance(body, dict) else None


def _provider(service: str, processor: Any) -> Any:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(processor)
    return provider


def emit(tracer: Any, rec: Record) -> None:
    """Start and end the record's span at the times the call had (wall clock, nanoseconds)."""
    from opentelemetry.trace import SpanKind, Status, StatusCode

    start = int(rec.ts * 1e9)
    span = tracer.start_span(
        f"chat {rec.model}" if rec.model else "chat", kind=SpanKind.CLIENT, start_time=start, attributes=attributes(rec)
    )
    if rec.verdict == VerdictName.ERROR or rec.error:
        span.set_status(Status(StatusCode.ERROR, rec.error or f"http {rec.status}"))
    span.end(end_time=start + int((rec.total_s or 0) * 1e9))


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL: a bare collector address gets /v1/traces, as OTEL_EXPORTER_OTLP_ENDPOINT does."""
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"--otlp-endpoint must be an http(s) URL, got {endpoint!r}")
    return endpoint.rstrip("/") + "/v1/traces" if parts.path in ("", "/") else endpoint


class Spans:
    """Live export: a batch processor sends spans from its own thread, so a slow or absent collector
    never holds up the analysis; when it is down, spans beyond the processor's queue are dropped."""

    def __init__(self, endpoint: str, service: str = "prefixguard-proxy") -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        exporter = OTLPSpanExporter(endpoint=traces_url(endpoint), timeout=EXPORT_TIMEOUT_S)
        self._provider = _provider(service, BatchSpanProcessor(exporter, schedule_delay_millis=BATCH_DELAY_MS))
        self._tracer = self._provider.get_tracer(n.SCOPE)

    def add(self, rec: Record) -> None:
        emit(self._tracer, rec)

    def flush(self) -> None:
        self._provider.force_flush(int(EXPORT_TIMEOUT_S * 1000))

    def close(self) -> None:
        self._provider.shutdown()


def otlp_json(records: Iterable[Record], service: str = "prefixguard-proxy") -> dict[str, Any]:
    """An OTLP/JSON ExportTraceServiceRequest of the records' spans, as a collector's otlpjsonfile
    receiver or POST /v1/traces (Content-Type application/json) takes it."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = _provider(service, SimpleSpanProcessor(memory))
    tracer = provider.get_tracer(n.SCOPE)
    for rec in records:
        emit(tracer, rec)
    provider.shutdown()
    message = MessageToDict(encode_spans(memory.get_finished_spans()), use_integers_for_enums=True)
    _hex_ids(message)
    return message


def _hex_ids(node: Any) -> None:
    """Protobuf's JSON mapping writes bytes in base64; OTLP/JSON wants trace and span ids in hex."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ID_FIELDS and isinstance(value, str):
                node[key] = base64.b64decode(value).hex()
            else:
                _hex_ids(value)
    elif isinstance(node, list):
        for item in node:
            _hex_ids(item)
