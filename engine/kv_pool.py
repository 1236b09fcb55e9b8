"""Paged KV memory: one preallocated tensor per layer for K and V, split into pages of `page_size`
token slots, and an allocator that hands each page to one owner at a time."""

from __future__ import annotations

import torch

from prefixguard.engine.config import ModelConfig


class OutOfPages(RuntimeError):
    pass


class PageAllocator:
    """Free list of page ids. Never hands out a page twice; freeing a page that is not allocated
    raises, so a double free is caught where it happens."""

    def __init__(self, num_pages: int) -> None:
        if num_pages < 1:
            raise ValueError("the KV pool needs at least one page")
        self.num_pages = num_pages
        self._free = list(range(num_pages - 1, -1, -1))  # pop() hands out low ids first
        self._used = bytearray(num_pages)

    @property
    def num_free(self) -> int:
        return len(self._free)

    @property
    def num_used(self) -> int:
        return self.num_pages - len(self._free)

    def alloc(self, n: int) -> list[int]:
        if n > len(self._free):
            raise OutOfPages(f"asked for {n} pages, {len(self._free)} free")
        pages = [self._free.pop() for _ in range(n)]
        for p in pages:
            self._used[p] = 1
        return pages

    def free(self, pages) -> None:
        for p in pages:
            if not self._used[p]:
                raise RuntimeError(f"page {p} freed twice or never allocated")
            self._used[p] = 0
            self._free.append(p)

    def is_used(self, page: int) -> bool:
        return bool(self._used[page])


class KVPool:
    """K and V for every layer in one tensor: kv[layer, slot] holds the K heads, then the V heads, so a
    layer stores a step's new tokens with one copy. `k` and `v` are views: [num_layers, slots,
    num_kv_heads, head_dim]. A token at position i of a sequence lives in slot
    pages[i // page_size] * page_size + i % page_size. One page more than the allocator hands out is the
    scratch page: the padding rows of a CUDA-graph batch write their K/V there (`scratch_slot`)."""

    def __init__(
        self,
        config: ModelConfig,
        num_pages: int,
        page_size: int,
        dtype: torch.dtype,
        device: str | torch.device = "cpu",
    ) -> None:
        if not 1 <= page_size <= 64:
            raise ValueError(f"page_size must be 1..64, got {page_size}")
        self.page_size = page_size
        self.allocator = PageAllocator(num_pages)
        nkv = config.num_kv_heads
        self.kv = torch.zeros(
            (config.num_layers, (num_pages + 1) * page_size, 2 * nkv, config.head_dim), dtype=dtype, device=device
        )
        self.k, self.v = self.kv[:, :, :nkv], self.kv[:, :, nkv:]
        self.layers = list(self.kv.unbind(0))
        self.scratch_slot = num_pages * page_size

    @staticmethod
    def page_bytes(config: ModelConfig, page_size: int, dtype: torch.dtype) -> int:
        return int(config.kv_bytes_per_token(torch.finfo(dtype).bits // 8) * page_size)

    @property
    def num_pages(self) -> int:
        return self.allocator.num_pages

    @property
    def nbytes(self) -> int:
        """The pages the allocator hands out (the scratch page is not counted)."""
        return self.num_pages * self.bytes_per_page

    @property
    def bytes_per_page(self) -> int:
        per_slot = self.kv.shape[0] * self.kv.shape[2] * self.kv.shape[3] * self.kv.element_size()
        return per_slot * self.page_size
