"""Automatic prefix caching: every prefix of a served prompt is cached (OpenAI before GPT-5.6, Gemini,
xAI, the other OpenAI-compatible providers' tables), read in whole units where the contract says so
(DeepSeek V4: `policy = "units"`), or in whole blocks of a server one runs (the compatible contract:
vLLM, SGLang, the engine). GPT-5.6's breakpoint modes are openai_breakpoints.py."""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import accumulate, takewhile

from xxhash import xxh3_128

from prefixguard.contracts.providers import provider_contract
from prefixguard.contracts.tables import UNITS
from prefixguard.judge.index import Table
from prefixguard.judge.policies.base import SAME_OUTPUT, Expected, Output, longest, message_ends
from prefixguard.judge.policies.openai_breakpoints import BREAKPOINT_KEY, BreakpointModes
from prefixguard.model.media import run_tokens
from prefixguard.model.prompt import STORED_CONTEXT, Prompt
from prefixguard.model.usage import Usage

# Automatic caching matches tokens, not parts: a read can end inside the first part that differs. Each
# part's text is hashed in pieces of this many characters, each piece's hash covering the prefix before
# it, so that is found to within a piece: about one OpenAI step (128 tokens) in the densest text (CJK,
# random ids: about a character a token), 32 tokens of prose. (Each piece is an entry: a MB of prompt
# holds 8,000 of the MAX_ENTRIES.)
PIECE = 128


def _pieces(prompt: Prompt, i: int, before: bytes) -> list[bytes]:
    """The hash of the prefix `before` and segment i's text up to the end of each whole PIECE-character piece."""
    seg = prompt.segments[i]
    text = prompt.text[seg.start : seg.end]
    # As another role it differs. JSON, not marshal: marshal's bytes depend on whether a string is
    # interned and how many refer to it, so equal parts parsed twice (or read back from a fleet's
    # shared index) could hash apart.
    opener = json.dumps([seg.level, seg.role, seg.header], ensure_ascii=False, separators=(",", ":"))
    running = xxh3_128(before + opener.encode("utf-8", "surrogatepass"))
    out = []
    for k in range(PIECE, len(text) + 1, PIECE):
        running.update(text[k - PIECE : k].encode("utf-8", "surrogatepass"))
        out.append(running.digest())  # of all before it: the state goes on
    return out


