"""The fleet's shared index in Redis: the session model's requests, the cache policies' entries and the
token scale's fits, so that many proxies judge a session as one proxy would (prefixguard/judge/index.py).

Layout (every key under one prefix; `{tag}` is a hash of tenant and provider, a Redis Cluster hash tag
that keeps one tenant's keys on one node so that each step stays one pipelined round trip):
- `<prefix>s{tag}:fp` (hash: fingerprint -> entry id, the latest request holding that prefix, all
  models), `<prefix>s{tag}:fp:<model hash>` (one model's), `<prefix>s{tag}:recent` (list of the latest
  entry ids), `<prefix>s{tag}:e:<id>` (the request: its prompt as compressed JSON with its secrets redacted, item,
  time: encode_seen);
- `<prefix>p:<policy>{tag}<fingerprint>`: one policy entry; `<prefix>scale:<model>`: one fit.
Every key expires: a session's with the provider's longest cache TTL plus as much again (so a request
after an expiry is still named `ttl_expired`, as in one process), a policy entry when the provider drops
it plus that margin. Nothing is kept past what the provider could still serve from its cache.

Prompts are stored as JSON (never pickle: whoever can write to Redis must not run code in the proxy).
The proxy's analysis process is the only user: never the request path. When Redis cannot be reached,
every call raises IndexDown at once for RETRY_S seconds (the analysis judges with its local index
meanwhile, and says so once on the console).
"""

from __future__ import annotations

import base64
import json
import re
import sys
import time
import uuid
import zlib
from array import array
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from hashlib import blake2b
from typing import TYPE_CHECKING, Any

from xxhash import xxh3_64_hexdigest

from prefixguard.contracts.providers import providers
from prefixguard.judge.index import IndexDown, TenantView
from prefixguard.model.prompt import Prompt, Segment
from prefixguard.utils.redaction import current_secrets, high_entropy, redact_text, url_for_display

if TYPE_CHECKING:  # redis is the fleet extra's: imported when a fleet index is opened
    from redis.typing import EncodableT, FieldT

RETRY_S = 5.0  # after a failure, Redis is tried again this much later
TIMEOUT_S = 0.5  # per command: a Redis that stalls must not hold the analysis back for long
NO_EXPIRY_S = 86_400.0  # lifetime of state under a contract without expiry (radix servers)
KEEP_DECODED = 512  # requests kept decoded in this process (the ones it wrote or read lately)


def _lifetime(provider: str) -> float:
    """How long a tenant's session state is kept: the provider's longest TTL, twice."""
    table = providers().get(provider)
    ttls = list(table.ttls.values()) if table else []
    return 2 * max(ttls) if ttls else NO_EXPIRY_S


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


def _tag(*parts: str | None) -> bytes:
    joined = "\x1f".join(p or "" for p in parts).encode("utf-8", "surrogatepass")
    return b"{" + xxh3_64_hexdigest(joined).encode() + b"}"


# ---- the session model's requests


class _View:
    def __init__(
        self,
        sessions: RedisSessions,
        base: bytes,
        chain: list[bytes],
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
    def __init__(self, index: RedisIndex) -> None:
        from prefixguard.judge.session import RECENT

        self.index, self.recent = index, RECENT

    def _base(self, key: tuple[str, str]) -> bytes:
        return self.index.prefix + b"s" + _tag(*key)

    def view(self, key: tuple[str, str], chain: list[bytes], model: str | None) -> TenantView | None:
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

    def add(self, key: tuple[str, str], chain: list[bytes], model: str | None, entry: Any) -> None:
        base = self._base(key)
        own = base + b":fp:" + xxh3_64_hexdigest((model or "").encode("utf-8", "surrogatepass")).encode()
        entry_id = uuid.uuid4().hex.encode()
        ms = int(_lifetime(key[1]) * 1000)
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


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


# A part whose text redaction changed keeps no key: this stands in for it, a hash of the key as sent
# (marshal never writes a first byte of 0, so it equals no request's own key: that part reads as changed).
_REDACTED_KEY = b"\0redacted:"


def _redacted(value: Any, secrets: list[str]) -> Any:
    """A JSON value with every secret of its strings (keys and values) replaced."""
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, dict):
        return {redact_text(k, secrets): _redacted(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v, secrets) for v in value]
    return value


