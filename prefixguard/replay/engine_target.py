"""The `engine` target: the in-process engine, a real model prefilling only what its radix tree does not
hold, stepped by one thread so requests in flight together are batched."""

from __future__ import annotations

import threading

from prefixguard.replay.blocks import block_ids
from prefixguard.replay.outcomes import DEFAULT_PAGE_SIZE, outcome, priced
from prefixguard.replay.rendering import rendered
from prefixguard.replay.results import Outcome
from prefixguard.replay.sources import Request


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
            prompt, ids = rendered(req, self.model_name, self.engine.template)
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
