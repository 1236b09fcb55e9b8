"""Reverse-proxy routes: which upstream a request goes to, by path prefix."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from urllib.parse import urlsplit

from mitmproxy import http
from mitmproxy.net.http.url import hostport


@dataclass(frozen=True, slots=True)
class Route:
    """Requests whose path starts with `prefix` go to `url` (the prefix removed, the URL's path prepended)."""

    prefix: str
    url: str

    @classmethod
    def parse(cls, spec: str) -> Route:
        prefix, _, url = spec.rpartition("=") if spec.startswith("/") else ("", "", spec)
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"upstream must be an http(s) URL, optionally after PREFIX=, got {spec!r}")
        return cls(prefix.rstrip("/"), url.rstrip("/"))

    def matches(self, path: str) -> bool:
        return not self.prefix or path == self.prefix or path.startswith(self.prefix + "/")

    def apply(self, request: http.Request) -> None:
        scheme, host, port, path, authority = _target(self.url)
        # Setting these rewrites the Host header and authority: work on every flow, worth skipping when
        # the request (as reverse mode leaves it for the default route) already goes there.
        if (
            (request.scheme, request.host, request.port) != (scheme, host, port)
            or request.headers.get("Host", authority) != authority
            or request.authority not in ("", authority)
        ):
            request.scheme, request.host, request.port = scheme, host, port
        if path or self.prefix:
            request.path = path + request.path[len(self.prefix) :]


@functools.cache
def _target(upstream: str) -> tuple[str, str, int, str, str]:
    """(scheme, host, port, path, host[:port] as the Host header has it) of an upstream URL."""
    parts = urlsplit(upstream)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    host = parts.hostname or ""
    return parts.scheme, host, port, parts.path, hostport(parts.scheme, host, port)
