"""The engine: requests in, tokens out. add_request/abort may be called from any thread (they go
through an inbox); one thread calls step() in a loop."""

from __future__ import annotations

import threading
import time

import torch

from prefixguard.engine.attention import PAGED_PREFILL_ROWS, choose_backend, pin_cuda_backends
from prefixguard.engine.batches import Batches
from prefixguard.engine.config import GGUF_MODELS, ModelConfig
from prefixguard.engine.devices import pick
from prefixguard.engine.kv_pool import KVPool
from prefixguard.engine.model import build_model
from prefixguard.engine.models import resolve
from prefixguard.engine.sampler import sample
from prefixguard.engine.scheduler import Plan, RequestTooLarge, Scheduler
from prefixguard.engine.sequence import Sequence
from prefixguard.engine.sizing import DTYPES, kv_page_count, template_for


class LLMEngine:
    """model: a preset name, a GGUF model's name (GGUF_MODELS) or a ModelConfig; with `weights` (a
    local safetensors directory or a .gguf file) the shape comes from its config.json or metadata
    unless a ModelConfig is given. The KV pool holds `kv_pages`
    pages, or as many as fit in `kv_memory_bytes`, or 16,384 tokens' worth. prefill_chunk: prompt
    tokens per step at most; max_batch: sequences running at once; schedule: "fcfs" or "lpm"
    (longest cached prefix first); keep_logits: keep each sampled row's logits (tests).
    attention: "auto" (triton on CUDA when it imports, else sdpa), "sdpa", "triton" or "flex"
    (engine/attention.py); cuda_graphs: replay decode steps from CUDA graphs (engine/cuda_graphs.py;
    None: on wherever the triton backend runs on CUDA). device "auto": cuda when there is one, else cpu;
    dtype "auto": bfloat16 on cuda, else float32 (engine/devices.py)."""

    def __init__(
        self,
        model: str | ModelConfig = "tiny",
        *,
        device: str = "cpu",
        dtype: str = "float32",
        page_size: int = 16,
        kv_pages: int | None = None,
        kv_memory_bytes: int | None = None,
        prefill_chunk: int = 2048,
        max_batch: int = 64,
        schedule: str = "fcfs",
        prefix_reuse: bool = True,
        seed: int = 0,
        weights: str | None = None,
        keep_logits: bool = False,
        attention: str = "auto",
        cuda_graphs: bool | None = None,
    ) -> None:
        device, dtype = pick(device, dtype)
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        if isinstance(model, str) and model in GGUF_MODELS and weights is None:
            from prefixguard.engine.gguf_model import gguf_path

            weights = str(gguf_path(model))
        if weights is not None and not isinstance(model, ModelConfig):
            if weights.endswith(".gguf"):
                from prefixguard.engine.gguf_model import read_config

                self.config = read_config(weights)
            else:
                from prefixguard.engine.loader import load_config

                self.config = load_config(weights)
        else:
            self.config = resolve(model)
        # the prompt format: a GGUF file's own tokenizer and chat template, else cl100k's
        self.template = template_for(weights)
        self.device = torch.device(device)
        self.dtype = DTYPES[dtype]
        self.model = build_model(self.config, device=device, dtype=self.dtype, seed=seed, weights=weights)
        pages = kv_page_count(self.config, page_size, self.dtype, kv_pages, kv_memory_bytes)
        self.pool = KVPool(self.config, pages, page_size, self.dtype, device)
        self.page_size = page_size
        self.scheduler = Scheduler(
            self.pool.allocator,
            page_size,
            prefix_reuse=prefix_reuse,
            prefill_chunk=prefill_chunk,
            max_batch=max_batch,
            policy=schedule,
        )
        self.keep_logits = keep_logits
        self.attention = choose_backend(attention, self.device)
        if self.device.type == "cuda":
            pin_cuda_backends()
        if cuda_graphs is None:
            cuda_graphs = self.device.type == "cuda" and self.attention == "triton"
        if cuda_graphs and self.attention != "triton":  # on the CPU only under Triton's interpreter (tests)
            raise ValueError("cuda_graphs needs the triton attention backend (a CUDA device)")
        self.flex = None
        if self.attention == "flex":  # compiled on CUDA; eager on the CPU, where no compiler is needed
            from prefixguard.engine.flex_paged import FlexPaged

            self.flex = FlexPaged(self.pool.kv.shape[1], page_size, self.device, compile=self.device.type == "cuda")
        self.graphs = None
        if cuda_graphs:
            from prefixguard.engine.cuda_graphs import DecodeGraphs

            max_pages = min(pages, -(-self.config.max_position // page_size))
            self.graphs = DecodeGraphs(self.model, self.pool, max_batch, max_pages)
        self.batches = Batches(self.pool, page_size, self.device, self.dtype, self.attention, self.flex)
        self._inbox: list[Sequence | int] = []  # a sequence to add, or the id of one to abort
        self._lock = threading.Lock()
        self._seqs: dict[int, Sequence] = {}
        self._totals = {
            "requests": 0,
            "finished": 0,
            "prompt_tokens": 0,
            "cached_tokens": 0,
            "prefill_tokens": 0,
            "decode_tokens": 0,
        }

    # -- requests (any thread) ------------------------------------------------------------------
    def add_request(
        self,
        prompt_ids: list[int],
        *,
        max_tokens: int = 16,
        temperature: float = 0.0,
        stop_token_ids=(),
        reuse_limit: int | None = None,
        seed: int | None = None,
    ) -> Sequence:
        if not prompt_ids:
            raise ValueError("empty prompt")
        if max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        if len(prompt_ids) + max_tokens > self.config.max_position:
            raise RequestTooLarge(
                f"prompt of {len(prompt_ids)} tokens plus {max_tokens} new tokens exceeds the "
                f"model's context of {self.config.max_position}"
            )
        if self.scheduler.pages_for(len(prompt_ids)) > self.pool.num_pages:
            raise RequestTooLarge(
                f"prompt of {len(prompt_ids)} tokens exceeds the KV pool of "
                f"{self.pool.num_pages * self.page_size} tokens"
            )
        bad = [t for t in prompt_ids if not 0 <= t < self.config.vocab_size]
        if bad:
            raise ValueError(f"token id {bad[0]} is outside the vocabulary of {self.config.vocab_size}")
        seq = Sequence(
            prompt_ids,
            max_tokens=max_tokens,
            temperature=temperature,
            stop_token_ids=stop_token_ids,
            reuse_limit=reuse_limit,
        )
        if temperature > 0:
            seq.generator = torch.Generator(device=self.device)
            seq.generator.manual_seed(seed if seed is not None else seq.seq_id)
        with self._lock:
            self._inbox.append(seq)
        return seq

    def abort(self, seq_id: int) -> None:
        with self._lock:
            self._inbox.append(seq_id)

    def has_unfinished(self) -> bool:
        return bool(self._inbox) or self.scheduler.has_work()

    # -- the loop (one thread) ------------------------------------------------------------------
    def step(self) -> list[Sequence]:
        """One scheduling step. Returns the sequences that got a token or finished."""
        self._drain_inbox()
        plan = self.scheduler.schedule()
        touched = []
        if plan is not None:
            touched = self._run(plan)
        ended, self.scheduler.ended = self.scheduler.ended, []
        for seq in ended:
            self._retire(seq)
        return touched + [s for s in ended if s not in touched]

    def generate(self, prompts: list[list[int]], **kw) -> list[Sequence]:
        seqs = [self.add_request(p, **kw) for p in prompts]
        while self.has_unfinished():
            self.step()
        return seqs

    def cached_prefix_len(self, prompt_ids: list[int]) -> int:
        tree = self.scheduler.tree
        return 0 if tree is None else tree.peek(prompt_ids[: len(prompt_ids) - 1])

    def _drain_inbox(self) -> None:
        with self._lock:
            inbox, self._inbox = self._inbox, []
        for item in inbox:
            if not isinstance(item, int):
                self._seqs[item.seq_id] = item
                self._totals["requests"] += 1
                self.scheduler.add(item)
            elif (seq := self._seqs.get(item)) is not None and not seq.finished:
                self.scheduler.abort(seq)

    def _retire(self, seq: Sequence) -> None:
        seq.finish_time = time.perf_counter()
        self._seqs.pop(seq.seq_id, None)
        self._totals["finished"] += 1

    @torch.inference_mode()
    def _run(self, plan: Plan) -> list[Sequence]:
        t0 = time.perf_counter()
        ids, positions = self._tokens(plan, t0)
        dev = self.device
        rows, sampling, end = [], [], 0
        for c in plan.chunks:
            end += c.end - c.start
            c.seq.num_computed = c.end
            if c.samples:  # only the last row of a finished prompt needs logits
                rows.append(end - 1)
                sampling.append(c.seq)
        logits = None
        graphs = self.graphs if self._graphed(plan, len(ids)) else None
        if graphs is not None:  # every row a token with its own length: one graph replay
            all_rows = graphs.run(ids, positions, *self.batches.row_places(plan))
            logits = all_rows[: len(ids)] if plan.decode else all_rows[rows] if rows else None
        elif plan.decode:  # every row samples
            batch = self.batches.decode_batch(plan)
            hidden = self.model(torch.tensor(ids, device=dev), torch.tensor(positions, device=dev), batch)
            logits = self.model.compute_logits(hidden)
        else:  # the last layer computes the sampled rows only
            batch = self.batches.prefill_batch(plan)
            batch.sampled = [i for i, c in enumerate(plan.chunks) if c.samples]
            rows_t = torch.tensor(rows, dtype=torch.long, device=dev)
            hidden = self.model(torch.tensor(ids, device=dev), torch.tensor(positions, device=dev), batch, rows_t)
            if sampling:
                logits = self.model.compute_logits(hidden)
        tokens = []
        if sampling:  # the step's one device-to-host copy: the sampled ids
            tokens = sample(logits, [s.temperature for s in sampling], [s.generator for s in sampling])
        elif dev.type == "cuda":
            torch.cuda.synchronize(dev)  # so that prefill_seconds is the GPU's time, not the launch's
        now = time.perf_counter()
        self._totals["decode_tokens" if plan.decode else "prefill_tokens"] += len(ids)
        if not plan.decode:
            for c in plan.chunks:
                c.seq.prefill_seconds += now - t0
                self.scheduler.cache_progress(c.seq)
        for i, (seq, tok) in enumerate(zip(sampling, tokens, strict=True)):
            if self.keep_logits:
                assert logits is not None, "a step that samples has logits"
                seq.logits.append(logits[i].cpu())
            self._append(seq, tok, now)
        return sampling

    def _graphed(self, plan: Plan, rows: int) -> bool:
        """Decode steps, and prefill steps short enough for the paged kernel (a long cached prefix),
        replay a CUDA graph when one of the buckets holds their rows."""
        return (
            self.graphs is not None
            and (plan.decode or rows <= PAGED_PREFILL_ROWS)
            and self.graphs.bucket(rows) is not None
        )

    def _tokens(self, plan: Plan, now: float) -> tuple[list[int], list[int]]:
        """Flatten the plan's chunks into token ids and positions."""
        ids: list[int] = []
        positions: list[int] = []
        for c in plan.chunks:
            seq = c.seq
            if seq.first_scheduled_time is None:
                seq.first_scheduled_time = now
                self._totals["prompt_tokens"] += len(seq.prompt_ids)
                self._totals["cached_tokens"] += seq.cached_tokens or 0
            ids += seq.token_slice(c.start, c.end)
            positions += range(c.start, c.end)
        return ids, positions

    def _append(self, seq: Sequence, token: int, now: float) -> None:
        seq.output_ids.append(token)
        if seq.first_token_time is None:
            seq.first_token_time = now
        if token in seq.stop_token_ids:
            self.scheduler.finish(seq, "stop")
        elif len(seq.output_ids) >= seq.max_tokens or len(seq) >= self.config.max_position:
            self.scheduler.finish(seq, "length")

    # -- numbers --------------------------------------------------------------------------------
    @property
    def stats(self) -> dict:
        t = self._totals
        tree = self.scheduler.tree
        alloc = self.pool.allocator
        return {
            **t,
            "hit_rate": t["cached_tokens"] / t["prompt_tokens"] if t["prompt_tokens"] else 0.0,
            "pool_pages_used": alloc.num_used,
            "pool_pages_total": alloc.num_pages,
            "page_size": self.page_size,
            "pool_bytes": self.pool.nbytes,
            "tree_pages": tree.total_pages if tree else 0,
            "evicted_pages": tree.evicted_pages if tree else 0,
            "preemptions": self.scheduler.preemptions,
            "waiting": len(self.scheduler.waiting) + len(self._inbox),
            "running": len(self.scheduler.running),
        }
