"""Which forwarded requests the proxy analyses, by method and path (issue 27 item 6).

Over every recorded call of ../shared/data/recorded/ (meta.json: method, URI; the body beside it) and the
real endpoints the issue names, counts the calls the proxy reads:
  before  by the path alone, as the proxy decided before (routes.route: /v1/... and the model-in-path shapes);
  now     by the path, or by its tail with the body's shape (wire.analysable, then detect_api on the body).
The calls neither reads are named by method and endpoint (routes.template), as the report names them.

    .venv/bin/python bench/paths.py [--data DIR]
"""
from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

from prefixguard.utils.errors import InputError
from prefixguard.wire import analysable, detect_api, routes
from prefixguard.wire.gemini import is_cache_creation

ROOT = Path(__file__).resolve().parent.parent
# The endpoints of issue 27 that were forwarded and never analysed, with a body of their shape.
CHAT = {"model": "glm-4.6", "messages": [{"role": "user", "content": "hi"}]}
ANTHROPIC = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
ISSUE = [("/api/coding/paas/v4/chat/completions", CHAT),
         ("/openai/deployments/prod-gpt4o/chat/completions?api-version=2024-10-21", CHAT),
         ("/openrouter/v1/chat/completions", CHAT),
         ("/proxy/anthropic/v1/messages", ANTHROPIC),
         ("/v1/0123456789abcdef0123456789abcdef/team-gw/anthropic/v1/messages", ANTHROPIC),
         ("/v1/0123456789abcdef0123456789abcdef/team-gw/openai/chat/completions", CHAT)]


def read_now(method: str, path: str, body: object) -> bool:
    if method == "POST" and is_cache_creation(path):
        return True     # a Gemini explicit cache: read for the requests that name it (no row of its own)
    if not analysable(method, path):
        return False
    try:
        detect_api(body, path)
    except InputError:
        return False
    return True


def calls(data: Path) -> list[tuple[str, str, object]]:
    out = []
    for meta in sorted(data.glob("*/*/meta.json")):
        for call in json.loads(meta.read_text())["interactions"]:
            body_file = meta.parent / f"{call['n']:04d}.request.json"
            body = json.loads(body_file.read_text()) if body_file.exists() else None
            parts = urlsplit(call["uri"])
            out.append((call["method"], parts.path + (f"?{parts.query}" if parts.query else ""), body))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "recorded")
    args = ap.parse_args()
    for title, rows in (("recorded calls", calls(args.data)), ("issue 27 endpoints", [("POST", p, b) for p, b in ISSUE])):
        before = sum(m == "POST" and (routes.route(p) is not None or is_cache_creation(p)) for m, p, _ in rows)
        now = sum(read_now(m, p, b) for m, p, b in rows)
        unread = Counter(f"{m} {routes.template(p)}" for m, p, b in rows if not read_now(m, p, b))
        print(f"{title}: {len(rows)} calls; analysed before {before}, now {now}; not analysed {sum(unread.values())}")
        for name, n in unread.most_common():
            print(f"  {n:4d}  {name}")


if __name__ == "__main__":
    main()
