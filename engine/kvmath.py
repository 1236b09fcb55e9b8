"""KV-cache memory and capacity planning. Pure arithmetic, no torch: `prefixguard kv` imports it.

KV bytes = 2 (K and V) x layers x kv_heads x head_dim x tokens x bytes per value, times the number
of concurrent sequences. Fewer KV heads (GQA, MQA) and narrower values (fp8, int8, int4) shrink it;
weights take their share of memory first."""

from __future__ import annotations

import math
import tomllib
from dataclasses import asdict, dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from prefixguard.engine.config import PRESETS, ModelConfig

MODELS_FILE: Any = files("prefixguard.rules").joinpath("kv_models.toml")  # installed as package data

# Bytes per stored value. Quantized KV also keeps scales (a few bytes per block of values); they
# are left out, as the vendors' own sizing tables do.
BYTES = {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}


@dataclass(frozen=True)
class Arch:
    name: str
    layers: int
    hidden_size: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_embeddings: bool = False
    qkv_bias: bool = False
    max_context: int | None = None
    source: str = ""

    @property
    def attention(self) -> str:
        return "MHA" if self.kv_heads == self.heads else "MQA" if self.kv_heads == 1 else "GQA"

    @property
    def params(self) -> int:
        return self.as_config().num_params

    def as_config(self) -> ModelConfig:
        return ModelConfig(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            num_layers=self.layers,
            num_heads=self.heads,
            num_kv_heads=self.kv_heads,
            head_dim=self.head_dim,
            intermediate_size=self.intermediate_size,
            tie_embeddings=self.tie_embeddings,
            qkv_bias=self.qkv_bias,
        )


def from_config(name: str, c: ModelConfig, source: str = "") -> Arch:
    return Arch(
        name=name,
        layers=c.num_layers,
        hidden_size=c.hidden_size,
        heads=c.num_heads,
        kv_heads=c.num_kv_heads,
        head_dim=c.head_dim,
        intermediate_size=c.intermediate_size,
        vocab_size=c.vocab_size,
        tie_embeddings=c.tie_embeddings,
        qkv_bias=c.qkv_bias,
        max_context=c.max_position,
        source=source,
    )


def load_models(path: Path | None = None) -> dict[str, Arch]:
    """The published architectures in rules/kv_models.toml, then the engine's own presets."""
    data = tomllib.loads((path or MODELS_FILE).read_text("utf-8"))
    models = {name: Arch(name=name, **row) for name, row in data.items()}
    for name, cfg in PRESETS.items():
        models[f"engine-{name}"] = from_config(f"engine-{name}", cfg, "engine/config.py")
    return models


def kv_bytes_per_token(arch: Arch, kv_dtype: str = "bf16") -> float:
    return arch.as_config().kv_bytes_per_token(BYTES[kv_dtype])


def kv_bytes(arch: Arch, tokens: int, kv_dtype: str = "bf16", concurrency: int = 1, page_size: int = 1) -> float:
    """KV memory of `concurrency` sequences of `tokens` each; a paged pool rounds each up to whole pages."""
    stored = math.ceil(tokens / page_size) * page_size
    return kv_bytes_per_token(arch, kv_dtype) * stored * concurrency


def weight_bytes(arch: Arch, weight_dtype: str = "bf16") -> float:
    return arch.params * BYTES[weight_dtype]


def max_tokens(arch: Arch, kv_memory: float, kv_dtype: str = "bf16", page_size: int = 1) -> int:
    """Tokens a pool of `kv_memory` bytes holds (whole pages only)."""
    per_page = kv_bytes_per_token(arch, kv_dtype) * page_size
    return int(kv_memory // per_page) * page_size if kv_memory > 0 else 0


def plan(
    arch: Arch,
    *,
    context: int,
    concurrency: int = 1,
    kv_dtype: str = "bf16",
    weight_dtype: str = "bf16",
    memory: float | None = None,
    page_size: int = 1,
) -> dict:
    """Everything `prefixguard kv` reports, as one dict (its JSON output)."""
    per_token = kv_bytes_per_token(arch, kv_dtype)
    total = kv_bytes(arch, context, kv_dtype, concurrency, page_size)
    mha = Arch(**{**asdict(arch), "kv_heads": arch.heads})
    out: dict[str, Any] = {
        "model": arch.name,
        "source": arch.source,
        "attention": arch.attention,
        "layers": arch.layers,
        "heads": arch.heads,
        "kv_heads": arch.kv_heads,
        "head_dim": arch.head_dim,
        "params": arch.params,
        "context": context,
        "concurrency": concurrency,
        "kv_dtype": kv_dtype,
        "weight_dtype": weight_dtype,
        "page_size": page_size,
        "kv_bytes_per_token": per_token,
        "kv_bytes_per_sequence": kv_bytes(arch, context, kv_dtype, 1, page_size),
        "kv_bytes": total,
        "kv_bytes_if_mha": kv_bytes(mha, context, kv_dtype, concurrency, page_size),
        "gqa_saving": 1 - arch.kv_heads / arch.heads,
        "kv_bytes_by_dtype": {d: kv_bytes(arch, context, d, concurrency, page_size) for d in BYTES},
        "weight_bytes": weight_bytes(arch, weight_dtype),
    }
    if arch.max_context is not None and context > arch.max_context:
        out["warning"] = f"context {context} exceeds the model's {arch.max_context}"
    if memory is not None:
        free = memory - out["weight_bytes"]
        fit_tokens = max_tokens(arch, free, kv_dtype, page_size)
        per_seq = out["kv_bytes_per_sequence"]
        out |= {
            "memory": memory,
            "kv_memory": max(free, 0.0),
            "fits": free >= total,
            "max_concurrency": int(max(free, 0) // per_seq) if per_seq else 0,
            "max_context": fit_tokens // concurrency // page_size * page_size,
            "max_tokens_in_pool": fit_tokens,
        }
        if arch.max_context is not None:
            out["max_context"] = min(out["max_context"], arch.max_context)
    return out
