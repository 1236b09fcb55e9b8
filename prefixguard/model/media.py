"""Image and document token costs by the provider's own formula (rules/media.toml), never by the
length of their base64: a 400 KB screenshot is a few hundred tokens at the provider.

The wire adapters find the media in a request and hand them here as `Media` (no field names of any
provider in this module). Sizes are read from the file's header, decoding only the few bytes of base64
it needs (a JPEG is walked marker by marker): this runs in the proxy's analysis of every request.
PDFs are decoded whole (page count, page boxes and text need it); their cost is remembered per segment.
"""

from __future__ import annotations

import binascii
import io
import math
import re
from collections import OrderedDict
from collections.abc import Iterable
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

from prefixguard.contracts import ruleset
from prefixguard.model.ids import own_id

if TYPE_CHECKING:
    from prefixguard.model.prompt import Prompt

IMAGE, DOCUMENT = "image", "document"
UNCOSTED = "audio or video"  # no cost rule known (rules/media.toml has none): counted as nothing, an estimate
PDF = "application/pdf"
_HEAD = 32  # bytes that hold the size of a PNG, GIF or WebP
_JPEG_MARKERS = 512  # markers walked before a JPEG is given up (a real one has a dozen)
_DATA_URL = re.compile(r"data:([^;,]*)((?:;[^;,]*)*),")
_URLSAFE = str.maketrans("-_", "+/")  # Gemini's SDKs send bytes in the URL-safe base64 alphabet


class Media(NamedTuple):
    """One image or document as the provider receives it."""

    kind: str  # IMAGE | DOCUMENT | UNCOSTED
    data: str | None = None  # base64 payload (no "data:" prefix); None when sent by URL or file id
    media_type: str | None = None  # "image/png", "application/pdf", "text/plain", ...
    detail: str | None = None  # OpenAI's "low" | "high" | "auto"
    text: str | None = None  # a plain-text document's text: counted by the tokenizer
    file_id: str | None = None  # sent by a file id: its size is known if its upload was seen


class Cost(NamedTuple):
    tokens: int
    estimated: bool  # the size or page count could not be read: a documented estimate


def data_url(url: Any) -> tuple[str, str] | None:
    """(media type, base64 payload) of a base64 data URL, else None (an http URL, a file id)."""
    if not isinstance(url, str) or not url.startswith("data:"):
        return None
    found = _DATA_URL.match(url)
    if found is None or ";base64" not in found.group(2):
        return None
    return found.group(1), url[found.end() :]


# ---- rules


@cache
def _tables() -> dict[str, Any]:
    return ruleset.load("media.toml")


class Rules(NamedTuple):
    provider: str
    image: dict[str, Any]
    document: dict[str, Any]
    key: bytes  # names these rules in a remembered count (the same bytes cost differently per model)


@cache
def rules_for(api: str, model: str | None) -> Rules:
    """The image and document rules for a request: by the model's family where the table knows it
    (an OpenAI-shaped request to a Claude model costs Claude's), else by the API shape; then the model's
    own row; then what that API bills differently, whatever the model (`[P.by_api.API]`: OpenAI's Chat
    and Responses bill one PDF differently, Bedrock bills Claude's PDF by its text layer), and for the model
    (its row's `by_api`: Bedrock bills Claude Sonnet 4.6's PDF pages as images, as the Messages API does)."""
    tables = _tables()
    bare = own_id(model)
    name = (
        next((n for n, t in tables.items() if any(bare.startswith(p) for p in t.get("model_prefixes", ()))), None)
        or next((n for n, t in tables.items() if api in t.get("apis", ())), None)
        or next(n for n, t in tables.items() if t.get("fallback"))
    )
    table = tables[name]
    image, document = dict(table["image"]), dict(table["document"])
    best = max(
        (m for m in table.get("models", ()) if bare.startswith(m["prefix"])),
        key=lambda m: len(m["prefix"]),
        default=None,
    )
    by_api = table.get("by_api", {}).get(api, {})
    own_api = (best or {}).get("by_api", {}).get(api, {})  # what that API bills differently for this model
    for row in (best or {}, by_api, own_api):
        image.update(row.get("image", {}))
        document.update(row.get("document", {}))
    key = repr((name, sorted(image.items()), sorted(document.items()))).encode()
    return Rules(provider=name, image=image, document=document, key=key)


# ---- cost


