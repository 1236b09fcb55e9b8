"""The base of every cache policy: entry bookkeeping (lookup, commit, what the provider reported
holding, a fleet's shared table), the cache-keying settings, and the two calls the proxy and replay's
sim both make (`predicted`, `answered`). A contract family's policy decides reads and writes (`_plan`)."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from itertools import accumulate
from types import MappingProxyType
from typing import Any, NamedTuple

from xxhash import xxh3_128_digest

from prefixguard.contracts.providers import Contract, invalidated_levels, provider_contract, providers, verdict_rules
from prefixguard.judge.index import LocalTable, Table
from prefixguard.judge.scale import TokenScale
from prefixguard.model import fingerprint
from prefixguard.model.fingerprint import Chain, prefix_length
from prefixguard.model.prompt import LEVELS, Prompt
from prefixguard.model.usage import NO_META, ResponseMeta, Usage

SAME_OUTPUT = 0.5  # parts carried back within this share of a request's reported output are that output
MAX_ENTRIES = 200_000  # memory bound over all tenants and models; the least recently used go first


class Expected(NamedTuple):
    """What the provider should report for one request."""

    cache_read: int
    cache_write: int
    uncached: int
    reason: str  # hit | partial | cold | ttl_expired | below_minimum | no_breakpoint | no_prefix_caching
    ttl: str | None = None  # TTL of the entry read or written last (Anthropic)
    write_by_ttl: Mapping[str, int] = MappingProxyType({})  # cache_write split by TTL (Anthropic)


class CachePolicy:
    """Base: bounded LRU state and the settings that key the cache. Subclasses decide reads and writes."""

    provider: str

    def __init__(self, entries: Table | None = None) -> None:
        self.contract: Contract = providers()[self.provider]
        self.caches_output: bool = self.contract.caches_output  # a request's output is cached with it
        self.ready: float = self.contract.ready_seconds  # what a request wrote is read only this long after it
        # where the entries live: this process (an LRU), or a fleet's shared index (prefixguard/judge/index.py)
        self._entries: Table = entries if entries is not None else LocalTable(MAX_ENTRIES)
        self._lock = threading.Lock()
        self._keyed: tuple[Chain, Chain] | None = None  # the last prompt keyed: (chain, keyed)

    def lookup(self, prompt: Prompt, now: float, tenant: str = "") -> Expected:
        """What the provider should read now; changes nothing."""
        with self._lock:
            self._entries.load(lambda: self._reads(prompt, tenant), now)
            return self._plan(prompt, now, tenant, commit=False)

    def commit(
        self, prompt: Prompt, now: float, tenant: str = "", output: int = 0, reasoning: int = 0, calls: bool = False
    ) -> Expected:
        """lookup, then record this request's reads and writes (refreshing the TTLs it touched).
        output: the tokens it generated (as reported), cached with it where the contract says so; reasoning:
        how many of them were reasoning; calls: whether it ended in tool calls."""
        with self._lock:
            self._entries.load(lambda: self._reads(prompt, tenant), now)
            expected = self._plan(prompt, now, tenant, commit=True)
            if output > 0 and self.caches_output and prompt.segments:
                key = (tenant, prompt.model or "", b"o" + self.keyed_chain(prompt)[-1])
                self._put(key, Output(at=now, tokens=output, reasoning=reasoning, calls=calls))
            self._entries.save()
            return expected

    def observe(self, prompt: Prompt, read: int, now: float, tenant: str = "") -> None:
        """The provider reported reading `read` tokens of this prompt (counted in its tokens): the prefix
        that long is cached, whoever wrote it (a run before the capture, another client). Recorded as an
        entry on the last part it covers, so later requests are judged by what the provider holds. Reads end
        on a part's end, or to their last whole step short of it (DeepSeek V4's 128 tokens): a part ending
        within a step past the read is covered."""
        if read <= 0 or not prompt.segments:
            return
        ends = list(accumulate(s.tokens for s in prompt.segments))
        last = min(range(len(ends)), key=lambda k: abs(ends[k] - read))
        if ends[last] > read * (1 + verdict_rules()["read_tolerance"]):
            last -= 1
        step = provider_contract(self.provider, prompt.model).token_step
        if step > 1:
            last = max(last, sum(end <= read + step - 1 for end in ends) - 1)
        if last < 0:
            return
        with self._lock:
            self._entries.load(lambda: self._reads(prompt, tenant), now)
            self._hold(prompt, self.keyed_chain(prompt), last, now, tenant)
            self._entries.save()

    def billed(self, expected: Expected, prompt: Prompt, usage: Usage) -> Expected:
        """The expectation against the prompt total the provider billed (known once it answered): no read
        when that is under the model's minimum, and none past it. Our scaled count can run over both.
        Where the provider ran tools of its own between passes (usage.server_calls), the counts sum the
        passes: the first pass reads what this prompt holds (the expectation), each later pass what
        later_passes_read says."""
        total = usage.prompt_total
        minimum = provider_contract(self.provider, prompt.model).min_cacheable_tokens
        later = 0
        if usage.server_calls and usage.reported:
            first = usage.first_pass or expected.cache_read + expected.cache_write + expected.uncached
            later = self.cached_of(prompt, later_passes_read(usage, first, minimum))
            if expected.cache_read > first:  # our count of the first pass ran over the bill's
                expected = expected._replace(cache_read=first, cache_write=0)
        if later:
            expected = expected._replace(
                cache_read=expected.cache_read + later, uncached=max(0, expected.uncached - later)
            )
        if not usage.reported or total <= 0:
            return expected
        if total < minimum:
            return Expected(cache_read=0, cache_write=0, uncached=total, reason="below_minimum")
        if not expected.cache_read:
            return expected
        if expected.cache_read > total:
            return expected._replace(cache_read=total, cache_write=0, uncached=0, write_by_ttl={})
        return expected

    def rendered(self, prompt: Prompt) -> Prompt:
        """The prompt as this provider renders it: one whose tool_choice makes it render no tool definitions
        (DeepSeek's "none") holds none of them, in its bill and in its prefix."""
        dropped = self.contract.tools_unrendered_under_tool_choice
        if not dropped or prompt.settings.get("tool_choice") not in dropped:
            return prompt
        kept = [s for s in prompt.segments if s.level != "tools"]
        if len(kept) == len(prompt.segments):
            return prompt
        return prompt.with_segments(kept, chain=fingerprint.chain(kept))

    def cached_of(self, prompt: Prompt, tokens: int) -> int:
        """What the provider caches of this prompt, run on for this long by its own tools: all of it."""
        return tokens

    def passed(self, prompt: Prompt, usage: Usage, now: float, tenant: str = "") -> None:
        """This prompt was sent and the provider ran tools of its own between passes of the model, caching
        each pass (what it keeps of them is the contract's: nothing here)."""

    def read_ends(self, prompt: Prompt) -> list[int]:
        """The segments a read of this prompt can end on and show where hidden tokens sit (scale.py): an
        automatic prefix read ends anywhere, so only one past all of the prompt says so."""
        return [len(prompt.segments) - 1]

    def held_end(self, prompt: Prompt) -> int | None:
        """The segment where what a request reads plus writes ends, where the contract fixes it (a write
        runs to the furthest breakpoint), so the provider's count there is exact (scale.py). None for an
        automatic prefix cache: its reads end on its own steps."""
        return None

    def _hold(self, prompt: Prompt, chain: Sequence[bytes], last: int, now: float, tenant: str) -> None:
        raise NotImplementedError

    def _plan(self, prompt: Prompt, now: float, tenant: str, commit: bool) -> Expected:
        raise NotImplementedError

    def _get(self, key: tuple[str, str, bytes]) -> Any:
        return self._entries.get(key)

    def _put(self, key: tuple[str, str, bytes], value: Any) -> None:
        self._entries.put(key, value, self._until(value))

    # What a fleet's shared index needs of a policy (prefixguard/judge/index.py). These defaults work for any
    # policy, only slower in a fleet: nothing fetched ahead (each key asked for alone), entries kept a day.
    def _until(self, value: Any) -> float:
        """When an entry holding `value` is of no more use (a shared index lets it expire then)."""
        return float("inf")

    def _reads(self, prompt: Prompt, tenant: str) -> list[tuple[str, str, bytes]]:
        """Every key a step on this prompt may read (fetched at once from a shared index)."""
        return []

    @property
    def longest_ttl(self) -> float:
        """The longest time the contract keeps an entry (inf: no expiry)."""
        return float("inf")

    def keyed_chain(self, prompt: Prompt) -> Chain:
        """Prompt.chain with the cache-keying settings folded in from the level each one invalidates:
        a changed `thinking` makes every message entry new while tools and system still match."""
        if self._keyed is not None and self._keyed[0] is prompt.chain:  # lookup and commit key it alike
            return self._keyed[1]
        salts = {}
        levels = invalidated_levels(self.provider, prompt.model)
        for i, level in enumerate(LEVELS):
            keyed = {
                k: v
                for k, v in prompt.settings.items()
                if k in levels and LEVELS.index(levels[k]) <= i and v not in (None, False)
            }
            salts[level] = json.dumps(keyed, sort_keys=True, default=str).encode() if keyed else b""
        chain = prompt.chain
        if any(salts.values()):
            chain = Chain.of(
                xxh3_128_digest(fp + salts[seg.level]) if salts[seg.level] else fp
                for fp, seg in zip(prompt.chain, prompt.segments, strict=True)
            )
        self._keyed = (prompt.chain, chain)
        return chain


def later_passes_read(usage: Usage, first: int, minimum: int) -> int:
    """What the passes after the first read, where each reads the pass before it whole and writes what a
    tool's result added: the bill less the first pass's prompt and less what the results added, but for the
    passes' prompts too short to be cached (under the minimum; the results' growth taken as even over them)."""
    step = usage.server_added / usage.server_calls
    prompts = [first + j * step for j in range(usage.server_calls)]  # of the passes read, the first's first
    if all(p < minimum for p in prompts):
        return 0
    read = usage.prompt_total - first - usage.server_added
    return max(0, read - round(sum(p for p in prompts if p < minimum)))


def longest(chain: Sequence[bytes], alive: Any) -> int:
    """Leading segments whose prefix passes alive(); a binary search, as alive is prefix-closed."""
    return prefix_length(len(chain), lambda k: alive(chain[k - 1]))


def message_ends(prompt: Prompt, roles: frozenset[str]) -> list[int]:
    """Indices of the last part of each message whose role is one of `roles`."""
    segs = prompt.segments
    return [
        i
        for i, s in enumerate(segs)
        if s.role in roles
        and (i + 1 == len(segs) or segs[i + 1].message_index != s.message_index or segs[i + 1].level != s.level)
    ]


def predicted(
    policy: CachePolicy, scale: TokenScale, prompt: Prompt, now: float, tenant: str = "", theirs: Prompt | None = None
) -> Expected:
    """What the provider should report for this request now, in its tokens (the scale learned from the
    usage reported before): the one prediction the proxy and replay's sim both make. Once the provider
    answered, `policy.billed` bounds it by the billed total and `answered` learns from the answer.
    theirs: the prompt as the scale renders it, where the caller has it already."""
    return policy.lookup(theirs if theirs is not None else scale.scaled(prompt), now, tenant)


def answered(
    policy: CachePolicy,
    scale: TokenScale,
    prompt: Prompt,
    usage: Usage,
    now: float,
    tenant: str = "",
    said: ResponseMeta = NO_META,
) -> Prompt:
    """What a provider's answer teaches, the same for the proxy and replay's sim: the token scale (and
    where hidden tokens sit, by where this contract's reads end), then this request's reads, writes and
    output kept in the provider's tokens (`said`: how the answer ended), and what the provider reported
    holding. Returns the prompt in the provider's tokens, as kept."""
    contract = provider_contract(policy.provider, prompt.model)
    scale.learn(
        prompt,
        usage,
        policy.read_ends(prompt),
        policy.held_end(prompt),
        contract.min_cacheable_tokens,
        contract.token_step,
    )
    held = scale.scaled(prompt)
    policy.commit(held, now, tenant, usage.output, usage.reasoning, said.made_calls)
    if usage.server_calls:  # (a read summed over passes is no one prefix's)
        policy.passed(held, usage, now, tenant)
    else:
        policy.observe(held, usage.cache_read, now, tenant)
    return held


class Output(NamedTuple):
    """What a request generated, cached with its prompt (a contract with caches_output): when, how many, and
    how many of them were reasoning, generated first."""

    at: float
    tokens: int
    reasoning: int = 0
    calls: bool = False  # it ended in tool calls
