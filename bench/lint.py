"""Lint speed as a ratio to json.loads of the same bytes, measured side by side in one run.

Two inputs, written to a temporary folder:
- one ~1 MB Anthropic request (50 tools, about 200 messages with tool calls, a timestamp in the system
  prompt), pretty-printed as an app's test would dump it;
- a 1,000-request capture (JSONL): 20 OpenAI Chat conversations of 50 turns each, every request the whole
  history so far, the system prompt re-rendering the time now and then (so sequence mode finds breaks).
Each is linted in-process the way `prefixguard lint` does it (read, parse, tokens, every rule, positions),
with token counting on, and once more with --no-tokens for reference.

    .venv/bin/python bench/lint.py [--json] [--compare REF] [--repeat N]

--compare REF also measures the code of git revision REF (exported to a temporary folder and run in a
subprocess on the same inputs), and prints the two side by side with the ratio new/old of lint time.
Each time is the best of --repeat runs (default 3): the machine is shared.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from prefixguard.model import tokens
from prefixguard.lint import config, linter

WORDS = ("the deployment pipeline builds image runs unit and integration suites promotes build to staging when "
         "every check passes production follows after manual approval cache prefix tokens model request tool "
         "result history system prompt reviewer merges branch release notes").split()


def prose(seed: int, words: int) -> str:
    """Varied text (no two messages alike, as in a real history), deterministic, nothing volatile in it."""
    return " ".join(WORDS[(seed * 7 + k * (seed % 5 + 1)) % len(WORDS)] for k in range(words)) + ". "


def big_request() -> dict:
    tools = [{"name": f"tool_{i:02d}", "description": prose(i, 60),
              "input_schema": {"properties": {"path": {"type": "string", "description": prose(i + 1, 30)},
                                              "limit": {"type": "integer"}}, "required": ["path"], "type": "object"}}
             for i in range(50)]
    messages = []
    for i in range(66):
        messages.append({"role": "user", "content": f"Step {i}: " + prose(i, 600)})
        messages.append({"role": "assistant", "content": [
            {"type": "text", "text": prose(i + 2, 300)},
            {"type": "tool_use", "id": f"toolu_{i:04d}", "name": f"tool_{i % 50:02d}",
             "input": {"path": f"src/m{i}.py"}}]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{i:04d}", "content": prose(i + 3, 1000)}]})
    messages[-1]["content"][0]["cache_control"] = {"type": "ephemeral"}
    return {"model": "claude-sonnet-4-5", "max_tokens": 4096, "tools": tools,
            "system": [{"type": "text", "text": prose(0, 2000) + " Current time: 2026-12-02T16:11:31Z",
                        "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
            "messages": messages}


def capture() -> list[str]:
    lines = []
    for c in range(20):
        history: list[dict] = []
        for turn in range(50):
            stamp = f"2026-12-02T{10 + c // 6:02d}:{turn // 10 * 10:02d}:00Z"   # re-rendered every 10 turns
            history.append({"role": "user", "content": f"Conversation {c}, question {turn}: " + prose(turn, 30)})
            system = {"role": "system", "content": prose(c, 250) + f"\nCurrent time: {stamp}"}
            lines.append(json.dumps({"model": "gpt-4.1", "prompt_cache_key": f"conv-{c}",
                                     "messages": [system, *history]}))
            history.append({"role": "assistant", "content": prose(turn + c, 30)})
    return lines


REPEAT = 3


def timed(fn) -> float:
    best = float("inf")
    for _ in range(REPEAT):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def measure(path: Path, text: str, jsonl: bool) -> dict:
    settings = config.load(None, config.Layer(), cwd=path.parent)
    loads = timed(lambda: [json.loads(x) for x in text.splitlines()] if jsonl else json.loads(text))
    counted = [None]
    lint_s = timed(lambda: counted.__setitem__(0, linter.lint([str(path)], settings, count_tokens=True)))
    estimate_s = timed(lambda: linter.lint([str(path)], settings, count_tokens=False))
    result = counted[0]
    assert not result.errors, result.errors
    return {"input": path.name, "bytes": len(text.encode()), "requests": result.requests,
            "findings": len(result.findings), "json_loads_s": round(loads, 4), "lint_s": round(lint_s, 4),
            "ratio": round(lint_s / loads, 1), "lint_no_tokens_s": round(estimate_s, 4),
            "ratio_no_tokens": round(estimate_s / loads, 1)}


def rows_here() -> list[dict]:
    tokens.count("warm up")   # load the tokenizer outside the timings
    with tempfile.TemporaryDirectory() as tmp:
        one = Path(tmp, "request.json")
        one_text = json.dumps(big_request(), indent=2)
        one.write_text(one_text, "utf-8")
        many = Path(tmp, "capture.jsonl")
        many_text = "\n".join(capture()) + "\n"
        many.write_text(many_text, "utf-8")
        return [measure(one, one_text, False), measure(many, many_text, True)]


def rows_of(ref: str) -> list[dict]:
    """The same measurement with the code of git revision `ref`, in a subprocess."""
    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(root), "archive", ref], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        env = dict(os.environ, PYTHONPATH=tmp)
        out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--json", "--repeat", str(REPEAT)],
                             env=env, cwd=tmp, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["rows"]


def main() -> None:
    global REPEAT
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--compare", metavar="REF", help="also measure git revision REF, side by side")
    parser.add_argument("--repeat", type=int, default=REPEAT, help="best of N runs per timing")
    args = parser.parse_args()
    REPEAT = max(1, args.repeat)
    rows = rows_here()
    if args.json:
        print(json.dumps({"tokenizer": tokens.encoding_name(), "rows": rows}, indent=2))
        return
    if args.compare:
        old = rows_of(args.compare)
        print(f"tokenizer: {tokens.encoding_name()}; best of {REPEAT}; old = {args.compare}, new = this tree")
        print(f"{'input':<14}{'requests':>10}{'findings old/new':>18}{'lint s old':>12}{'lint s new':>12}"
              f"{'new/old':>9}{'no-tokens old':>15}{'no-tokens new':>15}{'new/old':>9}")
        for o, n in zip(old, rows):
            print(f"{n['input']:<14}{n['requests']:>10}{o['findings']:>9}/{n['findings']:<8}{o['lint_s']:>12.3f}"
                  f"{n['lint_s']:>12.3f}{n['lint_s'] / o['lint_s']:>8.2f}x{o['lint_no_tokens_s']:>15.3f}"
                  f"{n['lint_no_tokens_s']:>15.3f}{n['lint_no_tokens_s'] / o['lint_no_tokens_s']:>8.2f}x")
        return
    print(f"tokenizer: {tokens.encoding_name()}")
    print(f"{'input':<14}{'MB':>7}{'requests':>10}{'findings':>10}{'json.loads s':>14}{'lint s':>9}"
          f"{'ratio':>8}{'no-tokens s':>13}{'ratio':>8}")
    for r in rows:
        print(f"{r['input']:<14}{r['bytes'] / 1e6:>7.2f}{r['requests']:>10}{r['findings']:>10}"
              f"{r['json_loads_s']:>14.4f}{r['lint_s']:>9.3f}{r['ratio']:>7.1f}x{r['lint_no_tokens_s']:>13.3f}{r['ratio_no_tokens']:>7.1f}x")


if __name__ == "__main__":
    main()
