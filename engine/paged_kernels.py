"""Triton kernels that read K/V from the pages where they live.

paged_decode: one query token per sequence. One program per (sequence, KV head) walks that sequence's
page table in blocks of BLOCK_N positions, keeps a running max and sum (online softmax), and writes
the outputs of the query heads that share the KV head. Nothing is gathered or copied, the launch has
the same shape whatever the contexts are (lengths and pages are read on the device), so a decode step
can be captured in a CUDA graph once per batch size and replayed at any length.

Under TRITON_INTERPRET=1 the same kernel runs on the CPU (tests/test_engine_kernels.py).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK_N = 64


@triton.jit
def _paged_decode_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    out_ptr,
    table_ptr,
    lens_ptr,
    scale,
    stride_qb,
    stride_qh,
    stride_ks,
    stride_kh,
    stride_vs,
    stride_vh,
    stride_ob,
    stride_oh,
    stride_tb,
    GROUP: tl.constexpr,
    BLOCK_G: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    PAGE_SIZE: tl.constexpr,
    BLOCK_N: tl.constexpr,
    PRECISION: tl.constexpr,
):
    b = tl.program_id(0)
    kv_head = tl.program_id(1)
    seq_len = tl.load(lens_ptr + b)
    g = tl.arange(0, BLOCK_G)
    d = tl.arange(0, HEAD_DIM)
    n = tl.arange(0, BLOCK_N)
    g_ok = g < GROUP
    q_heads = kv_head * GROUP + g
    q = tl.load(q_ptr + b * stride_qb + q_heads[:, None] * stride_qh + d[None, :], mask=g_ok[:, None], other=0.0)
    m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, HEAD_DIM], tl.float32)
    for start in range(0, seq_len, BLOCK_N):
        pos = start + n
        ok = pos < seq_len
        page = tl.load(table_ptr + b * stride_tb + pos // PAGE_SIZE, mask=ok, other=0)
        slot = page.to(tl.int64) * PAGE_SIZE + pos % PAGE_SIZE
        k = tl.load(k_ptr + slot[:, None] * stride_ks + kv_head * stride_kh + d[None, :], mask=ok[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION).to(tl.float32) * scale  # [BLOCK_G, BLOCK_N]
        s = tl.where(ok[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + slot[:, None] * stride_vs + kv_head * stride_vh + d[None, :], mask=ok[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION).to(tl.float32)
        m_i = m_new
    out = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]  # a padding row (length 0) writes zeros
    tl.store(
        out_ptr + b * stride_ob + q_heads[:, None] * stride_oh + d[None, :],
        out.to(out_ptr.dtype.element_ty),
        mask=g_ok[:, None],
    )


def paged_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    page_size: int,
) -> torch.Tensor:
    """q: [B, heads, hd] (one token per sequence); k_cache, v_cache: [slots, kv_heads, hd] (one layer of
    the pool); fp32 products are exact fp32 (never TF32); block_table: [B, max_pages] int32 page ids;
    seq_lens: [B] int32 positions to attend over (the new token's included, its K/V already stored).
    Returns [B, heads, hd]."""
    b, heads, hd = q.shape
    kv_heads = k_cache.shape[1]
    group = heads // kv_heads
    out = torch.empty_like(q)
    _paged_decode_kernel[(b, kv_heads)](
        q,
        k_cache,
        v_cache,
        out,
        block_table,
        seq_lens,
        hd**-0.5,
        q.stride(0),
        q.stride(1),
        k_cache.stride(0),
        k_cache.stride(1),
        v_cache.stride(0),
        v_cache.stride(1),
        out.stride(0),
        out.stride(1),
        block_table.stride(0),
        GROUP=group,
        BLOCK_G=max(16, triton.next_power_of_2(group)),
        HEAD_DIM=hd,
        PAGE_SIZE=page_size,
        BLOCK_N=BLOCK_N,
        PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
    )
    return out
