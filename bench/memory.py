"""Memory and head-of-line wait of the proxy's analysis process (issue 13, item 1).

For bodies of 1, 16 and 61 MiB made of many small messages (~44 bytes each, the shape that costs the
most per byte), one proxy each (a fresh analysis process, so its peak is this body's): the analysis
process's peak RSS (VmHWM) after the big flow, and how long a small flow sent right after the big one
waits for its row, next to the same small flow alone. Loopback only; the upstream answers every JSON
request with a fixed recorded answer.

    PYTHONPATH=. python bench/memory.py [--sizes 1 16 61]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from helpers.upstream import Upstream  # noqa: E402

from prefixguard.proxy.addon import PrefixGuard  # noqa: E402
from prefixguard.proxy.serve import ProxyThread  # noqa: E402

RECORDED = ROOT.parent / "shared" / "data" / "recorded"
ANSWER = RECORDED / "openllmetry/test_prompt_caching_test_anthropic_prompt_caching_legacy/0001.response.json"


def body_of(mib: float) -> bytes:
    """An Anthropic request of `mib` MiB made of small alternating messages."""
    pair = sum(len(json.dumps({"role": r, "content": "ok thanks"})) + 2 for r in ("user", "assistant"))
    n = int(mib * (1 << 20) / pair * 2) - 2  # a little under `mib` MiB, as the body limit is 64 MiB
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": "ok thanks"} for i in range(n)]
    return json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 5, "messages": msgs}).encode()


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run(mib: float, small: bytes) -> dict[str, float]:
    lines: dict[str, float] = {}  # console line -> when it came

    def console(line: str) -> None:
        lines[line] = time.monotonic()

    big = body_of(mib)
    with tempfile.TemporaryDirectory() as tmp, Upstream(RECORDED, body=ANSWER.read_bytes()) as up:
        addon = PrefixGuard(console=console)
        with ProxyThread([up.url], addon=addon, store=str(Path(tmp) / "c.db")) as px, httpx.Client(timeout=300) as c:
            c.post(px.url + "/v1/messages", content=small, headers={"x-api-key": "small-warm" + "k" * 20})
            time.sleep(1.0)  # the process is started and its tokenizer loaded
            lines.clear()
            c.post(px.url + "/v1/messages", content=small, headers={"x-api-key": "small-alone" + "k" * 20})
            answered = time.monotonic()
            while not lines and time.monotonic() < answered + 30:
                time.sleep(0.001)
            alone = max(lines.values()) - answered
            base = peak_rss_mb(addon._worker.pid)
            t0 = time.monotonic()
            c.post(px.url + "/v1/messages", content=big, headers={"x-api-key": "big" + "k" * 20})
            big_sent = time.monotonic() - t0
            lines.clear()
            t1 = time.monotonic()
            c.post(px.url + "/v1/messages", content=small, headers={"x-api-key": "small" + "k" * 20})
            answered = time.monotonic()
            deadline = time.monotonic() + 300
            while len(lines) < 2 and time.monotonic() < deadline:  # the big flow's line, then the small one's
                time.sleep(0.01)
            last = max(lines.values()) if lines else float("nan")
            peak = peak_rss_mb(addon._worker.pid)
    return {"mib": len(big) / (1 << 20), "base_mb": base, "alone_s": alone, "peak_mb": peak, "big_sent_s": big_sent,
            "small_wait_s": last - answered, "small_total_s": answered - t1, "rows": len(lines)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=float, nargs="+", default=[1, 16, 61])
    args = ap.parse_args()
    small = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 5,
                        "messages": [{"role": "user", "content": "hello"}]}).encode()
    print(f"{'body MiB':>9} {'idle RSS MB':>12} {'peak RSS MB':>12} {'peak/body':>10} {'small row wait s':>17}"
          f" {'alone s':>8} {'ratio':>6}")
    for mib in args.sizes:
        r = run(mib, small)
        print(f"{r['mib']:9.1f} {r['base_mb']:12.0f} {r['peak_mb']:12.0f} {r['peak_mb'] / r['mib']:10.1f} "
              f"{r['small_wait_s']:17.3f} {r['alone_s']:8.3f} {r['small_wait_s'] / r['alone_s']:6.1f}", flush=True)


if __name__ == "__main__":
    main()