_KEY_CHAR_ESCAPE = re.compile(r"\\u00(2[bdef]|3[0-9d]|[46][1-9a-f]|[57][0-9a]|5f)|\\(/)", re.I)


def _unescaped(text: str) -> str:
    """JSON text with the escapes that spell a key's characters (letters, digits, + - . / = _) decoded, so
    that redaction sees a key written `\\u0073k-ant-...`; quotes and backslashes stay escaped."""
    if "\\" not in text:
        return text
    return _KEY_CHAR_ESCAPE.sub(lambda m: m.group(2) or chr(int(m.group(1), 16)), text)


def _system_secrets(p: Prompt) -> list[str]:
    return list(
        dict.fromkeys(t for s in p.segments if s.level == "system" for t in high_entropy(p.text[s.start : s.end]))
    )


def encode_seen(seen: Any) -> bytes:
    """A session entry (prompt, item, time) as compressed JSON, its secrets redacted first: what compare
    reads of an earlier request (each part's value and text, tokens, breakpoints, settings), the
    fingerprint chain and each part's hash. A part that redaction changed keeps a hash of its key, not
    the key: where it holds a secret it reads as changed against the next request's own part, and
    nothing else of it is readable. Text between the parts (the body's other fields) is not kept."""
    p: Prompt = seen.prompt
    secrets = list(dict.fromkeys([*current_secrets(), *_system_secrets(p)]))  # the request's keys too
    clean = "\\u" not in p.text and "\\/" not in p.text and redact_text(p.text, secrets) == p.text
    segments, pieces, at = [], [], 0
    for s in p.segments:
        raw = p.text[s.start : s.end]
        text, value, header = (
            (raw, s.value, s.header)
            if clean
            else (redact_text(_unescaped(raw), secrets), _redacted(s.value, secrets), _redacted(s.header, secrets))
        )
        kept = clean or (text == raw and value == s.value and header == s.header)
        key = s.key if kept else _REDACTED_KEY + blake2b(s.key, digest_size=16).digest()
        segments.append(
            [
                s.level,
                redact_text(s.pointer),
                s.kind,
                s.role,
                value,
                at,
                at + len(text),
                _b64(key),
                s.tokens,
                s.breakpoint,
                s.message_index,
                header,
                s.media_tokens,
                s.estimated,
            ]
        )
        pieces.append(text)
        at += len(text)
    doc = {
        "api": p.api,
        "model": redact_text(p.model) if p.model else p.model,
        "segments": segments,
        "settings": p.settings if clean else _redacted(p.settings, secrets),
        "auto": p.auto_breakpoint,
        "text": "".join(pieces),
        "source": p.source,
        "estimated": p.tokens_estimated,
        "chain": [_b64(c) for c in p.chain],
        "parts": [_b64(h.to_bytes(8, "big")) for h in seen.parts],
        "counts_only": p.counts_only,
        "item": seen.item,
        "ts": seen.ts,
    }
    return zlib.compress(json.dumps(doc, separators=(",", ":")).encode("utf-8", "surrogatepass"), 1)


# A stored segment's fields, in the order encode_seen writes them.
_SEGMENT_FIELDS = (
    "level",
    "pointer",
    "kind",
    "role",
    "value",
    "start",
    "end",
    "key",
    "tokens",
    "breakpoint",
    "message_index",
    "header",
    "media_tokens",
    "estimated",
)


