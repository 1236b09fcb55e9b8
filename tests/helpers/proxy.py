"""What the proxy tests share: the recorded cassettes they send, a settable clock, the store rows of one
tenant (waited for: the analysis runs behind the flow), and small body helpers."""
from __future__ import annotations

import contextlib
import hashlib
import time
from pathlib import Path
from typing import Any

from prefixguard.utils.errors import InputError
from prefixguard.proxy.redact import tenant_of
from prefixguard.capture.store import open_store

LEGACY = "openllmetry/test_prompt_caching_test_anthropic_prompt_caching_legacy"
STREAM = "openllmetry/test_prompt_caching_test_anthropic_prompt_caching_stream_legacy"
OPENAI_STREAM = "pydantic-ai/test_dbos_test_mcp_tools_not_cached_when_disabled"
TOOLS = "pydantic-ai/test_tool_search_test_anthropic_custom_callable_round_trip"



class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def tenant_rows(db: Path, key: str, n: int, timeout: float) -> list[dict[str, Any]]:
    """The store rows of one tenant, once n of them are written (the analysis runs behind the flow)."""
    tenant = tenant_of({"x-api-key": key})
    deadline = time.monotonic() + timeout
    while True:
        rows = []
        with contextlib.suppress(InputError):  # missing, or created but its table not yet written
            with open_store(db) as store:
                rows = [r for r in store.rows() if r["tenant"] == tenant]
        if len(rows) >= n or time.monotonic() > deadline:
            return rows
        time.sleep(0.02)


def streamable(body: dict[str, Any]) -> dict[str, Any]:
    """A recorded streaming request for the SDKs' stream() helpers, which set `stream` themselves."""
    body.pop("stream", None)
    return body


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
