"""What the addon hands the analysis for each flow: the request (`FlowState`, which the analysis then
fills), how it ended (`Response`), their fields on the pipe between the two processes (`WIRE`), and the
early answer the response headers carry (`Early`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from prefixguard.capture.attribution import client_of, site_of
from prefixguard.judge.compare import Comparison
from prefixguard.judge.policies import Expected
from prefixguard.model.prompt import Prompt
from prefixguard.model.usage import Usage
from prefixguard.proxy.encoding import decoded
from prefixguard.proxy.redact import api_keys, redact_path, tenant_of


@dataclass(slots=True, kw_only=True)
class FlowState:
    """One request. The addon fills the transport fields as they were on the wire (taking them costs
    the flow nothing); `Analyzer.request` reads them, keeping only what is redacted, and fills the rest."""

    id: str
    ts: float  # clock() at arrival: unix seconds (or a test's clock)
    sent: float  # time.monotonic() when handed on upstream
    path: str  # as sent until the analysis redacts it
    upstream: str | tuple[str, str, int] | None = None  # (scheme, host, port) until read: the URL
    fields: tuple[tuple[bytes, bytes], ...] = ()  # the request's header fields, dropped once read
    method: str = "POST"
    body: bytes = b""  # as sent (content-encoding not undone); let go once its prompt is read
    # the path's route as the addon found it (wire.routes.Routed's fields, a plain tuple: marshal carries it);
    # None: the analysis routes the path itself (an in-process caller)
    routed: tuple[str | None, str | None, bool, str] | None = None
    # set by the analysis
    size: int = 0  # bytes of the body, content-encoding undone
    tenant: str = ""
    client: str = ""  # "claude-cli 2.0.14" (attribution.client_of)
    site: str | None = None  # the call site its x-prefixguard-site header names (read, forwarded as sent)
    secrets: list[str] = field(default_factory=list)  # this request's keys: scrubbed, never stored
    headers: dict[str, str] = field(default_factory=dict)  # the few that change parsing (anthropic-*)
    prompt: Prompt | None = None
    skip: str | None = None  # why the request was not analysed
    unread: bool = False  # its body was not read at all (too large): not analysed, not stored
    expected: Expected | None = None
    answers: int = 0  # answers the analysis had learnt from when it read this request
    comparison: Comparison | None = None
    previous_id: str | None = None
    degraded: bool = False  # judged by this process's index: the fleet's shared one was down

    def read_transport(self) -> str | None:
        """Headers -> tenant, secrets, parse headers; path redacted; body decoded. Returns the
        content-encoding when the body could not be decoded."""
        headers = _plain(self.fields)
        self.fields = ()
        self.secrets, self.tenant = api_keys(headers), tenant_of(headers)
        self.client, self.site = client_of(headers), site_of(headers)
        self.path = redact_path(self.path)
        if isinstance(self.upstream, tuple):
            scheme, host, port = self.upstream
            default = port == (443 if scheme == "https" else 80)
            self.upstream = f"{scheme}://{host}" if default else f"{scheme}://{host}:{port}"
        self.headers = {k: headers[k] for k in PARSE_HEADERS if k in headers}
        encoding = headers.get("content-encoding")
        self.body, ok = decoded(self.body, encoding)
        self.size = len(self.body)
        return None if ok else encoding


PARSE_HEADERS = ("anthropic-version", "anthropic-beta")  # headers that change how a body is read


def _plain(fields: tuple[tuple[bytes, bytes], ...]) -> dict[str, str]:
    """Header fields as a dict, names lowercase, repeats joined as mitmproxy joins them."""
    out: dict[str, str] = {}
    for raw_name, raw_value in fields:
        name = raw_name.decode("utf-8", "surrogateescape").lower()
        value = raw_value.decode("utf-8", "surrogateescape")
        out[name] = f"{out[name]}, {value}" if name in out else value
    return out


@dataclass(slots=True, kw_only=True)
class Response:
    """How the request ended, as the addon saw it (times are time.monotonic())."""

    id: str
    status: int | None = None
    headers_at: float | None = None
    ended_at: float | None = None
    encoding: str | None = None
    error: str | None = None
    chunks: list[tuple[float, bytes]] | None = None  # a streamed body: (arrival, bytes) of each chunk
    body: bytes | None = None  # a whole body, not streamed (content-encoding not undone)
    usage: Usage | None = None  # usage an in-process caller has already read (LiteLLM's streams)


# What the addon sends for each step: these fields of these classes, as a plain tuple in this order
# (marshal carries tuples fastest). `packed` and `unpacked` are the two ends; a name that is not a
# field fails on the first flow of any test.
WIRE: dict[str, tuple[type, tuple[str, ...]]] = {
    "request": (FlowState, ("id", "ts", "sent", "path", "upstream", "fields", "routed")),
    "finish": (Response, ("id", "status", "headers_at", "ended_at", "encoding", "error", "chunks")),
}


def packed(step: str, **values: Any) -> tuple[Any, ...]:
    return tuple(values[name] for name in WIRE[step][1])


def unpacked(step: str, args: tuple[Any, ...]) -> Any:
    cls, names = WIRE[step]
    return cls(**dict(zip(names, args, strict=True)))


class Early(NamedTuple):
    """What the response headers can carry, sent before the usage exists: the verdict the request gets
    when its provider keeps its contract (verdict.judge without a usage), its reused (expected cached)
    and re-prefilled tokens."""

    verdict: str
    cause: str | None
    expected_cached: int | None
    reprefill_tokens: int = 0
