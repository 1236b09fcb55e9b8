"""Speed of `prefixguard lint` on source code (issue 31): a generated tree of N lines where every file
holds SDK calls and volatile flows (so every file is parsed and analyzed, unlike a real repository where
most files are skipped before parsing), Python, TypeScript or both (half the lines each), or any folder
given. Prints lines, seconds (whole process, as a user runs it), lines per second.

    .venv/bin/python bench/code_lint.py --lines 100000 --language both
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
APPS = ROOT / "examples" / "code"
SUFFIXES = (".py", ".ts", ".js")
HELPERS = {  # plain code between the apps' flows
    ".py": "\n\ndef helper_{k}(items, scale=2):\n    total = 0\n    for item in items:\n"
           "        total += item * scale\n    return {{'total': total, 'k': {k}}}\n",
    ".ts": "\n\nexport function helper{k}(items: number[], scale = 2) {{\n  let total = 0;\n"
           "  for (const item of items) {{\n    total += item * scale;\n  }}\n  return {{ total, k: {k} }};\n}}\n",
}


def generate(folder: Path, lines: int, language: str) -> int:
    """Files of ~250 lines: an example app, plain helper functions after it."""
    apps = {"python": ["python"], "typescript": ["typescript"], "both": ["python", "typescript"]}[language]
    sources = [(p.suffix, p.read_text("utf-8")) for lang in apps for p in sorted((APPS / lang).iterdir())
               if p.is_file()]
    written, n = 0, 0
    while written < lines:
        suffix, app = sources[n % len(sources)]
        text = app + "".join(HELPERS[".py" if suffix == ".py" else ".ts"].format(k=k) for k in range(40))
        sub = folder / f"pkg{n // 50}"
        sub.mkdir(exist_ok=True)
        (sub / f"mod{n}{suffix}").write_text(text, "utf-8")
        written += text.count("\n") + 1
        n += 1
    return written


def count_lines(folder: Path) -> int:
    return sum(p.read_bytes().count(b"\n") for p in folder.rglob("*") if p.suffix in SUFFIXES and p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--path", type=Path)
    parser.add_argument("--language", choices=("python", "typescript", "both"), default="both")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.path or Path(tmp)
        lines = count_lines(folder) if args.path else generate(folder, args.lines, args.language)
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
        files = sum(1 for p in folder.rglob("*") if p.suffix in SUFFIXES)
        print(f"{lines:,} lines in {files:,} files: best of {args.rounds} {best:.2f} s "
              f"({lines / best:,.0f} lines/s), {found} findings")


if __name__ == "__main__":
    main()
