"""Redaction throughput on a large body (issue 28 item 1): the text of the real recorded requests,
repeated to SIZE_MB, through the redaction every stored body, console line and index entry gets.

    .venv/bin/python bench/redaction.py [--baseline OLD_REDACT_PY] [--size-mb 60] [--rounds 3]

--baseline: a copy of an earlier prefixguard/proxy/redact.py (its redact_text is timed beside ours).
Prints the best of --rounds for each, in seconds and MB/s.
"""
from __future__ import annotations

import argparse
import importlib.util
import time
from pathlib import Path

from prefixguard.utils.redaction import redact_text

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "recorded"


def body(size_mb: int) -> str:
    text = "".join(p.read_text() for p in sorted(DATA.rglob("*.request.json")))
    return (text * (size_mb * 1_000_000 // len(text) + 1))[:size_mb * 1_000_000]


def best(fn, text: str, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn(text)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline")
    ap.add_argument("--size-mb", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    text = body(args.size_mb)
    runs = {"now": redact_text}
    if args.baseline:
        spec = importlib.util.spec_from_file_location("old_redact", args.baseline)
        old = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(old)
        runs["baseline"] = old.redact_text
    for name, fn in runs.items():
        s = best(fn, text, args.rounds)
        print(f"{name:9s} {s:7.3f} s  {len(text) / 1e6 / s:7.1f} MB/s  ({args.size_mb} MB, best of {args.rounds})")


if __name__ == "__main__":
    main()
