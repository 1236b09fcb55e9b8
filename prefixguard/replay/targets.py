"""Where a replay sends its requests: `sim` (the radix tree or a provider policy, no model), `engine`
(the in-process engine: real prefill and decode), or an HTTP server (OpenAI or Anthropic shaped).

Every target turns a Request into an Outcome. Token ids come from the engine's chat template, so the
sim's tree sees exactly the prompts the engine and its server would see.
"""

from __future__ import annotations

import copy
import itertools
import json
import threading
import time
from typing import Any, Protocol

from prefixguard.contracts.providers import model_contract
from prefixguard.engine import chat_template
from prefixguard.engine.radix import RadixTree
from prefixguard.judge.policies import POLICIES as CONTRACTS
from prefixguard.judge.policies import CachePolicy, Policies, answered, predicted
from prefixguard.judge.scale import TokenScale
from prefixguard.model.prompt import Prompt
from prefixguard.model.usage import Usage
from prefixguard.replay.blocks import block_ids, block_prompt, blocks_api
from prefixguard.replay.results import Outcome
from prefixguard.replay.sources import MOONCAKE_BLOCK_TOKENS, Request
from prefixguard.utils.errors import InputError
from prefixguard.wire import UsageStream, anthropic, openai_chat, openai_responses, parse_request
from prefixguard.wire.adapters import adapter_for

POLICIES = ("auto", *CONTRACTS)  # the policy module's, one per contract of rules/providers.toml
DEFAULT_PAGE_SIZE = 16  # the engine's default page: tokens per KV page
NO_BODIES = "this trace holds no request bodies (Mooncake): only --target sim or engine replays it"


class Target(Protocol):
    realtime: bool  # True: requests are sent at the trace's pace; False: time is only a number
    needs_bodies: bool  # True: a trace of Mooncake blocks (no request bodies) cannot be sent to it

    def run(self, req: Request, now: float) -> Outcome: ...


def parsed(req: Request, model: str | None = None) -> Prompt:
    """The parsed request, counted as a provider counts it (our tokenizer, images by their formula):
    what a contract judges."""
    if req.body is None:
        raise InputError(NO_BODIES, req.ref)
    prompt = parse_request(json.dumps(req.body, ensure_ascii=False), path=req.path, source=req.ref)
    if model:
        prompt.model = model
    return prompt


def prompt_of(req: Request, model: str | None = None) -> Prompt:
    """The parsed request, its segments' tokens counted by the engine's chat template."""
    return _rendered(req, model)[0]


def _rendered(
    req: Request, model: str | None, template: chat_template.Template = chat_template.CL100K
) -> tuple[Prompt, list[int]]:
    """prompt_of, with the token ids the template rendered (the targets that need them render once);
    template: the engine model's (a GGUF model has its own tokenizer), else the presets' cl100k one."""
    if req.body is None:
        raise InputError(NO_BODIES, req.ref)
    prompt = parse_request(json.dumps(req.body, ensure_ascii=False), path=req.path, source=req.ref, count_tokens=False)
    ids = template.render(prompt.segments)  # also sets each segment's tokens as the template counts them
    if model:
        prompt.model = model
    return prompt, ids


def priced(o: Outcome, api: str, model: str | None, write_1h: int = 0) -> Outcome:
    """Cost at the model's prices (rules/providers.toml), and what the same tokens cost with no cache."""
    contract = model_contract(api, model)
    o.cost_usd = contract.cost(
        uncached=o.uncached,
        cache_read=o.cache_read,
        write_5m=o.cache_write - write_1h,
        write_1h=write_1h,
        output=o.output_tokens,
    )
    o.full_cost_usd = contract.cost(uncached=o.prompt_tokens, output=o.output_tokens)
    o.prices = contract.prices
    return o


