"""Image and document token costs by the provider's own formula (rules/media.toml), never by the
length of their base64: a 400 KB screenshot is a few hundred tokens at the provider.

The wire adapters find the media in a request and hand them here as `Media` (no field names of any
provider in this module). Sizes and pages are read from the bytes by media_files.py: this runs in the
proxy's analysis of every request. A PDF's cost is remembered per segment.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterable
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

from prefixguard.contracts import ruleset
from prefixguard.model.media_files import image_size, pdf_pages

if TYPE_CHECKING:
    from prefixguard.model.prompt import Prompt

IMAGE, DOCUMENT = "image", "document"
UNCOSTED = "audio or video"  # no cost rule known (rules/media.toml has none): counted as nothing, an estimate
PDF = "application/pdf"


class Media(NamedTuple):
    """One image or document as the provider receives it."""

    kind: str  # IMAGE | DOCUMENT | UNCOSTED
    data: str | None = None  # base64 payload (no "data:" prefix); None when sent by URL or file id
    media_type: str | None = None  # "image/png", "application/pdf", "text/plain", ...
    detail: str | None = None  # OpenAI's "low" | "high" | "auto"
    text: str | None = None  # a plain-text document's text: counted by the tokenizer
    file_id: str | None = None  # sent by a file id: its size is known if its upload was seen
    cited: bool = False  # a document with citations enabled (an API may bill it otherwise: `cited_as`)


class Cost(NamedTuple):
    tokens: int
    estimated: bool  # the size or page count could not be read: a documented estimate


# ---- rules


@cache
def _tables() -> dict[str, Any]:
    return ruleset.load("media.toml")


class Rules(NamedTuple):
    provider: str
    image: dict[str, Any]
    document: dict[str, Any]
    key: bytes  # names these rules in a remembered count (the same bytes cost differently per model)
    cited: Rules | None = None  # a cited document's, where the API bills it as another API does


@cache
def rules_for(api: str, model: str | None) -> Rules:
    """The image and document rules for a request: by the model's family where the table knows it
    (an OpenAI-shaped request to a Claude model costs Claude's), else by the API shape; then the model's
    own row; then what that API bills differently, whatever the model (`[P.by_api.API]`: OpenAI's Chat
    and Responses bill one PDF differently, Bedrock bills Claude's PDF by its text layer), and for the model
    (its row's `by_api`: Bedrock bills Claude Sonnet 4.6's PDF pages as images, as the Messages API does); a
    document with citations enabled as on the API `cited_as` names (Bedrock: as the Messages API)."""
    tables = _tables()
    model_id, family = model or "", ruleset.same_family
    name = (
        next((n for n, t in tables.items() if any(family(model_id, p) for p in t.get("model_prefixes", ()))), None)
        or next((n for n, t in tables.items() if api in t.get("apis", ())), None)
        or next(n for n, t in tables.items() if t.get("fallback"))
    )
    table = tables[name]
    image, document = dict(table["image"]), dict(table["document"])
    best = max(
        (m for m in table.get("models", ()) if family(model_id, m["prefix"])),
        key=lambda m: len(m["prefix"]),
        default=None,
    )
    by_api = table.get("by_api", {}).get(api, {})
    own_api = (best or {}).get("by_api", {}).get(api, {})  # what that API bills differently for this model
    for row in (best or {}, by_api, own_api):
        image.update(row.get("image", {}))
        document.update(row.get("document", {}))
    cited = rules_for(by_api["cited_as"], model) if "cited_as" in by_api else None
    key = repr((name, sorted(image.items()), sorted(document.items()), cited and cited.key)).encode()
    return Rules(provider=name, image=image, document=document, key=key, cited=cited)


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
        else Media(kind=item.kind, data=upload.data, media_type=upload.media_type, detail=item.detail, cited=item.cited)
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
    rules = rules.cited if item.cited and rules.cited else rules
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
    if method == "smart_resize":
        return _smart_resize(w, h, rule)
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


def _smart_resize(w: int, h: int, rule: dict[str, Any]) -> int:
    """Qwen-VL: both sides rounded to whole units of `factor` px (a patch times the 2x2 merge), the image
    then scaled, keeping its shape, into min_pixels..max_pixels (down to whole units, or up to them); a
    token a unit."""
    f, low, high = rule["factor"], rule["min_pixels"], rule["max_pixels"]
    w, h = max(1, w), max(1, h)  # a header that says 0 (a damaged file) is no division by zero
    rw, rh = max(f, round(w / f) * f), max(f, round(h / f) * f)
    if rw * rh > high:
        s = math.sqrt(w * h / high)
        rw, rh = max(f, math.floor(w / s / f) * f), max(f, math.floor(h / s / f) * f)
    elif rw * rh < low:
        s = math.sqrt(low / (w * h))
        rw, rh = math.ceil(w * s / f) * f, math.ceil(h * s / f) * f
    return (rw // f) * (rh // f)


def _level(levels: dict[str, int], detail: str | None, default: str) -> int:
    """A fixed budget by resolution level (Gemini 3's media_resolution); an unknown or unset level
    costs the default one."""
    return levels.get(detail or default, levels[default])
