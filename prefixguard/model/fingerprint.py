"""Hash chain over a prompt's segments (the longest-prefix index over chains is judge/index.Chains).

chain[i] = xxh3_128(chain[i-1] + key of segment i), so equal chain[i] means equal segments 0..i: "how
much of this prefix was seen before" becomes a longest-match lookup, found by binary search.
xxh3 because the chain hashes every byte of the body: it costs a small part of a json.loads, where
sha256 cost a large one (bench/RESULTS.md). Fingerprints tell one app's prompts apart, not adversaries' forgeries,
so 128 non-cryptographic bits are plenty.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from operator import itemgetter
from typing import Any, Protocol, overload

from xxhash import xxh3_128_digest

DIGEST = 16  # bytes of one fingerprint (xxh3_128)
_ONE = struct.Struct(f"{DIGEST}s")


class Keyed(Protocol):
    """A part of a prompt as the chain sees it (model/prompt.Segment): its key bytes."""

    @property
    def key(self) -> bytes: ...


class Chain(Sequence[bytes]):
    """A fingerprint chain as one buffer of DIGEST-byte digests, element i at i * DIGEST.

    A body can hold millions of parts: a bytes object per fingerprint and its list slot cost over three
    times the digest itself. Reads give bytes (an element is a dict key of the cache policies); a slice
    is a Chain of its own. An iteration holds the buffer: the chain cannot grow until it is done."""

    __slots__ = ("_buf",)
    __hash__ = None  # type: ignore[assignment]  # it grows: not a key

    def __init__(self, raw: bytes | bytearray | memoryview = b"") -> None:
        """A chain from its raw bytes (`bytes(chain)`: the digests one after another)."""
        if len(raw) % DIGEST:
            raise ValueError(f"a fingerprint chain is whole {DIGEST}-byte digests, not {len(raw)} bytes")
        self._buf = bytearray(raw)

    @classmethod
    def of(cls, digests: Iterable[bytes]) -> Chain:
        """A chain of these digests, in order."""
        out = cls()
        out.extend(digests)
        return out

    def append(self, digest: bytes) -> None:
        if len(digest) != DIGEST:
            raise ValueError(f"a fingerprint is {DIGEST} bytes, not {len(digest)}")
        self._buf += digest

    def extend(self, digests: Iterable[bytes]) -> None:
        if isinstance(digests, Chain):
            self._buf += digests._buf if digests is not self else bytes(self._buf)
            return
        for digest in digests:
            self.append(digest)

    def extend_from(self, other: Chain, start: int, stop: int) -> None:
        """Append other[start:stop] straight from its buffer (no slice of it is made first)."""
        if other is self:
            self.extend(self[start:stop])
            return
        with memoryview(other._buf) as view:
            self._buf += view[start * DIGEST : stop * DIGEST]

    def holds(self, i: int, digest: bytes) -> bool:
        """self[i] == digest, read in place (0 <= i < len(self))."""
        return len(digest) == DIGEST and self._buf.startswith(digest, i * DIGEST)

    def __len__(self) -> int:
        return len(self._buf) // DIGEST

    @overload
    def __getitem__(self, i: int) -> bytes: ...

    @overload
    def __getitem__(self, i: slice) -> Chain: ...

    def __getitem__(self, i: int | slice) -> bytes | Chain:
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            if step != 1:
                return Chain.of(self[j] for j in range(start, stop, step))
            return Chain(self._buf[start * DIGEST : max(start, stop) * DIGEST])
        n = len(self._buf) // DIGEST
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("fingerprint chain index out of range")
        return _ONE.unpack_from(self._buf, i * DIGEST)[0]

    def __iter__(self) -> Iterator[bytes]:
        return map(itemgetter(0), _ONE.iter_unpack(self._buf))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Chain):
            return self._buf == other._buf
        if isinstance(other, (list, tuple)):  # a chain as a list of digests
            return len(other) == len(self) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __bytes__(self) -> bytes:
        return bytes(self._buf)

    def __sizeof__(self) -> int:  # sys.getsizeof: the buffer is the chain's own
        return object.__sizeof__(self) + self._buf.__sizeof__()

    def __reduce__(self) -> tuple[Any, ...]:
        return Chain, (bytes(self._buf),)

    def __repr__(self) -> str:
        return f"Chain({len(self)} fingerprints)"


def chain(segments: Iterable[Keyed | bytes]) -> Chain:
    """Fingerprints of each prefix: element i covers segments 0..i (segments or their key bytes)."""
    out = Chain()
    prev = b""
    for seg in segments:
        prev = link(prev, seg if isinstance(seg, bytes) else seg.key)
        out.append(prev)
    return out


def link(prev: bytes, key: bytes) -> bytes:
    """The next fingerprint of a chain: one call on the two joined is the streaming hash of both, and
    costs less."""
    return xxh3_128_digest(prev + key)


def prefix_length(n: int, holds: Callable[[int], bool]) -> int:
    """The largest k <= n with holds(k), for a property of prefixes (holds(k) implies holds(j) for every
    j < k; holds(0) is taken as true): a binary search, log2(n) calls. Every "how much of this prefix
    is shared" question of the project (chains, cached prefixes, strings, token ids) is this one."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if holds(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def common_prefix(a: Sequence[bytes], b: Sequence[bytes]) -> int:
    """Number of leading segments two chains share (chain[i] implies chain[:i])."""
    return prefix_length(min(len(a), len(b)), lambda k: a[k - 1] == b[k - 1])