def outcome(req: Request, prompt_tokens: int, cached: int, **kw: Any) -> Outcome:
    reported = req.reported
    return Outcome(
        index=req.index,
        ts=req.ts,
        ref=req.ref,
        session=req.session,
        model=kw.pop("model", req.model),
        prompt_tokens=prompt_tokens,
        cache_read=cached,
        reported_cache_read=reported.cache_read if reported else None,
        reported_prompt=reported.prompt_total if reported else None,
        **kw,
    )


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
            return self._radix_ids(req, *_rendered(req, self.model))
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
        ahead = predicted(policy, self._scale, prompt, now, req.tenant)
        usage = req.reported or Usage()  # none reported: nothing learned, only this request's writes kept
        exp = policy.billed(ahead, prompt, usage)
        answered(policy, self._scale, prompt, usage, now, req.tenant)
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


class HttpTarget:
    """Any OpenAI- or Anthropic-compatible server: the engine server, vLLM, SGLang, a provider.

    Requests stream, so TTFT is measured at the first content event; cached tokens come from the
    usage fields the server reports (a server that reports none gives no cached count, never zero)."""

    realtime = True
    needs_bodies = True

    def __init__(
        self,
        base_url: str,
        *,
        max_tokens: int = 16,
        model: str | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 600.0,
        max_retries: int | None = None,
    ) -> None:
        from prefixguard.replay.http_client import MAX_RETRIES, Client

        self.base_url = base_url.rstrip("/")
        self.max_tokens = max_tokens
        self.model = model
        self.headers = headers or {}
        self.timeout = timeout
        # One pooled client for the whole replay: keep-alive, HTTP/2 where offered, retries.
        self.client = Client(self.base_url, timeout, MAX_RETRIES if max_retries is None else max_retries)

    def close(self) -> None:
        self.client.close()

    def run(self, req: Request, now: float) -> Outcome:
        import httpx

        from prefixguard.replay.http_client import auth_headers

        prompt = prompt_of(req, self.model)
        path = req.path or adapter_for(prompt.api).ENDPOINT
        if path is None:
            raise InputError(
                f"a {prompt.api} request names its model in its path: the trace must give the path", req.ref
            )
        want = min(req.output_tokens or self.max_tokens, self.max_tokens)
        body = streaming(req.body or {}, prompt.api, want, self.model)
        data = json.dumps(body, ensure_ascii=False).encode()
        headers = {"content-type": "application/json", **auth_headers(prompt.api, self.headers), **self.headers}
        if prompt.api == anthropic.API:
            headers.setdefault(anthropic.HEADER, "2023-06-01")
        stream = UsageStream(prompt.api)
        try:
            with self.client.stream(path, data, headers) as (attempt, chunks):
                start = attempt.started  # the last try's: waits before retries are not TTFT
                for chunk in chunks:
                    stream.feed(chunk)
        except httpx.HTTPError as e:
            return outcome(req, prompt.total_tokens, 0, model=prompt.model, error=f"{type(e).__name__}: {e}")
        if attempt.status >= 400:
            return outcome(
                req,
                prompt.total_tokens,
                0,
                model=prompt.model,
                error=f"HTTP {attempt.status}: {attempt.error_body}"
                + (f" (after {attempt.tries} tries)" if attempt.tries > 1 else ""),
            )
        end = time.monotonic()
        stream.feed(b"\n\n")
        usage = stream.usage()
        first = stream.first_content_at
        ttft = (first - start) if first is not None else end - start
        decode = (usage.output - 1) / (end - first) if first is not None and usage.output > 1 and end > first else None
        if not usage.reported:
            return outcome(
                req,
                prompt.total_tokens,
                0,
                model=prompt.model,
                ttft_s=ttft,
                decode_tps=decode,
                error="the server reported no cached-token field",
            )
        o = outcome(
            req,
            usage.prompt_total,
            usage.cache_read,
            cache_write=usage.cache_write,
            uncached=usage.uncached,
            output_tokens=usage.output,
            ttft_s=ttft,
            decode_tps=decode,
            reason="hit" if usage.cache_read else "cold",
            model=prompt.model,
        )
        return priced(o, prompt.api, prompt.model, write_1h=usage.cache_write_1h)


