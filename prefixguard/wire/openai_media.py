"""Images, files and audio in OpenAI content parts (Chat's image_url / file / input_audio, Responses'
input_image / input_file), as the media the provider's image and PDF cost formulas take."""

from __future__ import annotations

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


def _file_id(ref: Any) -> str | None:
    file_id = ref.get("file_id") if isinstance(ref, dict) else None
    return file_id if isinstance(file_id, str) else None
