"""An Analyzer that fails on purpose, for the proxy tests (it runs in the proxy's worker process, so it
lives in a module that process can import)."""
from __future__ import annotations

from prefixguard.proxy.analysis import Analyzer, Early, FlowState

MARKER = b"INJECT-FAILURE"


class FaultyAnalyzer(Analyzer):
    """Raises in the request step of any request whose body holds MARKER."""

    def request(self, flow: FlowState) -> Early | None:
        early = super().request(flow)
        text = flow.prompt.text if flow.prompt is not None else ""   # the body as read (the flow lets it go)
        if MARKER in flow.body or MARKER.decode() in text:
            raise RuntimeError(f"injected failure, key {flow.secrets[0]}")
        return early
