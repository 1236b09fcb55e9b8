"""Weights from a local safetensors directory in the Hugging Face Llama/Qwen2 layout (config.json
plus *.safetensors). Never downloads anything."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from prefixguard.engine.config import ModelConfig, from_hf_config

# Checkpoint tensors the model has no parameter for: rotary caches some exports carry.
_IGNORED = ("rotary_emb.inv_freq",)


def load_config(path: str | Path) -> ModelConfig:
    cfg = Path(path) / "config.json"
    if not cfg.is_file():
        raise FileNotFoundError(f"{cfg}: no config.json in the weights directory")
    return from_hf_config(cfg)


def load_weights(model: torch.nn.Module, path: str | Path) -> None:
    files = sorted(Path(path).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{path}: no *.safetensors files")
    params = dict(model.named_parameters())
    seen = set()
    for f in files:
        with safe_open(f, framework="pt", device="cpu") as st:
            for name in st.keys():
                if name.endswith(_IGNORED) or (name == "lm_head.weight" and name not in params):
                    continue  # tied embeddings: lm_head is the embedding matrix
                if name not in params:
                    raise ValueError(f"{f}: unexpected tensor {name}")
                t = st.get_tensor(name)
                p = params[name]
                if t.shape != p.shape:
                    raise ValueError(f"{f}: {name} has shape {tuple(t.shape)}, the model wants {tuple(p.shape)}")
                with torch.no_grad():
                    p.copy_(t.to(p.dtype))
                seen.add(name)
    missing = set(params) - seen
    if missing:
        raise ValueError(f"{path}: missing tensors: {', '.join(sorted(missing)[:5])}")


def save_weights(model: torch.nn.Module, config: ModelConfig, path: str | Path) -> None:
    """Write a checkpoint in the same layout (tests, and handing a random model to another tool)."""
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    hf = {
        "model_type": "qwen2" if config.qkv_bias else "llama",
        "vocab_size": config.vocab_size,
        "hidden_size": config.hidden_size,
        "num_hidden_layers": config.num_layers,
        "num_attention_heads": config.num_heads,
        "num_key_value_heads": config.num_kv_heads,
        "head_dim": config.head_dim,
        "intermediate_size": config.intermediate_size,
        "rope_theta": config.rope_theta,
        "max_position_embeddings": config.max_position,
        "rms_norm_eps": config.rms_eps,
        "tie_word_embeddings": config.tie_embeddings,
    }
    if config.rope_scaling:
        hf["rope_scaling"] = config.rope_scaling
    (out / "config.json").write_text(json.dumps(hf, indent=1))
    save_file({k: v.detach().contiguous().cpu() for k, v in model.named_parameters()}, str(out / "model.safetensors"))
