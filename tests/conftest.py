"""Shared test fixtures: where the real recorded data lives."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"   # in CI a copy of shared/ sits beside the clone
# Tests count with the tokenizer itself, never with counts an earlier run kept in the user's cache
# (tests/test_tokens.py turns the disk store on in a temporary directory).
os.environ["PREFIXGUARD_CACHE_DIR"] = "off"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        message = f"shared data not found at {SHARED_DATA}"
        if os.environ.get("CI"):  # a test that skips under CI proves nothing: the run fails instead
            pytest.fail(message)
        pytest.skip(message)
    return SHARED_DATA
