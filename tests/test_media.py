"""Images and documents cost the provider's formula, never their base64 length (prefixguard/model/media.py,
rules/media.toml), checked against real recorded images and the provider's own billed usage."""
from __future__ import annotations

import base64
import binascii
import copy
import io
import json
import random
import re
from pathlib import Path

import pytest
from helpers.bench import load_bench
from helpers.cli import CliRunner
from PIL import Image

from prefixguard.cli import main as cli
from prefixguard.model import media, media_files
from prefixguard.model.media import Media
from prefixguard.wire import parse_request, parse_response

CREWAI = "recorded/crewai"
OPENROUTER_IMAGE = "recorded/pydantic-ai/test_cache_test_openrouter_cache_point_image_e2e/0001.request.json"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _encoded(img: Image.Image, fmt: str, **kw: object) -> str:
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return _b64(buf.getvalue())


def _media_requests(root: Path) -> list[Path]:
    """Every recorded request that sends an image or a document block."""
    out = []
    for path in sorted(root.glob("*/*.request.json")):
        body = path.read_text()
        if '"type": "image"' in body or '"type": "document"' in body or '"image_url"' in body:
            out.append(path)
    return out


def _recorded_images(shared_data: Path) -> list[str]:
    found = []
    for path in _media_requests(shared_data / CREWAI) + [shared_data / OPENROUTER_IMAGE]:
        for msg in json.loads(path.read_text())["messages"]:
            for block in msg["content"] if isinstance(msg["content"], list) else ():
                src = block.get("source") or {}
                if src.get("type") == "base64" and src["media_type"].startswith("image/"):
                    found.append(src["data"])
                elif block.get("type") == "image_url":
                    found.append(media_files.data_url(block["image_url"]["url"])[1])
    return list(dict.fromkeys(found))


# ---- sizes from headers

def test_sizes_of_recorded_images_match_a_full_decode(shared_data: Path) -> None:
    images = _recorded_images(shared_data)
    assert len(images) >= 2  # crewAI's PNG and pydantic-ai's JPEG
    for data in images:
        assert media_files.image_size(data) == Image.open(io.BytesIO(base64.b64decode(data))).size


@pytest.mark.parametrize("fmt,kw", [("PNG", {}), ("GIF", {}), ("WEBP", {"lossless": True}),
                                    ("WEBP", {"quality": 80}), ("JPEG", {"quality": 90}),
                                    ("JPEG", {"progressive": True})])
def test_sizes_of_every_format_match_pillow(fmt: str, kw: dict) -> None:
    rng = random.Random(7)
    for w, h in ((1, 1), (333, 77), (1920, 1080)):
        img = Image.frombytes("RGB", (w, h), rng.randbytes(w * h * 3))
        assert media_files.image_size(_encoded(img, fmt, **kw)) == (w, h), (fmt, w, h)


def test_webp_extended_header() -> None:
    img = Image.new("RGBA", (640, 360), (10, 20, 30, 128))  # alpha: a VP8X header
    data = _encoded(img, "WEBP", quality=80, exif=b"Exif\x00\x00" + b"\x00" * 64)
    assert base64.b64decode(data)[12:16] == b"VP8X"
    assert media_files.image_size(data) == (640, 360)


def test_jpeg_size_is_read_past_a_large_exif_block_decoding_few_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A JPEG's frame header may sit after 60 KB of EXIF and ICC data: the walk skips them by length."""
    rng = random.Random(3)
    img = Image.frombytes("RGB", (400, 300), rng.randbytes(400 * 300 * 3))
    data = _encoded(img, "JPEG", exif=b"Exif\x00\x00" + rng.randbytes(60_000), icc_profile=rng.randbytes(30_000))
    decoded: list[int] = []
    real = binascii.a2b_base64

    class Spy:
        Error = binascii.Error

        @staticmethod
        def a2b_base64(s: str) -> bytes:
            decoded.append(len(s))
            return real(s)

    monkeypatch.setattr(media_files, "binascii", Spy)
    assert media_files.image_size(data) == (400, 300)
    assert len(data) > 200_000 and sum(decoded) < 200  # a few markers, not the 250 KB of base64


