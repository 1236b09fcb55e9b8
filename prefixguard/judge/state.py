"""What verdicts depend on across requests: the session model, the token scale, and a cache policy per
provider, kept in this process or in a fleet's shared index (prefixguard/judge/index.py). The proxy's
analysis holds one; when the shared index cannot be reached it judges with a second, local one."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from prefixguard.judge.policies import CachePolicy, Policies
from prefixguard.judge.scale import FIT_LIFETIME, TokenScale
from prefixguard.judge.session import Sessions
from prefixguard.judge.stored import STORED_LIFETIME, StoredResponses
from prefixguard.model.prompt import Prompt
from prefixguard.utils.errors import InputError
from prefixguard.utils.redaction import url_for_display

INDEX_SCHEMES = ("redis://", "rediss://", "unix://")


def open_index(url: str) -> Any:
    """The shared index at `url` (redis://HOST:PORT/DB, `?prefix=NAME:` for keys of their own: several
    fleets, or a test, on one Redis). InputError for another kind of URL, or when the fleet extra is
    not installed."""
    if not url.startswith(INDEX_SCHEMES):
        raise InputError(f"--index {url_for_display(url)!r}: expected a redis:// URL")
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    prefix = next((v for k, v in query if k == "prefix"), "prefixguard:")
    url = urlunsplit(parts._replace(query=urlencode([(k, v) for k, v in query if k != "prefix"])))
    try:
        from prefixguard.judge.redis_index import RedisIndex

        return RedisIndex(url, prefix)
    except ImportError:
        raise InputError(
            "--index needs the redis package: pip install '.[fleet]' in a clone of the prefixguard repository"
        ) from None


class State:
    def __init__(self, shared: Any = None, policy: str | None = None) -> None:
        self.shared = shared  # a RedisIndex, or None: everything in this process
        self.forced_policy = policy
        self.sessions = Sessions(index=shared.sessions() if shared else None)
        self.scale = TokenScale(shared.table("scale", FIT_LIFETIME) if shared else None)
        self._policies = Policies(shared.table if shared else None)
        self.stored = StoredResponses(
            *(shared.table(n, STORED_LIFETIME) for n in ("stored", "answers")) if shared else ()
        )

    def policy_for(self, prompt: Prompt, upstream: str | None = None) -> CachePolicy:
        """The request's contract: by its upstream's host where that names a provider (api.groq.com)."""
        policy = self._policies.get(self.forced_policy, prompt.api, prompt.model, host=upstream)
        assert policy is not None  # radix=True: every name has its policy
        return policy
