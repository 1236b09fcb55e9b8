"""Hash chain over a prompt's segments, and a longest-prefix index over chains.

chain[i] = xxh3_128(chain[i-1] + key of segment i), so equal chain[i] means equal segments 0..i: "how
much of this prefix was seen before" becomes a longest-match lookup, found by binary search.
xxh3 because the chain hashes every byte of the body: it costs a small part of a json.loads, where
sha256 cost a large one (bench/RESULTS.md). Fingerprints tell one app's prompts apart, not adversaries' forgeries,
so 128 non-cryptographic bits are plenty.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

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


class PrefixIndex:
    """Longest-prefix match over the chains added so far, bounded to the max_chains latest added.

    Every prefix fingerprint maps to the latest chain that has it, so a lookup is a binary search of
    dict probes. The oldest chain goes first; a fingerprint it still owns is held by no younger chain,
    so dropping it is exact. (A proxy adds every request it sees, so live sessions stay young.)
    """

    def __init__(self, max_chains: int = 10_000) -> None:
        self.max_chains = max_chains
        self._chains: OrderedDict[int, tuple[list[bytes], Any]] = OrderedDict()
        self._owner: dict[bytes, int] = {}  # fingerprint -> id of the latest chain holding it
        self._next_id = 0

    def __len__(self) -> int:
        return len(self._chains)

    def add(self, chain: list[bytes], item: Any) -> None:
        cid = self._next_id
        self._next_id += 1
        self._chains[cid] = (chain, item)
        for fp in chain:
            self._owner[fp] = cid
        while len(self._chains) > self.max_chains:
            old_id, (old_chain, _) = self._chains.popitem(last=False)
            for fp in old_chain:
                if self._owner.get(fp) == old_id:
                    del self._owner[fp]

    def longest(self, chain: list[bytes]) -> tuple[int, Any | None]:
        """(leading segments shared with the best earlier chain, that chain's item); most recent on ties."""
        lo = prefix_length(len(chain), lambda k: chain[k - 1] in self._owner)
        if lo == 0:
            return 0, None
        return lo, self._chains[self._owner[chain[lo - 1]]][1]
