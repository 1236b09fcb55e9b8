"""Attention over the paged KV pool: new tokens' K/V are written to their slots, then each query
attends over the gathered slots of its sequence (cached prefix plus the new tokens)."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.nn.attention.bias import causal_lower_right

CPU_QUERY_BLOCK = 256


@dataclass
class PrefillSeq:
    q_start: int             # first row of this sequence in the flattened batch
    q_len: int               # new tokens this step
    kv_slots: torch.Tensor   # slots of positions 0..ctx_len-1 (the new tokens are the last q_len)


@dataclass
class AttnBatch:
    """What one forward pass needs to find K/V: built by the engine, shared by all layers."""
    k_cache: torch.Tensor                 # [layers, slots, kv_heads, head_dim]
    v_cache: torch.Tensor
    slot_mapping: torch.Tensor            # [T] where each new token's K/V goes
    prefill: list[PrefillSeq] | None = None
    decode_slots: torch.Tensor | None = None   # [B, max_ctx] slots, padded
    decode_mask: torch.Tensor | None = None    # [B, 1, 1, max_ctx] True where a slot is real
    sampled: list[int] | None = None       # prefill: indices into `prefill` of the sequences whose last
                                           # row gives logits (the last layer computes only those rows)


def paged_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer: int, batch: AttnBatch) -> torch.Tensor:
    """q: [T, heads, hd]; k, v: [T, kv_heads, hd] for the new tokens. Returns [T, heads, hd]."""
    k_cache, v_cache = batch.k_cache[layer], batch.v_cache[layer]
    k_cache[batch.slot_mapping] = k
    v_cache[batch.slot_mapping] = v
    if batch.decode_slots is not None:
        kk = k_cache[batch.decode_slots].transpose(1, 2)        # [B, kv_heads, ctx, hd]
        vv = v_cache[batch.decode_slots].transpose(1, 2)
        out = F.scaled_dot_product_attention(q.unsqueeze(2), kk, vv, attn_mask=batch.decode_mask, enable_gqa=True)
        return out.squeeze(2)
    out = torch.empty_like(q)
    for s in batch.prefill:
        rows = slice(s.q_start, s.q_start + s.q_len)
        qs = q[rows].transpose(0, 1).unsqueeze(0)                          # [1, heads, q_len, hd]
        ctx = s.kv_slots.numel()
        if ctx == s.q_len:   # nothing cached: the new K/V are the whole context
            kk, vv = k[rows], v[rows]
        else:
            kk, vv = k_cache[s.kv_slots], v_cache[s.kv_slots]
        o = _causal_suffix(qs, kk.transpose(0, 1).unsqueeze(0), vv.transpose(0, 1).unsqueeze(0))
        out[rows] = o.squeeze(0).transpose(0, 1)
    return out


def last_row_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer: int, batch: AttnBatch) -> torch.Tensor:
    """The last layer of a prefill step: K/V of every new token go to the pool, but only the last
    query of each sampled sequence is computed (nothing reads the other rows' outputs). That query
    sees its whole context, so it needs no mask. q: [len(batch.sampled), heads, hd]; k, v: [T, kv_heads, hd]."""
    k_cache, v_cache = batch.k_cache[layer], batch.v_cache[layer]
    k_cache[batch.slot_mapping] = k
    v_cache[batch.slot_mapping] = v
    out = torch.empty_like(q)
    for j, i in enumerate(batch.sampled):
        s = batch.prefill[i]
        if s.kv_slots.numel() == s.q_len:
            rows = slice(s.q_start, s.q_start + s.q_len)
            kk, vv = k[rows], v[rows]
        else:
            kk, vv = k_cache[s.kv_slots], v_cache[s.kv_slots]
        o = F.scaled_dot_product_attention(q[j:j + 1].transpose(0, 1).unsqueeze(0), kk.transpose(0, 1).unsqueeze(0),
                                           vv.transpose(0, 1).unsqueeze(0), enable_gqa=True)
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
    if q.is_cuda:   # the lower-right bias calls the fused kernels directly: give them equal head counts
        groups = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    block = q_len if q.is_cuda else CPU_QUERY_BLOCK
    outs = []
    for a in range(0, q_len, block):
        b = min(a + block, q_len)
        end = ctx - q_len + b
        outs.append(F.scaled_dot_product_attention(q[:, :, a:b], k[:, :, :end], v[:, :, :end],
                                                   attn_mask=causal_lower_right(b - a, end), enable_gqa=True))
    return outs[0] if len(outs) == 1 else torch.cat(outs, dim=2)


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """One whole sequence, no cache: the from-scratch reference."""
    o = F.scaled_dot_product_attention(q.transpose(0, 1).unsqueeze(0), k.transpose(0, 1).unsqueeze(0),
                                       v.transpose(0, 1).unsqueeze(0), is_causal=True, enable_gqa=True)
    return o.squeeze(0).transpose(0, 1)
