"""A real OTLP/HTTP trace receiver on loopback: POST /v1/traces, a protobuf ExportTraceServiceRequest
decoded with opentelemetry-proto's own classes (what a collector does), answered as the spec says."""
from __future__ import annotations

import gzip
import http.server
import threading
import time
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (ExportTraceServiceRequest,
                                                                       ExportTraceServiceResponse)


def value_of(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


class Received:
    """One span as a collector sees it: its resource and scope, name, kind, times, attributes."""

    def __init__(self, resource: dict[str, Any], scope: str, span: Any) -> None:
        self.resource, self.scope, self.name, self.kind = resource, scope, span.name, span.kind
        self.start_ns, self.end_ns = span.start_time_unix_nano, span.end_time_unix_nano
        self.trace_id, self.span_id, self.status = span.trace_id, span.span_id, span.status.code
        self.attributes = {kv.key: value_of(kv.value) for kv in span.attributes}


class OtlpReceiver:
    def __init__(self) -> None:
        self.spans: list[Received] = []
        self.requests = 0
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.path != "/v1/traces" or self.headers.get("content-type") != "application/x-protobuf":
                    self.send_response(404 if self.path != "/v1/traces" else 415)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                owner._take(ExportTraceServiceRequest.FromString(body))
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def _take(self, request: ExportTraceServiceRequest) -> None:
        with self._lock:
            self.requests += 1
            for rs in request.resource_spans:
                resource = {kv.key: value_of(kv.value) for kv in rs.resource.attributes}
                for ss in rs.scope_spans:
                    self.spans += [Received(resource, ss.scope.name, s) for s in ss.spans]

    def wait(self, n: int, timeout: float = 20.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while len(self.spans) < n and time.monotonic() < deadline:
            time.sleep(0.05)
        return list(self.spans)

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
