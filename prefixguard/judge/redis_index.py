"""The fleet's shared index in Redis: the session model's requests, the cache policies' entries and the
token scale's fits, so that many proxies judge a session as one proxy would (prefixguard/judge/index.py).

Layout (every key under one prefix; `{tag}` is a hash of tenant and provider, a Redis Cluster hash tag
that keeps one tenant's keys on one node so that each step stays one pipelined round trip):
- `<prefix>s{tag}:fp` (hash: fingerprint -> entry id, the latest request holding that prefix, all
  models), `<prefix>s{tag}:fp:<model hash>` (one model's), `<prefix>s{tag}:recent` (list of the latest
  entry ids), `<prefix>s{tag}:e:<id>` (the request: its prompt as compressed JSON with its secrets redacted, item,
  time: prefixguard/judge/redis_seen.py);
- `<prefix>p:<policy>{tag}<fingerprint>`: one policy entry; `<prefix>scale:<model>`: one fit.
Every key expires: a session's with the provider's longest cache TTL plus as much again (so a request
after an expiry is still named `ttl_expired`, as in one process), a policy entry when the provider drops
it plus that margin. Nothing is kept past what the provider could still serve from its cache.

Prompts are stored as JSON (never pickle: whoever can write to Redis must not run code in the proxy).
The proxy's analysis process is the only user: never the request path. When Redis cannot be reached,
every call raises IndexDown at once for RETRY_S seconds (the analysis judges with its local index
meanwhile, and says so once on the console).

Here: the connection and its failures. The parts: redis_sessions.py (the requests), redis_table.py
(policy entries and fits), redis_seen.py (a request's stored form), redis_link.py (what they share).
"""

from __future__ import annotations

import sys
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from prefixguard.judge.index import IndexDown
from prefixguard.judge.redis_sessions import RedisSessions
from prefixguard.judge.redis_table import RedisTable
from prefixguard.utils.redaction import redact_text, url_for_display

RETRY_S = 5.0  # after a failure, Redis is tried again this much later
TIMEOUT_S = 0.5  # per command: a Redis that stalls must not hold the analysis back for long


class RedisIndex:
    """A connection to the shared index. `url`: redis://HOST:PORT/DB; `prefix`: the keys' namespace."""

    def __init__(self, url: str, prefix: str = "prefixguard:", warn: Callable[[str], None] | None = None) -> None:
        import redis  # the fleet extra: only a proxy given --index needs it

        self.url, self.prefix = url, prefix.encode()
        self.shown = url_for_display(url)  # what lines say: never the password of redis://:PASSWORD@host
        self.client = redis.Redis.from_url(
            url, socket_timeout=TIMEOUT_S, socket_connect_timeout=TIMEOUT_S, health_check_interval=0
        )
        self._errors = (redis.RedisError, OSError)
        self._down_until = 0.0
        self._warned = False
        self.warn = warn or (lambda line: print(line, file=sys.stderr, flush=True))
        self.decoded: OrderedDict[bytes, Any] = OrderedDict()  # entry id -> decoded request

    def run(self, fn: Callable[[], Any]) -> Any:
        """fn() against Redis; IndexDown when it fails (and for RETRY_S after, without trying)."""
        if time.monotonic() < self._down_until:
            raise IndexDown(self.shown)
        try:
            out = fn()
        except self._errors as err:
            self._down_until = time.monotonic() + RETRY_S
            if not self._warned:
                self._warned = True
                self.warn(
                    f"prefixguard warning: session index {self.shown} unreachable ({type(err).__name__}: "
                    f"{redact_text(str(err))}); verdicts use this proxy's own index, marked degraded, "
                    "until it is back"
                )
            raise IndexDown(self.shown) from None
        if self._warned:
            self._warned = False
            self.warn(f"prefixguard: session index {self.shown} is back")
        return out

    def sessions(self) -> RedisSessions:
        return RedisSessions(self)

    def table(self, name: str, margin: float) -> RedisTable:
        """A table of entries named `name`, each kept `margin` seconds past its own end."""
        return RedisTable(self, name, margin)

    def close(self) -> None:
        self.client.close()
