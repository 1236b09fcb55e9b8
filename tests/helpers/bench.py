"""A script of bench/ loaded as a module, for the tests that check its figures or reuse its readers."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parent.parent.parent / "bench"


def load_bench(name: str) -> ModuleType:
    """bench/<name>.py, loaded once per session (registered in sys.modules: its dataclasses look their
    module up there)."""
    key = f"bench_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    return module
