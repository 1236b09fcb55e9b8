"""Reverse-proxy routes: which upstream a request goes to, by path prefix."""
from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from mitmproxy import http


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
        parts = urlsplit(self.url)
        request.scheme = parts.scheme
        request.host = parts.hostname or ""
        request.port = parts.port or (443 if parts.scheme == "https" else 80)
        request.path = parts.path + request.path[len(self.prefix):]