def cost(items: Iterable[Media], rules: Rules, count_text: Any) -> Cost:
    """Tokens of these media under the rules; count_text(str) -> int counts a text part."""
    total, estimated = 0, False
    for item in items:
        if item.kind == UNCOSTED:  # never its base64 as text: 599,550 tokens for a video billed 3,831
            part = Cost(tokens=0, estimated=True)
        else:
            part = image_cost(item, rules) if item.kind == IMAGE else document_cost(item, rules, count_text)
        total += part.tokens
        estimated = estimated or part.estimated
    return Cost(tokens=total, estimated=estimated)


# ---- files uploaded earlier (a Files API): what their ids stand for, read once from the upload

UPLOADS_MAX = 4096
_uploads: OrderedDict[str, Media] = OrderedDict()


def remember_upload(file_id: str, media_type: str | None, data: str) -> None:
    """A file uploaded under this id (base64 data): later requests that send the id cost what it holds."""
    _uploads[file_id] = Media(
        kind=IMAGE if (media_type or "").startswith("image/") else DOCUMENT, data=data, media_type=media_type
    )
    _uploads.move_to_end(file_id)
    if len(_uploads) > UPLOADS_MAX:
        _uploads.popitem(last=False)


def forget_uploads() -> None:
    _uploads.clear()


def resolved(item: Media) -> Media:
    """The item with its upload's data where it was sent by the id of a file seen uploaded."""
    upload = _uploads.get(item.file_id) if item.file_id and item.data is None else None
    return (
        item
        if upload is None
        else Media(kind=item.kind, data=upload.data, media_type=upload.media_type, detail=item.detail)
    )


def upload_key(items: Iterable[Media]) -> bytes:
    """What changes these items' cost beyond their own bytes, part of a remembered cost's key: which
    file ids have a known upload, and a detail level set outside the part (Gemini's request-wide
    media resolution)."""
    return b"".join((b"u" if i.file_id in _uploads else b"") + (i.detail or "").encode() + b";" for i in items)


def run_tokens(prompt: Prompt) -> int:
    """Of a prompt's billed tokens, those the model runs: a model that bills an image at a multiple of that
    (gpt-4o-mini: `billed_multiple` in rules/media.toml) runs its share of the image's tokens."""
    multiple = rules_for(prompt.api, prompt.model).image.get("billed_multiple", 1.0)
    if multiple == 1.0:
        return prompt.total_tokens
    images = sum(s.tokens for s in prompt.segments if s.kind == IMAGE)
    return prompt.total_tokens - images + round(images / multiple)


def image_cost(item: Media, rules: Rules) -> Cost:
    item = resolved(item)
    size = image_size(item.data) if item.data else None
    w, h = size or rules.image["estimate_size"]
    return Cost(
        tokens=image_tokens(w, h, rules.image, item.detail) + rules.image.get("per_image_tokens", 0),
        estimated=size is None,
    )


def document_cost(item: Media, rules: Rules, count_text: Any) -> Cost:
    item = resolved(item)
    if item.text is not None:
        return Cost(tokens=count_text(item.text), estimated=False)
    pages = pdf_pages(item.data) if item.data and (item.media_type or PDF) == PDF else None
    doc = rules.document
    per_page, per_file = doc.get("per_page_tokens", 0), doc.get("per_file_tokens", 0)
    if pages is None:  # by reference, or not a PDF we can read: the documented estimate
        w, h = doc["page_points"]
        return Cost(tokens=per_file + doc["estimate_pages"] * (page_tokens(w, h, rules) + per_page), estimated=True)
    text_billed = doc.get("page_text", True)
    return Cost(
        tokens=per_file
        + sum(
            page_tokens(w, h, rules, item.detail) + per_page + (count_text(text) if text and text_billed else 0)
            for w, h, text in pages
        ),
        estimated=False,
    )


def page_tokens(width_pt: float, height_pt: float, rules: Rules, detail: str | None = None) -> int:
    """The image of one page: none where the API bills the text layer only (`page_image = false`), a
    budget by resolution level (`page_levels`), a flat cost where the API bills one
    (`page_image_tokens`), else its box rendered at page_dpi through the image rule (which caps it)."""
    doc = rules.document
    if not doc.get("page_image", True):
        return 0
    if "page_levels" in doc:
        return _level(doc["page_levels"], detail, doc["default_page_level"])
    if "page_image_tokens" in doc:
        return doc["page_image_tokens"]
    scale = doc["page_dpi"] / 72
    return image_tokens(max(1, round(width_pt * scale)), max(1, round(height_pt * scale)), rules.image, "high")


