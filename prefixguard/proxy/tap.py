"""The SSE tap: set as `flow.response.stream`, it hands every chunk on unchanged, as it arrives.

On the request path it only notes each chunk and its arrival time; reading the events (usage, when
content began) happens later, off that path, in `read_stream()`. So the tap adds nothing measurable to TTFT.
"""

from __future__ import annotations

import time

from prefixguard.proxy.encoding import decoder as make_decoder
from prefixguard.wire import UsageStream

# SSE, and AWS EventStream (Bedrock ConverseStream / InvokeModelWithResponseStream: binary frames)
STREAM_TYPES = ("text/event-stream", "application/vnd.amazon.eventstream")


def is_event_stream(content_type: str | None) -> bool:
    return content_type is not None and content_type.split(";")[0].strip().lower() in STREAM_TYPES


class StreamTap:
    """Callable for mitmproxy's flow.response.stream: returns each chunk as it came, noting it and the
    time it arrived."""

    def __init__(self) -> None:
        self.chunks: list[tuple[float, bytes]] = []  # (time.monotonic() at arrival, bytes)

    def __call__(self, chunk: bytes) -> bytes:
        if chunk:  # mitmproxy calls with b"" once the upstream ended the message
            self.chunks.append((time.monotonic(), chunk))
        return chunk


def read_stream(
    chunks: list[tuple[float, bytes]], api: str, encoding: str | None = None
) -> tuple[UsageStream, float | None]:
    """Feed a tap's chunks to a UsageStream; returns it and the arrival time of the chunk that carried
    the first content event (time.monotonic(), None if no content came)."""
    stream = UsageStream(api)
    first: float | None = None
    try:
        decoder = make_decoder(encoding)
    except ValueError:  # an encoding nobody can undo: the events stay unread, as for no usage
        return stream, None
    for at, chunk in chunks:
        stream.feed(decoder.feed(chunk) if decoder else chunk)
        if first is None and stream.first_content_at is not None:
            first = at
    stream.feed(b"\n\n")  # close the last event when the stream lacked its final blank line
    if first is None and stream.first_content_at is not None and chunks:
        first = chunks[-1][0]
    return stream, first
