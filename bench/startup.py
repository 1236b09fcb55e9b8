"""Whole-process time of the commands users wait on: `prefixguard diff` of a ~1 MB pair (bench/core.py's
session, a timestamp break), with the token counts kept on disk (warm), without them (cold), without
tokens at all, `lint` of one file, `--help`; against `python -c pass` and, where given, cachelint's diff
of the same pair. Fresh processes, interleaved rounds, medians: ratios are what to read.

    .venv/bin/python bench/startup.py [--rounds 9] [--cachelint SITE_DIR] [--baseline CHECKOUT] [--only TEXT]...
SITE_DIR holds cachelint 0.1.0a2 (`pip install --target SITE_DIR --no-deps cachelint==0.1.0a2`).
Each command's CPU seconds (user + system, the steadier figure on a shared machine) are given beside.
CHECKOUT is another revision of this repository (`git worktree add /tmp/base REV`): every prefixguard
command runs against it too, in the same rounds, and the table gives this tree's time over its time.
--only keeps the cases whose name holds TEXT (and `python -c pass`), for more rounds in the same time.
The small pair (examples/requests/anthropic/history_rewritten) is what "startup" means: little input.
`report` reads a capture of the Anthropic example pairs (34 requests, the demo's size), written once.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SMALL = ROOT / "examples" / "requests" / "anthropic" / "history_rewritten"
sys.path.insert(0, str(ROOT / "bench"))

import core  # noqa: E402


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one run: on a shared machine the CPU time is the
    steadier of the two, and a start is one thread, so on an idle one they are about equal."""
    start = time.perf_counter()
    # os.wait4 blocks (Popen.wait with a timeout polls in sleeps of up to 50 ms) and gives the child's usage.
    # Run from / : `python -c` puts the working directory first on sys.path, before PYTHONPATH, and
    # each case's PYTHONPATH says whose code it times.
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/")
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)   # reaped here: Popen must not wait for it again
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime


def example_capture(path: Path) -> Path:
    """A capture store of every Anthropic example pair, a then b, as the proxy stores them."""
    from prefixguard.capture.store import Record, Store
    from prefixguard.model.usage import Usage
    with Store(path) as store:
        for i, body in enumerate(p.read_text("utf-8") for d in sorted(SMALL.parent.iterdir())
                                 for p in (d / "a.json", d / "b.json")):
            store.add(Record(f"r{i}", 1000.0 + i, "/v1/messages", api="anthropic", model="claude-sonnet-4-5",
                             request=body, status=200, usage=Usage(3000, 0, 3000, 0, 0, 5, True), ttft_s=0.2))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--cachelint", type=Path, help="a directory where cachelint is installed (--target)")
    ap.add_argument("--baseline", type=Path, help="another checkout of prefixguard to time side by side")
    ap.add_argument("--only", action="append", default=[], metavar="TEXT", help="time only the cases named so")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="pg-startup-"))
    gen = core._examples()
    tools, history = core.build_session(gen)
    a, b = core.bodies(gen, "anthropic", tools, history, gen.NEXT_TURN, gen.TIME_B)
    pa, pb = tmp / "a.json", tmp / "b.json"
    pa.write_bytes(a)
    pb.write_bytes(b)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # users keep .pyc files
    env["PYTHONPATH"] = str(ROOT)
    warm = {**env, "PREFIXGUARD_CACHE_DIR": str(tmp / "cache")}
    cold = {**env, "PREFIXGUARD_CACHE_DIR": "off"}
    pg = [sys.executable, "-c", "from prefixguard.cli import main; main()"]
    capture = str(example_capture(tmp / "capture.db"))
    cases = {
        "python -c pass": ([sys.executable, "-c", "pass"], env),
        "diff, counts on disk": (pg + ["diff", str(pa), str(pb)], warm),
        "diff, no disk cache": (pg + ["diff", str(pa), str(pb)], cold),
        "diff --no-tokens": (pg + ["diff", "--no-tokens", str(pa), str(pb)], warm),
        "lint, counts on disk": (pg + ["lint", str(pb)], warm),
        "--help": (pg + ["--help"], env),
        "diff --no-tokens, small": (pg + ["diff", "--no-tokens", str(SMALL / "a.json"), str(SMALL / "b.json")], warm),
        "lint --no-tokens, small": (pg + ["lint", "--no-tokens", str(SMALL / "b.json")], warm),
        "report, 34 requests": (pg + ["report", capture], warm),
        "report -o json": (pg + ["report", capture, "-o", "json"], warm),
    }
    if args.only:
        cases = {name: case for name, case in cases.items()
                 if name == "python -c pass" or any(text in name for text in args.only)}
    if args.baseline:  # the same commands, the other checkout's code
        cases |= {f"{name} @baseline": (cmd, {**e, "PYTHONPATH": str(args.baseline)})
                  for name, (cmd, e) in cases.items() if cmd[:len(pg)] == pg}
    if args.cachelint:
        cases["cachelint diff"] = ([sys.executable, "-c", "import sys; from cachelint.cli import main; "
                                    "sys.exit(main())", "diff", str(pa), str(pb)],
                                   {**env, "PYTHONPATH": str(args.cachelint)})
    for cmd, e in cases.values():  # compile .pyc, fill the cache directory
        timed(cmd, e)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
    for _ in range(args.rounds):  # a new order each round: drift and the place in a round hit all alike
        for name, (cmd, e) in random.sample(list(cases.items()), len(cases)):
            times[name].append(timed(cmd, e))
    med = {name: statistics.median(wall for wall, _ in v) for name, v in times.items()}
    cpu = {name: statistics.median(used for _, used in v) for name, v in times.items()}
    ref = "cachelint diff" if args.cachelint else "diff --no-tokens" if "diff --no-tokens" in med else "python -c pass"
    print(f"{len(a) / 2**20:.2f} MB pair; medians of {args.rounds} interleaved rounds; ratio to {ref}")
    print(f"{'command':24} {'s':>7} {'ratio':>7} {'cpu s':>7}"
          + (f" {'baseline s':>11} {'vs baseline':>12} {'baseline cpu s':>15}" if args.baseline else ""))
    for name, s in med.items():
        if name.endswith(" @baseline"):
            continue
        base = med.get(f"{name} @baseline")
        print(f"{name:24} {s:7.3f} {s / med[ref]:6.2f}x {cpu[name]:7.3f}"
              + (f" {base:11.3f} {s / base:11.3f}x {cpu[f'{name} @baseline']:15.3f}" if base else ""))


if __name__ == "__main__":
    main()
