"""What a provider's prompt cache should read for a request, given what it saw before.

One policy per provider contract (rules/providers.toml), its state keyed by (tenant, model), at segment
granularity: a cache entry is a prefix fingerprint (an element of Prompt.chain) and the tokens it covers.
- radix ("compatible"): any earlier prefix is cached, in whole blocks of the server's block size, from
  its minimum, no expiry, or nothing at all where the server caches no prefix (vLLM, SGLang, the engine;
  settings by prefixguard/contracts/serving.py).
- openai: automatic; prompts of at least the minimum are cached; reads round down to the token step;
  an entry lives for the retention time after its last use. GPT-5.6 and later (chosen by model): entries
  only at breakpoints (the implicit one on the latest user or tool message, or the marked ones in
  explicit mode), a read exactly at one, no fallback, no rounding, the mode's TTL.
- deepseek: the prefix contract read in whole units (message ends, common prefixes), never inside one;
  the other OpenAI-compatible providers' tables: the prefix contract with their own numbers.
- anthropic: entries are written only at breakpoints (explicit, plus the automatic one); a breakpoint
  looks back a fixed number of blocks for an earlier entry; a minimum per model; the TTL counts from the
  last read or write.
- bedrock: the anthropic contract with Bedrock's numbers; gemini: the prefix contract with a minimum per
  model.
The proxy's verdicts, the engine server's --policy and replay's sim target all use this module, the
proxy and the sim through the same three calls: `predicted`, `CachePolicy.billed`, `answered`.

Why one file of ~600 lines: the contracts share CachePolicy's entry bookkeeping (commit, lookup, what
the provider reported holding, the fleet's shared table) and differ in a method or two each; apart,
each would need the base's internals.
"""
from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from itertools import accumulate, takewhile
from types import MappingProxyType
from typing import Any, NamedTuple

from xxhash import xxh3_128_digest

from prefixguard.contracts.providers import (
    breakpoint_caching,
    invalidated_levels,
    provider_contract,
    provider_for,
    providers,
    verdict_rules,
)
from prefixguard.judge.index import LocalTable, Table
from prefixguard.judge.scale import TokenScale
from prefixguard.model.breakpoints import breakpoints
from prefixguard.model.fingerprint import prefix_length
from prefixguard.model.prompt import LEVELS, Prompt
from prefixguard.model.usage import Usage

SAME_OUTPUT = 0.5      # parts carried back within this share of a request's reported output are that output
MAX_ENTRIES = 200_000  # memory bound over all tenants and models; the least recently used go first


class Expected(NamedTuple):
    """What the provider should report for one request."""

    cache_read: int
    cache_write: int
    uncached: int
    reason: str                 # hit | partial | cold | ttl_expired | below_minimum | no_breakpoint | no_prefix_caching
    ttl: str | None = None      # TTL of the entry read or written last (Anthropic)
    write_by_ttl: Mapping[str, int] = MappingProxyType({})  # cache_write split by TTL (Anthropic)


