"""Decode steps (and short prefill steps: a few new tokens after a long cached prefix) replayed from
CUDA graphs: the host launches one graph a step instead of every kernel of every layer. Each row is one
token with its own position, slot, page table and length (position + 1), so a prefill row is a decode
row of its sequence.

One graph per batch-size bucket (1, 2, 4, ..., 64, and max_batch), captured the first time a step of
that size runs, over static device buffers: token ids, positions, the slots the new K/V go to, the
page table and the lengths. A step copies its inputs into one pinned host buffer, moves it with one
host-to-device copy, replays the smallest bucket that holds the batch (padding rows have length 0 and
write their K/V to the pool's scratch slot), and hands back the bucket's logits. The attention is
engine/paged_kernels.py's, which reads lengths and pages on the device, so a graph captured at one
context length replays at any other. On the CPU (Triton's interpreter: tests/test_engine_kernels.py)
the same buffers and steps run, each "replay" a plain call of the captured function.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from prefixguard.engine.attention import AttnBatch, DecodeMeta
from prefixguard.engine.kv_pool import KVPool

if TYPE_CHECKING:
    from prefixguard.engine.model import LlamaModel

BUCKETS = (1, 2, 4, 8, 16, 32, 64)


def buckets_for(max_batch: int) -> tuple[int, ...]:
    return tuple(sorted({b for b in BUCKETS if b < max_batch} | {max_batch}))


class DecodeGraphs:
    def __init__(self, model: LlamaModel, pool: KVPool, max_batch: int, max_pages: int) -> None:
        self.model = model
        self.pool = pool
        self.buckets = buckets_for(max_batch)
        self.max_pages = max_pages
        dev = pool.kv.device
        self.cuda = dev.type == "cuda"
        n = self.buckets[-1]
        # one int64 host buffer, one copy: ids | positions | slots | lengths | page table
        self._host = torch.zeros(4 * n + n * max_pages, dtype=torch.int64, pin_memory=self.cuda)
        self._dev = torch.zeros_like(self._host, device=dev)
        self.ids, self.positions, self.slots = self._dev[:n], self._dev[n : 2 * n], self._dev[2 * n : 3 * n]
        self._lens64, self._table64 = self._dev[3 * n : 4 * n], self._dev[4 * n :].view(n, max_pages)
        self.seq_lens = torch.zeros(n, dtype=torch.int32, device=dev)  # the kernel reads int32, converted
        self.table = torch.zeros(n, max_pages, dtype=torch.int32, device=dev)  # inside the graph
        self._graphs: dict[int, tuple[torch.cuda.CUDAGraph | None, torch.Tensor | None]] = {}
        self._mempool = torch.cuda.graph_pool_handle() if self.cuda else None

    def bucket(self, batch: int) -> int | None:
        return next((b for b in self.buckets if b >= batch), None)

    def _forward(self, b: int) -> torch.Tensor:
        self.seq_lens.copy_(self._lens64)
        self.table.copy_(self._table64)
        meta = DecodeMeta(batch=b, block_table=self.table[:b], seq_lens=self.seq_lens[:b])
        batch = AttnBatch(
            kv_layers=self.pool.layers,
            slot_mapping=self.slots[:b],
            backend="triton",
            page_size=self.pool.page_size,
            decode=meta,
        )
        return self.model.compute_logits(self.model(self.ids[:b], self.positions[:b], batch))

    def _capture(self, b: int) -> tuple[torch.cuda.CUDAGraph | None, torch.Tensor | None]:
        # Nothing real is in the buffers yet: every row is padding (length 0, K/V to the scratch slot).
        self._dev.zero_()
        self.slots.fill_(self.pool.scratch_slot)
        if not self.cuda:
            return None, None
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):  # compile the kernels and settle the allocator first
                self._forward(b)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._mempool):
            logits = self._forward(b)
        return graph, logits

    def run(self, ids: list[int], positions: list[int], slots: list[int], tables: list[list[int]]) -> torch.Tensor:
        """One step of len(ids) rows (tables: each row's sequence's pages, as many as its length needs).
        Returns logits [bucket, vocab]; the first len(ids) rows are the step's."""
        b = len(ids)
        bucket = self.bucket(b)
        if bucket is None:
            raise ValueError(f"a step of {b} rows is over the largest graph bucket ({self.buckets[-1]})")
        if bucket not in self._graphs:
            self._graphs[bucket] = self._capture(bucket)
        graph, logits = self._graphs[bucket]
        n, host = self.buckets[-1], self._host
        host[:b] = torch.tensor(ids)
        host[n : n + b] = torch.tensor(positions)
        slot_row = torch.tensor(slots)
        host[2 * n : 2 * n + b] = slot_row
        host[2 * n + b : 3 * n] = self.pool.scratch_slot
        host[3 * n : 3 * n + b] = torch.tensor(positions) + 1
        host[3 * n + b : 4 * n] = 0
        width = max(len(t) for t in tables)
        table = host[4 * n :].view(n, self.max_pages)
        table[:b, :width] = torch.tensor([t + [0] * (width - len(t)) for t in tables])
        used = 4 * n + b * self.max_pages  # the rows of the table past the batch are not read
        self._dev[:used].copy_(host[:used], non_blocking=True)
        if graph is None or logits is None:
            return self._forward(bucket)
        graph.replay()
        return logits
