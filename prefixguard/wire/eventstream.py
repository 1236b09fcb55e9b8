"""AWS EventStream framing (application/vnd.amazon.eventstream), as Bedrock's ConverseStream and
InvokeModelWithResponseStream send it, decoded chunk by chunk with chunks cut anywhere.

A message: prelude (total length, headers length: 4-byte big-endian each; CRC32 of those 8 bytes),
headers (name length: 1 byte, name, value type: 1 byte, value), payload, CRC32 of all before it.
Both CRCs are checked: a message that fails them, or an impossible length, ends the decoding (the
rest of the stream cannot be framed again), and `error` says why.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

PRELUDE = 12  # total length, headers length, prelude CRC
MIN_MESSAGE = 16  # prelude + message CRC, no headers and no payload
MAX_MESSAGE = 16 << 20  # the framing's own ceiling on one message: larger means we are not in a frame
# Header value types: type byte -> (fixed size in bytes, or None for a 2-byte length then the bytes)
_SIZES = {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 6: None, 7: None, 8: 8, 9: 16}
_INTS = {2: ">b", 3: ">h", 4: ">i", 5: ">q", 8: ">q"}


def looks_framed(head: bytes) -> bool:
    """Whether a stream's first bytes are an EventStream prelude (its length's top byte is 0, which no
    text stream starts with) whose CRC holds."""
    if len(head) < PRELUDE or head[0] != 0:
        return False
    return zlib.crc32(head[:8]) == struct.unpack(">I", head[8:12])[0]


class EventStreamDecoder:
    """Feed bytes; get (headers, payload) of each whole message as it completes."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self.error: str | None = None

    def feed(self, chunk: bytes) -> list[tuple[dict[str, Any], bytes]]:
        if self.error:
            return []
        self._buf += chunk
        out: list[tuple[dict[str, Any], bytes]] = []
        while len(self._buf) >= PRELUDE:
            total, head_len, crc = struct.unpack_from(">III", self._buf)
            if zlib.crc32(self._buf[:8]) != crc:
                return self._fail(out, "prelude CRC mismatch")
            if not MIN_MESSAGE <= total <= MAX_MESSAGE or head_len > total - MIN_MESSAGE:
                return self._fail(out, f"bad message length {total} (headers {head_len})")
            if len(self._buf) < total:
                break
            message = bytes(self._buf[:total])
            del self._buf[:total]
            if zlib.crc32(message[:-4]) != struct.unpack(">I", message[-4:])[0]:
                return self._fail(out, "message CRC mismatch")
            try:
                headers = _headers(message[PRELUDE : PRELUDE + head_len])
            except (struct.error, ValueError, UnicodeDecodeError) as err:
                return self._fail(out, f"bad headers: {err}")
            out.append((headers, message[PRELUDE + head_len : -4]))
        return out

    def _fail(self, out: list[tuple[dict[str, Any], bytes]], why: str) -> list[tuple[dict[str, Any], bytes]]:
        self.error = why
        self._buf.clear()
        return out

    @property
    def pending(self) -> int:
        """Bytes of a message not complete yet (a stream that ends with some was cut short)."""
        return len(self._buf)


def _headers(raw: bytes) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    i = 0
    while i < len(raw):
        n = raw[i]
        name = raw[i + 1 : i + 1 + n].decode("utf-8")
        i += 1 + n
        kind = raw[i]
        i += 1
        if kind not in _SIZES:
            raise ValueError(f"unknown header value type {kind}")
        size = _SIZES[kind]
        if size is None:
            (size,) = struct.unpack_from(">H", raw, i)
            i += 2
        value = raw[i : i + size]
        if len(value) != size:
            raise ValueError("header value runs past the headers")
        i += size
        if kind in (0, 1):
            headers[name] = kind == 0
        elif kind in _INTS:
            headers[name] = struct.unpack(_INTS[kind], value)[0]
        elif kind == 7:
            headers[name] = value.decode("utf-8")
        else:
            headers[name] = bytes(value)
    return headers


def encode(headers: dict[str, str], payload: bytes) -> bytes:
    """One message with string headers: what a server (the engine, a test's upstream) sends."""
    head = b"".join(
        struct.pack(">B", len(k.encode())) + k.encode() + b"\x07" + struct.pack(">H", len(v.encode())) + v.encode()
        for k, v in headers.items()
    )
    total = PRELUDE + len(head) + len(payload) + 4
    prelude = struct.pack(">II", total, len(head))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + head + payload
    return body + struct.pack(">I", zlib.crc32(body))
