"""One request: its tokens, where its KV lives, and its timings."""

from __future__ import annotations

import itertools
import time
from enum import Enum, auto

_ids = itertools.count()


class Status(Enum):
    WAITING = auto()
    RUNNING = auto()
    FINISHED = auto()


class Sequence:
    def __init__(
        self,
        prompt_ids: list[int],
        *,
        max_tokens: int = 16,
        temperature: float = 0.0,
        stop_token_ids=(),
        reuse_limit: int | None = None,
    ) -> None:
        self.seq_id = next(_ids)
        self.prompt_ids = list(prompt_ids)
        self.output_ids: list[int] = []
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.stop_token_ids = frozenset(stop_token_ids)
        self.reuse_limit = reuse_limit
        self.status = Status.WAITING
        self.finish_reason: str | None = None
        # KV placement: pages[j] holds positions j*page_size ...; the first `tree_pages` of them
        # belong to the radix tree (locked through `node`), the rest to this sequence.
        self.pages: list[int] = []
        self.tree_pages = 0
        self.node = None
        self.num_computed = 0  # tokens whose K/V are in the pool
        self.cached_tokens: int | None = None
        self.generator = None  # torch.Generator for seeded sampling
        self.logits: list = []  # per sampled token, when the engine keeps them (tests)
        self.arrival_time = time.perf_counter()
        self.first_scheduled_time: float | None = None
        self.first_token_time: float | None = None
        self.prefill_seconds = 0.0
        self.finish_time: float | None = None

    @property
    def tokens(self) -> list[int]:
        return self.prompt_ids + self.output_ids

    def token_slice(self, start: int, end: int) -> list[int]:
        """tokens[start:end] without building the whole list (decode asks for one token a step)."""
        p = len(self.prompt_ids)
        if start >= p:
            return self.output_ids[start - p : end - p]
        if end <= p:
            return self.prompt_ids[start:end]
        return self.prompt_ids[start:] + self.output_ids[: end - p]

    def __len__(self) -> int:
        return len(self.prompt_ids) + len(self.output_ids)

    @property
    def finished(self) -> bool:
        return self.status is Status.FINISHED

    @property
    def ttft(self) -> float | None:
        return None if self.first_token_time is None else self.first_token_time - self.arrival_time

    @property
    def decode_tps(self) -> float | None:
        """Output tokens after the first, per second of decoding."""
        if self.finish_time is None or self.first_token_time is None or len(self.output_ids) < 2:
            return None
        span = self.finish_time - self.first_token_time
        return (len(self.output_ids) - 1) / span if span > 0 else None

    def metrics(self) -> dict:
        return {
            "seq_id": self.seq_id,
            "prompt_tokens": len(self.prompt_ids),
            "cached_tokens": self.cached_tokens or 0,
            "output_tokens": len(self.output_ids),
            "ttft_s": self.ttft,
            "prefill_s": self.prefill_seconds,
            "decode_tps": self.decode_tps,
            "finish_reason": self.finish_reason,
        }

    def __repr__(self) -> str:
        return (
            f"Sequence(id={self.seq_id}, prompt={len(self.prompt_ids)}, out={len(self.output_ids)}, "
            f"{self.status.name.lower()}, reason={self.finish_reason})"
        )
