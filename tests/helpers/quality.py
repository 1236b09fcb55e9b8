"""mypy started in the background: on a cold cache (a fresh clone) it takes a minute of one core, which
a suite in one process (`pytest -n 0`) leaves idle. conftest.py starts it once the tests are collected
and moves its test last; the test reads the result. With two workers (pyproject's addopts) no core is idle
and each worker collects every test: the test runs mypy itself, once."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
MYPY_TEST = "tests/test_code_quality.py::test_mypy_finds_nothing"
MYPY = pytest.StashKey[subprocess.Popen]()


def start_mypy() -> subprocess.Popen:
    """mypy over pyproject's [tool.mypy] packages; the cache lives in the checkout (git-ignored), so a
    second run reads only what changed."""
    return subprocess.Popen(
        [str(Path(sys.executable).with_name("mypy")), "--cache-dir", str(ROOT / ".mypy_cache")],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
