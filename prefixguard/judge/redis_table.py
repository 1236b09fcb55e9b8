"""The cache policies' entries and the token scale's fits in the Redis index: a Table
(prefixguard/judge/index.py) whose values are written as short text, each key expiring after its value."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any

from prefixguard.judge.redis_link import NO_EXPIRY_S, Link, tag


def _encode_value(value: Any) -> bytes:
    if isinstance(value, float):  # a time: most of what a commit writes (an entry a part, a piece)
        return b"f" + repr(value).encode()
    from prefixguard.judge.policies import Entry, Output, Passes
    from prefixguard.judge.scale import Fit

    if isinstance(value, Entry):
        return f"e{value.ttl} {value.expires!r}".encode()
    if isinstance(value, Passes):
        return f"p{value.expires!r} {value.tokens}".encode()
    if isinstance(value, Output):
        return f"o{value.at!r} {value.tokens} {value.reasoning} {value.calls:d}".encode()
    if isinstance(value, Fit):
        kinds = ",".join(repr(k) for k in value.kinds) or "-"  # the scale's fit by kind, and what it was fitted on
        seen = ";".join(":".join(map(str, row)) for row in value.seen) or "-"
        return f"s{value.ratio!r} {value.unseen} {value.front} {kinds} {seen} {value.ruled!r}".encode()
    return b"f" + repr(float(value)).encode()


def _decode_value(raw: bytes | None) -> Any:
    from prefixguard.judge.policies import Entry, Output, Passes
    from prefixguard.judge.scale import Fit

    if raw is None:
        return None
    kind, text = raw[:1], raw[1:].decode()
    if kind == b"e":
        ttl, expires = text.rsplit(" ", 1)
        return Entry(ttl=ttl, expires=float(expires))
    if kind == b"p":
        expires, tokens = text.split(" ")
        return Passes(expires=float(expires), tokens=int(tokens))
    if kind == b"o":
        at, tokens, *rest = text.split(" ")  # one written before reasoning (or calls) was kept has none
        return Output(at=float(at), tokens=int(tokens), reasoning=int(rest[0]) if rest else 0, calls=rest[1:2] == ["1"])
    if kind == b"s":
        ratio, unseen, *rest = text.split(" ")  # a fit written before fronts (or kinds, ...) were kept has none
        kinds = tuple(map(float, rest[1].split(","))) if len(rest) > 1 and rest[1] != "-" else ()
        seen = (
            tuple(tuple(map(int, row.split(":"))) for row in rest[2].split(";"))
            if len(rest) > 2 and rest[2] != "-"
            else ()
        )
        front, ruled = int(rest[0]) if rest else -1, float(rest[3]) if len(rest) > 3 else 1.0
        return Fit(ratio=float(ratio), unseen=int(unseen), front=front, kinds=kinds, seen=seen, ruled=ruled)
    return float(text)


_GROUPED = 16  # keys alike from which one script sets them, not a command each
_SET_ALL = "for _, k in ipairs(KEYS) do redis.call('SET', k, ARGV[1], 'PX', ARGV[2]) end"


class RedisTable:
    """A Table (prefixguard/judge/index.py) in Redis: keys fetched at load in one MGET, puts written at save in
    one pipeline, each expiring `margin` seconds after its value's own end."""

    def __init__(self, index: Link, name: str, margin: float) -> None:
        self.index, self.margin = index, margin if margin != float("inf") else NO_EXPIRY_S
        self._name = index.prefix + name.encode()
        self._now = 0.0
        self._values: dict[Hashable, Any] = {}
        self._pending: dict[Hashable, tuple[Any, float]] = {}

    def _key(self, key: Hashable) -> bytes:
        if isinstance(key, tuple):  # (tenant, model, fingerprint): a policy entry
            return self._name + tag(key[0], key[1]) + key[2]
        return self._name + b":" + str(key).encode("utf-8", "surrogatepass")

    def load(self, keys: Callable[[], Iterable[Hashable]], now: float) -> None:
        self._now, self._pending, self._values = now, {}, {}
        self._fetch(keys())

    def prefetch(self, keys: Callable[[], Iterable[Hashable]]) -> None:
        """Fetch these too, in one round trip, keeping what load fetched: what a lookup needs once it knows
        more (the pieces of the one part its match ends in)."""
        self._fetch(keys())

    def _fetch(self, keys: Iterable[Hashable]) -> None:
        """The values of these keys not yet here, in one MGET."""
        wanted = [k for k in dict.fromkeys(keys) if k not in self._values]
        raw = self.index.run(lambda: self.index.client.mget([self._key(k) for k in wanted])) if wanted else []
        self._values.update((k, _decode_value(v)) for k, v in zip(wanted, raw, strict=True))

    def get(self, key: Hashable) -> Any:
        if key not in self._values:  # not announced at load: asked for alone
            self._values[key] = _decode_value(self.index.run(lambda: self.index.client.get(self._key(key))))
        return self._values[key]

    def put(self, key: Hashable, value: Any, until: float) -> None:
        self._values[key] = value
        self._pending[key] = (value, until)

    def save(self) -> None:
        pending, self._pending = self._pending, {}
        if not pending:
            return

        # A commit writes one value with one lifetime to thousands of keys (every piece of a large prompt):
        # those go as one command, each group of keys alike as a script that sets them all.
        groups: dict[tuple[bytes, int], list[bytes]] = {}
        for key, (value, until) in pending.items():
            left = until - self._now if until != float("inf") else NO_EXPIRY_S
            px = max(1, int((left + self.margin) * 1000))
            groups.setdefault((_encode_value(value), px), []).append(self._key(key))

        def write() -> None:
            pipe = self.index.client.pipeline(transaction=False)
            for (value, px), keys in groups.items():
                if len(keys) < _GROUPED:
                    for key in keys:
                        pipe.set(key, value, px=px)
                else:
                    pipe.eval(_SET_ALL, len(keys), *keys, value, px)
            pipe.execute()

        self.index.run(write)
