"""The `sim` target: prefix reuse without a model, in the engine's radix tree or under a provider's
caching contract."""

from __future__ import annotations

import itertools
from typing import Any

from prefixguard.engine.radix import RadixTree
from prefixguard.judge.policies import POLICIES as CONTRACTS
from prefixguard.judge.policies import CachePolicy, Policies, answered, predicted
from prefixguard.judge.scale import TokenScale
from prefixguard.judge.stored import StoredResponses
from prefixguard.model.prompt import Prompt
from prefixguard.model.usage import Usage
from prefixguard.replay.blocks import block_prompt, blocks_api
from prefixguard.replay.outcomes import DEFAULT_PAGE_SIZE, outcome, priced
from prefixguard.replay.rendering import parsed, rendered
from prefixguard.replay.results import Outcome
from prefixguard.replay.sources import MOONCAKE_BLOCK_TOKENS, Request
from prefixguard.utils.errors import InputError

POLICIES = ("auto", *CONTRACTS)  # the policy module's, one per contract of rules/providers.toml


class _Pages:
    """Page ids for the sim's tree. No KV memory stands behind them, so a freed id needs no bookkeeping:
    the tree's own page count is the cache's size."""

    def __init__(self) -> None:
        self._ids = itertools.count()

    def alloc(self, n: int) -> list[int]:
        return list(itertools.islice(self._ids, n))

    def free(self, pages: Any) -> None:
        pass


