"""HTTP/1.1 chunked trailers through the proxy: the message passes whole, its trailer fields are dropped.

mitmproxy's HTTP/1 layer raises NotImplementedError at a chunked message's trailer fields: a request
with trailers then never reaches the upstream and its client waits forever, and a response with
trailers ends at the client without its last chunk. RFC 9112 section 7.1.2 lets a recipient that
removes the chunked coding discard trailer fields (and RFC 9110 section 6.5.1: a recipient may ignore
them): so the message ends where its trailers begin, its body and end pass as sent, and the fields'
names are logged once per process (their values may be secrets).

`install()` wraps each HTTP/1 connection's body reader; it changes nothing for a message without
trailers (the same events in the same order).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("prefixguard.proxy")
_installed = False
_warned = False


class _WithoutTrailers:
    """h11's body reader, its end of message stripped of trailer fields."""

    def __init__(self, reader: Any, side: str) -> None:
        self.reader, self.side = reader, side

    def __call__(self, buf: Any) -> Any:
        return self._end(self.reader(buf))

    def read_eof(self) -> Any:
        return self._end(self.reader.read_eof())

    def _end(self, event: Any) -> Any:
        import h11

        if isinstance(event, h11.EndOfMessage) and event.headers:
            _dropped(self.side, [name.decode("latin-1") for name, _ in event.headers])
            return h11.EndOfMessage()
        return event


def _dropped(side: str, names: list[str]) -> None:
    global _warned
    if not _warned:
        _warned = True
        logger.warning(
            "prefixguard: dropped the HTTP/1.1 trailer fields (%s) of a %s; the message passed whole "
            "(RFC 9112 7.1.2; logged once)",
            ", ".join(names),
            side,
        )


def install() -> None:
    """Wrap mitmproxy's HTTP/1 body reading (once per process)."""
    global _installed
    if _installed:
        return
    from mitmproxy.proxy.layers.http import _http1

    original: Callable[..., Any] = _http1.Http1Connection.read_body

    def read_body(self: Any, event: Any) -> Any:
        reader = getattr(self, "body_reader", None)
        if reader is not None and not isinstance(reader, _WithoutTrailers):
            self.body_reader = _WithoutTrailers(
                reader, "request" if isinstance(self, _http1.Http1Server) else "response"
            )
        return original(self, event)

    setattr(_http1.Http1Connection, "read_body", read_body)  # noqa: B010 - a method replaced on the class
    _installed = True
