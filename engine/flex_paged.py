"""The "flex" attention backend: PyTorch's FlexAttention reading K/V from the pool's pages where they
live, one call per layer for the whole step (decode, prefill over a cached prefix, cold prefill).

The pool layer [slots, 2 * kv_heads, hd] is handed to flex_attention whole, as K and V of batch 1
(views, nothing copied); the queries are [B, heads, Q, hd], one row of the batch per sequence, padded
to a shape bucket. Which key a query may see is the block mask's business, built once per step and
shared by every layer, in the documented paged-attention way (a physical-to-logical page map read by
the mask_mod):
- kv_indices list, for each sequence and block of Q_BLOCK queries, the pool's KV blocks (KV_BLOCK
  slots, whole pages) that hold the sequence's context up to the block's last query, each once, so
  the kernel visits only those blocks whatever the pool's size;
- the mask_mod keeps, inside those blocks, the keys whose page belongs to the sequence and whose
  logical position is at most the query's own (causal over cached prefix and new tokens alike).

Shapes are bucketed (batch and query rows to powers of two, the pool's length fixed), and each bucket
keeps its own buffers and mask_mod, refilled in place every step: a compiled flex_attention (on
CUDA) is compiled once per bucket and never again as contexts grow. On the CPU it runs eagerly (no
compiler needed; tests/test_engine_flex.py), which computes the same values densely.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import torch
from torch.nn.attention.flex_attention import BlockMask, flex_attention

Q_BLOCK = 128
KV_BLOCK = 64  # slots; rounded up to whole pages (lcm with the page size)
RECOMPILE_LIMIT = 64  # shape buckets a process may compile before dynamo falls back to eager

# Eager flex_attention is this backend's CPU path by choice, not a missed torch.compile.
warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")


def next_pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


@dataclass
class FlexMeta:
    """One step's places for flex_attention, shared by every layer: rows [T] where each new token's
    query goes in the flattened [batch * q_rows] padding, and the block mask."""

    batch: int
    q_rows: int
    rows: torch.Tensor
    block_mask: Any
    attn: Any  # flex_attention, compiled or eager


@dataclass
class _Bucket:
    inv: torch.Tensor  # [batch, pages]: the logical page of each physical page in the sequence, or -1
    pos0: torch.Tensor  # [batch]: the position of the sequence's first query row
    q_len: torch.Tensor  # [batch]: query rows in use (0 for a padding row)
    mask_mod: Any


class FlexPaged:
    """Builds each step's FlexMeta over one KV pool (flex_attend runs a layer with it)."""

    def __init__(self, num_slots: int, page_size: int, device: torch.device, compile: bool) -> None:
        self.page_size = page_size
        self.num_slots = num_slots
        self.kv_block = math.lcm(page_size, KV_BLOCK)
        self.num_blocks = -(-num_slots // self.kv_block)
        # the mask_mod may be asked about slots past the pool's end, up to the last block's end
        self.inv_width = self.num_blocks * self.kv_block // page_size
        self.scratch_page = num_slots // page_size - 1  # never in a page table: the padding's target
        self.device = device
        self._buckets: dict[tuple[int, int], _Bucket] = {}
        self._attn = _compiled() if compile else flex_attention

    def _bucket(self, batch: int, q_rows: int) -> _Bucket:
        key = (batch, q_rows)
        if key not in self._buckets:
            dev, ps = self.device, self.page_size
            inv = torch.full((batch, self.inv_width), -1, dtype=torch.int32, device=dev)
            pos0 = torch.zeros(batch, dtype=torch.int32, device=dev)
            q_len = torch.zeros(batch, dtype=torch.int32, device=dev)

            def mask_mod(b, h, q_idx, kv_idx):
                logical = inv[b, kv_idx // ps]
                return (logical >= 0) & (logical * ps + kv_idx % ps <= pos0[b] + q_idx) & (q_idx < q_len[b])

            self._buckets[key] = _Bucket(inv=inv, pos0=pos0, q_len=q_len, mask_mod=mask_mod)
        return self._buckets[key]

    def plan(self, rows: list[tuple[list[int], int, int]]) -> FlexMeta:
        """rows: per sequence (its pages, first new position, end): queries at positions start..end-1,
        each seeing positions 0..its own (their K/V already in the pool)."""
        n = len(rows)
        batch = next_pow2(n)
        width = max(e - s for _, s, e in rows)
        q_rows = next_pow2(width)
        ps = self.page_size
        n_pages = max(-(-e // ps) for _, _, e in rows)
        host = [0] * (2 * batch)  # first positions | query rows in use
        table = [self.scratch_page] * (batch * n_pages)
        dst: list[int] = []
        for i, (pages, s, e) in enumerate(rows):
            k = -(-e // ps)
            host[i], host[batch + i] = s, e - s
            table[i * n_pages : i * n_pages + k] = pages[:k]
            dst += range(i * q_rows, i * q_rows + e - s)
        packed = torch.tensor(host + table + dst, dtype=torch.int64, device=self.device)  # one copy
        b = self._bucket(batch, q_rows)
        b.pos0.copy_(packed[:batch])
        b.q_len.copy_(packed[batch : 2 * batch])
        table_t = packed[2 * batch : 2 * batch + batch * n_pages].view(batch, n_pages)
        b.inv.fill_(-1)
        b.inv.scatter_(1, table_t, torch.arange(n_pages, dtype=torch.int32, device=self.device).expand(batch, -1))
        b.inv[:, self.scratch_page] = -1
        num, idx, full_num, full_idx = self._kv_blocks(table_t, b.pos0.long(), b.q_len.long(), q_rows)
        mask = BlockMask.from_kv_blocks(
            num,
            idx,
            full_num,
            full_idx,
            BLOCK_SIZE=(Q_BLOCK, self.kv_block),
            mask_mod=b.mask_mod,
            seq_lengths=(q_rows, self.num_slots),
            compute_q_blocks=False,
        )
        return FlexMeta(
            batch=batch, q_rows=q_rows, rows=packed[2 * batch + batch * n_pages :], block_mask=mask, attn=self._attn
        )

    def _kv_blocks(
        self, pages: torch.Tensor, pos0: torch.Tensor, q_len: torch.Tensor, q_rows: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices ([B, 1, J] and [B, 1, J,
        num_blocks]): for each sequence and block of queries, the KV blocks holding its pages up to the
        block's last query. A block is full (the kernel skips the mask_mod there) when all its pages
        are the sequence's, every query row of the block is in use, and every slot is at or before the
        block's first query; the others are partial, masked element by element."""
        batch, n_pages = pages.shape
        dev, ps, nb = self.device, self.page_size, self.num_blocks
        j = torch.arange(-(-q_rows // Q_BLOCK), device=dev)[None, :, None]  # [1, J, 1]
        pos0, q_len = pos0[:, None, None], q_len[:, None, None]  # [B, 1, 1]
        col = torch.arange(n_pages, device=dev)[None, None, :]  # [1, 1, W]
        end = torch.minimum((j + 1) * Q_BLOCK, q_len)  # rows in use, block end
        seen = (col * ps < pos0 + end) & (j * Q_BLOCK < q_len)  # [B, J, W]
        all_rows = torch.clamp((j + 1) * Q_BLOCK, max=q_rows) <= q_len  # no padding row in the block
        whole = seen & all_rows & ((col + 1) * ps <= pos0 + j * Q_BLOCK + 1)  # before its first query
        blk = (pages * ps // self.kv_block)[:, None, :].expand(-1, j.shape[1], -1)  # [B, J, W]
        shape = (batch, j.shape[1], nb)
        needed = torch.zeros(shape, dtype=torch.int32, device=dev).scatter_add_(2, blk, seen.int()) > 0
        full = torch.zeros(shape, dtype=torch.int32, device=dev).scatter_add_(2, blk, whole.int())
        full = full == self.kv_block // ps
        (num, idx), (full_num, full_idx) = _ordered(needed & ~full), _ordered(full)
        return num, idx, full_num, full_idx


def _ordered(dense: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[B, J, N] booleans -> the count [B, 1, J] and the indices of the true ones first, ascending."""
    order = torch.sort(dense.to(torch.int8), dim=-1, descending=True, stable=True).indices
    return dense.sum(-1, dtype=torch.int32)[:, None], order.to(torch.int32)[:, None]


def flex_attend(q: torch.Tensor, cache: torch.Tensor, nkv: int, meta: FlexMeta) -> torch.Tensor:
    """q: [T, heads, hd], the step's new tokens in plan order; cache: one layer of the pool, the new
    tokens' K/V already stored. Returns [T, heads, hd]."""
    t, heads, hd = q.shape
    whole = meta.q_rows == 1 and t == meta.batch  # decode of a full bucket: rows are 0..t-1 already
    padded = q if whole else q.new_zeros(meta.batch * meta.q_rows, heads, hd).index_copy_(0, meta.rows, q)
    qb = padded.view(meta.batch, meta.q_rows, heads, hd).transpose(1, 2)
    k = cache[:, :nkv].transpose(0, 1).unsqueeze(0)  # [1, kv_heads, slots, hd]: views of the pool
    v = cache[:, nkv:].transpose(0, 1).unsqueeze(0)
    out = meta.attn(qb, k, v, block_mask=meta.block_mask, enable_gqa=True)
    out = out.transpose(1, 2).reshape(-1, heads, hd)
    return out if whole else out.index_select(0, meta.rows)


_COMPILED: Any = None


def _compiled() -> Any:
    """flex_attention compiled once per process (then once per shape bucket, with static shapes)."""
    global _COMPILED
    if _COMPILED is None:
        cfg = torch._dynamo.config  # recompile_limit, once cache_size_limit (older torch)
        name = "recompile_limit" if hasattr(cfg, "recompile_limit") else "cache_size_limit"
        setattr(cfg, name, max(getattr(cfg, name), RECOMPILE_LIMIT))
        _COMPILED = torch.compile(flex_attention, dynamic=False)
    return _COMPILED
