"""The addon's mitmproxy options (also settable with mitmproxy's --set), declared in one place."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

OPTIONS = (
    "prefixguard_store",
    "prefixguard_index",
    "prefixguard_bodies",
    "prefixguard_headers",
    "prefixguard_quiet",
    "prefixguard_policy",
    "prefixguard_upstreams",
    "prefixguard_diagnostics",
    "prefixguard_otlp_endpoint",
    "prefixguard_metrics_port",
    "prefixguard_metrics_host",
)


def add_options(loader: Any) -> None:
    """Declare every option of OPTIONS with its type, default and help."""
    loader.add_option("prefixguard_store", str, "", "Capture store: SQLite file or postgresql:// URL (empty: none).")
    loader.add_option(
        "prefixguard_index", str, "", "Shared session index of a fleet: redis:// URL (empty: in process)."
    )
    loader.add_option("prefixguard_bodies", bool, True, "Store redacted request bodies (else fingerprints only).")
    loader.add_option("prefixguard_headers", bool, True, "Add x-prefixguard-* response headers.")
    loader.add_option("prefixguard_quiet", bool, False, "No console line per request.")
    loader.add_option("prefixguard_policy", str, "", "Cache policy: radix, anthropic, openai (empty: by provider).")
    loader.add_option(
        "prefixguard_upstreams", Sequence[str], [], "Reverse-proxy routes PREFIX=URL (a URL alone: every other path)."
    )
    loader.add_option(
        "prefixguard_diagnostics",
        bool,
        False,
        "Ask the provider for its cache diagnosis against the tenant's previous response: "
        "adds one member to Messages / Responses request bodies (off: every byte passes).",
    )
    loader.add_option("prefixguard_otlp_endpoint", str, "", "OTLP/HTTP collector for one span per call (empty: none).")
    loader.add_option("prefixguard_metrics_port", int, 0, "Port of the Prometheus /metrics (0: none).")
    loader.add_option("prefixguard_metrics_host", str, "127.0.0.1", "Address of the Prometheus /metrics.")
