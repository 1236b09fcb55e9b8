"""Where the session model, the cache policies and the token scale keep what they remember between
requests. Two backends implement the same small interface:
- in this process (the default, below): exact, bounded, gone when the process ends;
- Redis (prefixguard/judge/redis_index.py): shared by every proxy of a fleet, so a session whose requests land
  on different proxies is judged as if one proxy had seen it all.
The session logic (prefixguard/judge/session.py) and the policies (prefixguard/judge/policies/) ask only these
operations, so both backends give the same verdicts.

- `SessionIndex`: per (tenant, provider), the requests seen: a longest-prefix lookup over their
  fingerprint chains (over all models, or one model's), the latest ones, and adding one.
- `Table`: a key -> value map with a lifetime per value (the cache policies' entries, the token scale's
  fits). `load(keys, now)` announces the keys a step may read (a function listing them), so a remote
  backend fetches them in one round trip; `save()` ends the step (a remote backend writes what was put,
  in one round trip).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, Protocol


class IndexDown(Exception):
    """The shared index cannot be reached now: the caller judges with its local index instead."""


class TenantView(Protocol):
    """What one lookup needs of a tenant's requests, read once."""

    def longest(self, model: str | None = None, *, any_model: bool = False) -> tuple[int, Any | None]:
        """(leading segments shared with the best earlier chain, its entry): over every model's
        requests (any_model), else over `model`'s alone; the most recent on ties."""

    def recent(self) -> list[Any]:
        """The latest entries, oldest first."""


class SessionIndex(Protocol):
    def view(self, key: tuple[str, str], chain: Sequence[bytes], model: str | None) -> TenantView | None:
        """The tenant's requests as they stand (None when it has none)."""

    def add(self, key: tuple[str, str], chain: Sequence[bytes], model: str | None, entry: Any) -> None:
        """Remember a request (`entry` is the session model's record of it)."""


class Chains:
    """The `keep` latest chains added, with their entries, and a longest-prefix match over them.

    Nothing is kept per fingerprint (a body can hold millions of parts): a lookup compares the chain
    with each kept one, newest first, by binary search (chain[i] equal means segments 0..i equal), and
    skips at once every chain that does not share one more segment than the best found so far. On
    ties the most recent wins."""

    __slots__ = ("_kept",)

    def __init__(self, keep: int) -> None:
        self._kept: deque[tuple[Sequence[bytes], Any]] = deque(maxlen=keep)

    def __len__(self) -> int:
        return len(self._kept)

    def add(self, chain: Sequence[bytes], entry: Any) -> None:
        self._kept.append((chain, entry))

    def longest(self, chain: Sequence[bytes]) -> tuple[int, Any | None]:
        """(leading segments shared with the best kept chain, its entry); (0, None) when none shares one."""
        best, found = 0, None
        for kept, entry in reversed(self._kept):
            n = min(len(kept), len(chain))
            if n <= best or kept[best] != chain[best]:
                continue  # cannot share more than the best so far
            lo, hi = best + 1, n  # shares lo segments; the answer lies in lo..hi
            if kept[hi - 1] == chain[hi - 1]:
                lo = hi
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if kept[mid - 1] == chain[mid - 1]:
                    lo = mid
                else:
                    hi = mid - 1
            best, found = lo, entry
        return best, found


class _Tenant:
    __slots__ = ("index", "recent_", "by_model", "keep", "_chain")

    def __init__(self, keep: int, recent: int) -> None:
        self.keep = keep
        self._chain: Sequence[bytes] = ()  # the chain being looked up
        self.index = Chains(keep)  # every model's requests
        self.recent_: deque[Any] = deque(maxlen=recent)
        self.by_model: dict[str | None, Chains] = {}

    def longest(self, model: str | None = None, *, any_model: bool = False) -> tuple[int, Any | None]:
        if any_model:
            return self.index.longest(self._chain)
        own = self.by_model.get(model)
        return own.longest(self._chain) if own is not None else (0, None)

    def recent(self) -> list[Any]:
        return list(self.recent_)


class LocalSessions:
    """The in-process session index: `keep` requests per tenant, `tenants` tenants (least recently
    active first out)."""

    def __init__(self, keep: int, tenants: int, recent: int) -> None:
        self.keep, self.tenants, self.recent = keep, tenants, recent
        self._tenants: OrderedDict[tuple[str, str], _Tenant] = OrderedDict()

    def view(self, key: tuple[str, str], chain: Sequence[bytes], model: str | None) -> TenantView | None:
        state = self._tenants.pop(key, None) or _Tenant(self.keep, self.recent)
        self._tenants[key] = state
        while len(self._tenants) > self.tenants:
            self._tenants.popitem(last=False)
        if not state.recent_:
            return None
        state._chain = chain
        return state

    def add(self, key: tuple[str, str], chain: Sequence[bytes], model: str | None, entry: Any) -> None:
        state = self._tenants.get(key)
        if state is None:
            state = self._tenants[key] = _Tenant(self.keep, self.recent)
        state.index.add(chain, entry)
        state.by_model.setdefault(model, Chains(self.keep)).add(chain, entry)
        state.recent_.append(entry)


class Table(Protocol):
    def load(self, keys: Callable[[], Iterable[Hashable]], now: float) -> None: ...
    def prefetch(self, keys: Callable[[], Iterable[Hashable]]) -> None: ...
    def get(self, key: Hashable) -> Any: ...
    def put(self, key: Hashable, value: Any, until: float) -> None: ...
    def save(self) -> None: ...


class LocalTable:
    """An LRU map bounded to `size` entries; lifetimes are left to the reader (it compares times)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[Hashable, Any] = OrderedDict()

    def load(self, keys: Callable[[], Iterable[Hashable]], now: float) -> None:
        pass  # everything is here already: the keys are not even listed

    def prefetch(self, keys: Callable[[], Iterable[Hashable]]) -> None:
        pass

    def get(self, key: Hashable) -> Any:
        return self._entries.get(key)

    def put(self, key: Hashable, value: Any, until: float) -> None:
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def save(self) -> None:
        pass

    def __len__(self) -> int:
        return len(self._entries)
