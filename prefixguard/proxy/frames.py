"""The frames that carry messages between the proxy and its analysis process (both pipes and the spool).

A frame is two 4-byte big-endian lengths, the message, then a raw payload (a body, sent beside the
message so that it is never copied into it). Messages to the analysis are marshalled tuples
(seq, step, args, to); see prefixguard/proxy/process.py for what each means.
"""

from __future__ import annotations

import marshal
import struct
from typing import Any, BinaryIO

HEADER = struct.Struct(">II")  # message length, raw payload length
REPLY, REPORT, PRINT = "reply", "report", "print"  # where a step's result goes (see proxy/process.py)


def frame(data: bytes, payload: bytes = b"") -> list[bytes]:
    """The frame of `data` (and its payload), as the pieces to write in order."""
    head = HEADER.pack(len(data), len(payload)) + data
    return [head, payload] if payload else [head]


def read_frame(inp: BinaryIO) -> tuple[bytes, bytes] | None:
    """The next (message, payload) of `inp`; None at its end or at a frame cut short (the writer died mid-message)."""
    head = inp.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    size, payload = HEADER.unpack(head)
    data, body = inp.read(size), inp.read(payload)
    if len(data) < size or len(body) < payload:
        return None
    return data, body


def flow_id(args: Any) -> str | None:
    """The flow a message is about: the first of its args for every step that has one (see analysis.WIRE)."""
    return args[0] if isinstance(args, (tuple, list)) and args and isinstance(args[0], str) else None


def without(data: bytes, done: set[str]) -> bytes:
    """The frames of `data` whose flow is not among those stored."""
    if not done:
        return data
    kept, at = [], 0
    while len(data) - at >= HEADER.size:
        size, payload = HEADER.unpack_from(data, at)
        end = at + HEADER.size + size + payload
        try:
            _, _, args, _ = marshal.loads(data[at + HEADER.size : at + HEADER.size + size])
        except (ValueError, EOFError, TypeError):
            args = None
        if flow_id(args) not in done:
            kept.append(data[at:end])
        at = end
    return b"".join(kept)


def whole_frames(data: bytes) -> bytes:
    """`data` up to its first frame that is cut or empty (a place whose write never came)."""
    at = 0
    while len(data) - at >= HEADER.size:
        size, payload = HEADER.unpack_from(data, at)
        end = at + HEADER.size + size + payload
        if size == 0 or end > len(data):
            break
        at = end
    return data[:at]