def test_wrapped_base64_and_junk() -> None:
    img = Image.new("RGB", (50, 40))
    data = _encoded(img, "PNG")
    wrapped = "\n".join(data[i:i + 76] for i in range(0, len(data), 76))
    assert media_files.image_size(wrapped) == (50, 40)
    assert media_files.image_size("not base64 at all!") is None
    assert media_files.image_size(_b64(b"\xff\xd8\xff\xda" + b"\x00" * 20)) is None  # scan before any frame
    assert media_files.data_url("data:image/png;base64," + data) == ("image/png", data)
    assert media_files.data_url("https://example.com/x.png") is None


# ---- formulas against the providers' worked examples

def test_anthropic_patch_formula_examples() -> None:
    rule = media.rules_for("anthropic", "claude-sonnet-4-5").image
    assert rule["method"] == "patches" and rule["patch"] == 28
    assert media.image_tokens(200, 200, rule) == 8 * 8
    assert media.image_tokens(1000, 1000, rule) == 36 * 36   # 1,296: counted 1,304 with the message around it
    # long edge over 1568 px: scaled to 1568 x 392 first, 56 x 14 patches
    assert media.image_tokens(4000, 1000, rule) == media.image_tokens(1568, 392, rule) == 784
    # over 1,568 patches: shrunk to whole patches under the cap, whatever the size
    assert 1500 <= media.image_tokens(8000, 8000, rule) <= 1568
    # Claude 3.x bills the same patches (a token a row, read from two large images, is not billed on small ones)
    old = media.rules_for("anthropic", "claude-3-5-haiku-20241022").image
    assert media.image_tokens(640, 480, old) == media.image_tokens(640, 480, rule) == 23 * 18


def test_openai_tile_formula_examples() -> None:
    rule = media.rules_for("openai-chat", "gpt-4o").image
    assert media.image_tokens(1024, 1024, rule, "high") == 765   # docs' worked examples
    assert media.image_tokens(2048, 4096, rule, "high") == 1105
    assert media.image_tokens(4096, 8192, rule, "low") == 85
    assert media.image_tokens(1024, 1024, rule, None) == 765     # auto: costed as high
    mini = media.rules_for("openai-chat", "gpt-4o-mini").image
    assert media.image_tokens(1024, 1024, mini, "high") == 2833 + 4 * 5667


def test_openai_patch_formula_examples() -> None:
    rule = media.rules_for("openai-responses", "gpt-4.1-mini-2025-04-14").image
    assert rule["method"] == "patches" and rule["multiplier"] == 1.62
    one = {**rule, "multiplier": 1.0}
    assert media.image_tokens(1024, 1024, one) == 1024         # docs: 1024 patches
    assert media.image_tokens(1800, 2400, one) == 1452         # docs: 1452 patches after the shrink
    assert media.image_tokens(1024, 1024, rule) == 1659        # 1024 * 1.62, rounded up
    assert media.image_tokens(1024, 1024, rule, "low") == 1659  # detail does not apply to patch models


def test_rules_follow_the_model_family() -> None:
    assert media.rules_for("openai-chat", "anthropic/claude-sonnet-4.6").provider == "anthropic"
    assert media.rules_for("anthropic", "claude-opus-4-7").image["method"] == "patches"
    assert media.rules_for("openai-chat", "gpt-4.1").image["method"] == "tiles"
    assert media.rules_for("openai-chat", "some-local-model").provider == "openai"


def test_an_api_no_table_lists_costs_by_the_one_fallback_table_of_the_data() -> None:
    fallbacks = [name for name, table in media._tables().items() if table.get("fallback")]
    assert len(fallbacks) == 1
    media.rules_for.cache_clear()
    assert media.rules_for("gemini", "gemini-2.5-flash").provider == "gemini"   # its own table now
    assert media.rules_for("an-api-of-tomorrow", None).provider == fallbacks[0]
    assert media.rules_for("gemini", "claude-sonnet-4-5").provider == "anthropic"   # the model's family first


# ---- documents