class CachePolicy:
    """Base: bounded LRU state and the settings that key the cache. Subclasses decide reads and writes."""

    provider: str

    def __init__(self, entries: Table | None = None) -> None:
        table = providers()[self.provider]
        self.caches_output: bool = table.get("caches_output", False)  # a request's output is cached with it
        # where the entries live: this process (an LRU), or a fleet's shared index (prefixguard/judge/index.py)
        self._entries: Table = entries if entries is not None else LocalTable(MAX_ENTRIES)
        self._lock = threading.Lock()
        self._keyed: tuple[list[bytes], list[bytes]] | None = None   # the last prompt keyed: (chain, keyed)

    def lookup(self, prompt: Prompt, now: float, tenant: str = "") -> Expected:
        """What the provider should read now; changes nothing."""
        with self._lock:
            self._entries.load(lambda: self._reads(prompt, tenant), now)
            return self._plan(prompt, now, tenant, commit=False)

    def commit(self, prompt: Prompt, now: float, tenant: str = "", output: int = 0) -> Expected:
        """lookup, then record this request's reads and writes (refreshing the TTLs it touched).
        output: the tokens it generated (as reported), cached with it where the contract says so."""
        with self._lock:
            self._entries.load(lambda: self._reads(prompt, tenant), now)
            expected = self._plan(prompt, now, tenant, commit=True)
            if output > 0 and self.caches_output and prompt.segments:
                self._put((tenant, prompt.model or "", b"o" + self.keyed_chain(prompt)[-1]), _Output(now, output))
            self._entries.save()
            return expected

    def observe(self, prompt: Prompt, read: int, now: float, tenant: str = "") -> None:
        """The provider reported reading `read` tokens of this prompt (counted in its tokens): the prefix
        that long is cached, whoever wrote it (a run before the capture, another client). Recorded as an
        entry on the last part it covers, so later requests are judged by what the provider holds."""
        if read <= 0 or not prompt.segments:
            return
        ends = list(accumulate(s.tokens for s in prompt.segments))
        last = min(range(len(ends)), key=lambda k: abs(ends[k] - read))  # reads end on a part's end
        if ends[last] > read * (1 + verdict_rules()["read_tolerance"]):
            last -= 1
        if last < 0:
            return
        with self._lock:
            self._entries.load(lambda: self._reads(prompt, tenant), now)
            self._hold(prompt, self.keyed_chain(prompt), last, now, tenant)
            self._entries.save()

    def billed(self, expected: Expected, prompt: Prompt, usage: Usage) -> Expected:
        """The expectation against the prompt total the provider billed (known once it answered): no read
        when that is under the model's minimum, and none past it. Our scaled count can run over both (a
        server tool loop's usage sums its passes, so one request's sum is no prefix of the next)."""
        total = usage.prompt_total
        if not usage.reported or total <= 0 or not expected.cache_read:
            return expected
        if total < provider_contract(self.provider, prompt.model).min_cacheable_tokens:
            return Expected(0, 0, total, "below_minimum")
        if expected.cache_read > total:
            return expected._replace(cache_read=total, cache_write=0, uncached=0, write_by_ttl={})
        return expected

    def read_ends(self, prompt: Prompt) -> list[int]:
        """The segments a read of this prompt can end on and show where hidden tokens sit (scale.py): an
        automatic prefix read ends anywhere, so only one past all of the prompt says so."""
        return [len(prompt.segments) - 1]

    def _hold(self, prompt: Prompt, chain: list[bytes], last: int, now: float, tenant: str) -> None:
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

    def keyed_chain(self, prompt: Prompt) -> list[bytes]:
        """Prompt.chain with the cache-keying settings folded in from the level each one invalidates:
        a changed `thinking` makes every message entry new while tools and system still match."""
        if self._keyed is not None and self._keyed[0] is prompt.chain:  # lookup and commit key it alike
            return self._keyed[1]
        salts = {}
        levels = invalidated_levels(self.provider, prompt.model)
        for i, level in enumerate(LEVELS):
            keyed = {k: v for k, v in prompt.settings.items()
                     if k in levels and LEVELS.index(levels[k]) <= i and v not in (None, False)}
            salts[level] = json.dumps(keyed, sort_keys=True, default=str).encode() if keyed else b""
        chain = prompt.chain
        if any(salts.values()):
            chain = [xxh3_128_digest(fp + salts[seg.level]) if salts[seg.level] else fp
                     for fp, seg in zip(prompt.chain, prompt.segments)]
        self._keyed = (prompt.chain, chain)
        return chain


def _longest(chain: list[bytes], alive: Any) -> int:
    """Leading segments whose prefix passes alive(); a binary search, as alive is prefix-closed."""
    return prefix_length(len(chain), lambda k: alive(chain[k - 1]))


def _message_ends(prompt: Prompt, roles: frozenset[str]) -> list[int]:
    """Indices of the last part of each message whose role is one of `roles`."""
    segs = prompt.segments
    return [i for i, s in enumerate(segs) if s.role in roles and (
        i + 1 == len(segs) or segs[i + 1].message_index != s.message_index or segs[i + 1].level != s.level)]


