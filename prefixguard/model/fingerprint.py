"""Hash chain over a prompt's segments (the longest-prefix index over chains is judge/index.Chains).

chain[i] = xxh3_128(chain[i-1] + key of segment i), so equal chain[i] means equal segments 0..i: "how
much of this prefix was seen before" becomes a longest-match lookup, found by binary search.
xxh3 because the chain hashes every byte of the body: it costs a small part of a json.loads, where
sha256 cost a large one (bench/RESULTS.md). Fingerprints tell one app's prompts apart, not adversaries' forgeries,
so 128 non-cryptographic bits are plenty.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from xxhash import xxh3_128_digest

from prefixguard.model.prompt import Segment


def chain(segments: Iterable[Segment | bytes]) -> list[bytes]:
    """Fingerprints of each prefix: element i covers segments 0..i (segments or their key bytes)."""
    out: list[bytes] = []
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


def common_prefix(a: list[bytes], b: list[bytes]) -> int:
    """Number of leading segments two chains share (chain[i] implies chain[:i])."""
    return prefix_length(min(len(a), len(b)), lambda k: a[k - 1] == b[k - 1])
