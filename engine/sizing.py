"""What an engine's parts are made of: the dtype names it accepts, the KV pool's page count, and the
prompt template its weights bring."""

from __future__ import annotations

import torch

from prefixguard.engine.chat_template import CL100K, Template
from prefixguard.engine.config import ModelConfig
from prefixguard.engine.kv_pool import KVPool

DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
}
DEFAULT_KV_TOKENS = 16384


def kv_page_count(
    config: ModelConfig, page_size: int, dtype: torch.dtype, kv_pages: int | None, kv_memory_bytes: int | None
) -> int:
    if kv_pages is not None:
        return kv_pages
    if kv_memory_bytes is not None:
        return kv_memory_bytes // KVPool.page_bytes(config, page_size, dtype)
    return -(-DEFAULT_KV_TOKENS // page_size)


def template_for(weights: str | None) -> Template:
    if weights is not None and weights.endswith(".gguf"):
        from prefixguard.engine.gguf_model import template

        return template(weights)
    return CL100K
