"""What a file's bytes say of its size, read from its base64 without decoding more than needed: an image's
width and height from its header (a JPEG walked marker by marker), a PDF's pages with their boxes and text,
a data URL's media type and payload. prefixguard/model/media.py costs them."""

from __future__ import annotations

import binascii
import io
import re
from typing import Any

_HEAD = 32  # bytes that hold the size of a PNG, GIF or WebP
_JPEG_MARKERS = 512  # markers walked before a JPEG is given up (a real one has a dozen)
_DATA_URL = re.compile(r"data:([^;,]*)((?:;[^;,]*)*),")
_URLSAFE = str.maketrans("-_", "+/")  # Gemini's SDKs send bytes in the URL-safe base64 alphabet


def data_url(url: Any) -> tuple[str, str] | None:
    """(media type, base64 payload) of a base64 data URL, else None (an http URL, a file id)."""
    if not isinstance(url, str) or not url.startswith("data:"):
        return None
    found = _DATA_URL.match(url)
    if found is None or ";base64" not in found.group(2):
        return None
    return found.group(1), url[found.end() :]


def b64_bytes(data: str, start: int, end: int) -> bytes:
    """Bytes [start, end) of a base64 payload, decoding only the characters that hold them
    (4 characters per 3 bytes). Fewer bytes when the payload ends first."""
    q0, q1 = start // 3, -(-end // 3)
    chunk = data[4 * q0 : 4 * q1].rstrip("=").translate(_URLSAFE)
    chunk = chunk[: len(chunk) - (len(chunk) % 4 == 1)]  # a lone trailing character holds no byte
    try:
        raw = binascii.a2b_base64(chunk + "=" * (-len(chunk) % 4))
    except binascii.Error:
        return b""
    return raw[start - 3 * q0 : end - 3 * q0]


def image_size(data: str) -> tuple[int, int] | None:
    """(width, height) from a PNG, GIF, WebP or JPEG header in base64, else None."""
    if any(c in data[:80] for c in " \r\n\t"):  # wrapped base64 (MIME style): offsets need it unwrapped
        data = re.sub(r"\s+", "", data)
    head = b64_bytes(data, 0, _HEAD)
    if head.startswith(b"\x89PNG\r\n\x1a\n") and head[12:16] == b"IHDR":
        return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return int.from_bytes(head[6:8], "little"), int.from_bytes(head[8:10], "little")
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return _webp(head)
    if head[:2] == b"\xff\xd8":
        return _jpeg(data)
    return None


def _webp(head: bytes) -> tuple[int, int] | None:
    chunk = head[12:16]
    if chunk == b"VP8 " and head[23:26] == b"\x9d\x01\x2a":
        return (int.from_bytes(head[26:28], "little") & 0x3FFF, int.from_bytes(head[28:30], "little") & 0x3FFF)
    if chunk == b"VP8L" and head[20] == 0x2F:
        bits = int.from_bytes(head[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":
        return int.from_bytes(head[24:27], "little") + 1, int.from_bytes(head[27:30], "little") + 1
    return None


# Start-of-frame markers (baseline, progressive, lossless...): not DHT (C4), JPG (C8) or DAC (CC).
_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


def _jpeg(data: str) -> tuple[int, int] | None:
    """Walk the markers from the start, decoding 9 bytes at each: EXIF and ICC blocks (often tens of
    KB) are skipped by their length, never decoded."""
    pos = 2
    for _ in range(_JPEG_MARKERS):
        seg = b64_bytes(data, pos, pos + 9)
        if len(seg) < 4 or seg[0] != 0xFF:
            return None
        marker = seg[1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker in _SOF:
            return (int.from_bytes(seg[7:9], "big"), int.from_bytes(seg[5:7], "big")) if len(seg) == 9 else None
        if marker == 0x01 or 0xD0 <= marker <= 0xD8:  # markers without a length
            pos += 2
            continue
        if marker == 0xDA:  # start of scan before any frame header: not a JPEG we can read
            return None
        pos += 2 + int.from_bytes(seg[2:4], "big")
    return None


def pdf_pages(data: str) -> list[tuple[float, float, str]] | None:
    """(width, height in points, text) of each page of a base64 PDF, else None (not a PDF we can read)."""
    try:
        raw = binascii.a2b_base64(data.translate(_URLSAFE))
    except binascii.Error:
        return None
    if not raw.startswith(b"%PDF"):
        return None
    try:
        import logging

        from pypdf import PdfReader
    except ImportError:  # without pypdf: the page objects, letter-sized, without their text
        count = len(re.findall(rb"/Type\s*/Page(?![a-zA-Z])", raw))
        return [(612.0, 792.0, "")] * count if count else None
    logging.getLogger("pypdf").setLevel(logging.ERROR)  # its repair notes are not the user's concern
    try:
        reader = PdfReader(io.BytesIO(raw))
        out = []
        for page in reader.pages:
            box = page.mediabox
            out.append((abs(float(box.width)), abs(float(box.height)), page.extract_text() or ""))
        return out
    except Exception:  # a damaged or encrypted PDF: pypdf raises many kinds; the estimate stands in
        return None
