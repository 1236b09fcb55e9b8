"""Images, files and audio in OpenAI content parts (Chat's image_url / file / input_audio, Responses'
input_image / input_file), as the media the provider's image and PDF cost formulas take."""

from __future__ import annotations

import re
from typing import Any

from prefixguard.model import media_files
from prefixguard.model.media import DOCUMENT, IMAGE, PDF, UNCOSTED, Media


def part_media(part: Any) -> Media | None:
    """The image or file in a content part (Chat's image_url / file, Responses' input_image /
    input_file), by its base64 data URL or, without one, by reference (an estimate); audio, uncosted."""
    kind = part.get("type") if isinstance(part, dict) else None
    if kind == "input_audio":  # billed by its length, which no rule here knows
        return Media(kind=UNCOSTED)
    if kind in ("image_url", "input_image"):
        ref = part.get("image_url")
        detail = part.get("detail")
        if isinstance(ref, dict):  # Chat: {"url": ..., "detail": ...}; Responses: a string
            detail = ref.get("detail", detail)
            ref = ref.get("url")
        found = media_files.data_url(ref)
        return Media(
            kind=IMAGE,
            data=found[1] if found else None,
            media_type=found[0] if found else None,
            detail=detail,
            file_id=_file_id(part),
        )
    if kind in ("file", "input_file"):
        ref = part.get("file") if kind == "file" else part
        data = ref.get("file_data") if isinstance(ref, dict) else None
        found = media_files.data_url(data)
        if found is None and isinstance(data, str):  # bare base64 (some clients send it so)
            found = (PDF, data)
        return Media(
            kind=DOCUMENT,
            data=found[1] if found else None,
            media_type=found[0] if found else None,
            file_id=_file_id(ref),
        )
    return None


# A file written into a message's text as a data URL (NVIDIA's NIM: `<img src="data:image/png;base64,...">`).
_EMBEDDED = re.compile(r"data:((?:image|application)/[\w.+-]+);base64,([A-Za-z0-9+/_-]+=*)")


def embedded_media(text: str) -> tuple[list[Media], str] | None:
    """The files a text holds as base64 data URLs, and the text without them; None where it holds none. The
    provider reads a file, not its base64: counted as text, a 672 KB PNG was 480,000 tokens where NVIDIA
    billed 5."""
    if ";base64," not in text:
        return None
    found = [
        Media(kind=IMAGE if m.group(1).startswith("image/") else DOCUMENT, data=m.group(2), media_type=m.group(1))
        for m in _EMBEDDED.finditer(text)
    ]
    return (found, _EMBEDDED.sub("", text)) if found else None


def _file_id(ref: Any) -> str | None:
    file_id = ref.get("file_id") if isinstance(ref, dict) else None
    return file_id if isinstance(file_id, str) else None