def streaming(body: dict[str, Any], api: str, max_tokens: int, model: str | None) -> dict[str, Any]:
    """The body to send: streamed with usage, answer length capped, the model replaced if asked."""
    out = copy.copy(body)
    out["stream"] = True
    if model:
        out["model"] = model
    if api == openai_chat.API:
        out["stream_options"] = {**(out.get("stream_options") or {}), "include_usage": True}
        out.pop("max_tokens", None)
        out["max_completion_tokens"] = max_tokens
    elif api == openai_responses.API:
        out["max_output_tokens"] = max_tokens
    else:
        out["max_tokens"] = max_tokens
    return out


class EngineTarget:
    """The in-process engine: a real model prefilling only what its radix tree does not hold.

    One thread steps the engine while any request is unfinished, so requests in flight together are
    batched as the server would batch them."""

    realtime = True
    needs_bodies = False  # Mooncake blocks become token ids (block_ids)

    def __init__(
        self,
        model: str = "tiny",
        *,
        page_size: int = DEFAULT_PAGE_SIZE,
        kv_pages: int | None = None,
        prefix_reuse: bool = True,
        max_tokens: int = 16,
        device: str = "cpu",
        dtype: str = "float32",
        model_name: str | None = None,
    ) -> None:
        from prefixguard.engine.llm_engine import LLMEngine

        self.engine = LLMEngine(
            model, device=device, dtype=dtype, page_size=page_size, kv_pages=kv_pages, prefix_reuse=prefix_reuse
        )
        self.page_size = page_size
        self.prefix_reuse = prefix_reuse
        self.max_tokens = max_tokens
        self.model_name = model_name
        self._work = threading.Condition()
        self._closed = False
        self._failed: str | None = None
        self._thread = threading.Thread(target=self._loop, name="replay-engine", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            with self._work:
                while not self._closed and not self.engine.has_unfinished():
                    self._work.wait()
                if self._closed:
                    return
            try:
                self.engine.step()
            except Exception as e:  # the engine broke: fail the waiting requests, do not hang them
                self._failed = f"engine failed: {type(e).__name__}: {e}"
                self._closed = True
            with self._work:
                self._work.notify_all()

    def close(self) -> None:
        with self._work:
            self._closed = True
            self._work.notify_all()
        self._thread.join()

    def run(self, req: Request, now: float) -> Outcome:
        if req.blocks is not None:
            ids = block_ids(req.blocks, req.input_tokens or 0, self.engine.config.vocab_size)
            api, model = "", self.model_name or req.model
        else:
            prompt, ids = _rendered(req, self.model_name, self.engine.template)
            api, model = prompt.api, prompt.model
        want = min(req.output_tokens or self.max_tokens, self.max_tokens)
        try:
            seq = self.engine.add_request(ids, max_tokens=want)
        except ValueError as e:  # too long for the model's context or the KV pool
            return outcome(req, len(ids), 0, model=model, error=str(e))
        with self._work:
            self._work.notify_all()
            while not seq.finished and self._failed is None:
                self._work.wait()
        if not seq.finished:
            return outcome(req, len(ids), 0, model=model, error=self._failed)
        cached = seq.cached_tokens or 0
        full = len(ids) // self.page_size * self.page_size if self.prefix_reuse else cached
        o = outcome(
            req,
            len(ids),
            cached,
            cache_write=max(0, full - cached),
            uncached=len(ids) - max(full, cached),
            reason="hit" if cached else "cold",
            output_tokens=len(seq.output_ids),
            ttft_s=seq.ttft,
            prefill_s=seq.prefill_seconds,
            decode_tps=seq.decode_tps,
            model=model,
        )
        return priced(o, api, model)
