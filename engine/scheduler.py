"""Which sequences run next, and where their KV goes.

Each step is either a prefill step (chunks of uncached prompt tokens, up to `prefill_chunk` tokens
in all) or a decode step (one token for every running sequence), prefill first as in nano-vllm.
A sequence is admitted when pages for its whole prompt are free (after taking the cached prefix
from the radix tree and evicting unlocked leaves if needed); otherwise it waits. One that shares an
uncached prefix with a prompt being prefilled waits a step, so that it reuses that prefill. Decode that runs
out of pages evicts, then preempts the newest running sequence (its computed pages go to the tree)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from prefixguard.engine.kv_pool import PageAllocator
from prefixguard.engine.radix import RadixTree
from prefixguard.engine.sequence import Sequence, Status
from prefixguard.model.fingerprint import prefix_length


class RequestTooLarge(ValueError):
    """The request can never run on this engine (larger than the KV pool or the model's context)."""


@dataclass
class Chunk:
    seq: Sequence
    start: int  # first token position computed this step
    end: int  # one past the last

    @property
    def samples(self) -> bool:  # the chunk reaches the end of the sequence: its last logits pick a token
        return self.end == len(self.seq)


@dataclass
class Plan:
    chunks: list[Chunk]
    decode: bool


class Scheduler:
    def __init__(
        self,
        allocator: PageAllocator,
        page_size: int,
        *,
        prefix_reuse: bool,
        prefill_chunk: int,
        max_batch: int,
        policy: str,
    ) -> None:
        if policy not in ("fcfs", "lpm"):
            raise ValueError(f"schedule must be 'fcfs' or 'lpm', got {policy!r}")
        if prefill_chunk < 1 or max_batch < 1:
            raise ValueError("prefill_chunk and max_batch must be at least 1")
        self.allocator = allocator
        self.page_size = page_size
        self.tree = RadixTree(page_size, allocator) if prefix_reuse else None
        self.prefill_chunk = prefill_chunk
        self.max_batch = max_batch
        self.policy = policy
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.preemptions = 0
        self.ended: list[Sequence] = []  # finished by the scheduler itself, for the engine to report

    def pages_for(self, n_tokens: int) -> int:
        return -(-n_tokens // self.page_size)

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    # -- planning -----------------------------------------------------------------------------
    def schedule(self) -> Plan | None:
        budget = self.prefill_chunk
        chunks = []
        for seq in self.running:  # prefills already under way go first
            pending = len(seq) - seq.num_computed
            if pending > 1 and budget > 0:
                n = min(pending, budget)
                chunks.append(Chunk(seq=seq, start=seq.num_computed, end=seq.num_computed + n))
                budget -= n
        tree = self.tree
        if self.policy == "lpm" and tree is not None and len(self.waiting) > 1:
            self.waiting = deque(sorted(self.waiting, key=lambda s: -tree.peek(s.tokens[:-1])))
        computing = [c.seq for c in chunks]  # prompts whose KV this step adds to the tree
        while self.waiting and budget > 0 and len(self.running) < self.max_batch:
            seq = self.waiting[0]
            if self.pages_for(len(seq)) > self.allocator.num_pages:
                self.waiting.popleft()  # a preempted sequence that outgrew the pool
                self.finish(seq, "length")
                continue
            if self._shares_uncached_prefix(seq, computing):
                break  # a later step reuses what this one computes
            if not self._admit(seq):
                break  # no room: it waits for pages to come back
            computing.append(seq)
            self.waiting.popleft()
            self.running.append(seq)
            n = min(len(seq) - seq.num_computed, budget)
            chunks.append(Chunk(seq=seq, start=seq.num_computed, end=seq.num_computed + n))
            budget -= n
        if chunks:
            return Plan(chunks=chunks, decode=False)
        return self._plan_decode()

    def _shares_uncached_prefix(self, seq: Sequence, computing: list[Sequence]) -> bool:
        """True when `seq` shares at least a page beyond its cached prefix with a prompt being
        prefilled in this step: admitting it now would compute that part twice."""
        if self.tree is None or not computing:
            return False
        tokens = seq.tokens
        cached = self.tree.peek(tokens)
        return any(common_prefix_len(tokens, other.tokens) >= cached + self.page_size for other in computing)

    def _plan_decode(self) -> Plan | None:
        chunks = []
        for seq in list(self.running):
            if seq.status is not Status.RUNNING:
                continue  # preempted by an earlier one in this loop
            pos = len(seq) - 1
            while pos // self.page_size >= len(seq.pages):
                if self._reserve(1):
                    seq.pages += self.allocator.alloc(1)
                    continue
                if len(self.running) == 1:  # alone and still no page: the pool is its limit
                    self.finish(seq, "length")
                    break
                victim = self.running[-1]
                self.preempt(victim)
                if victim is seq:
                    break
            if seq.status is Status.RUNNING:
                chunks.append(Chunk(seq=seq, start=pos, end=pos + 1))
        return Plan(chunks=chunks, decode=True) if chunks else None

    # -- memory -------------------------------------------------------------------------------
    def _reserve(self, n: int) -> bool:
        short = n - self.allocator.num_free
        if short > 0 and self.tree is not None:
            self.tree.evict(short)
        return self.allocator.num_free >= n

    def _admit(self, seq: Sequence) -> bool:
        tokens = seq.tokens
        pages, node = [], None
        if self.tree is not None:
            limit = len(tokens) - 1  # the last token is always computed: it gives the logits
            if seq.reuse_limit is not None and seq.cached_tokens is None:
                limit = min(limit, seq.reuse_limit)
            pages, node = self.tree.match_prefix(tokens[: max(limit, 0)])
            self.tree.lock(node)
        need = self.pages_for(len(tokens)) - len(pages)
        if not self._reserve(need):
            if node is not None and self.tree is not None:
                self.tree.unlock(node)
            return False
        seq.pages = list(pages) + self.allocator.alloc(need)
        seq.tree_pages = len(pages)
        seq.node = node
        seq.num_computed = len(pages) * self.page_size
        if seq.cached_tokens is None:
            seq.cached_tokens = seq.num_computed
        seq.status = Status.RUNNING
        return True

    def cache_progress(self, seq: Sequence) -> None:
        """Hand the sequence's full computed pages to the tree, so that requests arriving while it
        is still running can reuse them; it keeps them locked."""
        if self.tree is None:
            return
        full = seq.num_computed // self.page_size
        if full <= seq.tree_pages:
            return
        n = full * self.page_size
        tokens = seq.tokens[:n]
        self.tree.insert(tokens, seq.pages[:full])
        pages, node = self.tree.match_prefix(tokens)
        assert len(pages) == full, "the tree lost a prefix it just inserted"
        seq.pages[:full] = pages
        self.tree.lock(node)
        self.tree.unlock(seq.node)
        seq.node, seq.tree_pages = node, full

    def _release(self, seq: Sequence, keep: bool) -> None:
        if keep:
            self.cache_progress(seq)
        if seq.node is not None and self.tree is not None:
            self.tree.unlock(seq.node)
        self.allocator.free(seq.pages[seq.tree_pages :])
        seq.pages, seq.tree_pages, seq.node = [], 0, None
        if seq in self.running:
            self.running.remove(seq)

    def finish(self, seq: Sequence, reason: str) -> None:
        self._release(seq, keep=True)
        seq.status, seq.finish_reason = Status.FINISHED, reason
        self.ended.append(seq)

    def preempt(self, seq: Sequence) -> None:
        self._release(seq, keep=True)
        seq.status, seq.num_computed = Status.WAITING, 0
        self.waiting.appendleft(seq)
        self.preemptions += 1

    def abort(self, seq: Sequence) -> None:
        if seq.status is Status.RUNNING:
            self._release(seq, keep=False)
        elif seq in self.waiting:
            self.waiting.remove(seq)
        seq.status, seq.finish_reason = Status.FINISHED, "abort"
        self.ended.append(seq)


def common_prefix_len(a: list[int], b: list[int]) -> int:
    """Slice comparisons (C speed) rather than a Python loop over tokens."""
    return prefix_length(min(len(a), len(b)), lambda k: a[:k] == b[:k])
