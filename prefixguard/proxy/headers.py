"""The response header fields the addon reads and writes: the content type and encoding it reads to
choose how a body travels, and the x-prefixguard-* fields of a request's early verdict."""

from __future__ import annotations

from typing import Any

from mitmproxy import http

from prefixguard.judge.verdict import VerdictName
from prefixguard.proxy.flow import Early


def content_headers(fields: tuple[tuple[bytes, bytes], ...]) -> tuple[str | None, str | None]:
    """(content-type, content-encoding) in one pass over the fields (each headers.get scans them all),
    repeats joined as mitmproxy joins them."""
    found: dict[bytes, str] = {}
    for name, value in fields:
        if len(name) in (12, 16) and (name := name.lower()) in (b"content-type", b"content-encoding"):
            text = value.decode("utf-8", "surrogateescape")
            found[name] = f"{found[name]}, {text}" if name in found else text
    return found.get(b"content-type"), found.get(b"content-encoding")


def add_verdict(headers: http.Headers, answer: tuple[Any, ...] | None | bool) -> None:
    """The x-prefixguard-* headers for an early answer: appended to the fields in one step (each
    headers[name] = value rewrites them all), replaced where an upstream sent its own."""
    pairs: list[tuple[str, str]]
    if answer is None:
        pairs = [("x-prefixguard-verdict", VerdictName.PENDING)]
    elif not isinstance(answer, tuple):  # False: analysed, but no LLM request it could read
        pairs = [("x-prefixguard-verdict", VerdictName.UNKNOWN)]
    else:
        early = Early._make(answer)
        pairs = [("x-prefixguard-verdict", early.verdict)]
        if early.cause:
            pairs.append(("x-prefixguard-cause", early.cause))
        if early.expected_cached is not None:
            pairs.append(("x-prefixguard-expected-cached", str(early.expected_cached)))
        if early.reprefill_tokens:
            pairs.append(("x-prefixguard-reprefill-tokens", str(early.reprefill_tokens)))
    if any(name[:14].lower() == b"x-prefixguard-" for name, _ in headers.fields):
        for name, value in pairs:
            headers[name] = value
    else:
        headers.fields += tuple((name.encode(), value.encode()) for name, value in pairs)