def test_pdf_pages_and_estimates(shared_data: Path) -> None:
    body = json.loads((shared_data / CREWAI / "llms_TestAnthropicMultimodalIntegration.test_analyze_pdf"
                       / "0001.request.json").read_text())
    pdf = body["messages"][0]["content"][1]["source"]["data"]
    assert media_files.pdf_pages(pdf) == [(612.0, 792.0, "")]
    rules = media.rules_for("anthropic", "claude-3-5-haiku-20241022")
    one = media.document_cost(Media("document", pdf, "application/pdf"), rules, len)
    assert not one.estimated and 1500 < one.tokens < 1700
    # three pages made by a real PDF writer: three times the page cost
    pages = [Image.new("RGB", (612, 792), "white") for _ in range(3)]
    buf = io.BytesIO()
    pages[0].save(buf, "PDF", save_all=True, append_images=pages[1:], resolution=72)
    three = media.document_cost(Media("document", _b64(buf.getvalue()), "application/pdf"), rules, len)
    assert three == media.Cost(3 * one.tokens, False)
    by_ref = media.document_cost(Media("document"), rules, len)
    assert by_ref.estimated and by_ref.tokens == one.tokens
    assert media.document_cost(Media("document", "bm90IGEgcGRm", "application/pdf"), rules, len).estimated
    assert media.document_cost(Media("document", text="plain words"), rules, len) == media.Cost(11, False)


# ---- the provider's billed usage: every recorded image/PDF request

def _calibration(shared_data: Path, uploads: bool) -> list[tuple[str, int, int, bool]]:
    """(request, billed prompt, predicted prompt, estimated) per image/PDF request; with uploads, the
    files each cassette uploads (POST /v1/files) are read first, as replay and the proxy read them."""
    from prefixguard.replay.sources import cassette_uris, remember_uploads
    media.forget_uploads()
    rows = []
    for path in _media_requests(shared_data / CREWAI) + [shared_data / OPENROUTER_IMAGE]:
        if uploads:
            remember_uploads(path.parent, cassette_uris(path.parent))
        prompt = parse_request(path.read_bytes(), source=str(path))
        usage = parse_response(path.with_name(path.name.replace("request", "response")).read_bytes(), prompt.api)
        rows.append((str(path), usage.prompt_total, prompt.total_tokens, any(s.estimated for s in prompt.segments)))
    media.forget_uploads()
    return rows


def test_every_recorded_image_and_pdf_request_within_10_percent_of_billed(shared_data: Path) -> None:
    # images sent by file id cannot be sized from the request alone: a documented estimate, flagged
    estimates = [r for r in _calibration(shared_data, uploads=False) if r[3]]
    assert len(estimates) == 2 and all("file_id" in Path(p).read_text() for p, *_ in estimates)
    # ...but the cassettes hold their uploads: read first, every request is sized and within 10%
    rows = _calibration(shared_data, uploads=True)
    assert len(rows) >= 22 and not any(r[3] for r in rows)  # 21 crewAI requests, 1 OpenRouter image
    for path, billed, predicted, _ in rows:
        assert abs(predicted - billed) <= 0.10 * billed, (path, billed, predicted)


def test_nested_tool_result_image_costs_its_formula(shared_data: Path) -> None:
    body = json.loads((shared_data / CREWAI / "llms_TestAnthropicMultimodalIntegration.test_describe_image"
                       / "0001.request.json").read_text())
    image = body["messages"][0]["content"][1]
    flat = parse_request(json.dumps(body)).segments[1].media_tokens
    nested = copy.deepcopy(body)
    nested["messages"] = [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "shot", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": [{"type": "text", "text": "the screen"}, image]}]}]
    seg = parse_request(json.dumps(nested)).segments[-1]
    assert seg.kind == "tool_result" and seg.media_tokens == flat == 23 * 18 + 2  # claude-3-5-haiku
    assert seg.tokens - seg.media_tokens < 40  # the text and ids around it, by the tokenizer


# ---- no feature scales with the base64 length any more

def _image_request(data: str, api: str) -> bytes:
    if api == "anthropic":
        block = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data},
                 "cache_control": {"type": "ephemeral"}}
        body = {"model": "claude-sonnet-4-5", "max_tokens": 10,
                "messages": [{"role": "user", "content": [block, {"type": "text", "text": "What is it?"}]}]}
    elif api == "openai-chat":
        body = {"model": "gpt-4.1", "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + data}},
            {"type": "text", "text": "What is it?"}]}]}
    else:
        body = {"model": "gpt-4.1", "input": [{"role": "user", "content": [
            {"type": "input_image", "image_url": "data:image/png;base64," + data},
            {"type": "input_text", "text": "What is it?"}]}]}
    return json.dumps(body).encode()


