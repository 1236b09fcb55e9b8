"""Lint's precision and recall, in figures (issue 27 item 9).

Precision: warnings and errors per request on every recorded request of ../shared/data/recorded/ (real
traffic, each finding checked against the provider's usage by tests/test_lint_precision.py), with the
default rule set and with --select ALL.
Recall: requests that carry an id made per session, run or request inside the cached prefix (a system
block under a breakpoint, an OpenAI system message before the latest one), in the layouts apps send;
how many lint reports (any loud finding on the block holding the id).

    .venv/bin/python bench/lint_precision.py [--data DIR]
    PYTHONPATH=OLD_TREE python bench/lint_precision.py     # the same figures for another revision's code
"""
from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from prefixguard.lint import catalog, config, linter
from prefixguard.lint.linter import check_prompt
from prefixguard.wire import parse_request

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("crewai", "openllmetry", "pydantic-ai", "pydantic-ai-bedrock", "pydantic-ai-gemini")
RULES = "You are the support agent of Acme. Answer from the policy below, briefly and politely.\n" * 60
IDS = ("Session: 3f0c9a52-7d1e-4b8a-9e2f-5c6d7e8f9a01", "session_id=7fa3c9e1b2d4", "run_id: r-20261204-88af31",
       "Conversation 9c1d6e0f4a2b7c3d8e5f6a1b2c3d4e5f", "thread_id: thr_8Qk2mZx7Lp")


def probes() -> list[tuple[str, dict, str]]:
    """(name, body, pointer of the block holding the id) for each id in each layout."""
    out = []
    for note in IDS:
        out.append((f"anthropic system block: {note}", {
            "model": "claude-sonnet-4-5", "max_tokens": 1024,
            "system": [{"type": "text", "text": RULES + note, "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": "Where is my order?"}]}, "/system/0/text"))
        out.append((f"openai system message: {note}", {
            "model": "gpt-4.1", "prompt_cache_key": "support-v3",
            "messages": [{"role": "system", "content": RULES + note}, {"role": "user", "content": "Where is my order?"}]},
            "/messages/0/content"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "recorded")
    args = ap.parse_args()
    roots = [str(args.data / name) for name in FOLDERS]
    for label, select in (("default", None), ("ALL", ("ALL",))):
        settings = config.load(None, config.Layer(select=select) if select else config.Layer(), cwd=args.data)
        result = linter.lint(roots, settings)
        loud = [f for f in result.findings if f.severity in ("error", "warning")]
        print(f"precision ({label}): {len(loud)} loud findings on {result.requests} recorded requests = "
              f"{len(loud) / result.requests:.3f} per request; {dict(Counter(f.code for f in loud))}")
        codes = settings.enabled
        found = 0
        for name, body, pointer in probes():
            hits = [h for h in check_prompt(parse_request(json.dumps(body)), codes)
                    if h.pointer == pointer and catalog.get(h.rule).severity_of(h.variant) in ("error", "warning")]
            found += bool(hits)
        print(f"recall ({label}): an id inside the cached prefix reported in {found} of {len(probes())} requests")


if __name__ == "__main__":
    main()