# Automatic caching matches tokens, not parts: a read can end inside the first part that differs. Each
# part's text is hashed in pieces of this many characters (about 128 tokens, OpenAI's step), each
# piece's hash covering the prefix before it, so that is found to within a piece. (Each piece is an
# entry: a MB of prompt holds 2,000 of the MAX_ENTRIES.)
PIECE = 512


def _pieces(prompt: Prompt, i: int, before: bytes) -> list[bytes]:
    """Hash chain over the whole PIECE-character pieces of segment i's text, after the prefix `before`."""
    seg = prompt.segments[i]
    text = prompt.text[seg.start:seg.end]
    # As another role it differs. JSON, not marshal: marshal's bytes depend on whether a string is
    # interned and how many refer to it, so equal parts parsed twice (or read back from a fleet's
    # shared index) could hash apart.
    opener = json.dumps([seg.level, seg.role, seg.header], ensure_ascii=False, separators=(",", ":"))
    out, prev = [], before + opener.encode("utf-8", "surrogatepass")
    for k in range(PIECE, len(text) + 1, PIECE):
        prev = xxh3_128_digest(prev + text[k - PIECE:k].encode("utf-8", "surrogatepass"))
        out.append(prev)
    return out


class PrefixPolicy(CachePolicy):
    """Automatic prefix caching: every prefix of a served prompt is cached (OpenAI, radix servers)."""

    def __init__(self, provider: str, entries: Table | None = None) -> None:
        self.provider = provider
        super().__init__(entries)
        table = providers()[provider]
        self.minimum: int = table.get("min_cacheable_tokens", 0)
        self.step: int = max(1, table.get("token_step", 1))
        self.retention: dict[str, float] = table.get("retention_seconds", {})
        self.default_retention: str | None = table.get("default_retention")
        self.by_model: bool = provider in PER_MODEL_MINIMUM
        # OpenAI GPT-5.6 and later: breakpoints (implicit or explicit), chosen per model (contracts.py)
        self.breakpoint_rules: dict[str, Any] = table.get("breakpoint_caching", {})
        # DeepSeek V4: reads end on whole "prefix units" (message ends of these roles), never inside one
        self.unit_roles: frozenset[str] = frozenset(table.get("unit_end_roles", ())) if table.get("policy") == "units" \
            else frozenset()
        self.prefix_caching: bool = table.get("prefix_caching", True)       # a server may reuse no prefix at all

    def mode(self, prompt: Prompt) -> str | None:
        """"explicit" or "implicit" where this request is cached by breakpoints (GPT-5.6+), else None."""
        if not self.breakpoint_rules:
            return None
        if prompt.settings.get("cache_mode") == "explicit":
            return "explicit"
        return "implicit" if breakpoint_caching(self.provider, prompt.model) else None

    def read_ends(self, prompt: Prompt) -> list[int]:
        mode = self.mode(prompt)
        if mode:
            return self._breakpoints(prompt, mode)[1] or [len(prompt.segments) - 1]
        if self.unit_roles:
            return _message_ends(prompt, self.unit_roles) or [len(prompt.segments) - 1]
        return [len(prompt.segments) - 1]

    def _ttl(self, prompt: Prompt) -> float:
        if not self.retention:
            return float("inf")
        wanted = str(prompt.settings.get("prompt_cache_retention") or self.default_retention).replace("-", "_")
        return self.retention.get(wanted, self.retention[self.default_retention])

    def _plan(self, prompt: Prompt, now: float, tenant: str, commit: bool) -> Expected:
        total = prompt.total_tokens
        if self.by_model:  # Gemini: a minimum per model
            self.minimum = provider_contract(self.provider, prompt.model).min_cacheable_tokens
        if total == 0 or total < self.minimum:
            if commit and total and self.caches_output:  # with its output it may reach the minimum: remembered
                self._remember(prompt, self.keyed_chain(prompt), (tenant, prompt.model or ""), now)
            return Expected(0, 0, total, "below_minimum" if total else "cold")
        if not self.prefix_caching:
            return Expected(0, 0, total, "no_prefix_caching")
        chain = self.keyed_chain(prompt)
        cum = list(accumulate(s.tokens for s in prompt.segments))
        owner = (tenant, prompt.model or "")
        mode = self.mode(prompt)
        if mode:
            return self._plan_breakpoints(prompt, mode, chain, cum, owner, now, commit)
        ttl = self._ttl(prompt)

        def stored(fp: bytes) -> bool:
            return self._get((*owner, fp)) is not None

        def alive(fp: bytes) -> bool:
            last = self._get((*owner, fp))
            return last is not None and now - last <= ttl

        n_alive = _longest(chain, alive)
        reached = cum[n_alive - 1] if n_alive else 0
        output = (self._get((*owner, b"o" + chain[n_alive - 1]))
                  if self.caches_output and 0 < n_alive < len(chain) else None)
        carried = n_alive
        if output is not None and now - output.at <= ttl:
            # A request ended here: what it generated, carried back as the parts that follow, was cached with it.
            while carried < len(chain) and prompt.segments[carried].role == "assistant":
                carried += 1
        if carried > n_alive:
            ours = cum[carried - 1] - reached
            # About its size: it is that output, which the provider counted exactly (a reasoning item's size
            # is an estimate); else it is some of it, or more than it (the client added to it).
            same = abs(ours - output.tokens) <= SAME_OUTPUT * output.tokens
            reached += output.tokens if same else min(ours, output.tokens)
        elif self.unit_roles:  # whole units only: back to the last unit end inside the match
            # (a message end of the unit roles, or a common prefix an earlier request made a unit)
            ends = [i for i in _message_ends(prompt, self.unit_roles) if i < n_alive]
            shared = n_alive > 0 and self._get((*owner, b"u" + chain[n_alive - 1])) is not None
            last = n_alive - 1 if shared else (ends[-1] if ends else -1)
            reached = cum[last] if last >= 0 else 0
            if commit and n_alive and not shared:  # this common prefix becomes a unit for later requests
                self._put((*owner, b"u" + chain[n_alive - 1]), now)
        elif n_alive < len(chain):  # the match goes on inside the first differing part, token by token
            seg = prompt.segments[n_alive]
            pieces = _pieces(prompt, n_alive, chain[n_alive - 1] if n_alive else b"")
            same = _longest(pieces, lambda fp: alive(b"c" + fp))
            reached += seg.tokens * same * PIECE // max(1, seg.end - seg.start)
        read = self._rounded(reached) if reached else 0
        # An explicit cache (Gemini cachedContents) named at the start is read whole while it lives.
        explicit = sum(s.tokens for s in takewhile(lambda s: s.kind == "cached_content", prompt.segments))
        read = max(read, explicit)
        if read:
            reason = "hit"
        else:
            n_any = _longest(chain, stored)
            reason = "ttl_expired" if n_any and self._rounded(cum[n_any - 1]) else "cold"
        if commit:
            self._remember(prompt, chain, owner, now)
        return Expected(read, 0, total - read, reason)

    def _remember(self, prompt: Prompt, chain: list[bytes], owner: tuple[str, str], now: float) -> None:
        """Every prefix of the prompt is cached now."""
        for i, fp in enumerate(chain):
            self._put((*owner, fp), now)
            for piece in _pieces(prompt, i, chain[i - 1] if i else b""):
                self._put((*owner, b"c" + piece), now)

    def _breakpoints(self, prompt: Prompt, mode: str) -> tuple[list[int], list[int]]:
        """(where this request writes, where it may read) as segment indices. Explicit: the marked parts.
        Implicit: the marked parts and the latest user or tool message write; a read may end on any of
        them or on an earlier user or tool message (where an earlier request put its implicit one). Reads
        consider the latest read_lookback_breakpoints positions."""
        rules = self.breakpoint_rules
        marked = [i for i, s in enumerate(prompt.segments) if s.breakpoint]
        if mode == "explicit":
            writes, reads = marked, marked
        else:
            ends = _message_ends(prompt, frozenset(rules["implicit_breakpoint_roles"]))
            writes, reads = sorted({*marked, *ends[-1:]}), sorted({*marked, *ends})
        return writes[-rules["max_writes"]:], reads[-rules["read_lookback_breakpoints"]:]

    def _plan_breakpoints(self, prompt: Prompt, mode: str, chain: list[bytes], cum: list[int],
                          owner: tuple[str, str], now: float, commit: bool) -> Expected:
        """GPT-5.6 and later: entries are written at breakpoints only (at most max_writes); a read must
        match exactly at a breakpoint written earlier, with no fallback to a shorter prefix and no
        rounding; the TTL is prompt_cache_options.ttl (else the mode's default)."""
        total = prompt.total_tokens
        writes_at, reads_at = self._breakpoints(prompt, mode)
        if not writes_at and not reads_at:
            return Expected(0, 0, total, "no_breakpoint")
        rules = self.breakpoint_rules
        options = prompt.settings.get("prompt_cache_options")
        wanted = options.get("ttl") if isinstance(options, dict) else None
        ttl = rules["ttl_seconds"].get(str(wanted), rules["ttl_seconds"][rules["default_ttl"]])
        key = b"x"  # breakpoint entries apart from the automatic ones of earlier models

        def alive(fp: bytes) -> bool:
            last = self._get((*owner, key + fp))
            return last is not None and now - last <= ttl

        hit = next((i for i in reversed(reads_at) if cum[i] >= self.minimum and alive(chain[i])), None)
        read = cum[hit] if hit is not None else 0
        writes = [i for i in writes_at if (hit is None or i > hit) and cum[i] >= self.minimum]
        written = cum[writes[-1]] - read if writes else 0
        if read:
            reason = "hit"
        elif all(cum[i] < self.minimum for i in (*writes_at, *reads_at)):
            reason = "below_minimum"
        elif any(self._get((*owner, key + chain[i])) is not None for i in reads_at):
            reason = "ttl_expired"
        else:
            reason = "cold"
        if commit:
            for i in ([hit] if read else []) + writes:
                self._put((*owner, key + chain[i]), now)
        return Expected(read, written, total - read - written, reason)

    def _hold(self, prompt: Prompt, chain: list[bytes], last: int, now: float, tenant: str) -> None:
        if self.mode(prompt):  # a breakpoint entry where the read ended
            self._put((tenant, prompt.model or "", b"x" + chain[last]), now)
            return
        for fp in chain[:last + 1]:
            self._put((tenant, prompt.model or "", fp), now)

    def _until(self, value: float | _Output) -> float:
        return (value.at if isinstance(value, _Output) else value) + self.longest_ttl  # the entry's last use

    @property
    def longest_ttl(self) -> float:
        ttls = [*self.retention.values(), *self.breakpoint_rules.get("ttl_seconds", {}).values()]
        return max(ttls, default=float("inf"))

    def _reads(self, prompt: Prompt, tenant: str) -> list[tuple[str, str, bytes]]:
        chain = self.keyed_chain(prompt)
        owner = (tenant, prompt.model or "")
        keys = [(*owner, fp) for fp in chain] + ([(*owner, b"o" + fp) for fp in chain] if self.caches_output else [])
        if self.breakpoint_rules:
            keys += [(*owner, b"x" + fp) for fp in chain]
        if self.unit_roles:
            keys += [(*owner, b"u" + fp) for fp in chain]
        for i in range(len(chain)):
            keys += [(*owner, b"c" + piece) for piece in _pieces(prompt, i, chain[i - 1] if i else b"")]
        return keys

    def _rounded(self, tokens: int) -> int:
        if tokens < max(self.minimum, 1):
            return 0
        return tokens - (tokens - self.minimum) % self.step