@pytest.mark.parametrize("api", ["anthropic", "openai-chat", "openai-responses"])
def test_totals_do_not_scale_with_base64_length(api: str, tmp_path: Path) -> None:
    rng = random.Random(1)
    flat = _encoded(Image.new("RGB", (800, 600), "white"), "PNG")
    noisy = _encoded(Image.frombytes("RGB", (800, 600), rng.randbytes(800 * 600 * 3)), "PNG")
    assert len(noisy) > 100 * len(flat)
    a, b = parse_request(_image_request(flat, api)), parse_request(_image_request(noisy, api))
    assert a.total_tokens == b.total_tokens < 1000
    assert a.chain != b.chain  # the bytes still decide cache identity
    if api != "anthropic":  # lint's below-minimum speaks of a breakpoint; the OpenAI shapes here have none
        return
    # lint reads the same count: below Sonnet's 1,024-token minimum whatever the base64 weighs
    path = tmp_path / "noisy.json"
    path.write_bytes(_image_request(noisy, api))
    out = CliRunner().invoke(cli, ["lint", str(path), "--format", "json"])
    found = json.loads(out.output)["findings"]
    assert any(f["name"] == "below-minimum" for f in found), out.output


def test_diff_counts_an_appended_screenshot_by_its_formula(tmp_path: Path) -> None:
    rng = random.Random(2)
    shot = _encoded(Image.frombytes("RGB", (400, 300), rng.randbytes(400 * 300 * 3)), "PNG")
    a = {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [{"role": "user", "content": "Look."}]}
    b = copy.deepcopy(a)
    b["messages"] += [{"role": "assistant", "content": "Ok."}, {"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": shot}}]}]
    pa, pb = tmp_path / "a.json", tmp_path / "b.json"
    pa.write_text(json.dumps(a))
    pb.write_text(json.dumps(b))
    out = CliRunner().invoke(cli, ["diff", str(pa), str(pb)])
    assert out.exit_code in (0, 1), out.output
    total = parse_request(pb.read_bytes()).total_tokens
    assert total < 250  # 400x300: 160 + 27, not the ~200,000 of its base64 as text
    found = re.search(r"([\d,]+) reused, ([\d,]+) to prefill again|([\d,]+) reused of ([\d,]+) in B", out.output)
    assert found, out.output
    assert all(int(n.replace(",", "")) <= total for n in found.groups() if n)


def test_token_scale_leaves_media_tokens() -> None:
    from prefixguard.judge.scale import TokenScale
    from prefixguard.model.usage import Usage
    rng = random.Random(4)
    shot = _encoded(Image.frombytes("RGB", (400, 300), rng.randbytes(400 * 300 * 3)), "PNG")
    prompt = parse_request(_image_request(shot, "anthropic"))
    image = prompt.segments[0]
    framing = image.tokens - image.media_tokens  # Claude's format: the message's 3, the reply's 4
    assert image.media_tokens == 15 * 11 + 2 and framing == 3 + 4
    longer = json.loads(_image_request(shot, "anthropic"))
    longer["messages"][0]["content"][1]["text"] = "What is it? " * 40
    longer = parse_request(json.dumps(longer))
    scale = TokenScale()
    for p in (prompt, longer):  # the provider bills the text at 1.5x our count and the image as costed
        text = p.total_tokens - image.media_tokens
        scale.learn(p, Usage(prompt_total=image.media_tokens + round(1.5 * text), reported=True))
    scaled = scale.scaled(prompt)
    assert scaled.segments[0].tokens == image.media_tokens + round(1.5 * framing)  # the image itself unscaled
    assert scaled.segments[1].tokens == round(prompt.segments[1].tokens * 1.5)


def test_url_and_file_images_are_flagged_estimates() -> None:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
        {"type": "image", "source": {"type": "file", "file_id": "file_1"}},
        {"type": "document", "source": {"type": "file", "file_id": "file_2"}},
        {"type": "text", "text": "compare"}]}]}
    segs = parse_request(json.dumps(body)).segments
    assert [s.estimated for s in segs] == [True, True, True, False]
    rule = media.rules_for("anthropic", "claude-sonnet-4-5").image
    assert segs[0].media_tokens == segs[1].media_tokens == media.image_tokens(1024, 1024, rule) + 2
    chat = {"model": "gpt-4o", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "low"}}]}]}
    seg = parse_request(json.dumps(chat)).segments[0]
    assert seg.estimated and seg.media_tokens == 85


