"""The HTTP client replay's server target sends with: one httpx client per replay, so connections are
kept alive (and HTTP/2 is used where a TLS server offers it) and a request's TTFT never includes a
connection set-up; retries with backoff on 429, 408, 409 and 5xx (honouring `retry-after` and
`retry-after-ms`); the API key from the environment variables the providers' SDKs read.

A connection refused (or a host name that does not resolve) is tried once more, in case the server is
restarting, then stops the whole replay as an input error: the next request would be refused too, and
a wrong --target must say so in one line, not after seconds of backoff per request."""

from __future__ import annotations

import email.utils
import os
import random
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from prefixguard.utils.errors import InputError

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
MAX_RETRIES = 3
CONNECT_RETRIES = 1  # a refused connection: one more try, then Unreachable
BACKOFF_S = 0.5  # first wait without a retry-after; doubles each try (with jitter)
MAX_WAIT_S = 60.0  # a retry-after beyond this is not waited for: the request fails instead
KEY_ENV = {
    "anthropic": ("ANTHROPIC_API_KEY", "x-api-key", "{}"),
    "openai-chat": ("OPENAI_API_KEY", "authorization", "Bearer {}"),
    "openai-responses": ("OPENAI_API_KEY", "authorization", "Bearer {}"),
    "openai-completions": ("OPENAI_API_KEY", "authorization", "Bearer {}"),
}


def _http2() -> bool:
    try:
        import h2  # noqa: F401  httpx negotiates HTTP/2 through it (ALPN, TLS servers only)
    except ImportError:
        return False
    return True


def retry_after(headers: Any, attempt: int) -> float:
    """Seconds to wait before the next try: the server's retry-after-ms or retry-after (seconds or an
    HTTP date), else exponential backoff with jitter."""
    ms = headers.get("retry-after-ms")
    try:
        if ms is not None:
            return max(0.0, float(ms) / 1e3)
    except ValueError:
        pass
    value = headers.get("retry-after")
    if value is not None:
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value) if value.strip() else None
            if when is not None:
                return max(0.0, when.timestamp() - time.time())
    return BACKOFF_S * 2**attempt * (0.75 + random.random() / 2)


def auth_headers(api: str, headers: dict[str, str], env: dict[str, str] | None = None) -> dict[str, str]:
    """The provider's key header from its usual environment variable, unless the caller set one."""
    source: Mapping[str, str] = os.environ if env is None else env
    if api not in KEY_ENV:
        return {}
    name, header, form = KEY_ENV[api]
    given = {k.lower() for k in headers}
    key = source.get(name)
    if key and not given & {"x-api-key", "authorization", "api-key"}:
        return {header: form.format(key)}
    return {}


class Unreachable(InputError):
    """The target refused the connection, or its name did not resolve, on the retry too."""


@dataclass(slots=True)
class Attempt:
    """The answer of the last try: status, the first bytes of an error body, when the try began."""

    status: int
    started: float
    error_body: str = ""
    tries: int = 1


class Client:
    """A pooled httpx client; `stream` yields the response's chunks after retries are settled."""

    def __init__(
        self, base_url: str, timeout: float, max_retries: int = MAX_RETRIES, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        import httpx

        self.http2 = _http2()
        self._httpx = httpx
        self._client = httpx.Client(
            base_url=base_url,
            http2=self.http2,
            timeout=httpx.Timeout(timeout),
            limits=httpx.Limits(max_keepalive_connections=64, keepalive_expiry=120.0),
        )
        self.max_retries = max_retries
        self._sleep = sleep

    @contextmanager
    def stream(self, path: str, data: bytes, headers: dict[str, str]) -> Iterator[tuple[Attempt, Iterator[bytes]]]:
        """POST with retries. Yields (attempt, chunks); chunks is empty when the final status is an error.
        Transport errors after the last retry raise httpx.TransportError."""
        attempt = 0
        while True:
            started = time.monotonic()
            try:
                request = self._client.build_request("POST", path, content=data, headers=headers)
                resp = self._client.send(request, stream=True)
            except self._httpx.ConnectError as err:
                if attempt >= min(self.max_retries, CONNECT_RETRIES):
                    raise Unreachable(
                        f"cannot connect to {self._client.base_url} ({_reason(err)}); is the "
                        "server running, and is --target its address?"
                    ) from None
                self._sleep(retry_after({}, attempt))
                attempt += 1
                continue
            except self._httpx.RemoteProtocolError:
                # Dropped before an answer: worth another try; a read timeout is not.
                if attempt >= self.max_retries:
                    raise
                self._sleep(retry_after({}, attempt))
                attempt += 1
                continue
            try:
                if resp.status_code < 400:
                    # the bytes decoded: httpx asks for gzip
                    yield Attempt(status=resp.status_code, started=started, tries=attempt + 1), resp.iter_bytes()
                    return
                wait = retry_after(resp.headers, attempt)
                body = resp.read()[:300].decode("utf-8", "replace")
            finally:
                resp.close()
            if resp.status_code not in RETRY_STATUS or attempt >= self.max_retries or wait > MAX_WAIT_S:
                yield Attempt(status=resp.status_code, started=started, error_body=body, tries=attempt + 1), iter(())
                return
            self._sleep(wait)
            attempt += 1

    def close(self) -> None:
        self._client.close()


def _reason(err: Exception) -> str:
    """The OS's words for a connect error ("connection refused"), without its errno."""
    text = str(err) or type(err).__name__
    return text.split("] ", 1)[-1].lower() if text.startswith("[Errno") else text
