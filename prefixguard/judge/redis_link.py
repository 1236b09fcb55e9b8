"""What the parts of the Redis index share: the shape of its connection (RedisIndex,
prefixguard/judge/redis_index.py, which sessions and tables are given), the hash tag that keeps one
tenant's keys on one Redis Cluster node, and how long a tenant's state is kept."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from xxhash import xxh3_64_hexdigest

from prefixguard.contracts.providers import providers

if TYPE_CHECKING:  # redis is the fleet extra's: imported when a fleet index is opened
    from redis import Redis

NO_EXPIRY_S = 86_400.0  # lifetime of state under a contract without expiry (radix servers)


class Link(Protocol):
    """What the sessions and tables use of a RedisIndex."""

    prefix: bytes
    client: Redis
    decoded: OrderedDict[bytes, Any]  # entry id -> decoded request, shared by every view of the index

    def run(self, fn: Callable[[], Any]) -> Any: ...


def lifetime(provider: str) -> float:
    """How long a tenant's session state is kept: the provider's longest TTL, twice."""
    table = providers().get(provider)
    ttls = list(table.ttls.values()) if table else []
    return 2 * max(ttls) if ttls else NO_EXPIRY_S


def tag(*parts: str | None) -> bytes:
    joined = "\x1f".join(p or "" for p in parts).encode("utf-8", "surrogatepass")
    return b"{" + xxh3_64_hexdigest(joined).encode() + b"}"
