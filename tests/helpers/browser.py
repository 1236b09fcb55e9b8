"""Headless Chromium for the tests that look at the HTML report as people see it (Debian's package)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

PATHS = ("chromium", "chromium-browser", "/usr/bin/chromium")
CHARTS = ("cost-by-model", "cost-over-time", "ttft", "decode", "hit-rate", "inputs", "tokens", "ttft-vs-cached",
          "causes")  # what a report draws


def _found() -> str | None:
    return next((p for p in (shutil.which(n) or n for n in PATHS) if os.path.exists(p)), None)


def chromium() -> str:
    """Debian's chromium; installed with apt when missing and running as root (bounded in time). Missing
    after that: a failure under CI, a skip elsewhere."""
    found = _found()
    if found is None and os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        try:  # a fresh machine's package lists may be empty: update them first
            subprocess.run(["apt-get", "update"], env=env, capture_output=True, timeout=300)
            subprocess.run(["apt-get", "install", "-y", "chromium"], env=env, capture_output=True, timeout=600)
        except subprocess.TimeoutExpired:
            pass
        found = _found()
    if found is None:
        message = "chromium is not installed: apt-get install -y chromium"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def headless(profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           "--hide-scrollbars", f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120)
