"""Time and peak memory of analysing one very large request body: `lint`, `diff` (two bodies that differ
at their last message) and the proxy's analysis of one request (Analyzer.request, in-process), each in
a fresh process with the part ceiling off (PREFIXGUARD_MAX_PARTS=0), peak RSS from the kernel (wait4).

    .venv/bin/python bench/big_body.py [--messages 1500000] [--big 19000] [--baseline CHECKOUT] [--cases ...]
Bodies: "many" is --messages tiny Anthropic messages with plain string content, just under the 64 MiB
body limit at 1.5M (about 44 bytes a message); "big" is --big messages of about 3 KB (about 57 MiB).
CHECKOUT is another revision of this repository (`git worktree add /tmp/base REV`): every case runs
against it too, one after the other, and the table puts both side by side. A lint of a tiny body runs
first in each tree, so that no case pays for writing the on-disk caches (a cold start peaks higher).
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

ROOT = Path(__file__).resolve().parent.parent


def many_messages(n: int, last: str = "end") -> bytes:
    """n tiny alternating user/assistant messages, plain string content; the last one says `last`."""
    parts = [b'{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[']
    for i in range(n - 1):
        role = b"user" if i % 2 == 0 else b"assistant"
        parts.append(b'{"role":"%s","content":"%07d abcde"},' % (role, i))
    parts.append(b'{"role":"user","content":%s}]}' % json.dumps(last).encode())
    return b"".join(parts)


def big_messages(n: int, last: str = "end") -> bytes:
    """n messages of about 3 KB each (a text block and a tool result), the kind a long agent run has."""
    filler = "word " * 600
    messages = []
    for i in range(n - 1):
        if i % 2 == 0:
            messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"toolu_{i:08d}", "content": f"{i} {filler}"}]})
        else:
            messages.append({"role": "assistant", "content": [
                {"type": "text", "text": f"step {i} {filler}"}]})
    messages.append({"role": "user", "content": last})
    return json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 16, "system": "You are a coding agent.",
                       "messages": messages}, separators=(",", ":")).encode()


PROXY = """
import sys, time
from prefixguard.proxy.analysis import Analyzer, FlowState
analyzer = Analyzer(store=None)
analyzer.warm()
# the body held by the flow alone, as in the analysis process (which lets it go once its text is read)
flow = FlowState(id="f1", ts=1000.0, sent=0.0, path="/v1/messages", upstream=("https", "api.anthropic.com", 443),
                 fields=((b"content-type", b"application/json"), (b"x-api-key", b"sk-ant-bench")),
                 body=open(sys.argv[1], "rb").read())
start = time.perf_counter()
early = analyzer.request(flow)
took = time.perf_counter() - start
assert flow.prompt is not None, flow.skip
print(f"analysed {len(flow.prompt.segments)} segments in {took:.2f} s: {early}", file=sys.stderr)
"""


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, float, int, int]:
    """(wall seconds, CPU seconds, peak RSS in bytes, exit code) of one fresh process. CPU seconds are
    what to compare on a shared machine: wall time there grows with everyone else's load."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd="/")
    _, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - start
    assert proc.stderr is not None   # stderr=PIPE
    err = proc.stderr.read().decode(errors="replace").strip()
    proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if err:
        print(f"    {err.splitlines()[-1][:200]}", file=sys.stderr)
    return took, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, proc.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=1_500_000, help="messages of the 'many' body")
    ap.add_argument("--big", type=int, default=19_000, help="messages of the 'big' body (about 3 KB each)")
    ap.add_argument("--baseline", type=Path, help="another checkout of prefixguard to time side by side")
    ap.add_argument("--cases", nargs="*", help="run only the cases whose name contains one of these words")
    ap.add_argument("--tokens", action="store_true", help="count with the tokenizer (default: --no-tokens)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="pg-bigbody-") as tmp:   # the bodies: ~240 MB a run
        measure(args, Path(tmp))


def measure(args: argparse.Namespace, tmp: Path) -> None:
    bodies = {}
    for name, make, n in (("many", many_messages, args.messages), ("big", big_messages, args.big)):
        a, b = tmp / f"{name}_a.json", tmp / f"{name}_b.json"
        a.write_bytes(make(n, "the end"))
        b.write_bytes(make(n, "another end"))
        bodies[name] = (a, b, n)
    pg = [sys.executable, "-c", "from prefixguard.cli import main; main()"]
    no_tokens = [] if args.tokens else ["--no-tokens"]
    cases: dict[str, list[str]] = {}
    for name, (a, b, _) in bodies.items():
        cases[f"lint {name}"] = pg + ["lint", *no_tokens, str(a)]
        cases[f"diff {name}"] = pg + ["diff", *no_tokens, str(a), str(b)]
        cases[f"proxy {name}"] = [sys.executable, "-c", PROXY, str(b)]
    if args.cases:
        cases = {k: v for k, v in cases.items() if any(w in k for w in args.cases)}
    env = {**os.environ, "PREFIXGUARD_MAX_PARTS": "0", "PREFIXGUARD_CACHE_DIR": str(tmp / "cache")}
    trees = {"this": ROOT} | ({"baseline": args.baseline} if args.baseline else {})
    results: dict[tuple[str, str], tuple[float, float, int, int]] = {}
    tiny = tmp / "tiny.json"
    tiny.write_bytes(many_messages(2))
    for path in trees.values():   # the on-disk caches (rules, prices) written before, not by the first case
        run(pg + ["lint", *no_tokens, str(tiny)], {**env, "PYTHONPATH": str(path)})
    for case, cmd in cases.items():
        for tree, path in trees.items():
            if not args.tokens and case.startswith("proxy"):
                env_case = {**env, "PREFIXGUARD_TOKENIZER": "estimate"}
            else:
                env_case = env
            results[tree, case] = run(cmd, {**env_case, "PYTHONPATH": str(path)})
            s, cpu, rss, rc = results[tree, case]
            print(f"  {tree:8} {case:12} {s:6.1f} s {cpu:6.1f} cpu s {rss / 2**20:7.0f} MiB rc {rc}", file=sys.stderr)
    sizes = {name: a.stat().st_size for name, (a, _, _) in bodies.items()}
    print(f"bodies: many {args.messages} messages {sizes['many'] / 2**20:.1f} MiB; "
          f"big {args.big} messages {sizes['big'] / 2**20:.1f} MiB; "
          f"{'tokenizer' if args.tokens else '--no-tokens'}; PREFIXGUARD_MAX_PARTS=0")
    head = f"{'case':12} {'wall s':>7} {'cpu s':>6} {'peak MiB':>9} {'x body':>7}"
    print(head + (f" {'base wall':>9} {'base cpu':>8} {'base MiB':>9}" if args.baseline else ""))
    for case in cases:
        s, cpu, rss, rc = results["this", case]
        size = sizes[case.split()[1]]
        line = (f"{case:12} {s:7.1f} {cpu:6.1f} {rss / 2**20:9.0f} {rss / size:6.1f}x"
                + ("" if rc in (0, 1) else f" rc {rc}"))
        if args.baseline:
            bs, bcpu, brss, brc = results["baseline", case]
            line += f" {bs:9.1f} {bcpu:8.1f} {brss / 2**20:9.0f}" + ("" if brc in (0, 1) else f" rc {brc}")
        print(line)


if __name__ == "__main__":
    main()
