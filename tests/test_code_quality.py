"""The library's habits, kept by CI: ruff (lint and format, rules in pyproject.toml) and mypy (pyproject's
[tool.mypy]) report nothing. They run here, as tests, because `.ci/run` runs the test command and nothing else."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers.quality import MYPY, start_mypy

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
CODE = ["prefixguard", "engine"]


def _run(*argv: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / argv[0]), *argv[1:]], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def test_ruff_finds_nothing() -> None:
    done = _run("ruff", "check", "--no-cache", *CODE)
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format_changes_nothing() -> None:
    done = _run("ruff", "format", "--check", "--no-cache", *CODE)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_finds_nothing(request: pytest.FixtureRequest) -> None:
    """Started in the background when the tests were collected (helpers/quality.py), or now when run alone."""
    proc = request.config.stash.get(MYPY, None) or start_mypy()
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0 and "Success" in out, out


def test_the_checks_can_fail(tmp_path: Path) -> None:
    """Each tool reports a planted fault: an unused import, a badly formatted line, a wrong type."""
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nx: int = 'a'\ny = [1,2]\n", "utf-8")
    assert _run("ruff", "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"), str(bad)).returncode == 1
    assert _run("ruff", "format", "--check", "--no-cache", str(bad)).returncode == 1
    done = _run("mypy", "--cache-dir", str(tmp_path / "cache"), "--config-file", str(ROOT / "pyproject.toml"), str(bad))
    assert done.returncode == 1 and "incompatible types" in done.stdout.lower(), done.stdout
