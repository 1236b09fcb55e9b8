"""Core benchmark: parse + fingerprint + compare of a pair of ~1 MB requests (about 200 messages and
50 tools), with and without token counting, as a ratio to json.loads of the same two bodies; and what the
provider's cache policy costs the proxy's analysis for the pair (A committed, B looked up).

Measured side by side in one run, interleaved, medians of the repeats. Target: at most 3x json.loads
without token counting. Two pairs per API shape: B appends the next turn to A (the common case), and
B also changes a timestamp in the system prompt (a break that compare has to classify).

    .venv/bin/python bench/core.py [--repeat 15] [--json]
"""
from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from prefixguard.model import tokens  # noqa: E402
from prefixguard.judge.compare import compare  # noqa: E402
from prefixguard.judge.policies import make_policy, policy_name  # noqa: E402
from prefixguard.wire import parse_request  # noqa: E402

TARGET = 3.0
SHAPES = ("anthropic", "openai-chat", "openai-responses")


def _examples() -> Any:
    """The example session (system prompt, tools, turns) from tests/helpers/make_examples.py."""
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers import make_examples
    return make_examples


def build_session(gen: Any, n_tools: int = 50, n_turns: int = 50) -> tuple[list, list]:
    """50 tools (variants of the example's six) and a long history of tool round trips with big outputs."""
    tools = []
    for i in range(n_tools):
        name, desc, schema = gen.TOOLS[i % len(gen.TOOLS)]
        schema = copy.deepcopy(schema)
        schema["properties"][f"option_{i}"] = {"type": "string", "description": f"Variant {i} of {name}."}
        tools.append((f"{name}_{i}", f"{desc} (workspace {i})", schema))
    outputs = (gen.PYTEST_OUTPUT, gen.INVOICE_SOURCE * 3, gen.SEARCH_OUTPUT * 6 + gen.GIT_LOG * 4)
    history: list[tuple[Any, ...]] = []
    for t in range(n_turns):  # 4 messages a turn in every shape: user, assistant + call, result, assistant
        name = tools[t % n_tools][0]
        history.append(("user", f"Step {t}: {gen.HISTORY[0][1]}"))
        history.append(("assistant", f"Checking step {t}.", [(f"call_{t}", name, {"path": f"billing/m{t}.py",
                                                                                 "start_line": t + 1})]))
        history.append(("tool", f"call_{t}", f"[{t}] " + outputs[t % 3] * 7))
        history.append(("assistant", gen.HISTORY[6][1], []))
    return tools, history


def bodies(gen: Any, shape: str, tools: list, history: list, next_turn: list, now_b: str) -> tuple[bytes, bytes]:
    a = gen.RENDER[shape](gen.MODELS[shape][0], gen.system_text(gen.TIME_A), tools, history)
    b = gen.RENDER[shape](gen.MODELS[shape][0], gen.system_text(now_b), tools, history + next_turn)
    return (json.dumps(a, ensure_ascii=False).encode(), json.dumps(b, ensure_ascii=False).encode())


def sample(fn: Callable[[], Any], samples: list[float]) -> None:
    start = time.perf_counter()
    fn()
    samples.append((time.perf_counter() - start) * 1000)


def measure(a: bytes, b: bytes, repeat: int, token_repeat: int) -> dict[str, float]:
    def loads() -> None:
        json.loads(a), json.loads(b)

    def core(count: bool) -> Callable[[], Any]:
        def run() -> Any:
            if count:  # a cold tokenizer each time: nothing of a or b remembered from the last repeat
                tokens.forget()
            return compare(parse_request(a, count_tokens=count), parse_request(b, count_tokens=count))
        return run

    core(True)()  # warm the tokenizer and the caches once
    pa, pb = parse_request(a, count_tokens=False), parse_request(b, count_tokens=False)
    times: dict[str, list[float]] = {"json": [], "core": [], "core_tokens": [], "compare": [], "policy": []}

    def policy() -> None:
        cache = make_policy(policy_name(pa.api, pa.model))
        cache.commit(pa, 0.0)
        cache.lookup(pb, 1.0)

    for i in range(repeat):  # interleaved, so drift on a busy machine hits all of them alike
        sample(loads, times["json"])
        sample(core(False), times["core"])
        sample(lambda: compare(pa, pb), times["compare"])
        sample(policy, times["policy"])
        if i < token_repeat:
            sample(core(True), times["core_tokens"])
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=25)
    ap.add_argument("--token-repeat", type=int, default=5, help="repeats of the (slow) token-counting run")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = ap.parse_args()

    gen = _examples()
    tools, history = build_session(gen)
    rows = []
    for shape in SHAPES:
        for pair, now_b in (("append", gen.TIME_A), ("timestamp break", gen.TIME_B)):
            a, b = bodies(gen, shape, tools, history, gen.NEXT_TURN, now_b)
            pa = parse_request(a, count_tokens=False)
            body = json.loads(a)
            result = compare(pa, parse_request(b, count_tokens=False))
            ms = measure(a, b, args.repeat, args.token_repeat)
            rows.append({"shape": shape, "pair": pair, "verdict": ",".join(result.causes),
                         "mb": round((len(a) + len(b)) / 2 / 2**20, 2),
                         "messages": len(body.get("messages") or body.get("input")),
                         "tools": sum(1 for s in pa.segments if s.level == "tools"),
                         "json_ms": round(ms["json"], 2), "core_ms": round(ms["core"], 2),
                         "core_tokens_ms": round(ms["core_tokens"], 2), "compare_ms": round(ms["compare"], 3),
                         "policy_ms": round(ms["policy"], 2),
                         "ratio": round(ms["core"] / ms["json"], 2),
                         "ratio_tokens": round(ms["core_tokens"] / ms["json"], 2)})
    worst = max(r["ratio"] for r in rows)
    if args.json:
        print(json.dumps({"target_ratio": TARGET, "worst_ratio": worst, "met": worst <= TARGET, "rows": rows},
                         indent=2))
        return
    print(f"{'shape':17} {'pair':16} {'verdict':17} {'MB':>5} {'msgs':>5} {'tools':>5} {'json.loads':>11} "
          f"{'core':>9} {'ratio':>6} {'+tokens':>9} {'ratio':>6} {'compare':>8} {'policy':>8}")
    for r in rows:
        print(f"{r['shape']:17} {r['pair']:16} {r['verdict']:17} {r['mb']:5.2f} {r['messages']:5d} {r['tools']:5d} "
              f"{r['json_ms']:9.2f}ms {r['core_ms']:7.2f}ms {r['ratio']:5.2f}x {r['core_tokens_ms']:7.1f}ms "
              f"{r['ratio_tokens']:5.1f}x {r['compare_ms']:6.2f}ms {r['policy_ms']:6.2f}ms")
    print(f"target: core without tokens <= {TARGET:.0f}x json.loads; worst {worst:.2f}x: "
          f"{'met' if worst <= TARGET else 'MISSED'}")


if __name__ == "__main__":
    main()
