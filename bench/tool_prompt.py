"""Claude's tool-use system prompt (rules/encodings.toml [tool_prompt]) against recorded bills.

For every recorded Claude request that declares tools of the client's own and holds no tool call or result,
no image or document, no provider-run tool and no thinking, its billed input less our count without the
tool-use prompt is what the provider added. Per model family and tool_choice: how many requests, the
median of that over requests under SMALL of our tokens (where a tokenizer's difference is small beside it),
the table's figure, and over every such request the median error of our total against the bill without
the prompt and with it, side by side.

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

from prefixguard.model import tokens  # noqa: E402
from prefixguard.replay import sources  # noqa: E402
from prefixguard.utils.errors import InputError  # noqa: E402
from prefixguard.wire import parse_request, tool_prompt  # noqa: E402
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


def rows(folders: list[Path]) -> dict[tuple[str, str], list[tuple[int, int, int]]]:
    """(family, tool_choice) -> [(bill, ours without the tool-use prompt, the prompt's tokens)]."""
    out: dict[tuple[str, str], list[tuple[int, int, int]]] = defaultdict(list)
    for root in folders:
        for meta in sorted(root.rglob("meta.json")):
            try:
                trace = sources.load(meta.parent)
            except InputError:
                continue
            for req in trace.requests:
                usage = req.reported
                if usage is None or not usage.reported or usage.server_calls or not usage.prompt_total:
                    continue
                try:
                    prompt = parse_request(json.dumps(req.body), path=req.path or "/v1/messages")
                except InputError:
                    continue
                segs = prompt.segments
                tools = [s for s in segs if s.level == "tools" and s.kind == "tool"]
                if not tools or any(provider_tool(s.value) for s in tools):
                    continue
                added = prompt.front  # the tool-use prompt, by the table
                extra = req.body.get("additionalModelRequestFields") or {}
                thinking = req.body.get("thinking") or extra.get("thinking")
                if (not added or any(s.kind in _CALLS for s in segs) or any(s.media_tokens for s in segs)
                        or (isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive"))):
                    continue
                choice = tool_prompt.choice(req.body)
                row = (usage.prompt_total, prompt.total_tokens - added, added)
                out[(family(prompt.model or ""), choice)].append(row)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, action="append", help="a folder of cassettes (repeatable)")
    folders = ap.parse_args().data or [DATA]
    found = rows(folders)
    print(f"{'model':24s} {'choice':6s} {'n':>4s} {'small':>5s} {'measured':>8s} {'table':>5s} "
          f"{'err without':>11s} {'err with':>8s}")
    before, after = [], []
    for (fam, choice), rs in sorted(found.items()):
        small = [bill - ours for bill, ours, _ in rs if ours < SMALL]
        without = [(ours - bill) / bill for bill, ours, _ in rs]
        with_ = [(ours + added - bill) / bill for bill, ours, added in rs]
        before += without
        after += with_
        measured = f"{statistics.median(small):8.0f}" if small else f"{'-':>8s}"
        print(f"{fam:24s} {choice:6s} {len(rs):4d} {len(small):5d} {measured} {rs[0][2]:5d} "
              f"{100 * statistics.median(without):+10.1f}% {100 * statistics.median(with_):+7.1f}%")
    if before:
        within = sum(abs(e) <= 0.05 for e in after), sum(abs(e) <= 0.05 for e in before)
        error = [100 * statistics.median(map(abs, errors)) for errors in (before, after)]
        print(f"\n{len(before)} requests: total within 5% of the bill {within[1]} without the prompt, {within[0]} "
              f"with it; median |error| {error[0]:.1f}% -> {error[1]:.1f}%")


if __name__ == "__main__":
    main()
