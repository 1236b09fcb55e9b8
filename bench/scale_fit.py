"""The token scale by kind of content against one ratio per model: each model's next request in every
recorded cassette, its prompt total as scaled by what the earlier requests taught, against its bill.

One ratio is what prefixguard/judge/scale.py did before kinds: the latest request's provider/ours ratio,
within MAX_RATIO either way, the rest unseen (kept where the scale keeps its fit: per model and set of kinds
of tool declared, scale.fit_key). Rows: each source, and the requests whose prompt is mostly
tool schemas (over half of our tokens). Counts are this tree's (each model's own encoding); a context a
request names by id (previous_response_id) is counted as the proxy counts it, from that response. First,
how many OpenAI requests with text only (no tools, calls or media) this tree counts at exactly their bill.

    .venv/bin/python bench/scale_fit.py [--data ../shared/data/recorded]
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from prefixguard.utils.errors import InputError  # noqa: E402
from prefixguard.replay import sources  # noqa: E402
from prefixguard.judge.policies import make_policy, policy_name  # noqa: E402
from prefixguard.judge.scale import MAX_RATIO, Fit, TokenScale, fit_key  # noqa: E402
from prefixguard.judge.stored import StoredResponses  # noqa: E402
from prefixguard.wire import parse_request, parse_response  # noqa: E402


def one_ratio(scale: TokenScale, prompt, usage) -> None:
    media = sum(s.media_tokens for s in prompt.segments)  # and no tool-use prompt: the method before it was known
    ours, theirs = prompt.total_tokens - media - prompt.front, usage.prompt_total - media
    if ours > 0 and theirs > 0:
        ratio = min(MAX_RATIO, max(1 / MAX_RATIO, theirs / ours))
        scale._fit.put(fit_key(prompt), Fit(ratio=ratio, unseen=max(0, round(theirs - ratio * ours)), ruled=0.0), 0.0)


def exact_counts(data: Path) -> tuple[int, int, int]:
    """(OpenAI requests with text only, those whose prompt total is the billed one, those within 1%)."""
    n = exact = close = 0
    for path in sorted(data.glob("*/*/*.request.json")):
        try:
            prompt = parse_request(path.read_bytes())
            response = next(path.parent.glob(path.name.split(".")[0] + ".response.*"), None)
            usage = parse_response(response.read_bytes(), prompt.api) if response else None
        except InputError:
            continue
        if (not usage or not usage.prompt_total or not (prompt.model or "").startswith(("gpt", "o1", "o3", "o4"))
                or any(s.level == "tools" or s.kind in ("tool_use", "tool_result", "thinking") or s.media_tokens
                       for s in prompt.segments)):
            continue
        n += 1
        exact += prompt.total_tokens == usage.prompt_total
        close += abs(prompt.total_tokens - usage.prompt_total) <= 0.01 * usage.prompt_total
    return n, exact, close


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "recorded")
    args = ap.parse_args()
    n, exact, close = exact_counts(args.data)
    print(f"OpenAI requests with text only: {n}; prompt total as billed: {exact}; within 1%: {close}\n")
    errors: dict[str, dict[str, list[float]]] = {"one ratio": defaultdict(list), "by kind": defaultdict(list)}
    for cassette in sorted(p for p in args.data.glob("*/*") if p.is_dir()):
        try:
            trace = sources.load(cassette)
        except InputError:
            continue
        scales = {name: TokenScale() for name in errors}
        stored = {name: StoredResponses() for name in errors}
        seen: set[str | None] = set()
        for r in trace.requests:
            if not r.body or not r.reported or not r.reported.prompt_total:
                continue
            try:
                prompt = parse_request(json.dumps(r.body), path=r.path)
            except InputError:
                continue
            # tool schemas over half of our tokens (the tool-use prompt in front of them is none)
            tools = sum(s.tokens for s in prompt.segments if s.level == "tools") - prompt.front
            heavy = 2 * tools > prompt.total_tokens - prompt.front
            policy = make_policy(policy_name(prompt.api, prompt.model))
            for name, scale in scales.items():
                held = policy.rendered(stored[name].filled(prompt, policy.contract.restores_reasoning))
                if prompt.model in seen:
                    # (a server tool's counts sum its passes: the scale learns, and is held to, one pass)
                    err = scale.scaled(held).total_tokens / (r.reported.prompt_total / r.reported.passes) - 1
                    errors[name][cassette.parent.name].append(err)
                    if heavy:
                        errors[name]["(mostly tool schemas)"].append(err)
                scale.learn(held, r.reported, [len(held.segments) - 1])
                if name == "one ratio":
                    one_ratio(scale, held, r.reported)
                stored[name].answered(r.said, scale.scaled(held), r.reported, policy, 0.0)
            seen.add(prompt.model)
    print(f"{'next request total':<24} {'n':>4}   {'one ratio: within 2% / 5%':>26}   {'by kind: within 2% / 5%':>24}")
    for group in sorted(errors["by kind"]):
        cells = []
        for name in errors:
            errs = errors[name][group]
            w2, w5 = sum(abs(e) <= 0.02 for e in errs), sum(abs(e) <= 0.05 for e in errs)
            cells.append(f"{w2:>4} {100 * w2 / len(errs):3.0f}% / {w5:>4} {100 * w5 / len(errs):3.0f}%")
        print(f"{group:<24} {len(errors['by kind'][group]):>4}   {cells[0]:>26}   {cells[1]:>24}")


if __name__ == "__main__":
    main()