def decode_seen(blob: bytes) -> Any:
    from prefixguard.judge.session import Seen

    doc = json.loads(zlib.decompress(blob))
    segments = [
        Segment(**dict(zip(_SEGMENT_FIELDS, fields, strict=True)) | {"key": base64.b64decode(fields[7])})
        for fields in doc["segments"]
    ]
    prompt = Prompt(
        api=doc["api"],
        model=doc["model"],
        segments=segments,
        settings=doc["settings"],
        auto_breakpoint=doc["auto"],
        text=doc["text"],
        source=doc["source"],
        tokens_estimated=doc["estimated"],
        chain=[base64.b64decode(c) for c in doc["chain"]],
        counts_only=doc["counts_only"],
    )
    parts = sorted({int.from_bytes(base64.b64decode(h), "big") for h in doc["parts"]})
    return Seen(prompt=prompt, item=doc["item"], ts=doc["ts"], parts=array("Q", parts))


# ---- the policies' entries and the scale's fits


def _encode_value(value: Any) -> bytes:
    from prefixguard.judge.policies import Entry, Output
    from prefixguard.judge.scale import Fit

    if isinstance(value, Entry):
        return f"e{value.ttl} {value.expires!r}".encode()
    if isinstance(value, Output):
        return f"o{value.at!r} {value.tokens}".encode()
    if isinstance(value, Fit):
        kinds = ",".join(repr(k) for k in value.kinds) or "-"  # the scale's fit by kind, and what it was fitted on
        seen = ";".join(":".join(map(str, row)) for row in value.seen) or "-"
        return f"s{value.ratio!r} {value.unseen} {value.front} {kinds} {seen}".encode()
    return b"f" + repr(float(value)).encode()


def _decode_value(raw: bytes | None) -> Any:
    from prefixguard.judge.policies import Entry, Output
    from prefixguard.judge.scale import Fit

    if raw is None:
        return None
    kind, text = raw[:1], raw[1:].decode()
    if kind == b"e":
        ttl, expires = text.rsplit(" ", 1)
        return Entry(ttl=ttl, expires=float(expires))
    if kind == b"o":
        at, tokens = text.split(" ")
        return Output(at=float(at), tokens=int(tokens))
    if kind == b"s":
        ratio, unseen, *rest = text.split(" ")  # a fit written before fronts (or kinds) were kept has none
        kinds = tuple(map(float, rest[1].split(","))) if len(rest) > 1 and rest[1] != "-" else ()
        seen = (
            tuple(tuple(map(int, row.split(":"))) for row in rest[2].split(";"))
            if len(rest) > 2 and rest[2] != "-"
            else ()
        )
        return Fit(ratio=float(ratio), unseen=int(unseen), front=int(rest[0]) if rest else -1, kinds=kinds, seen=seen)
    return float(text)


class RedisTable:
    """A Table (prefixguard/judge/index.py) in Redis: keys fetched at load in one MGET, puts written at save in
    one pipeline, each expiring `margin` seconds after its value's own end."""

    def __init__(self, index: RedisIndex, name: str, margin: float) -> None:
        self.index, self.margin = index, margin if margin != float("inf") else NO_EXPIRY_S
        self._name = index.prefix + name.encode()
        self._now = 0.0
        self._values: dict[Hashable, Any] = {}
        self._pending: dict[Hashable, tuple[Any, float]] = {}

    def _key(self, key: Hashable) -> bytes:
        if isinstance(key, tuple):  # (tenant, model, fingerprint): a policy entry
            return self._name + _tag(key[0], key[1]) + key[2]
        return self._name + b":" + str(key).encode("utf-8", "surrogatepass")

    def load(self, keys: Callable[[], Iterable[Hashable]], now: float) -> None:
        self._now, self._pending = now, {}
        wanted = list(dict.fromkeys(keys()))
        raw = self.index.run(lambda: self.index.client.mget([self._key(k) for k in wanted])) if wanted else []
        self._values = {k: _decode_value(v) for k, v in zip(wanted, raw, strict=True)}

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

        def write() -> None:
            pipe = self.index.client.pipeline(transaction=False)
            for key, (value, until) in pending.items():
                left = until - self._now if until != float("inf") else NO_EXPIRY_S
                pipe.set(self._key(key), _encode_value(value), px=max(1, int((left + self.margin) * 1000)))
            pipe.execute()

        self.index.run(write)
