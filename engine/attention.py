"""Attention over the paged KV pool: the new tokens' K/V are written to their slots, then each query
attends over its sequence's context (cached prefix plus the new tokens).

Two backends, chosen per engine (choose_backend):
- "sdpa": PyTorch's scaled_dot_product_attention over the context's slots, gathered once per layer by
  one index_select. The CPU path, and a CUDA fallback (cuDNN's backend is switched off there: it
  builds a new plan for every new sequence length).
- "triton": decode reads K/V from the pages where they live (engine/paged_kernels.py: one program
  per sequence and KV head, walking the page table), so a decode step has fixed shapes whatever the
  context and can be captured in a CUDA graph. A prefill step of at most PAGED_PREFILL_ROWS new
  tokens (a prompt whose prefix is cached) goes through the same kernel, each new token a row with its
  own length: no gather of the cached context, one call per layer for the whole batch. Longer
  prefills go through SDPA (flash or memory-efficient), compute-bound there.
- "flex": PyTorch's FlexAttention over the whole pool through a paged block mask
  (engine/flex_paged.py): one call per layer for the whole step, decode and prefill alike, reading
  K/V where they live; compiled per shape bucket on CUDA, eager on the CPU. A candidate, measured
  against the others by bench/gpu.sh; `auto` never picks it.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention.bias import causal_lower_right

CPU_QUERY_BLOCK = 256
PAGED_PREFILL_ROWS = 64
BACKENDS = ("sdpa", "triton", "flex")


@dataclass
class PrefillSeq:
    q_start: int  # first row of this sequence in the flattened batch
    q_len: int  # new tokens this step
    kv_slots: torch.Tensor  # slots of positions 0..ctx_len-1 (the new tokens are the last q_len)


@dataclass
class DecodeMeta:
    """A decode step's places, shared by every layer. sdpa: `slots` [B * width] flat slot ids of each
    sequence's context padded to `width`, `mask` [B, 1, 1, width]. triton: `block_table` [B, pages]
    int32 and `seq_lens` [B] int32 (0 for a padding row of a CUDA-graph bucket)."""

    batch: int
    width: int = 0
    slots: torch.Tensor | None = None
    mask: torch.Tensor | None = None
    block_table: torch.Tensor | None = None
    seq_lens: torch.Tensor | None = None


@dataclass
class AttnBatch:
    """What one forward pass needs to find K/V: built by the engine, shared by all layers."""

    kv_layers: list[torch.Tensor]  # per layer [slots, 2 * kv_heads, head_dim]: K heads, then V heads
    slot_mapping: torch.Tensor  # [T] where each new token's K/V goes
    backend: str = "sdpa"
    page_size: int = 16
    prefill: list[PrefillSeq] | None = None
    decode: DecodeMeta | None = None
    sampled: list[int] | None = None  # prefill: indices into `prefill` of the sequences whose last
    # row gives logits (the last layer computes only those rows)
    last_rows: DecodeMeta | None = None  # a triton prefill of few rows: the sampled rows' tables and lengths
    flex: Any = None  # flex: the step's FlexMeta (engine/flex_paged.py), and that of
    flex_last: Any = None  # the sampled rows, for the last layer of a prefill


def store_kv(kv: torch.Tensor, layer: int, batch: AttnBatch) -> torch.Tensor:
    """The new tokens' K|V rows into their slots: one copy per layer. Returns the layer's pool."""
    cache = batch.kv_layers[layer]
    cache.index_copy_(0, batch.slot_mapping, kv)
    return cache


def context_kv(cache: torch.Tensor, kv: torch.Tensor, rows: slice, s: PrefillSeq) -> torch.Tensor:
    """[ctx, 2 * kv_heads, hd]: the new rows themselves when nothing is cached, else one gather."""
    return kv[rows] if s.kv_slots.numel() == s.q_len else cache.index_select(0, s.kv_slots)


def paged_attention(q: torch.Tensor, kv: torch.Tensor, layer: int, batch: AttnBatch) -> torch.Tensor:
    """q: [T, heads, hd]; kv: [T, 2 * kv_heads, hd] for the new tokens. Returns [T, heads, hd]."""
    cache = store_kv(kv, layer, batch)
    nkv = kv.shape[1] // 2
    if batch.flex is not None:
        return _flex_attend()(q, cache, nkv, batch.flex)
    d = batch.decode
    if d is not None:
        if batch.backend == "triton":
            return _paged_decode()(q, cache[:, :nkv], cache[:, nkv:], d.block_table, d.seq_lens, batch.page_size)
        assert d.slots is not None, "an sdpa decode step carries its slots"
        ctx = cache.index_select(0, d.slots).view(d.batch, d.width, 2 * nkv, kv.shape[-1]).transpose(1, 2)
        out = F.scaled_dot_product_attention(
            q.unsqueeze(2), ctx[:, :nkv], ctx[:, nkv:], attn_mask=d.mask, enable_gqa=True
        )
        return out.squeeze(2)
    assert batch.prefill is not None, "a step is a decode or a prefill"
    out = torch.empty_like(q)
    for s in batch.prefill:
        rows = slice(s.q_start, s.q_start + s.q_len)
        qs = q[rows].transpose(0, 1).unsqueeze(0)  # [1, heads, q_len, hd]
        c = context_kv(cache, kv, rows, s).transpose(0, 1).unsqueeze(0)  # [1, 2 * kv_heads, ctx, hd]
        o = _causal_suffix(qs, c[:, :nkv], c[:, nkv:])
        out[rows] = o.squeeze(0).transpose(0, 1)
    return out


def last_row_attention(q: torch.Tensor, kv: torch.Tensor, layer: int, batch: AttnBatch) -> torch.Tensor:
    """The last layer of a prefill step: K/V of every new token go to the pool, but only the last
    query of each sampled sequence is computed (nothing reads the other rows' outputs). That query
    sees its whole context, so it needs no mask. q: [len(batch.sampled), heads, hd]; kv: [T, 2 * kv_heads, hd]."""
    cache = store_kv(kv, layer, batch)
    nkv = kv.shape[1] // 2
    if batch.flex_last is not None:
        return _flex_attend()(q, cache, nkv, batch.flex_last)
    if batch.last_rows is not None:
        d = batch.last_rows
        return _paged_decode()(q, cache[:, :nkv], cache[:, nkv:], d.block_table, d.seq_lens, batch.page_size)
    assert batch.sampled is not None and batch.prefill is not None, "the last layer of a prefill step"
    out = torch.empty_like(q)
    for j, i in enumerate(batch.sampled):
        s = batch.prefill[i]
        c = context_kv(cache, kv, slice(s.q_start, s.q_start + s.q_len), s).transpose(0, 1).unsqueeze(0)
        o = F.scaled_dot_product_attention(
            q[j : j + 1].transpose(0, 1).unsqueeze(0), c[:, :nkv], c[:, nkv:], enable_gqa=True
        )
        out[j] = o[0, :, 0]
    return out


def _causal_suffix(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Queries that are the last q_len of ctx positions, each seeing every key up to its own.
    CUDA kernels take the lower-right causal mask whole. The CPU kernels skip masked blocks only
    for a square causal mask, so there the queries go in blocks, each over the keys it can see:
    the masked work left is a triangle per block, not the whole cached prefix's rectangle."""
    q_len, ctx = q.shape[2], k.shape[2]
    if q_len == ctx:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    if q.is_cuda:  # the lower-right bias calls the fused kernels directly: give them equal head counts
        groups = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    block = q_len if q.is_cuda else CPU_QUERY_BLOCK
    outs = []
    for a in range(0, q_len, block):
        b = min(a + block, q_len)
        end = ctx - q_len + b
        outs.append(
            F.scaled_dot_product_attention(
                q[:, :, a:b], k[:, :, :end], v[:, :, :end], attn_mask=causal_lower_right(b - a, end), enable_gqa=True
            )
        )
    return outs[0] if len(outs) == 1 else torch.cat(outs, dim=2)


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """One whole sequence, no cache: the from-scratch reference."""
    o = F.scaled_dot_product_attention(
        q.transpose(0, 1).unsqueeze(0),
        k.transpose(0, 1).unsqueeze(0),
        v.transpose(0, 1).unsqueeze(0),
        is_causal=True,
        enable_gqa=True,
    )
    return o.squeeze(0).transpose(0, 1)


def pin_cuda_backends() -> None:
    """cuDNN's SDPA builds a plan per new shape (milliseconds of host time per call): never use it."""
    torch.backends.cuda.enable_cudnn_sdp(False)


def choose_backend(name: str, device: torch.device) -> str:
    """ "auto": triton on CUDA when Triton imports, else sdpa (flex only when asked for). A ValueError names
    the choices."""
    if name not in (*BACKENDS, "auto"):
        raise ValueError(f"attention must be one of auto, {', '.join(BACKENDS)}; got {name!r}")
    if name == "auto":
        name = "triton" if device.type == "cuda" and _has_triton() else "sdpa"
    if name == "triton" and device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        raise ValueError("the triton attention backend needs a CUDA device (or TRITON_INTERPRET=1: tests)")
    return name


@functools.cache
def _paged_decode():
    """Imported on first use: Triton loads only where the triton backend runs."""
    from prefixguard.engine.paged_kernels import paged_decode

    return paged_decode


@functools.cache
def _flex_attend():
    """Imported on first use: FlexAttention loads only where the flex backend runs."""
    from prefixguard.engine.flex_paged import flex_attend

    return flex_attend


def _has_triton() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True
