"""How long a proxy's row takes when every core is busy: the analysis process's priority, measured.

A proxy (this checkout, or --baseline's) answers one recorded request from a loopback upstream while
`cores + 1` processes spin at normal priority; the figure is the time from the answer to its row in the
store: with the proxy started (its analysis process warm) before the spinning, and started while the
cores are already busy (a proxy a CI job starts beside its test suite). Each case is a fresh process;
each is also timed with nothing spinning, in the same run.

    .venv/bin/python bench/busy_cores.py [--baseline CHECKOUT] [--nice 0] [--limit 90]
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

ROOT = Path(__file__).resolve().parents[1]
CASSETTE = ROOT.parent / "shared" / "data" / "recorded" / "openllmetry" / \
    "test_prompt_caching_test_anthropic_prompt_caching_legacy"
KEY = "sk-ant-api03-busy-" + "x" * 24


def one(limit: float, busy: int, started_busy: bool) -> float | None:
    """In a child: the seconds from the answer to its row (None: not within `limit`)."""
    sys.path.insert(0, str(ROOT / "tests"))
    import httpx
    from helpers.proxy import tenant_rows
    from helpers.upstream import Upstream

    from prefixguard.proxy.addon import PrefixGuard
    from prefixguard.proxy.serve import ProxyThread

    db = Path(tempfile.mkdtemp()) / "capture.db"
    spinners: list[subprocess.Popen] = []
    spin = ([sys.executable, "-c", "while True: pass"],) * busy
    try:
        if started_busy:
            spinners = [subprocess.Popen(cmd) for cmd in spin]
        with Upstream(CASSETTE.parent.parent) as up, \
                ProxyThread([up.url], addon=PrefixGuard(console=lambda _: None), store=str(db)) as px:
            if not started_busy:
                time.sleep(1.0)  # the analysis process started and warm, as a proxy that has run a while
                spinners = [subprocess.Popen(cmd) for cmd in spin]
            time.sleep(0.5)
            body = (CASSETTE / "0001.request.json").read_bytes()
            r = httpx.post(f"{px.url}/v1/messages", content=body, timeout=60,
                           headers={"x-api-key": KEY, "content-type": "application/json"})
            assert r.status_code == 200, r.status_code
            answered = time.monotonic()
            rows = tenant_rows(db, KEY, 1, limit)
            return time.monotonic() - answered if rows else None
    finally:
        for p in spinners:
            p.kill()

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", type=Path, help="another checkout of prefixguard, measured side by side")
    ap.add_argument("--nice", type=int, action="append", default=[],
                    help="also this checkout with PREFIXGUARD_ANALYSIS_NICE set to this")
    ap.add_argument("--limit", type=float, default=90.0, help="seconds to wait for a row")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child: how many processes spin
    ap.add_argument("--started-busy", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one is not None:
        print(json.dumps(one(args.limit, args.one, args.started_busy)))
        return
    env = {k: v for k, v in os.environ.items() if k != "PREFIXGUARD_ANALYSIS_NICE"}
    cases = {"this checkout": {**env, "PYTHONPATH": str(ROOT)}}
    cases |= {f"nice {n}": {**env, "PYTHONPATH": str(ROOT), "PREFIXGUARD_ANALYSIS_NICE": str(n)} for n in args.nice}
    if args.baseline:
        cases["baseline"] = {**env, "PYTHONPATH": str(args.baseline)}
    busy = (os.cpu_count() or 1) + 1
    runs = {"idle machine s": (0, []), f"{busy} spinning s": (busy, []),
            "started busy s": (busy, ["--started-busy"])}
    print(f"{'case':<16}" + "".join(f" {title:>16}" for title in runs))
    for name, case_env in cases.items():
        seconds = []
        for spinning, flags in runs.values():
            out = subprocess.run([sys.executable, __file__, "--one", str(spinning), "--limit", str(args.limit), *flags],
                                 capture_output=True, text=True, env=case_env, timeout=args.limit + 120)
            value = json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else "failed"
            seconds.append(f"> {args.limit:.0f}" if value is None else value if isinstance(value, str)
                           else f"{value:.2f}")
        print(f"{name:<16}" + "".join(f" {value:>16}" for value in seconds))


if __name__ == "__main__":
    main()
