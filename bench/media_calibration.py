"""Media calibration: predicted prompt tokens (Prompt.total_tokens) against the provider's billed prompt
total, on every recorded request that sends an image or a document block.

Billed: Anthropic input + cache_creation + cache_read; OpenAI(-shaped) prompt_tokens. Images and PDFs
are costed by rules/media.toml, the text around them by our tokenizer (cl100k, not the provider's).
Rows marked "estimate" send media by file id or URL with no upload seen: a documented estimate (the
files a cassette uploads, POST /v1/files, are read first, as replay and the proxy read them).
Also prints what the old count (base64 tokenized as text) gave, measured in the same run.

    .venv/bin/python bench/media_calibration.py [--data ../shared/data] [--json]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from prefixguard import tokens  # noqa: E402
from prefixguard.prompt import compact_json  # noqa: E402
from prefixguard.replay.sources import cassette_uris, remember_uploads  # noqa: E402
from prefixguard.wire import parse_request, parse_response  # noqa: E402

SETS = ("recorded/crewai", "recorded/pydantic-ai", "recorded/openllmetry")
MARKS = ('"type": "image"', '"type": "document"', '"image_url"', '"input_image"', '"input_file"')


def requests(data: Path) -> list[Path]:
    out = []
    for name in SETS:
        for path in sorted((data / name).glob("*/*.request.json")):
            if any(m in path.read_text() for m in MARKS):
                out.append(path)
    return out


def row(path: Path, data: Path) -> dict[str, object]:
    remember_uploads(path.parent, cassette_uris(path.parent))  # files the cassette uploaded, by id
    prompt = parse_request(path.read_bytes(), source=str(path))
    response = next(path.parent.glob(path.name.split(".")[0] + ".response.*"))
    billed = parse_response(response.read_bytes(), prompt.api).prompt_total
    media = sum(s.media_tokens for s in prompt.segments)
    # the old count: every media segment's JSON (its base64) through the tokenizer
    old = sum(tokens.count(compact_json(s.value)) if s.media_tokens else s.tokens for s in prompt.segments)
    predicted = prompt.total_tokens
    return {"request": str(path.relative_to(data)), "model": prompt.model, "billed": billed,
            "predicted": predicted, "media": media, "text": predicted - media,
            "error_pct": round(100 * (predicted - billed) / billed, 1), "old": old,
            "estimate": any(s.estimated for s in prompt.segments)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = [row(p, args.data) for p in requests(args.data)]
    measured = [r for r in rows if not r["estimate"]]
    worst = max((abs(r["error_pct"]) for r in measured), default=0.0)
    summary = {"requests": len(rows), "measured": len(measured), "max_abs_error_pct": worst,
               "within_10pct": sum(abs(r["error_pct"]) <= 10 for r in measured), "tokenizer": tokens.encoding_name()}
    if args.json:
        print(json.dumps({"rows": rows, "summary": summary}, indent=1))
        return
    print(f"{'request':<78} {'billed':>7} {'predicted':>9} {'error':>7} {'media':>6} {'old count':>10}")
    for r in rows:
        name = str(r["request"]).removeprefix("recorded/")
        name = name if len(name) <= 76 else name[:36] + ".." + name[-38:]
        flag = "  estimate (file id)" if r["estimate"] else ""
        print(f"{name:<78} {r['billed']:>7,} {r['predicted']:>9,} {r['error_pct']:>+6.1f}% {r['media']:>6,}"
              f" {r['old']:>10,}{flag}")
    print(f"\n{summary['within_10pct']}/{summary['measured']} sized requests within 10% of billed; worst "
          f"{worst:.1f}%; text by {summary['tokenizer']}; {len(rows) - len(measured)} by file id (estimates)")


if __name__ == "__main__":
    main()
