"""Media calibration: predicted prompt tokens (Prompt.total_tokens) against the provider's billed prompt
total, on every recorded request that sends an image or a document block.

Billed: Anthropic input + cache_creation + cache_read; OpenAI(-shaped) prompt_tokens. Images and PDFs
are costed by rules/media.toml, the text around them by the model's own encoding where it has one
(rules/encodings.toml: OpenAI's), else cl100k (not the provider's).
Rows marked "estimate" send media by file id or URL with no upload seen: a documented estimate (the
files a cassette uploads, POST /v1/files, are read first, as replay and the proxy read them).
Also prints what the old count (base64 tokenized as text) gave, measured in the same run.

    .venv/bin/python bench/media_calibration.py [--data ../shared/data] [--json]

--data may also be a folder of held-out sources laid out like ../shared/data/recorded/ (a folder of cassettes
each): their requests alone are measured.

Rows under rebuilt/ are OpenAI PDF requests rebuilt from public recordings not in ../shared/data (see
rebuilt()): their prompt text as sent, a PDF of the same page box and text layer, the total billed there.
Rows under public/ are facts read from public cassettes (FACTS: source, model, API, image size, the
prompt's text, the prompt total billed), rebuilt as the smallest request of that API with an image of
that size.
Bedrock Converse and Gemini recordings take their model from the URL (meta.json). Requests whose only
documents are plain text are left out: the check is for images and PDFs.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from prefixguard.model import tokens  # noqa: E402
from prefixguard.model.prompt import compact_json  # noqa: E402
from prefixguard.replay.sources import cassette_uris, remember_uploads, response_file  # noqa: E402
from prefixguard.wire import parse_request, parse_response  # noqa: E402

SETS = ("recorded/crewai", "recorded/pydantic-ai", "recorded/openllmetry", "recorded/pydantic-ai-bedrock",
        "recorded/pydantic-ai-gemini")
MARKS = ('"type": "image"', '"type": "document"', '"image_url"', '"input_image"', '"input_file"', '"type": "file"',
         '"image": {', '"format": "pdf"', '"mimeType": "image/', '"mimeType": "application/pdf"')


def sources(data: Path) -> list[Path]:
    """The folders of cassettes to read: ../shared/data's recorded sets, else every folder under data (held-out
    recordings laid out alike, one folder of cassettes a source)."""
    if (data / "recorded").is_dir():
        return [data / name for name in SETS]
    return sorted(d for d in data.iterdir() if d.is_dir())


def _stem(path: Path) -> str:
    return path.name.removesuffix(".request.json")


def requests(data: Path) -> list[Path]:
    out = []
    for source in sources(data):
        for path in sorted(source.glob("*/*.request.json")):
            if any(m in path.read_text() for m in MARKS) and response_file(path.parent, _stem(path)):
                out.append(path)
    return out


def row(path: Path, data: Path) -> dict[str, object]:
    uris = cassette_uris(path.parent)
    remember_uploads(path.parent, uris)  # files the cassette uploaded, by id
    prompt = parse_request(path.read_bytes(), path=uris.get(path.name.split(".")[0]), source=str(path))
    response = response_file(path.parent, _stem(path))
    assert response is not None  # requests() keeps only answered ones
    billed = parse_response(response.read_bytes(), prompt.api).prompt_total
    media = sum(s.media_tokens for s in prompt.segments)
    # the old count: every media segment's JSON (its base64) through the tokenizer
    old = sum(tokens.count(compact_json(s.value)) if s.media_tokens else s.tokens for s in prompt.segments)
    predicted = prompt.total_tokens
    return {"request": str(path.relative_to(data)), "model": prompt.model, "billed": billed,
            "predicted": predicted, "media": media, "text": predicted - media,
            "error_pct": round(100 * (predicted - billed) / billed, 1) if billed else None, "old": old,
            "estimate": any(s.estimated for s in prompt.segments),
            "text_only": all(_text_document(s.value) for s in prompt.segments if s.media_tokens)}


def _text_document(block: object) -> bool:
    """A document of text, not a PDF: Claude's text or content source, Converse's non-PDF formats, Gemini's
    text/* parts. Such requests are left out: the check is for images and PDFs."""
    if not isinstance(block, dict):
        return False
    source = block.get("source")
    if block.get("type") == "document" and isinstance(source, dict):
        return source.get("type") in ("text", "content")
    inner = block.get("document")
    if isinstance(inner, dict):
        return inner.get("format") not in (None, "pdf")
    part = block.get("inlineData") or block.get("inline_data") or block.get("fileData") or block.get("file_data")
    return isinstance(part, dict) and str(part.get("mimeType") or part.get("mime_type") or "").startswith("text/")


# OpenAI PDF requests rebuilt from public recordings that are not in ../shared/data (their prompt text
# as sent, a one-page PDF of the same page box and text layer), with the prompt total billed there:
# pydantic-ai's test_openai/test_document_as_binary_content_input.yaml (Chat) and
# test_openai_responses/test_openai_responses_document_as_binary_content_input.yaml (Responses), crewAI's
# TestAgentMultimodalOpenAIResponses.test_pdf_file[openai-gpt-4o-mini-responses].yaml (a blank page).
CREWAI_INSTRUCTIONS = (
    "You are File Analyst. Expert at analyzing various file types.\nYour personal goal is: Analyze and describe "
    "files accurately\nTo give my best complete final answer to the task respond using the exact following "
    "format:\n\nThought: I now can give a great answer\nFinal Answer: Your final answer must be the great and "
    "the most complete as possible, it must be outcome described.\n\nI MUST use these formats, my job depends "
    "on it!")
CREWAI_TASK = ("\nCurrent Task: What type of document is this?\n\nBegin! This is VERY important to you, use the "
               "tools available and give your best Final Answer, your job depends on it!\n\nThought:")


def one_page_pdf(text: str, box: tuple[int, int]) -> str:
    """A one-page PDF (base64) of this page box (points) whose text layer is `text`."""
    import base64
    content = f"BT /F1 24 Tf 72 720 Td ({text}) Tj ET".encode() if text else b""
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Resources << /Font << /F1 5 0 R >> >>"
            b" /Contents 4 0 R >>" % box,
            b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    out, offsets = b"%PDF-1.4\n", []
    for i, obj in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1) + b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    return base64.b64encode(out).decode()


CREWAI_IMAGE_TASK = ("\nCurrent Task: Describe this image briefly.\n\nBegin! This is VERY important to you, use the "
                     "tools available and give your best Final Answer, your job depends on it!\n\nThought:")
CREWAI_PNG = "recorded/crewai/llms_TestAnthropicMultimodalIntegration.test_describe_image/0001.request.json"


def crewai_png(data: Path) -> str:
    """The 640x480 PNG crewAI's multimodal tests send (recorded here in its Anthropic tests)."""
    body = json.loads((data / CREWAI_PNG).read_text())
    return next(b["source"]["data"] for b in body["messages"][0]["content"] if b.get("type") == "image")


def rebuilt(data: Path = ROOT.parent / "shared" / "data") -> list[tuple[str, dict[str, object], int]]:
    """(name, request body, billed prompt total) of OpenAI PDF and image requests rebuilt from public
    recordings: crewAI's TestAgentMultimodalOpenAI(Responses).test_image_file[...] send the same PNG with
    the texts below (billed 14,300 on gpt-4o-mini, Chat and Responses; 649 on o4-mini, Chat)."""
    dummy = "data:application/pdf;base64," + one_page_pdf("Dummy PDF file", (595, 842))
    blank = "data:application/pdf;base64," + one_page_pdf("", (612, 792))
    chat = {"model": "gpt-4o", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "What is the main content on this document?"},
        {"type": "file", "file": {"file_data": dummy, "filename": "filename.pdf"}}]}]}
    responses = {"model": "gpt-4o", "input": [{"role": "user", "content": [
        {"type": "input_text", "text": "What is in the document?"},
        {"type": "input_file", "file_data": dummy, "filename": "filename.pdf"}]}]}
    crewai = {"model": "gpt-4o-mini", "instructions": CREWAI_INSTRUCTIONS, "input": [{"role": "user", "content": [
        {"type": "input_text", "text": CREWAI_TASK},
        {"type": "input_file", "filename": "document.pdf", "file_data": blank}]}]}
    png = "data:image/png;base64," + crewai_png(data)
    image_chat = {"messages": [{"role": "system", "content": CREWAI_INSTRUCTIONS}, {"role": "user", "content": [
        {"type": "text", "text": CREWAI_IMAGE_TASK}, {"type": "image_url", "image_url": {"url": png}}]}]}
    image_responses = {"input": [{"role": "user", "content": [
        {"type": "input_text", "text": CREWAI_IMAGE_TASK}, {"type": "input_image", "image_url": png}]}],
        "model": "gpt-4o-mini", "instructions": CREWAI_INSTRUCTIONS}
    return [("pydantic-ai test_document_as_binary_content_input (Chat, gpt-4o)", chat, 235),
            ("pydantic-ai test_openai_responses_document_as_binary_content_input (Responses)", responses, 20),
            ("crewAI test_pdf_file[openai-gpt-4o-mini-responses] (Responses, blank page)", crewai, 139),
            ("crewAI test_image_file[openai-gpt-4o-mini] (Chat, 640x480 PNG)", image_chat | {"model": "gpt-4o-mini"},
             14300),
            ("crewAI test_image_file[openai-o4-mini] (Chat, 640x480 PNG)", image_chat | {"model": "o4-mini"}, 649),
            ("crewAI test_image_file[openai-gpt-4o-mini-responses] (Responses, PNG)", image_responses, 14300)]


class Fact(NamedTuple):
    """A fact read from a public VCR cassette that is not in ../shared/data: an image of this size (or the
    PDF file `pdf`) and this text (a system prompt too, if any) sent to the model through this API
    (anthropic, gemini, openai-chat, openai-responses), and the prompt total billed."""

    source: str
    model: str
    api: str
    w: int
    h: int
    text: str
    billed: int
    system: str = ""
    pdf: Path | None = None


FANTASY = "charmbracelet/fantasy providertests/testdata/TestImageUploadAgent/"
MIRASCOPE = "Mirascope/mirascope python/tests/e2e/input/snapshots/"
MIRASCOPE_IMAGE = "Describe the following image in one sentence"
MIRASCOPE_PDF = "What text is in this PDF document? Reply in one short sentence."
HELLO_PDF = ROOT / "tests" / "data" / "public" / "mirascope" / "hello.pdf"  # a letter page: "Hello, world!"
# Figures only; each is rebuilt as the smallest request of its API sending that text and an image of that
# size (the formulas read only the size).
FACTS = (
    Fact("pydantic/pydantic-ai tests/models/cassettes/test_anthropic/test_image_as_binary_content_input.yaml",
         "claude-3-5-sonnet-latest", "anthropic", 3008, 2000, "What is the name of this fruit?", 1586),
    Fact("pydantic/pydantic-ai tests/models/cassettes/test_openai/test_image_as_binary_content_input.yaml",
         "gpt-4o", "openai-chat", 597, 566, "What fruit is in the image?", 779),
    # the Go library's image upload test: one system prompt, one question, a small PNG
    Fact(FANTASY + "anthropic-claude-sonnet-4.yaml", "claude-sonnet-4-20250514", "anthropic", 50, 50,
         "Describe the image briefly in English.", 27, "You are a helpful assistant"),
    Fact(FANTASY + "openai-gpt-5.yaml", "gpt-5", "openai-chat", 812, 442,
         "Describe the image briefly in English.", 372, "You are a helpful assistant"),
    Fact(FANTASY + "gemini-2.5-pro.yaml", "gemini-2.5-pro", "gemini", 812, 442,
         "Describe the image briefly in English.", 272, "You are a helpful assistant"),
    # Mirascope's e2e tests: one question and a file, across providers (their snapshots hold the usage)
    Fact(MIRASCOPE + "test_call_with_image_content/image_png/anthropic_claude_sonnet_4_0", "claude-sonnet-4-0",
         "anthropic", 100, 100, MIRASCOPE_IMAGE, 34),
    Fact(MIRASCOPE + "test_call_with_image_content/image_gif/anthropic_claude_sonnet_4_0", "claude-sonnet-4-0",
         "anthropic", 400, 400, MIRASCOPE_IMAGE, 243),
    Fact(MIRASCOPE + "test_call_with_image_content/image_jpeg/anthropic_claude_sonnet_4_0", "claude-sonnet-4-0",
         "anthropic", 172, 178, MIRASCOPE_IMAGE, 67),
    Fact(MIRASCOPE + "test_call_with_image_content/openai_gpt_5_mini_completions", "gpt-5-mini", "openai-chat",
         100, 100, MIRASCOPE_IMAGE, 34),
    Fact(MIRASCOPE + "test_call_with_image_content/openai_gpt_5_mini", "gpt-5-mini", "openai-responses",
         100, 100, MIRASCOPE_IMAGE, 33),
    Fact(MIRASCOPE + "test_call_with_image_content/image_webp/openai_gpt_4o_completions", "gpt-4o", "openai-chat",
         550, 368, MIRASCOPE_IMAGE, 439),
    Fact(MIRASCOPE + "test_call_with_image_content/image_jpeg/openai_gpt_4o_responses", "gpt-4o",
         "openai-responses", 172, 178, MIRASCOPE_IMAGE, 269),
    Fact(MIRASCOPE + "test_call_with_image_content/image_webp/google_gemini_2_5_flash", "gemini-2.5-flash",
         "gemini", 550, 368, MIRASCOPE_IMAGE, 266),
    Fact("Mirascope/mirascope python/tests/e2e/input/cassettes/test_call_with_image_content/"
         "together_meta_llama_Llama_4_Maverick_17B_128E_Instruct_FP8.yaml",
         "meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8", "openai-chat", 100, 100, MIRASCOPE_IMAGE, 165),
    Fact(MIRASCOPE + "test_call_with_document_content/anthropic_claude_sonnet_4_0", "claude-sonnet-4-0",
         "anthropic", 0, 0, MIRASCOPE_PDF, 1598, pdf=HELLO_PDF),
    Fact(MIRASCOPE + "test_call_with_document_content/openai_gpt_4o_completions", "gpt-4o", "openai-chat",
         0, 0, MIRASCOPE_PDF, 241, pdf=HELLO_PDF),
    Fact(MIRASCOPE + "test_call_with_document_content/openai_gpt_4o_responses", "gpt-4o", "openai-responses",
         0, 0, MIRASCOPE_PDF, 29, pdf=HELLO_PDF),
    Fact(MIRASCOPE + "test_call_with_document_content/google_gemini_2_5_flash", "gemini-2.5-flash", "gemini",
         0, 0, MIRASCOPE_PDF, 273, pdf=HELLO_PDF),
    # Claude 3.x, small images (simonw/llm-anthropic sends the image first, then the text, if any)
    Fact("simonw/llm-anthropic tests/cassettes/test_anthropic/test_image_with_no_prompt.yaml",
         "claude-3-5-sonnet-latest", "anthropic", 166, 282, "", 76),
    Fact("DataDog/dd-trace-py tests/contrib/anthropic/cassettes/anthropic_create_image.yaml",
         "claude-3-opus-20240229", "anthropic", 405, 405, "Hello, what do you see in the following image?", 246),
)


def png_header(w: int, h: int) -> str:
    """The base64 of a PNG's signature and header chunk for a w x h image: all a size is read from."""
    import base64
    import struct
    import zlib
    ihdr = b"IHDR" + struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    chunk = struct.pack(">I", 13) + ihdr + struct.pack(">I", zlib.crc32(ihdr))
    return base64.b64encode(b"\x89PNG\r\n\x1a\n" + chunk).decode()


def fact_body(f: Fact) -> tuple[str, dict[str, object]]:
    """(path, body) of the smallest request of the fact's API: its system prompt, its text, then an image of
    its size."""
    import base64
    mime, data = ("application/pdf", base64.b64encode(f.pdf.read_bytes()).decode()) if f.pdf else \
        ("image/png", png_header(f.w, f.h))
    url = f"data:{mime};base64,{data}"
    if f.api == "anthropic":
        kind = "document" if f.pdf else "image"
        text = [{"type": "text", "text": f.text}] if f.text else []
        body: dict[str, object] = {"model": f.model, "max_tokens": 1024, "messages": [{"role": "user", "content": [
            *text, {"type": kind, "source": {"type": "base64", "media_type": mime, "data": data}}]}]}
        if f.system:
            body["system"] = f.system
        return "/v1/messages", body
    if f.api == "gemini":
        parts = [{"text": f.text}, {"inlineData": {"mimeType": mime, "data": data}}]
        body = {"contents": [{"role": "user", "parts": parts}]}
        if f.system:
            body["systemInstruction"] = {"parts": [{"text": f.system}]}
        return f"/v1beta/models/{f.model}:generateContent", body
    if f.api == "openai-responses":
        part = {"type": "input_file", "file_data": url, "filename": "document.pdf"} if f.pdf else \
            {"type": "input_image", "image_url": url, "detail": "auto"}
        content = [{"type": "input_text", "text": f.text}, part]
        body = {"model": f.model, "input": [{"role": "user", "content": content}]}
        if f.system:
            body["instructions"] = f.system
        return "/v1/responses", body
    system = [{"role": "system", "content": f.system}] if f.system else []
    part = {"type": "file", "file": {"file_data": url, "filename": "document.pdf"}} if f.pdf else \
        {"type": "image_url", "image_url": {"url": url}}
    return "/v1/chat/completions", {"model": f.model, "messages": [
        *system, {"role": "user", "content": [{"type": "text", "text": f.text}, part]}]}


def fact_row(f: Fact) -> dict[str, object]:
    path, body = fact_body(f)
    name = "/".join(f.source.split("/")[-2:]).removesuffix(".yaml")
    what = f.pdf.name if f.pdf else f"{f.w}x{f.h}"
    return rebuilt_row(f"{name} ({f.model}, {f.api}, {what})", body, f.billed, path=path, prefix="public/")


def rebuilt_row(name: str, body: dict[str, object], billed: int, path: str | None = None,
                prefix: str = "rebuilt/") -> dict[str, object]:
    path = path or ("/v1/chat/completions" if "messages" in body else "/v1/responses")
    prompt = parse_request(json.dumps(body), path=path)
    media = sum(s.media_tokens for s in prompt.segments)
    old = sum(tokens.count(compact_json(s.value)) if s.media_tokens else s.tokens for s in prompt.segments)
    predicted = prompt.total_tokens
    return {"request": prefix + name, "model": prompt.model, "billed": billed, "predicted": predicted,
            "media": media, "text": predicted - media, "error_pct": round(100 * (predicted - billed) / billed, 1),
            "old": old, "estimate": any(s.estimated for s in prompt.segments)}


def calibration_rows(data: Path) -> list[dict[str, object]]:
    """Every row: recorded requests that send an image or a PDF (a request whose image mark is only a
    requested output format, no media sent, is left out), the rebuilt ones, the public facts."""
    rows = [r for r in (row(p, data) for p in requests(data)) if r["media"] and r["billed"] and not r["text_only"]]
    if not (data / "recorded").is_dir():  # held-out recordings: no rebuilt requests or facts to add
        return rows
    return rows + [rebuilt_row(*r) for r in rebuilt(data)] + [fact_row(f) for f in FACTS]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = calibration_rows(args.data)
    measured = [r for r in rows if not r["estimate"]]
    worst = max((abs(r["error_pct"]) for r in measured), default=0.0)
    summary = {"requests": len(rows), "measured": len(measured), "max_abs_error_pct": worst,
               "within_10pct": sum(abs(r["error_pct"]) <= 10 for r in measured), "tokenizer": tokens.encoding_name(),
               "openai_tokenizer": tokens.encoding_name("gpt-4o")}
    if args.json:
        print(json.dumps({"rows": rows, "summary": summary}, indent=1))
        return
    print(f"{'request':<78} {'model':<26} {'billed':>7} {'predicted':>9} {'error':>7} {'media':>6} {'old count':>10}")
    for r in rows:
        name = str(r["request"]).removeprefix("recorded/")
        name = name if len(name) <= 76 else name[:36] + ".." + name[-38:]
        flag = "  estimate (file id)" if r["estimate"] else ""
        model = str(r["model"])[-26:]
        print(f"{name:<78} {model:<26} {r['billed']:>7,} {r['predicted']:>9,} {r['error_pct']:>+6.1f}%"
              f" {r['media']:>6,} {r['old']:>10,}{flag}")
    print(f"\n{summary['within_10pct']}/{summary['measured']} sized requests within 10% of billed; worst "
          f"{worst:.1f}%; text by {summary['tokenizer']} (gpt-4o and later: {summary['openai_tokenizer']}); "
          f"{len(rows) - len(measured)} by file id (estimates)")


if __name__ == "__main__":
    main()
