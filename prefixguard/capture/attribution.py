"""Who sent a request: its client (user-agent family and version), its call site (the header a caller sets to
name the code that made the call), as labels a capture row carries and reports group by.

Read from the request's header fields only, never changing them: the proxy forwards every byte it got,
this header included. Every label is cut to a bounded length of printable characters: a header is the
caller's text, and a label lands in terminals, JSON and metrics.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

SITE_HEADER = "x-prefixguard-site"  # the call site: a test's node id, a LiteLLM call's metadata, the app's own
MAX_LABEL = 120
# The official SDKs' own user agents ("Anthropic/Python 0.69.0", "OpenAI/JS 4.2.0"): maker and language
_SDK_AGENT = re.compile(r"^(Anthropic|OpenAI)/([A-Za-z]+) v?(\d[\w.+-]*)")
_PRODUCT = re.compile(r"^([A-Za-z][\w.+-]*)/v?(\d[\w.+-]*)")  # "claude-cli/2.0.14 (external, cli)"
_UNSAFE = re.compile(r"[^\x21-\x7e ]+")


def _clean(text: str, limit: int = MAX_LABEL) -> str:
    return _UNSAFE.sub("?", text).strip()[:limit]


def client_of(headers: Mapping[str, str]) -> str:
    """ "family version" of the client that sent the request: "claude-cli 2.0.14", "anthropic-python 0.69.0",
    "openai-python 1.109.1"; the first product of any other user agent ("litellm 1.77.0", "curl 8.5.0");
    the SDK's x-stainless-* headers when the user agent says nothing; "" when nothing names a client.
    A caller's own user agent (an app that sets it over an SDK's) wins: it is the finer name."""
    agent = (headers.get("user-agent") or "").strip()
    found = _SDK_AGENT.match(agent)
    if found:
        return _clean(f"{found.group(1).lower()}-{found.group(2).lower()} {found.group(3)}")
    found = _PRODUCT.match(agent)
    if found:
        return _clean(f"{found.group(1).lower()} {found.group(2)}")
    lang, version = headers.get("x-stainless-lang"), headers.get("x-stainless-package-version")
    if lang and version:  # a Stainless-made SDK (Anthropic's, OpenAI's) under a user agent of no version
        return _clean(f"{agent.split('/')[0].lower() or 'sdk'}-{lang.lower()} {version}")
    return _clean(agent.split(" ")[0].lower()) if agent else ""


def client_family(client: str) -> str:
    """The client with its major version only ("claude-cli 2", "anthropic-python 0.69": before 1.0 the
    minor is what breaks), a label of bounded cardinality for metrics."""
    name, _, version = client.partition(" ")
    parts = version.split(".")
    major = ".".join(parts[:2]) if parts[0] == "0" and len(parts) > 1 else parts[0]
    return f"{name} {major}".strip() if name else ""


def site_of(headers: Mapping[str, str]) -> str | None:
    """The call site the caller named in its x-prefixguard-site header; None when it named none."""
    site = headers.get(SITE_HEADER)
    return _clean(site, 200) or None if site else None
