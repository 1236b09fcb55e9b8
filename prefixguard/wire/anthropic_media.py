"""Images, documents and citations in Anthropic Messages content blocks: the media a block carries
(also inside a tool_result) for the provider's image and PDF cost formulas, and the flags the request's
settings report (images, citations enabled)."""

from __future__ import annotations

from typing import Any

from prefixguard.model.media import DOCUMENT, IMAGE, Media
from prefixguard.model.prompt import compact_json, without_markers

MEDIA_KINDS = (IMAGE, DOCUMENT)  # block types costed by the provider's image and PDF formula


def block_media(block: dict[str, Any], kind: str) -> tuple[list[Media], str | None] | None:
    """The images and documents in a block (also inside a tool_result), and the text of the rest of
    it to count with the tokenizer; None when it holds none."""
    if kind in MEDIA_KINDS:
        item = _source(kind, block.get("source"))
        extra = [block[k] for k in ("title", "context") if isinstance(block.get(k), str)]
        return [item], "\n".join(extra) or None
    inner = block.get("content")
    if not isinstance(inner, list):
        return None
    found = [b for b in inner if isinstance(b, dict) and b.get("type") in MEDIA_KINDS]
    if not found:
        return None
    items = [m for b in found for m in (block_media(b, b["type"]) or ([], None))[0]]
    rest = {**without_markers(block), "content": [b for b in inner if b not in found]}
    return items, compact_json(rest)


def _source(kind: str, source: Any) -> Media:
    """An image or document block's source: base64 data, plain text, or a reference (URL, file id)."""
    if not isinstance(source, dict):
        return Media(kind=kind)
    form = source.get("type")
    if form == "base64" and isinstance(source.get("data"), str):
        return Media(kind=kind, data=source["data"], media_type=source.get("media_type"))
    if form == "text" and isinstance(source.get("data"), str):
        return Media(kind=DOCUMENT, media_type=source.get("media_type"), text=source["data"])
    if form == "content" and isinstance(source.get("content"), list):
        return Media(kind=DOCUMENT, text=chunks_text(source["content"]))
    # by URL or file id: the size is unknown (an estimate) unless the file's upload was seen
    file_id = source.get("file_id") if form == "file" and isinstance(source.get("file_id"), str) else None
    return Media(kind=kind, media_type=source.get("media_type"), file_id=file_id)


def chunks_text(chunks: list[Any]) -> str:
    """The text of a document sent as chunks of content (Anthropic's `content` source, Bedrock Converse's): a
    line a chunk."""
    return "\n".join(
        (c["text"] if isinstance(c.get("text"), str) else "") if isinstance(c, dict) else str(c) for c in chunks
    )


def has_image(block: Any) -> bool:
    if not isinstance(block, dict):
        return False
    if block.get("type") == "image":
        return True
    inner = block.get("content")  # tool_result blocks may carry images
    return isinstance(inner, list) and any(has_image(b) for b in inner)


def cites(block: Any) -> bool:
    citations = block.get("citations") if isinstance(block, dict) else None
    return isinstance(citations, dict) and bool(citations.get("enabled"))
