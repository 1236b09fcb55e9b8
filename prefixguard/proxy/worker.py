"""The analysis process: one Analyzer, fed in order by the addon through a one-process pool.

Parsing, tokenizing and comparing are CPU work; in the proxy's own process they would hold the GIL
that the event loop needs to move bytes, and every flow would wait. In a process of their own they
cost the traffic nothing. Every call returns (result, error): an exception never crosses back.
"""
from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

from prefixguard.proxy.redact import redact_text

_analyzer: Any = None


def init(factory: Callable[..., Any], settings: dict[str, Any]) -> None:
    global _analyzer
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the proxy, which then stops us cleanly
    _analyzer = factory(**settings)


def call(step: str, arg: Any) -> tuple[Any, str | None]:
    """Run one analysis step; (its result, None) or (None, a one-line error with secrets removed)."""
    try:
        return getattr(_analyzer, step)(arg), None
    except Exception as err:  # noqa: BLE001 - reported by the addon, never raised into a flow
        secrets = getattr(arg, "secrets", None) or (_analyzer.secrets_of(arg.id) if hasattr(arg, "id") else [])
        return None, redact_text(f"{type(err).__name__}: {err}", secrets)