def image_tokens(w: int, h: int, rule: dict[str, Any], detail: str | None = None) -> int:
    """Tokens of a w x h image under one image rule (rules/media.toml describes the methods)."""
    method = rule["method"]
    if method == "patches":
        return _patches(w, h, rule)
    if method == "tiles":
        return _tiles(w, h, rule, detail or rule.get("default_detail", "high"))
    if method == "crop_tiles":
        return _crop_tiles(w, h, rule)
    if method == "canvas_tiles":
        return _canvas_tiles(w, h, rule)
    if method == "levels":
        return _level(rule["levels"], detail, rule["default_level"])
    if method == "fixed":
        return rule["tokens"]
    raise ValueError(f"rules/media.toml: unknown image method {method!r}")


def _patches(w: int, h: int, rule: dict[str, Any]) -> int:
    """OpenAI's documented steps (and Claude's 28 px patches): shrink until the patches fit the cap,
    then once more so that whole patches cover the shrunk image."""
    p, cap = rule["patch"], rule["max_patches"]
    edge = rule.get("max_long_edge")
    if edge and max(w, h) > edge:
        s = edge / max(w, h)
        w, h = max(1, int(w * s)), max(1, int(h * s))
    if math.ceil(w / p) * math.ceil(h / p) > cap:
        s = math.sqrt(p * p * cap / (w * h))
        rw, rh = w * s, h * s
        s *= min(math.floor(rw / p) / (rw / p), math.floor(rh / p) / (rh / p))
        w, h = w * s, h * s
    patches = min(math.ceil(w / p) * math.ceil(h / p), cap)
    rows = math.ceil(h / p) * rule.get("row_tokens", 0)  # a row-break token per row of patches (Pixtral)
    return math.ceil(patches * rule.get("multiplier", 1.0)) + rows


def _tiles(w: int, h: int, rule: dict[str, Any], detail: str) -> int:
    if detail == "low":
        return rule["base_tokens"]
    box = rule["fit_box"]
    if max(w, h) > box:
        s = box / max(w, h)
        w, h = w * s, h * s
    short = rule["short_side"]
    if min(w, h) > short:
        s = short / min(w, h)
        w, h = w * s, h * s
    tile = rule["tile"]
    return rule["base_tokens"] + rule["tile_tokens"] * math.ceil(w / tile) * math.ceil(h / tile)


def _crop_tiles(w: int, h: int, rule: dict[str, Any]) -> int:
    """Gemini 1.5 and 2.0: a small image (both sides <= small_side) is one fixed cost; a larger one is cut in
    square crops of its short side / crop_divisor (kept within min_crop..max_crop), each a tile, plus
    extra_tiles (a whole-image view)."""
    if w <= rule["small_side"] and h <= rule["small_side"]:
        return rule["small_tokens"]
    unit = min(rule["max_crop"], max(rule["min_crop"], math.floor(min(w, h) / rule["crop_divisor"])))
    tiles = math.ceil(w / unit) * math.ceil(h / unit) + rule.get("extra_tiles", 0)
    return tiles * rule["tile_tokens"]


def _canvas_tiles(w: int, h: int, rule: dict[str, Any]) -> int:
    """Llama 4: the image resized, without distortion, onto the canvas of whole tiles (at most max_tiles)
    that needs the least upscaling (else the least downscaling; the smaller canvas on a tie). One tile
    costs tile_tokens; several cost theirs and separator_tokens each, plus a whole-image tile."""
    tile, cap = rule["tile"], rule["max_tiles"]
    scales = {
        (cols, rows): min(cols * tile / w, rows * tile / h)
        for cols in range(1, cap + 1)
        for rows in range(1, cap // cols + 1)
    }
    up = [s for s in scales.values() if s >= 1]
    chosen = min(up) if up else max(scales.values())
    cols, rows = min((c for c, s in scales.items() if s == chosen), key=lambda c: c[0] * c[1])
    n = cols * rows
    each = rule["tile_tokens"]
    return each if n == 1 else n * (each + rule.get("separator_tokens", 0)) + each


def _level(levels: dict[str, int], detail: str | None, default: str) -> int:
    """A fixed budget by resolution level (Gemini 3's media_resolution); an unknown or unset level
    costs the default one."""
    return levels.get(detail or default, levels[default])


# ---- sizes from the bytes


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