class SimTarget:
    """Prefix reuse without a model: the engine's radix tree (policy radix: any capacity, any page size,
    LRU eviction), or a provider's caching contract (anthropic, openai: breakpoints, minimums, TTLs from
    the trace's timestamps), or auto: each request under the contract of the provider its API shape and
    model name, judged exactly as the proxy judges it (the policy module's `predicted`, `billed` and
    `answered`, the compatible contract included), so a capture of several providers' traffic is
    predicted request by request as the proxy predicted it. A trace without bodies (Mooncake) has only
    the tree."""

    realtime = False
    needs_bodies = False

    def __init__(
        self,
        policy: str = "radix",
        *,
        page_size: int | None = None,
        capacity_tokens: int | None = None,
        capacity_pages: int | None = None,
        model: str | None = None,
    ) -> None:
        if policy not in POLICIES:
            raise InputError(f"unknown policy {policy!r} (one of {', '.join(POLICIES)})")
        self.policy_name = policy
        self.page_size = page_size
        self.capacity_tokens = capacity_tokens
        self.capacity_pages = capacity_pages
        self.model = model
        self._policies = Policies()
        self._tree: RadixTree | None = None
        self._capacity: int | None = None
        self._pages = _Pages()
        self._scale = TokenScale()
        self._stored = StoredResponses()

    def run(self, req: Request, now: float) -> Outcome:
        if req.blocks is not None:
            model = self.model or req.model
            api = blocks_api(self.policy_name, model)
            policy = self._policy(api, model, tree=True)
            if policy is None:
                return self._radix_blocks(req)
            return self._contract(req, now, block_prompt(req, api or "openai-chat", model), policy)
        prompt = parsed(req, self.model)
        policy = self._policy(prompt.api, prompt.model, host=req.upstream)
        if policy is None:
            return self._radix_ids(req, *rendered(req, self.model))
        return self._contract(req, now, prompt, policy)

    def _policy(self, api: str, model: str | None, tree: bool = False, host: str | None = None) -> CachePolicy | None:
        """The contract a request is judged by, one state per contract. None: the radix tree, for policy
        radix (the engine's reuse), and under auto for a trace without bodies; auto judges a body by
        the proxy's policies, the compatible contract's included."""
        return self._policies.get(
            self.policy_name, api, model, radix=self.policy_name == "auto" and not tree, host=host
        )

    # -- the radix tree --------------------------------------------------------------------------
    def _tree_for(self, unit_tokens: int, units_per_page: int) -> RadixTree:
        """The tree, made on first use: its unit is a token (text) or a 512-token block (Mooncake)."""
        if self._tree is None:
            self._tree = RadixTree(units_per_page, self._pages)
            page_tokens = unit_tokens * units_per_page
            if self.capacity_pages is not None:
                self._capacity = self.capacity_pages
            elif self.capacity_tokens is not None:
                self._capacity = self.capacity_tokens // page_tokens
        return self._tree

    def _cache(self, tree: RadixTree, units: list[int], limit: int) -> tuple[int, int]:
        """Match then insert, evicting LRU leaves to stay within capacity. (units matched, units kept)."""
        pages, node = tree.match_prefix(units[:limit])
        tree.lock(node)
        new = len(units) // tree.page_size - len(pages)
        if self._capacity is not None:
            over = tree.total_pages + new - self._capacity
            if over > 0:
                tree.evict(over)
            new = max(0, min(new, self._capacity - tree.total_pages))
        kept = list(pages) + self._pages.alloc(new)
        tree.insert(units, kept)
        tree.unlock(node)
        return len(pages) * tree.page_size, len(kept) * tree.page_size

    def _radix_blocks(self, req: Request) -> Outcome:
        page = self.page_size or MOONCAKE_BLOCK_TOKENS
        if page % MOONCAKE_BLOCK_TOKENS:
            raise InputError(
                f"Mooncake traces hash {MOONCAKE_BLOCK_TOKENS}-token blocks: --page-size must "
                f"be a multiple of {MOONCAKE_BLOCK_TOKENS}, got {page}"
            )
        tree = self._tree_for(MOONCAKE_BLOCK_TOKENS, page // MOONCAKE_BLOCK_TOKENS)
        total, blocks = req.input_tokens or 0, req.blocks or []
        matched, kept = self._cache(tree, blocks, len(blocks))
        cached = min(matched * MOONCAKE_BLOCK_TOKENS, total)
        written = min(kept * MOONCAKE_BLOCK_TOKENS, total) - cached
        o = outcome(
            req,
            total,
            cached,
            cache_write=written,
            uncached=total - cached - written,
            reason="hit" if cached else "cold",
            output_tokens=req.output_tokens or 0,
            model=self.model or req.model,
        )
        return priced(o, blocks_api(self.policy_name, o.model), o.model)

    def _radix_ids(self, req: Request, prompt: Prompt, ids: list[int]) -> Outcome:
        tree = self._tree_for(1, self.page_size or DEFAULT_PAGE_SIZE)
        # As the engine does: the last token is always computed, since it gives the first logits.
        cached, kept = self._cache(tree, ids, len(ids) - 1)
        written = kept - cached
        o = outcome(
            req,
            len(ids),
            cached,
            cache_write=written,
            uncached=len(ids) - kept,
            reason="hit" if cached else "cold",
            output_tokens=req.output_tokens or 0,
            model=prompt.model,
        )
        return priced(o, prompt.api, prompt.model)

    # -- a provider's contract -------------------------------------------------------------------
    def _contract(self, req: Request, now: float, prompt: Prompt, policy: CachePolicy) -> Outcome:
        # As the proxy judges a request: in the provider's tokens as learned from the usage reported
        # before it, then its own reported usage teaches the scale before its reads and writes are kept.
        # a stored context it names, the answers it sends back: as the provider bills them
        prompt = policy.rendered(self._stored.filled(prompt, policy.contract.restores_reasoning))
        ahead = predicted(policy, self._scale, prompt, now, req.tenant)
        usage = req.reported or Usage()  # none reported: nothing learned, only this request's writes kept
        exp = policy.billed(ahead, prompt, usage)
        held = answered(policy, self._scale, prompt, usage, now, req.tenant, req.said)
        self._stored.answered(req.said, held, usage, policy, now, req.tenant)
        total = ahead.cache_read + ahead.cache_write + ahead.uncached  # in the provider's tokens
        o = outcome(
            req,
            total,
            exp.cache_read,
            cache_write=exp.cache_write,
            uncached=exp.uncached,
            reason=exp.reason,
            output_tokens=req.output_tokens or 0,
            model=prompt.model,
        )
        return priced(o, prompt.api, prompt.model, write_1h=exp.write_by_ttl.get("1h", 0))