class PrefixPolicy(BreakpointModes):
    """Automatic prefix caching: every prefix of a served prompt is cached (OpenAI, radix servers)."""

    def __init__(self, provider: str, entries: Table | None = None) -> None:
        self.provider = provider
        super().__init__(entries)
        table = self.contract
        self.minimum = table.min_cacheable_tokens
        self.tail: int = table.prefill_tail_tokens
        self.retention: dict[str, float] = table.retention_seconds
        self.default_retention: str | None = table.default_retention
        self.by_model: bool = table.min_per_model  # the minimum is the model row's (_minimum)
        # OpenAI GPT-5.6 and later: breakpoints (implicit or explicit), chosen per model (contracts.py)
        self.breakpoint_rules = table.breakpoint_caching
        # DeepSeek V4: reads end on whole "prefix units" (message ends of these roles), never inside one
        self.unit_roles: frozenset[str] = frozenset(table.unit_end_roles) if table.policy == UNITS else frozenset()
        self.prefix_caching: bool = table.prefix_caching  # a server may reuse no prefix at all
        self.calls_cached: int = table.output_calls_cached
        modes = self.breakpoint_rules.ttl_seconds if self.breakpoint_rules else {}
        self._longest_ttl = max([*self.retention.values(), *modes.values()], default=float("inf"))

    def read_ends(self, prompt: Prompt) -> list[int]:
        mode = self.mode(prompt)
        if mode:
            return self._breakpoints(prompt, mode)[1] or [len(prompt.segments) - 1]
        if self.unit_roles:
            return message_ends(prompt, self.unit_roles) or [len(prompt.segments) - 1]
        return [len(prompt.segments) - 1]

    def held_end(self, prompt: Prompt) -> int | None:
        mode = self.mode(prompt)
        writes = self._breakpoints(prompt, mode)[0] if mode else []
        return writes[-1] if writes else None  # GPT-5.6's modes: a write runs to the furthest breakpoint

    def _ttl(self, prompt: Prompt) -> float:
        if not self.retention:
            return float("inf")
        wanted = str(prompt.settings.get("prompt_cache_retention") or self.default_retention).replace("-", "_")
        return self.retention.get(wanted, self.retention[self.default_retention or ""])

    def _plan(self, prompt: Prompt, now: float, tenant: str, commit: bool) -> Expected:
        total = prompt.total_tokens
        if total == 0 or run_tokens(prompt) < self._minimum(prompt):  # the minimum counts what the model runs
            if commit and total and self.caches_output:  # with its output it may reach the minimum: remembered
                self._remember(prompt, self.keyed_chain(prompt), (tenant, prompt.model or ""), now)
            return Expected(cache_read=0, cache_write=0, uncached=total, reason="below_minimum" if total else "cold")
        if not self.prefix_caching or not provider_contract(self.provider, prompt.model).prefix_caching:
            return Expected(cache_read=0, cache_write=0, uncached=total, reason="no_prefix_caching")
        chain = self.keyed_chain(prompt)
        cum = list(accumulate(s.tokens for s in prompt.segments))
        owner = (tenant, prompt.model or "")
        mode = self.mode(prompt)
        if mode:
            return self._plan_breakpoints(prompt, mode, chain, cum, owner, now, commit)
        ttl = self._ttl(prompt)

        def stored(fp: bytes) -> bool:
            last = self._get((*owner, fp))
            return last is not None and last <= now

        def alive(fp: bytes) -> bool:
            last = self._get((*owner, fp))  # the time it was last used, or (not yet kept) will be readable
            return last is not None and 0 <= now - last <= ttl

        n_alive = longest(chain, alive)
        reached = cum[n_alive - 1] if n_alive else 0
        if n_alive == len(chain):  # the whole prompt again: what the provider added after its parts too
            reached += prompt.after
        if n_alive and prompt.segments[n_alive - 1].kind == STORED_CONTEXT:
            reached -= 1  # a stored context ends with an answer's last token, which no cache holds
        output = (
            self._get((*owner, b"o" + chain[n_alive - 1])) if self.caches_output and 0 < n_alive < len(chain) else None
        )
        carried, cut = n_alive, False
        if output is not None and self.ready <= now - output.at <= ttl:
            # A request ended here: what it generated, carried back as the parts that follow, was cached with it.
            while carried < len(chain) and prompt.segments[carried].role == "assistant":
                carried += 1
            # It generated its reasoning first; where that is not carried back (Chat never sends it; Responses
            # drops it before a new user message), the cached continuation ends where that request's prompt did.
            back = prompt.segments[n_alive:carried]
            if output.reasoning and not any(s.kind == "thinking" and s.tokens for s in back):
                carried = n_alive
            # It ended in tool calls; carried back as text, not as calls (smolagents' "Called Tool: ..."), the
            # continuation is no longer what it generated.
            if output.calls and not any(s.kind == "tool_use" for s in back):
                carried = n_alive
            # Of several calls made at once, some providers hold only the first as generated (xAI).
            calls = [n_alive + k for k, s in enumerate(back) if s.kind == "tool_use"]
            if cut := 0 < self.calls_cached < len(calls):
                carried = calls[self.calls_cached - 1] + 1
        if carried > n_alive and output is not None:
            ours = cum[carried - 1] - reached
            # About its size: it is that output, which the provider counted exactly (a reasoning item's size
            # is an estimate); else it is some of it, or more than it (the client added to it).
            same = not cut and abs(ours - output.tokens) <= SAME_OUTPUT * output.tokens
            # Its last token was sampled and never run through the model: no cache holds it (z.ai's tool
            # loop reads 12,049 + 61 - 1; OpenAI's entry of 7,529 + 23 ends one short of a 128 step).
            kept = output.tokens - 1
            # It followed all of that request's prompt, what the provider put after its parts too (the reply's
            # opening: the assistant message's header that carries it back), as the provider ran it.
            reached += prompt.after + (kept if same else min(ours, kept))
        elif self.unit_roles:  # whole units only: back to the last unit end inside the match
            # (a message end of the unit roles, or a common prefix an earlier request made a unit)
            ends = [i for i in message_ends(prompt, self.unit_roles) if i < n_alive]
            unit = self._get((*owner, b"u" + chain[n_alive - 1])) if n_alive else None
            shared = unit is not None and unit <= now
            last = n_alive - 1 if shared else (ends[-1] if ends else -1)
            reached = cum[last] if last >= 0 else 0
            if commit and n_alive and unit is None:  # this common prefix becomes a unit for later requests
                self._put((*owner, b"u" + chain[n_alive - 1]), now + self.ready)
        elif n_alive < len(chain):  # the match goes on inside the first differing part, token by token
            seg = prompt.segments[n_alive]
            pieces = _pieces(prompt, n_alive, chain[n_alive - 1] if n_alive else b"")
            self._entries.prefetch(lambda: [(*owner, b"c" + fp) for fp in pieces])  # a fleet's: this part's only
            same = longest(pieces, lambda fp: alive(b"c" + fp))
            # The provider's own text in front of the first part is the same for every request of the model.
            hidden = prompt.front if n_alive == 0 else 0
            reached += hidden + (seg.tokens - hidden) * same * PIECE // max(1, seg.end - seg.start)
        read = self._rounded(reached, prompt) if reached else 0
        # An explicit cache (Gemini cachedContents) named at the start is read whole while it lives.
        explicit = sum(s.tokens for s in takewhile(lambda s: s.kind == "cached_content", prompt.segments))
        read = max(read, explicit)
        if read:
            reason = "hit"
        else:
            n_any = longest(chain, stored)
            reason = "ttl_expired" if n_any and self._rounded(cum[n_any - 1], prompt) else "cold"
        if commit:
            self._remember(prompt, chain, owner, now)
        return Expected(cache_read=read, cache_write=0, uncached=total - read, reason=reason)

    def billed(self, expected: Expected, prompt: Prompt, usage: Usage) -> Expected:
        """As every policy bounds it; and the server prefills a prompt's last `tail` tokens itself, cached
        or not: a read of the longest prefix stops that far before the billed total (ours may be short of
        it: an encrypted reasoning item is an estimate), on a step."""
        expected = super().billed(expected, prompt, usage)
        last = usage.prompt_total - self.tail
        if not self.tail or not usage.reported or expected.cache_read <= last or self.mode(prompt):
            return expected  # (breakpoint modes read exactly at a breakpoint)
        read = self._rounded(max(0, last), prompt)
        return expected._replace(cache_read=read, uncached=expected.uncached + expected.cache_read - read)

    def cached_of(self, prompt: Prompt, tokens: int) -> int:
        """Every prefix of a prompt sent is cached: all of it, on a step (none where the server reuses none)."""
        return self._rounded(tokens, prompt) if self.prefix_caching else 0

    def _remember(self, prompt: Prompt, chain: Sequence[bytes], owner: tuple[str, str], now: float) -> None:
        """Every prefix of the prompt is cached now; one it did not read, once the provider has kept it (`ready`)."""
        ready = now + self.ready
        put, until = self._entries.put, self._until(ready)  # one lifetime for all: thousands of pieces a MB
        for i, fp in enumerate(chain):
            kept = self._get((*owner, fp)) if self.ready else None
            put((*owner, fp), now if kept is not None and kept <= now else ready, until)
            for piece in _pieces(prompt, i, chain[i - 1] if i else b""):
                put((*owner, b"c" + piece), ready, until)

    def _hold(self, prompt: Prompt, chain: Sequence[bytes], last: int, now: float, tenant: str) -> None:
        if self.mode(prompt):  # a breakpoint entry where the read ended
            self._put((tenant, prompt.model or "", BREAKPOINT_KEY + chain[last]), now)
            return
        for fp in chain[: last + 1]:
            self._put((tenant, prompt.model or "", fp), now)

    def _until(self, value: float | Output) -> float:
        return (value.at if isinstance(value, Output) else value) + self.longest_ttl  # the entry's last use

    @property
    def longest_ttl(self) -> float:
        return self._longest_ttl

    def _reads(self, prompt: Prompt, tenant: str) -> list[tuple[str, str, bytes]]:
        chain = self.keyed_chain(prompt)
        owner = (tenant, prompt.model or "")
        keys = [(*owner, fp) for fp in chain] + ([(*owner, b"o" + fp) for fp in chain] if self.caches_output else [])
        if self.breakpoint_rules:
            keys += [(*owner, BREAKPOINT_KEY + fp) for fp in chain]
        if self.unit_roles:
            keys += [(*owner, b"u" + fp) for fp in chain]
        return keys  # the pieces of the one part a match ends in are fetched once it is known (_plan)

    def _minimum(self, prompt: Prompt) -> int:
        """The least a cache holds: the model's where the table says so (Gemini, DeepSeek V4), else the table's."""
        return provider_contract(self.provider, prompt.model).min_cacheable_tokens if self.by_model else self.minimum

    def _rounded(self, tokens: int, prompt: Prompt) -> int:
        """A read of this long, to its last whole step of the model's (none under the minimum)."""
        minimum = self._minimum(prompt)
        if tokens < max(minimum, 1):
            return 0
        return tokens - (tokens - minimum) % provider_contract(self.provider, prompt.model).token_step
