"""The tool-use prompt (rules/encodings.toml [tool_prompt]) and OpenAI's rendering of function tools
([tool_render]) against recorded bills.

For every recorded request that declares function tools of the client's own and holds no tool call or result,
no image or document, no response schema, no provider-run tool and no thinking, on a model the tables name:
its billed input less our count without the tool-use prompt is what the provider added. Per model family and
tool_choice: how many requests, the median of that (over all of them where our count of the text is exact, a
model counted in its own encoding; else over those under SMALL of our tokens, where a tokenizer's difference is
small beside it), the table's figure, and the median error of our total against the bill: as counted before
(the tools' JSON, no prompt) and now, side by side.

    .venv/bin/python bench/tool_prompt.py [--data ../shared/data/recorded] [--data <folder>] ...
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from prefixguard.model import templates, tokens  # noqa: E402
from prefixguard.model.prompt import compact_json  # noqa: E402
from prefixguard.replay import sources  # noqa: E402
from prefixguard.utils.errors import InputError  # noqa: E402
from prefixguard.wire import front, parse_request  # noqa: E402
from prefixguard.wire.fields import provider_tool  # noqa: E402

SMALL = 400
DATA = ROOT.parent / "shared" / "data" / "recorded"
_CALLS = {"tool_use", "tool_result", "thinking", "redacted_thinking"}


def family(model: str) -> str:
    """The model's id without gateway, region, date or version suffixes: claude-sonnet-4-0 and
    claude-sonnet-4-20250514 are one family."""
    bare = tokens.own_id(model).replace(".", "-")
    bare = re.sub(r"-v\d+:\d+$", "", bare)
    bare = re.sub(r"-(\d{8}|latest)$", "", bare)
    return re.sub(r"-4-0$", "-4", bare)


def rows(folders: list[Path]) -> dict[tuple[str, str], list[tuple[int, int, int, int, bool]]]:
    """(family, tool_choice) -> [(bill, ours without the tool-use prompt, the prompt's tokens, the count before
    (tools as JSON, no prompt), whether our text is exact)]."""
    out: dict[tuple[str, str], list[tuple[int, int, int, int, bool]]] = defaultdict(list)
    seen: set[str] = set()
    for root in folders:
        for meta in sorted(root.rglob("meta.json")):
            try:
                trace = sources.load(meta.parent)
            except InputError:
                continue
            for req in trace.requests:
                usage = req.reported
                body = json.dumps(req.body, sort_keys=True)
                if usage is None or usage.server_calls or not usage.prompt_total or body in seen:
                    continue
                seen.add(body)  # a body recorded again (a test's parametrizations, copies) counts once
                try:
                    prompt = parse_request(json.dumps(req.body), path=req.path or "/v1/messages")
                except InputError:
                    continue
                segs = prompt.segments
                tools = [s for s in segs if s.level == "tools" and s.kind == "tool"]
                rendered = templates.tool_style(prompt.api, prompt.model)
                added = templates.tool_prompt(prompt.api, prompt.model, front.choice(req.body))  # in front, or the template's
                if not tools or any(provider_tool(s.value) for s in tools) or not (added or rendered):
                    continue
                extra = req.body.get("additionalModelRequestFields") or {}
                thinking = req.body.get("thinking") or extra.get("thinking")
                if (any(s.kind in _CALLS or s.kind == "schema" or s.media_tokens for s in segs)
                        or (isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive"))):
                    continue
                encoding = tokens.encoding_for(prompt.model)
                ours = prompt.total_tokens - added
                json_tools = sum(tokens.count(compact_json(s.value), encoding) for s in tools)
                before = ours - (sum(s.tokens for s in tools) - added) + json_tools if rendered else ours
                exact = templates.message_framing(prompt.api, prompt.model).exact
                group = family(prompt.model or "") + ("" if prompt.api == "anthropic" else f" ({prompt.api})")
                out[(group, front.choice(req.body))].append((usage.prompt_total, ours, added, before, exact))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, action="append", help="a folder of cassettes (repeatable)")
    folders = ap.parse_args().data or [DATA]
    found = rows(folders)
    print(f"{'model (API)':40s} {'choice':6s} {'n':>4s} {'used':>4s} {'measured':>8s} {'table':>5s} "
          f"{'err before':>10s} {'err now':>8s}")
    before, after = [], []
    for (fam, choice), rs in sorted(found.items()):
        used = [bill - ours for bill, ours, _, _, exact in rs if exact or ours < SMALL]
        old = [(count - bill) / bill for bill, _, _, count, _ in rs]
        now = [(ours + added - bill) / bill for bill, ours, added, _, _ in rs]
        before += old
        after += now
        measured = f"{statistics.median(used):8.0f}" if used else f"{'-':>8s}"
        print(f"{fam:40s} {choice:6s} {len(rs):4d} {len(used):4d} {measured} {rs[0][2]:5d} "
              f"{100 * statistics.median(old):+9.1f}% {100 * statistics.median(now):+7.1f}%")
    if before:
        within = [sum(abs(e) <= limit for e in errors) for errors in (before, after) for limit in (0.01, 0.05)]
        error = [100 * statistics.median(map(abs, errors)) for errors in (before, after)]
        print(f"\n{len(before)} requests: total within 1% / 5% of the bill {within[0]} / {within[1]} before, "
              f"{within[2]} / {within[3]} now; median |error| {error[0]:.1f}% -> {error[1]:.1f}%")


if __name__ == "__main__":
    main()