def predicted(policy: CachePolicy, scale: TokenScale, prompt: Prompt, now: float, tenant: str = "") -> Expected:
    """What the provider should report for this request now, in its tokens (the scale learned from the
    usage reported before): the one prediction the proxy and replay's sim both make. Once the provider
    answered, `policy.billed` bounds it by the billed total and `answered` learns from the answer."""
    return policy.lookup(scale.scaled(prompt), now, tenant)


def answered(policy: CachePolicy, scale: TokenScale, prompt: Prompt, usage: Usage, now: float,
             tenant: str = "") -> None:
    """What a provider's answer teaches, the same for the proxy and replay's sim: the token scale (and
    where hidden tokens sit, by where this contract's reads end), then this request's reads, writes and
    output kept in the provider's tokens, and what the provider reported holding."""
    scale.learn(prompt, usage, policy.read_ends(prompt))
    held = scale.scaled(prompt)
    policy.commit(held, now, tenant, usage.output)
    policy.observe(held, usage.cache_read, now, tenant)


class _Output(NamedTuple):
    """What a request generated, cached with its prompt (a contract with caches_output): when, how many."""

    at: float
    tokens: int


class _Entry(NamedTuple):
    ttl: str
    expires: float


class AnthropicPolicy(CachePolicy):
    """Breakpoint caching: entries written at breakpoints only, reached by a bounded lookback."""

    provider = "anthropic"

    def __init__(self, provider: str = "anthropic", entries: Table | None = None) -> None:
        self.provider = provider  # bedrock: the same contract with its own numbers
        super().__init__(entries)
        table = providers()[provider]
        self.lookback: int = table["lookback_blocks"]
        self.ttl_seconds: dict[str, float] = table["ttl_seconds"]
        self.default_ttl: str = table["default_ttl"]
        self.ineligible: set[str] = set(table.get("breakpoint_ineligible_kinds", ()))

    def breakpoints(self, prompt: Prompt) -> list[tuple[int, str]]:
        """(segment index, TTL) of each breakpoint, the automatic one on the last eligible block."""
        return sorted(breakpoints(prompt, self.ineligible).items())

    def read_ends(self, prompt: Prompt) -> list[int]:
        return [idx for idx, _ in self.breakpoints(prompt)]  # a read ends on a breakpoint

    def _seconds(self, ttl: str) -> float:
        return self.ttl_seconds.get(ttl, self.ttl_seconds[self.default_ttl])

    def _plan(self, prompt: Prompt, now: float, tenant: str, commit: bool) -> Expected:
        total = prompt.total_tokens
        points = self.breakpoints(prompt)
        if not points:
            return Expected(0, 0, total, "no_breakpoint")
        chain = self.keyed_chain(prompt)
        cum = list(accumulate(s.tokens for s in prompt.segments))
        owner = (tenant, prompt.model or "")
        minimum = provider_contract(self.provider, prompt.model).min_cacheable_tokens

        read_at, expired_at, read_entries = -1, -1, []
        for idx, _ in points:
            for j in range(idx, max(idx - self.lookback, -1), -1):
                entry = self._get((*owner, chain[j]))
                if entry is None:
                    continue
                if entry.expires > now:
                    read_entries.append(j)
                    read_at = max(read_at, j)
                    break
                expired_at = max(expired_at, j)
        read = cum[read_at] if read_at >= 0 else 0

        writes = [(idx, ttl) for idx, ttl in points if idx > read_at and cum[idx] >= minimum]
        by_ttl: dict[str, int] = {}
        done = read
        for idx, ttl in writes:
            by_ttl[ttl] = by_ttl.get(ttl, 0) + cum[idx] - done
            done = cum[idx]
        written = done - read

        # How far this prompt runs inside some live entry: past what was read, no breakpoint reached it.
        known = _longest(chain, lambda fp: (e := self._get((*owner, b"k" + fp))) is not None and e > now)
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
        last_ttl = writes[-1][1] if writes else (self._get((*owner, chain[read_at])).ttl if read_at >= 0 else None)

        if commit:
            for j in read_entries:
                entry = self._get((*owner, chain[j]))
                self._touch(owner, chain, j, entry.ttl, now)
            for idx, ttl in writes:
                self._touch(owner, chain, idx, ttl, now)
        return Expected(read, written, total - read - written, reason, last_ttl, by_ttl)

    def _hold(self, prompt: Prompt, chain: list[bytes], last: int, now: float, tenant: str) -> None:
        owner = (tenant, prompt.model or "")
        if not self._alive(owner, chain[last], now):
            self._touch(owner, chain, last, self.default_ttl, now)

    def _until(self, value: _Entry | float) -> float:
        return value.expires if isinstance(value, _Entry) else value  # a "k" entry holds its expiry

    @property
    def longest_ttl(self) -> float:
        return max(self.ttl_seconds.values())

    def _reads(self, prompt: Prompt, tenant: str) -> list[tuple[str, str, bytes]]:
        owner = (tenant, prompt.model or "")
        chain = self.keyed_chain(prompt)
        return [(*owner, fp) for fp in chain] + [(*owner, b"k" + fp) for fp in chain]

    def _alive(self, owner: tuple[str, str], fp: bytes, now: float) -> bool:
        entry = self._get((*owner, fp))
        return entry is not None and entry.expires > now

    def _touch(self, owner: tuple[str, str], chain: list[bytes], idx: int, ttl: str, now: float) -> None:
        expires = now + self._seconds(ttl)
        self._put((*owner, chain[idx]), _Entry(ttl, expires))
        # "k" + fingerprint: the prefixes some live entry covers, to tell a partial read from a full one
        for fp in chain[: idx + 1]:
            key = (*owner, b"k" + fp)
            if (self._get(key) or 0) < expires:
                self._put(key, expires)


