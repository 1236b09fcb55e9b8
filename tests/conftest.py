"""Shared test fixtures: where the real recorded data lives, and one run of the demo."""
from __future__ import annotations

import compileall
import fcntl
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers.quality import MYPY, MYPY_TEST, start_mypy

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"   # in CI a copy of shared/ sits beside the clone
# Tests count with the tokenizer itself, never with counts an earlier run kept in the user's cache
# (tests/test_tokens.py turns the disk store on in a temporary directory).
os.environ["PREFIXGUARD_CACHE_DIR"] = "off"
# Two workers share the cores (pytest-xdist): the proxies' analysis runs at the traffic's priority, so that a row
# a test waits for never waits on the other worker's load (its default, SCHED_IDLE, is tested in
# test_hardening_proxy.py).
os.environ["PREFIXGUARD_ANALYSIS_NICE"] = "0"
# The CLI and server processes the tests start import prefixguard from bytecode, as an
# installed copy does, even where PYTHONDONTWRITEBYTECODE keeps Python from writing it (these CI machines
# set it): each start would compile the package again, a tenth of a second of CPU.
for package in ("prefixguard", "engine"):
    compileall.compile_dir(ROOT / package, quiet=1)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        message = f"shared data not found at {SHARED_DATA}"
        if os.environ.get("CI"):  # a test that skips under CI proves nothing: the run fails instead
            pytest.fail(message)
        pytest.skip(message)
    return SHARED_DATA


@dataclass(frozen=True)
class DemoRun:
    result: dict[str, Any]   # its JSON output
    store: Path              # the proxy's capture
    seconds: float           # wall time, whole process


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """`prefixguard demo -o json --store capture.db`, the README's main command, run once for the tests
    that read its output or its capture (about 30 s each time): once for the run, whichever pytest-xdist worker
    asks first (the others wait for it, and read the same capture)."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # this run's folder, above each worker's own
    folder, out = shared / "demo", shared / "demo" / "run.json"
    folder.mkdir(exist_ok=True)
    with open(shared / "demo.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not out.exists():
            started = time.monotonic()
            done = subprocess.run([sys.executable, "-c", "from prefixguard.cli import main; main()", "demo", "-o",
                                   "json", "--store", str(folder / "capture.db")],
                                  capture_output=True, text=True, timeout=300, cwd=folder)
            assert done.returncode == 0, done.stderr[-2000:]
            out.write_text(json.dumps({"result": json.loads(done.stdout), "seconds": time.monotonic() - started}))
    run = json.loads(out.read_text())
    return DemoRun(run["result"], folder / "capture.db", run["seconds"])



# ---- mypy in the background (helpers/quality.py): its test runs last, to read the result.

def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    last = [item for item in items if item.nodeid == MYPY_TEST]
    if last:
        items[:] = [item for item in items if item.nodeid != MYPY_TEST] + last
        # in one process only: under pytest-xdist every worker collects and no core is idle (the test runs it)
        if not hasattr(config, "workerinput"):
            config.stash[MYPY] = start_mypy()


def pytest_unconfigure(config: pytest.Config) -> None:
    proc = config.stash.get(MYPY, None)
    if proc is not None and proc.poll() is None:  # the run stopped before its test (-x, ^C)
        proc.kill()
        proc.wait()
