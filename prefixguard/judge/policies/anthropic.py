"""Breakpoint caching (Anthropic's contract, and Bedrock's with its own numbers: `policy = "anthropic"`):
entries are written only at breakpoints (explicit, plus the automatic one); a breakpoint looks back a
fixed number of blocks for an earlier entry; a minimum per model; the TTL counts from the last read or
write."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate
from typing import NamedTuple

from prefixguard.contracts.providers import provider_contract
from prefixguard.judge.index import Table
from prefixguard.judge.policies.base import CachePolicy, Expected, longest
from prefixguard.model.breakpoints import breakpoints
from prefixguard.model.prompt import Prompt
from prefixguard.model.usage import Usage
from prefixguard.wire.fields import is_server_result


class Entry(NamedTuple):
    """An entry written at a breakpoint: its TTL and when it expires."""

    ttl: str
    expires: float


class Passes(NamedTuple):
    """What a request's server tool passes left cached: until when, and how long the last pass's prompt was
    (the provider's tokens: the first pass's prompt and what the passes added)."""

    expires: float
    tokens: int


class AnthropicPolicy(CachePolicy):
    """Breakpoint caching: entries written at breakpoints only, reached by a bounded lookback."""

    def __init__(self, provider: str, entries: Table | None = None) -> None:
        self.provider = provider  # bedrock: the same contract with its own numbers
        super().__init__(entries)
        table = self.contract
        if table.lookback_blocks is None or not table.ttl_seconds or table.default_ttl is None:
            raise ValueError(
                f"rules/providers.toml [{provider}] caches at breakpoints: it needs lookback_blocks, "
                "ttl_seconds and default_ttl"
            )
        self.lookback: int = table.lookback_blocks
        self.ttl_seconds: dict[str, float] = table.ttl_seconds
        self.default_ttl: str = table.default_ttl
        self.ineligible: set[str] = set(table.breakpoint_ineligible_kinds)

    def breakpoints(self, prompt: Prompt) -> list[tuple[int, str]]:
        """(segment index, TTL) of each breakpoint, the automatic one on the last eligible block."""
        return sorted(breakpoints(prompt, self.ineligible).items())

    def read_ends(self, prompt: Prompt) -> list[int]:
        return [idx for idx, _ in self.breakpoints(prompt)]  # a read ends on a breakpoint

    def held_end(self, prompt: Prompt) -> int | None:
        points = self.breakpoints(prompt)
        return points[-1][0] if points else None  # a write runs to the furthest breakpoint

    def _seconds(self, ttl: str) -> float:
        return self.ttl_seconds.get(ttl, self.ttl_seconds[self.default_ttl])

    def _plan(self, prompt: Prompt, now: float, tenant: str, commit: bool) -> Expected:
        total = prompt.total_tokens
        points = self.breakpoints(prompt)
        if not points:
            return Expected(cache_read=0, cache_write=0, uncached=total, reason="no_breakpoint")
        chain = self.keyed_chain(prompt)
        cum = list(accumulate(s.tokens for s in prompt.segments))
        owner = (tenant, prompt.model or "")
        minimum = provider_contract(self.provider, prompt.model).min_cacheable_tokens

        passes = self._passes_kept(prompt, chain, owner, now)
        read_at, expired_at, read_entries = -1, -1, []
        for idx, _ in points:
            for j in range(idx, max(idx - self.lookback, -1), -1):
                if j in passes:
                    read_entries.append(j)
                    read_at = max(read_at, j)
                    break
                entry = self._get((*owner, chain[j]))
                if entry is None:
                    continue
                if entry.expires > now:
                    read_entries.append(j)
                    read_at = max(read_at, j)
                    break
                expired_at = max(expired_at, j)
        # a prefix the passes left is as long as the provider counted it, not as we count its tool results
        read = passes[read_at] if read_at in passes else cum[read_at] if read_at >= 0 else 0

        writes = [(idx, ttl) for idx, ttl in points if idx > read_at and cum[idx] >= minimum]
        by_ttl: dict[str, int] = {}
        done = read
        for idx, ttl in writes:
            by_ttl[ttl] = by_ttl.get(ttl, 0) + max(0, cum[idx] - done)
            done = max(done, cum[idx])
        written = done - read

        # How far this prompt runs inside some live entry: past what was read, no breakpoint reached it.
        known = longest(chain, lambda fp: (e := self._get((*owner, b"k" + fp))) is not None and e > now)
        if read:
            reason = "partial" if known > read_at + 1 else "hit"
        elif expired_at >= 0:
            reason = "ttl_expired"
        elif all(cum[idx] < minimum for idx, _ in points):
            reason = "below_minimum"
        elif any(self._alive(owner, chain[j], now) for j in range(known)):
            reason = "no_breakpoint"  # an entry on this prompt's path, beyond every breakpoint's lookback
        else:
            reason = "cold"
        last_ttl = writes[-1][1] if writes else (self._ttl(owner, chain[read_at]) if read_at >= 0 else None)

        if commit:
            for j in read_entries:
                self._touch(owner, chain, j, self._ttl(owner, chain[j]), now)
            for idx, ttl in writes:
                self._touch(owner, chain, idx, ttl, now)
        return Expected(
            cache_read=read,
            cache_write=written,
            uncached=max(0, total - read - written),
            reason=reason,
            ttl=last_ttl,
            write_by_ttl=by_ttl,
        )

    def _ttl(self, owner: tuple[str, str], fp: bytes) -> str:
        """The TTL of the entry at fp; the default one where a server tool's passes cached it."""
        entry = self._get((*owner, fp))
        return entry.ttl if entry is not None else self.default_ttl

    def cached_of(self, prompt: Prompt, tokens: int) -> int:
        """A request that marks a breakpoint, wherever, has each pass of its own tools' loop cached; one that
        marks none, none (langchain-anthropic's web search, code execution and MCP cassettes read nothing)."""
        return tokens if self.breakpoints(prompt) else 0

    def passed(self, prompt: Prompt, usage: Usage, now: float, tenant: str = "") -> None:
        """The provider caches each pass of its own tools' loop, at the default TTL, where the request marks
        a breakpoint (cached_of): this prompt and, after it, the reply through its last tool result (the
        last pass's prompt). A "p" entry on the prompt's last part says so, and how long that was; the
        reply's parts are known once a later request sends them back."""
        if not prompt.segments or not self.breakpoints(prompt):
            return
        key = (tenant, prompt.model or "", b"p" + self.keyed_chain(prompt)[-1])
        kept = Passes(expires=now + self._seconds(self.default_ttl), tokens=usage.first_pass + usage.server_added)
        with self._lock:
            self._entries.load(lambda: [key], now)
            self._put(key, kept)
            self._entries.save()

    def _passes_kept(
        self, prompt: Prompt, chain: Sequence[bytes], owner: tuple[str, str], now: float
    ) -> dict[int, int]:
        """The parts a server tool's passes left cached (passed()), with how long that prefix was: where an
        earlier request that ran them ends and this prompt goes on with the assistant's reply, the last
        server tool result in that reply."""
        segs, out = prompt.segments, {}
        for i in _replies(prompt):
            kept = self._get((*owner, b"p" + chain[i]))
            if kept is None or kept.expires <= now:
                continue
            last, message = None, segs[i + 1].message_index
            for j in range(i + 1, len(segs)):  # the reply's parts
                if segs[j].message_index != message:
                    break
                last = j if is_server_result(segs[j].kind) else last
            if last is not None:
                out[last] = kept.tokens
        return out

    def _hold(self, prompt: Prompt, chain: Sequence[bytes], last: int, now: float, tenant: str) -> None:
        owner = (tenant, prompt.model or "")
        if not self._alive(owner, chain[last], now):
            self._touch(owner, chain, last, self.default_ttl, now)

    def _until(self, value: Entry | Passes | float) -> float:
        return value.expires if isinstance(value, (Entry, Passes)) else value  # a "k" entry holds its expiry

    @property
    def longest_ttl(self) -> float:
        return max(self.ttl_seconds.values())

    def _reads(self, prompt: Prompt, tenant: str) -> list[tuple[str, str, bytes]]:
        owner = (tenant, prompt.model or "")
        chain = self.keyed_chain(prompt)
        return (
            [(*owner, fp) for fp in chain]
            + [(*owner, b"k" + fp) for fp in chain]
            + [(*owner, b"p" + chain[i]) for i in _replies(prompt)]
        )

    def _alive(self, owner: tuple[str, str], fp: bytes, now: float) -> bool:
        entry = self._get((*owner, fp))
        return entry is not None and entry.expires > now

    def _touch(self, owner: tuple[str, str], chain: Sequence[bytes], idx: int, ttl: str, now: float) -> None:
        expires = now + self._seconds(ttl)
        self._put((*owner, chain[idx]), Entry(ttl=ttl, expires=expires))
        # "k" + fingerprint: the prefixes some live entry covers, to tell a partial read from a full one
        for fp in chain[: idx + 1]:
            key = (*owner, b"k" + fp)
            if (self._get(key) or 0) < expires:
                self._put(key, expires)


def _replies(prompt: Prompt) -> list[int]:
    """The parts an assistant's reply follows: where a request that ran the provider's own tools may end."""
    segs = prompt.segments
    return [
        i
        for i in range(len(segs) - 1)
        if segs[i + 1].role == "assistant" and segs[i + 1].message_index != segs[i].message_index
    ]