PER_MODEL_MINIMUM = ("gemini",)  # prefix policies whose minimum is the model's, not the table's
BREAKPOINT_POLICIES = ("anthropic",)  # rules/providers.toml `policy` values that AnthropicPolicy implements


def _factories() -> dict[str, Callable[[Table | None], CachePolicy]]:
    """A policy per contract of rules/providers.toml (its `policy` kind: anthropic-like breakpoints, else a
    prefix rule), "radix" for the compatible one: adding a provider is adding its table."""
    out: dict[str, Callable[[Table | None], CachePolicy]] = {}
    for name, table in providers().items():
        kind = table.get("policy", name)
        cls = AnthropicPolicy if kind in BREAKPOINT_POLICIES else PrefixPolicy
        out["radix" if name == "compatible" else name] = \
            lambda t=None, name=name, cls=cls: cls(name, t)   # type: ignore[misc]
    return out


POLICIES = _factories()


def make_policy(name: str, entries: Table | None = None) -> CachePolicy:
    """A fresh policy: "radix" (the compatible contract: a server one runs) or a provider's ("anthropic",
    "openai", "deepseek", ...); its entries in `entries` (a fleet's shared index), else in this process."""
    try:
        return POLICIES[name](entries)
    except KeyError:
        raise ValueError(f"unknown cache policy {name!r} (one of {', '.join(POLICIES)})") from None


