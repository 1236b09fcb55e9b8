"""The session model's requests in the Redis index: which earlier request holds each prefix (all
models, and one model's), a tenant's latest requests, and the requests themselves (prefixguard/judge/redis_seen.py)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from xxhash import xxh3_64_hexdigest

from prefixguard.judge.index import TenantView
from prefixguard.judge.redis_link import Link, lifetime, tag
from prefixguard.judge.redis_seen import decode_seen, encode_seen

if TYPE_CHECKING:  # redis is the fleet extra's: imported when a fleet index is opened
    from redis.typing import EncodableT, FieldT

KEEP_DECODED = 512  # requests kept decoded in this process (the ones it wrote or read lately)


class _View:
    def __init__(
        self,
        sessions: RedisSessions,
        base: bytes,
        chain: Sequence[bytes],
        everyone: list[bytes | None],
        own: list[bytes | None],
        recent: list[bytes],
    ) -> None:
        self._sessions, self._base, self._chain = sessions, base, chain
        self._everyone, self._own, self._recent = everyone, own, recent

    def longest(self, model: str | None = None, *, any_model: bool = False) -> tuple[int, Any | None]:
        owners = self._everyone if any_model else self._own
        lo, hi = 0, len(owners)  # binary search: a prefix held means every shorter one is held too
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if owners[mid - 1] is not None:
                lo = mid
            else:
                hi = mid - 1
        if lo == 0:
            return 0, None
        owner = owners[lo - 1]  # not None: the search stops on a held one
        found = self._sessions.entries(self._base, [owner])[0] if owner is not None else None
        return (lo, found) if found is not None else (0, None)  # expired meanwhile: as never seen

    def recent(self) -> list[Any]:
        return [e for e in self._sessions.entries(self._base, self._recent[::-1]) if e is not None]


class RedisSessions:
    def __init__(self, index: Link) -> None:
        from prefixguard.judge.session import RECENT

        self.index, self.recent = index, RECENT

    def _base(self, key: tuple[str, str]) -> bytes:
        return self.index.prefix + b"s" + tag(*key)

    def view(self, key: tuple[str, str], chain: Sequence[bytes], model: str | None) -> TenantView | None:
        base = self._base(key)
        own = base + b":fp:" + xxh3_64_hexdigest((model or "").encode("utf-8", "surrogatepass")).encode()

        def read() -> list[Any]:
            pipe = self.index.client.pipeline(transaction=False)
            if chain:
                pipe.hmget(base + b":fp", chain)
                pipe.hmget(own, chain)
            pipe.lrange(base + b":recent", 0, -1)
            return pipe.execute()

        out = self.index.run(read)
        recent = out[-1]
        if not recent:
            return None
        everyone, mine = (out[0], out[1]) if chain else ([], [])
        return _View(self, base, chain, everyone, mine, recent)

    def entries(self, base: bytes, ids: list[bytes]) -> list[Any | None]:
        """The requests stored under these ids (None for one expired), decoded ones from this process."""
        decoded = self.index.decoded
        missing = [i for i in ids if i not in decoded]
        if missing:
            blobs = self.index.run(lambda: self.index.client.mget([base + b":e:" + i for i in missing]))
            for i, blob in zip(missing, blobs, strict=True):
                if blob is not None:
                    self._remember(i, decode_seen(blob))
        return [decoded.get(i) for i in ids]

    def _remember(self, entry_id: bytes, seen: Any) -> None:
        decoded = self.index.decoded
        decoded[entry_id] = seen
        decoded.move_to_end(entry_id)
        while len(decoded) > KEEP_DECODED:
            decoded.popitem(last=False)

    def add(self, key: tuple[str, str], chain: Sequence[bytes], model: str | None, entry: Any) -> None:
        base = self._base(key)
        own = base + b":fp:" + xxh3_64_hexdigest((model or "").encode("utf-8", "surrogatepass")).encode()
        entry_id = uuid.uuid4().hex.encode()
        ms = int(lifetime(key[1]) * 1000)
        blob = encode_seen(entry)

        def write() -> None:
            pipe = self.index.client.pipeline(transaction=False)
            pipe.set(base + b":e:" + entry_id, blob, px=ms)
            if chain:
                owners: dict[FieldT, EncodableT] = dict.fromkeys(chain, entry_id)
                for name in (base + b":fp", own):
                    pipe.hset(name, mapping=owners)
                    pipe.pexpire(name, ms)
            pipe.lpush(base + b":recent", entry_id)
            pipe.ltrim(base + b":recent", 0, self.recent - 1)
            pipe.pexpire(base + b":recent", ms)
            pipe.execute()

        self.index.run(write)
        self._remember(entry_id, entry)