def test_token_scale_fits_the_text_of_a_recorded_image_request(shared_data: Path) -> None:
    """The tokenizer calibration (provider total against our total) is taken over the text only: the
    image's cost is the provider's already. Before, 485 billed / 26,297 counted pinned it at its bound."""
    from prefixguard.judge.scale import TokenScale
    from prefixguard.replay.sources import load
    from prefixguard.replay.targets import parsed
    req = load(shared_data / CREWAI / "llms_TestAnthropicMultimodalIntegration.test_describe_image").requests[0]
    prompt, scale = parsed(req), TokenScale()
    scale.learn(prompt, req.reported)
    assert scale.scaled(prompt).total_tokens == req.reported.prompt_total == 453
    media = sum(s.media_tokens for s in prompt.segments)
    # the image by its patches and the block's 2; the text and Claude's format 17 (19 billed): the ~18 more
    # this larger image bills on Claude 3 (rules/media.toml) are tokens unseen, and the total is the bill
    assert media == 416 and prompt.total_tokens - media == 17


def test_openai_shapes_cost_files_and_tool_output_images(shared_data: Path) -> None:
    body = json.loads((shared_data / CREWAI / "llms_TestAnthropicMultimodalIntegration.test_analyze_pdf"
                       / "0001.request.json").read_text())
    pdf = body["messages"][0]["content"][1]["source"]["data"]
    png = _encoded(Image.new("RGB", (1024, 1024), "white"), "PNG")
    rules = media.rules_for("openai-chat", "gpt-4o")
    page = media.document_cost(Media("document", pdf, "application/pdf"), rules, len).tokens
    chat = {"model": "gpt-4o", "messages": [{"role": "user", "content": [
        {"type": "file", "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64," + pdf}},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + png, "detail": "high"}}]}]}
    segs = parse_request(json.dumps(chat)).segments
    assert [(s.kind, s.media_tokens, s.estimated) for s in segs] == [("document", page, False),
                                                                      ("image", 765, False)]
    responses = {"model": "gpt-4o", "input": [
        {"role": "user", "content": [{"type": "input_file", "filename": "a.pdf",
                                      "file_data": "data:application/pdf;base64," + pdf},
                                     {"type": "input_image", "image_url": "data:image/png;base64," + png,
                                      "detail": "low"},
                                     {"type": "input_file", "file_id": "file-1"}]},
        {"type": "function_call", "call_id": "c1", "name": "shot", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": [
            {"type": "input_text", "text": "the screen"},
            {"type": "input_image", "image_url": "data:image/png;base64," + png, "detail": "high"}]}]}
    segs = parse_request(json.dumps(responses)).segments
    # the same PDF bills its text layer only on Responses (rules/media.toml [openai.by_api])
    page = media.document_cost(Media("document", pdf, "application/pdf"),
                               media.rules_for("openai-responses", "gpt-4o"), len).tokens
    by_id = media.document_cost(Media("document", file_id="file-1"), media.rules_for("openai-responses", "gpt-4o"),
                                len).tokens
    assert [(s.kind, s.media_tokens, s.estimated) for s in segs] == [
        ("document", page, False), ("image", 85, False), ("document", by_id, True), ("tool_use", 0, False),
        ("tool_result", 765, False)]
    assert segs[-1].tokens - segs[-1].media_tokens < 40


def test_the_proxy_sizes_a_file_id_by_the_upload_it_saw(shared_data: Path, tmp_path: Path) -> None:
    """An image uploaded through the proxy (POST /v1/files, multipart) and then sent by its id costs
    what the upload holds (640x480), not the 1024x1024 estimate."""
    import base64

    from prefixguard.capture.store import open_store
    from prefixguard.proxy.analysis import Analyzer, FlowState, Response
    folder = shared_data / CREWAI / "llms_TestAnthropicFileUploadIntegration.test_describe_image_with_file_id"
    media.forget_uploads()
    analyzer = Analyzer(store=str(tmp_path / "capture.db"))
    calls = [("/v1/files?beta=true", base64.b64decode((folder / "0001.request.txt").read_bytes()), "0001"),
             ("/v1/messages?beta=true", (folder / "0002.request.json").read_bytes(), "0002")]
    for i, (path, body, stem) in enumerate(calls):
        analyzer.request(FlowState(id=stem, ts=float(i), sent=float(i), path=path, body=body))
        analyzer.finish(Response(id=stem, status=200, body=(folder / f"{stem}.response.json").read_bytes()))
    analyzer.close()
    with open_store(tmp_path / "capture.db") as db:
        sent = [r for r in db.records() if r.id == "0002"][0]
    rules = media.rules_for("anthropic", sent.model)
    image = media.image_tokens(640, 480, rules.image) + rules.image.get("per_image_tokens", 0)
    assert any(tokens == image for _, _, tokens in sent.segments), sent.segments
    billed = sent.usage.prompt_total
    assert abs(sum(t for *_, t in sent.segments) - billed) <= 0.1 * billed
    media.forget_uploads()


