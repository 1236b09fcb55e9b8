"""Undoing a response's Content-Encoding: the one place for whole bodies and for a tapped stream, with
the same encodings for both (gzip, deflate, br, zstd: the decoders mitmproxy itself ships)."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any


def _brotli() -> Any:
    import brotli  # a dependency of mitmproxy, as is backports.zstd: only the proxy decodes

    return brotli.Decompressor()


def _zstd() -> Any:
    try:
        from compression import zstd  # Python 3.14
    except ImportError:
        from backports import zstd
    return zstd.ZstdDecompressor()


# encoding -> a new incremental decoder; `feed` calls the decoder's decompress/process on each chunk.
_DECODERS: dict[str, Callable[[], Any]] = {
    "gzip": lambda: zlib.decompressobj(16 + zlib.MAX_WBITS),
    "x-gzip": lambda: zlib.decompressobj(16 + zlib.MAX_WBITS),
    "deflate": lambda: zlib.decompressobj(),
    "br": _brotli,
    "zstd": _zstd,
}


class Decoder:
    """Undoes one encoding chunk by chunk (a stream's arrival times stay per chunk)."""

    def __init__(self, encoding: str) -> None:
        self._inner = _DECODERS[encoding]()
        self._step = getattr(self._inner, "decompress", None) or self._inner.process

    def feed(self, chunk: bytes) -> bytes:
        return self._step(chunk)


def decoder(encoding: str | None) -> Decoder | None:
    """A decoder for this Content-Encoding; None for identity or none. Raises ValueError for one we cannot undo."""
    encoding = (encoding or "").strip().lower()
    if encoding in ("", "identity"):
        return None
    if encoding not in _DECODERS:
        raise ValueError(f"unknown content-encoding {encoding!r}")
    return Decoder(encoding)


def decoded(body: bytes, encoding: str | None) -> tuple[bytes, bool]:
    """The body with its content-encoding undone, and whether that worked; on failure the body as it came."""
    try:
        d = decoder(encoding)
        return (d.feed(body) if d and body else body), True
    except Exception:  # zlib.error, brotli.error, ZstdError...: a body that is not what it claims
        return body, False
