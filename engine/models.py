"""A model by name (a preset, or a GGUF model shipped in a wheel) or by ModelConfig -> its shape.

Above both engine/config.py (the presets, no torch) and engine/gguf_model.py (the file's metadata),
so neither imports the other back."""

from __future__ import annotations

from prefixguard.engine.config import GGUF_MODELS, PRESETS, ModelConfig, check_name


def resolve(model: str | ModelConfig) -> ModelConfig:
    """A ValueError naming the known models when `model` is none of them."""
    if isinstance(model, ModelConfig):
        return model
    check_name(model)
    if model in GGUF_MODELS:
        from prefixguard.engine.gguf_model import gguf_path, read_config

        return read_config(gguf_path(model))
    return PRESETS[model]