def policy_name(api: str, model: str | None, host: str | None = None) -> str:
    """The policy of the provider that serves this API shape and model (at this upstream host, if known)."""
    provider = provider_for(api, model, host)
    return provider if provider in POLICIES else "radix"


class Policies:
    """One policy state per contract, made on first use: what the proxy, the engine server and replay
    each keep. `chosen` auto (or None) judges a request by its own provider's contract."""

    def __init__(self, table: Callable[[str, float], Table] | None = None) -> None:
        self._made: dict[str, CachePolicy] = {}
        self._table = table   # a fleet's shared table for a policy's entries (name, lifetime), else in-process

    def get(self, chosen: str | None, api: str, model: str | None, radix: bool = True,
            host: str | None = None) -> CachePolicy | None:
        """The state for this request; with radix=False, None for the radix policy (the caller keeps a
        real radix tree instead). host: the upstream's, where known (a provider known by its host only)."""
        name = policy_name(api, model, host) if chosen in (None, "auto") else chosen
        if name == "radix" and not radix:
            return None
        if name not in self._made:
            # kept past their end by the contract's longest TTL: the margin a shared table needs
            entries = self._table(f"p:{name}", make_policy(name).longest_ttl) if self._table else None
            self._made[name] = make_policy(name, entries)
        return self._made[name]
