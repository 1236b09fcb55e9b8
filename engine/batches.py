"""Attention metadata for one step's plan: each new token's KV slot, the page tables and lengths, and
the mask or kernel plan of the attention backend (sdpa, triton, flex)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from prefixguard.engine.attention import PAGED_PREFILL_ROWS, AttnBatch, DecodeMeta, PrefillSeq
from prefixguard.engine.kv_pool import KVPool
from prefixguard.engine.scheduler import Plan

if TYPE_CHECKING:  # built only for the flex backend, whose module imports flex attention
    from prefixguard.engine.flex_paged import FlexPaged


class Batches:
    """Builds a step's AttnBatch from its plan, for the engine's pool, page size, device and backend."""

    def __init__(
        self,
        pool: KVPool,
        page_size: int,
        device: torch.device,
        dtype: torch.dtype,
        attention: str,
        flex: FlexPaged | None = None,
    ) -> None:
        self.pool, self.page_size, self.device, self.dtype = pool, page_size, device, dtype
        self.attention, self.flex = attention, flex
        self._arange = torch.arange(page_size, device=device)

    def row_places(self, plan: Plan) -> tuple[list[int], list[list[int]]]:
        """Each new token's slot, and the pages of its sequence up to the chunk's end."""
        ps = self.page_size
        slots, tables = [], []
        for c in plan.chunks:
            pages = c.seq.pages[: -(-c.end // ps)]
            slots += [pages[p // ps] * ps + p % ps for p in range(c.start, c.end)]
            tables += [pages] * (c.end - c.start)
        return slots, tables

    def _attn_batch(self, slot_mapping: torch.Tensor, **kw) -> AttnBatch:
        return AttnBatch(
            kv_layers=self.pool.layers,
            slot_mapping=slot_mapping,
            backend=self.attention,
            page_size=self.page_size,
            **kw,
        )

    def prefill_batch(self, plan: Plan) -> AttnBatch:
        prefill, new_slots, row = [], [], 0
        for c in plan.chunks:
            slots = self._slots(c.seq.pages, c.end)
            prefill.append(PrefillSeq(q_start=row, q_len=c.end - c.start, kv_slots=slots))
            new_slots.append(slots[c.start :])
            row += c.end - c.start
        batch = self._attn_batch(new_slots[0] if len(new_slots) == 1 else torch.cat(new_slots), prefill=prefill)
        if self.flex is not None:
            batch.flex = self.flex.plan([(c.seq.pages, c.start, c.end) for c in plan.chunks])
            last = [(c.seq.pages, c.end - 1, c.end) for c in plan.chunks if c.samples]
            batch.flex_last = self.flex.plan(last) if last else None
        if self.attention == "triton" and row <= PAGED_PREFILL_ROWS:
            batch.decode, batch.last_rows = self._rows_meta(plan)
        return batch

    def _rows_meta(self, plan: Plan) -> tuple[DecodeMeta, DecodeMeta | None]:
        """A short prefill for the paged kernel: every new token a row, with its sequence's page table
        and its own length (its position + 1); and the same for the rows that sample."""
        ps, dev = self.page_size, self.device
        width = max(-(-c.end // ps) for c in plan.chunks)
        tables: list[list[int]] = []
        lens: list[int] = []
        last: list[int] = []
        for c in plan.chunks:
            table = c.seq.pages[: -(-c.end // ps)]
            table = table + [0] * (width - len(table))
            tables += [table] * (c.end - c.start)
            lens += range(c.start + 1, c.end + 1)
            if c.samples:
                last.append(len(lens) - 1)

        def meta(rows: list[int]) -> DecodeMeta:
            return DecodeMeta(
                batch=len(rows),
                block_table=torch.tensor([tables[r] for r in rows], dtype=torch.int32, device=dev),
                seq_lens=torch.tensor([lens[r] for r in rows], dtype=torch.int32, device=dev),
            )

        return meta(list(range(len(lens)))), (meta(last) if last else None)

    def _new_slots(self, plan: Plan) -> list[int]:
        ps = self.page_size
        return [c.seq.pages[c.start // ps] * ps + c.start % ps for c in plan.chunks]

    def decode_batch(self, plan: Plan) -> AttnBatch:
        """One page table for the whole batch, built on the host and moved once. sdpa: the slots of
        every context padded to the longest and a mask past each length; triton: the page table and
        the lengths, read by the kernel."""
        ps, dev = self.page_size, self.device
        lens = [c.end for c in plan.chunks]
        n_pages = [-(-n // ps) for n in lens]
        width = max(n_pages)
        table = [c.seq.pages[:k] + [0] * (width - k) for c, k in zip(plan.chunks, n_pages, strict=True)]
        slot_mapping = torch.tensor(self._new_slots(plan), device=dev)
        b = len(lens)
        if self.flex is not None:
            return self._attn_batch(
                slot_mapping, flex=self.flex.plan([(c.seq.pages, c.start, c.end) for c in plan.chunks])
            )
        if self.attention == "triton":
            meta = DecodeMeta(
                batch=b,
                block_table=torch.tensor(table, dtype=torch.int32, device=dev),
                seq_lens=torch.tensor(lens, dtype=torch.int32, device=dev),
            )
            return self._attn_batch(slot_mapping, decode=meta)
        slots = (torch.tensor(table, device=dev)[:, :, None] * ps + self._arange).view(-1)
        lens_t = torch.tensor(lens, device=dev)
        mask = torch.zeros(b, 1, 1, width * ps, device=dev, dtype=self.dtype)
        mask.masked_fill_(torch.arange(width * ps, device=dev) >= lens_t[:, None, None, None], float("-inf"))
        return self._attn_batch(slot_mapping, decode=DecodeMeta(batch=b, width=width * ps, slots=slots, mask=mask))

    def _slots(self, pages: list[int], n: int) -> torch.Tensor:
        ps = self.page_size
        p = torch.tensor(pages[: -(-n // ps)], dtype=torch.long, device=self.device)
        return (p[:, None] * ps + self._arange).flatten()[:n]
