"""Speed of `prefixguard lint` on Python source (issue 31): a generated tree of N lines where every file
holds SDK calls and volatile flows (so every file is parsed and analyzed, unlike a real repository where
most files are skipped before parsing), or any folder given. Prints lines, seconds (whole process, as a
user runs it), lines per second.

    .venv/bin/python bench/code_lint.py --lines 100000
    .venv/bin/python bench/code_lint.py --path .venv/lib/python3.12/site-packages/openai
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APPS = ROOT / "examples" / "code" / "python"


def generate(folder: Path, lines: int) -> int:
    """Files of ~250 lines: an example app plain helper functions between."""
    sources = [p.read_text("utf-8") for p in sorted(APPS.glob("*.py"))]
    written, n = 0, 0
    while written < lines:
        body = [sources[n % len(sources)]]
        for k in range(40):
            body.append(f"\n\ndef helper_{k}(items, scale=2):\n    total = 0\n    for item in items:\n"
                        f"        total += item * scale\n    return {{'total': total, 'k': {k}}}\n")
        text = "".join(body)
        sub = folder / f"pkg{n // 50}"
        sub.mkdir(exist_ok=True)
        (sub / f"mod{n}.py").write_text(text, "utf-8")
        written += text.count("\n") + 1
        n += 1
    return written


def count_lines(folder: Path) -> int:
    return sum(p.read_bytes().count(b"\n") for p in folder.rglob("*.py"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--path", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.path or Path(tmp)
        lines = count_lines(folder) if args.path else generate(folder, args.lines)
        exe = str(Path(sys.executable).with_name("prefixguard"))
        times = []
        for _ in range(args.rounds):
            start = time.perf_counter()
            done = subprocess.run([exe, "lint", "--select", "PG6", "--format", "concise", "--exit-zero",
                                   "--exclude", "*.json", "--exclude", "*.jsonl", str(folder)],
                                  capture_output=True, text=True)
            times.append(time.perf_counter() - start)
            assert done.returncode == 0, done.stderr
        best = min(times)
        found = done.stdout.count(": PG6")
        print(f"{lines:,} lines in {len(list(folder.rglob('*.py'))):,} files: best of {args.rounds} {best:.2f} s "
              f"({lines / best:,.0f} lines/s), {found} findings")


if __name__ == "__main__":
    main()
