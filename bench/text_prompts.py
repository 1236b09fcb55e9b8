"""The text Completions API on real agent prompts: what the proxy expects a server to read, against what the
engine's radix tree (engine/radix.py) reads, side by side.

Each call of ../shared/data/lmcache-agent-trace/miniswe (mini-swe-agent on SWE-bench tasks: 20 sessions, 402 calls,
each prompt one string) goes in time order, as a /v1/completions body, through the proxy's analysis (the compatible
contract at the block size given) with the usage a radix server reports: its prompt in cl100k_base ids and the
tree's match of it (its last token computed again, whole blocks). The tree then holds the prompt and, with
--outputs, the answer the trace recorded (vLLM and SGLang cache what they generate too). Printed per block size:
reads within 5% of the tree's, the gaps, and the verdicts.

    .venv/bin/python bench/text_prompts.py [--block 1 16] [--outputs]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections import Counter
from itertools import count
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from prefixguard.capture.store import open_store  # noqa: E402
from prefixguard.contracts.providers import Compatible, configure_compatible  # noqa: E402
from prefixguard.engine.chat_template import encoding  # noqa: E402
from prefixguard.engine.radix import RadixTree  # noqa: E402
from prefixguard.proxy.analysis import Analyzer, FlowState, Response  # noqa: E402

TRACE = Path(__file__).resolve().parents[2] / "shared" / "data" / "lmcache-agent-trace" / "miniswe"
MODEL = "Qwen/Qwen3-0.6B"  # a model no provider sells: the compatible contract, counted in cl100k_base
UPSTREAM = "http://127.0.0.1:8000"


class _Pages:
    def free(self, pages: object) -> None:
        pass


def calls() -> list[dict]:
    rows = [json.loads(line) for f in sorted(TRACE.glob("*.jsonl")) for line in f.open()]
    return sorted(rows, key=lambda r: r["timestamp"])


def run(block: int, outputs: bool) -> list[tuple[int, int, int, str]]:
    """(tree's read, proxy's expected read, prompt tokens, verdict) per call."""
    configure_compatible(Compatible(block_tokens=block, source="bench"))
    tree, pages, enc = RadixTree(block, _Pages()), count(), encoding()
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        analyzer = Analyzer(store=str(Path(tmp) / "capture.db"))
        for i, call in enumerate(calls()):
            ids = enc.encode_ordinary(call["input"])
            read = tree.peek(ids[: len(ids) - 1]) // block * block
            held = ids + enc.encode_ordinary(call["output"]) if outputs else ids
            whole = len(held) // block * block
            tree.insert(held[:whole], [next(pages) for _ in range(whole // block)])
            body = json.dumps({"model": MODEL, "prompt": call["input"], "max_tokens": 512}).encode()
            analyzer.request(FlowState(id=str(i), ts=i, sent=i, path="/v1/completions", upstream=UPSTREAM, body=body))
            usage = {"prompt_tokens": len(ids), "completion_tokens": 1,
                     "prompt_tokens_details": {"cached_tokens": read}}
            answer = {"object": "text_completion", "choices": [{"text": call["output"]}], "usage": usage}
            said = json.dumps(answer).encode()
            analyzer.finish(Response(id=str(i), status=200, headers_at=i, ended_at=i, body=said, chunks=None))
        analyzer.close()
        with open_store(Path(tmp) / "capture.db") as db:
            rows = {r["id"]: r for r in db.rows()}
    for i in range(len(rows)):
        r = rows[str(i)]
        out.append((r["usage"]["cache_read"], r["expected_cached"] or 0, r["usage"]["prompt_total"], r["verdict"]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--block", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--outputs", action="store_true", help="the tree holds each recorded answer too")
    args = ap.parse_args()
    print(f"{'block':>5} {'reads':>6} {'within 5%':>10} {'zeros ok':>9} {'median gap':>11} {'worst gap':>10}  verdicts")
    for block in args.block:
        rows = run(block, args.outputs)
        reads = [(t, p) for t, p, _, _ in rows if t > 0]
        ok = sum(abs(p - t) <= 0.05 * t for t, p in reads)
        zeros = sum(p == 0 for t, p, _, _ in rows if t == 0)
        gaps = [(p - t) / t for t, p in reads]
        verdicts = Counter(v for *_, v in rows)
        print(f"{block:>5} {len(reads):>6} {ok:>4}/{len(reads):<5} {zeros:>4}/{len(rows) - len(reads):<4} "
              f"{statistics.median(gaps or [0.0]):>+10.2%} {max(gaps, key=abs, default=0.0):>+9.2%}  "
              f"{dict(verdicts.most_common())}")


if __name__ == "__main__":
    main()