# ---- OpenAI PDFs by each API's own billing (rules/media.toml [openai.by_api])

def _media_calibration():
    return load_bench("media_calibration")


def test_openai_pdfs_and_images_cost_what_each_api_bills(shared_data: Path) -> None:
    """The same one-page PDF costs 219 tokens on Chat and 7 on Responses (its text layer and filename);
    rebuilt from public recordings (bench/media_calibration.py), every request lands within 10% of what
    OpenAI billed (before: +375%, +5,470% and +18,336%: a page image at 300 dpi by the image rule). The
    image requests (tiles on gpt-4o-mini, patches on o4-mini, Chat and Responses) calibrated nothing:
    the docs' formulas, o200k_base and the chat framing give the bill exactly, o4-mini's to a token (its
    framing, measured on 84 text-only requests of the reasoning models, primes the reply with 2, not 3)."""
    bench = _media_calibration()
    rows = [bench.rebuilt_row(*r) for r in bench.rebuilt(shared_data)]
    assert all(abs(r["error_pct"]) <= 10 for r in rows), rows
    assert [r["predicted"] - r["billed"] for r in rows[3:]] == [0, -1, 0]
    chat, responses, blank = rows[:3]
    assert (chat["media"], responses["media"]) == (219, 7)     # 3 tokens of text + 4 a file (+ 212 a page on Chat)
    assert blank["media"] == 4                                  # a blank page: the file's own tokens only
    assert not any(r["estimate"] for r in rows)


def test_the_calibration_leaves_out_requests_whose_only_documents_are_text(shared_data: Path, tmp_path: Path) -> None:
    """bench/media_calibration.py checks images and PDFs: a request whose documents are all text (Claude's text
    or content source: langchain-anthropic's citations test, chatlas's CSV) is left out, as its docstring says;
    one that also sends a PDF stays. They were counted, their text taken for media."""
    pdf = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                          "data": _media_calibration().one_page_pdf("Dummy PDF file", (595, 842))}}
    texts = [{"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "a,b\n1,2\n"}},
             {"type": "document", "source": {"type": "content", "content": [{"type": "text", "text": "Grass."}]},
              "citations": {"enabled": True}}]
    for n, extra in enumerate(([texts[0]], [texts[1]], [texts[0], pdf]), 1):
        folder = tmp_path / "held" / "src" / f"c{n}"
        folder.mkdir(parents=True)
        body = {"model": "claude-haiku-4-5", "max_tokens": 8,
                "messages": [{"role": "user", "content": [*extra, {"type": "text", "text": "What is it?"}]}]}
        (folder / "0001.request.json").write_text(json.dumps(body))
        (folder / "0001.response.json").write_text(json.dumps({"id": "m", "type": "message", "role": "assistant",
            "content": [{"type": "text", "text": "ok"}], "usage": {"input_tokens": 1700, "output_tokens": 1}}))
    rows = _media_calibration().calibration_rows(tmp_path / "held")
    assert [r["request"].split("/")[1] for r in rows] == ["c3"], rows


def test_a_pdf_page_image_is_billed_per_page_on_chat_only(shared_data: Path) -> None:
    """A real two-document request shape: each page adds the flat page image on Chat, nothing on Responses."""
    body = json.loads((shared_data / CREWAI / "llms_TestAnthropicMultimodalIntegration.test_analyze_pdf"
                       / "0001.request.json").read_text())
    pdf = body["messages"][0]["content"][1]["source"]["data"]
    pages = len(media_files.pdf_pages(pdf))
    chat, responses = (media.rules_for(api, "gpt-4.1") for api in ("openai-chat", "openai-responses"))
    item = Media("document", pdf, "application/pdf")
    on_chat, on_responses = (media.document_cost(item, rules, len).tokens for rules in (chat, responses))
    assert on_chat - on_responses == pages * chat.document["page_image_tokens"] == pages * 212
