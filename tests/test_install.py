"""`pip install` outside the checkout, then `prefixguard demo`: the engine and the rules install as
prefixguard.engine and prefixguard.rules (no top-level `engine`), the demo's app ships in the package.

The fresh virtual environment gets its dependencies from this interpreter's site-packages (a .pth
line) and prefixguard itself from a real wheel build of a copy of this checkout (--no-deps: no network)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
SKIP = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache",
                              ".hypothesis", "out", "*.db")


def test_installed_outside_the_checkout_the_demo_runs(tmp_path: Path) -> None:
    src, venv, work = tmp_path / "src", tmp_path / "venv", tmp_path / "work"
    shutil.copytree(ROOT, src, ignore=SKIP)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "deps.pth").write_text("\n".join(p for p in sys.path if p.endswith("site-packages")) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    py = str(venv / "bin" / "python")
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", str(src)],
                   check=True, timeout=300, env=env, cwd=tmp_path)
    shutil.rmtree(src)  # nothing may reach back into a checkout
    work.mkdir()
    probe = ("import importlib.util, prefixguard, prefixguard.engine.kvmath, prefixguard.rules; "
             "print(prefixguard.__file__); print(importlib.util.find_spec('engine'), importlib.util.find_spec('rules'))")
    done = subprocess.run([py, "-c", probe], capture_output=True, text=True, timeout=60, env=env, cwd=work)
    assert done.returncode == 0, done.stderr
    where, missing = done.stdout.splitlines()
    assert where.startswith(str(site)) and missing == "None None"
    demo = subprocess.run([str(venv / "bin" / "prefixguard"), "demo", "-o", "json"], capture_output=True,
                          text=True, timeout=600, env=env, cwd=work)
    assert demo.returncode == 0, demo.stderr[-2000:]
    result = json.loads(demo.stdout)
    assert result["before"]["requests"] and result["after"]["requests"]
