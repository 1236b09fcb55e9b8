"""A Llama-style decoder (RMSNorm, RoPE, grouped-query attention, SwiGLU). Parameter names follow
the Hugging Face Llama/Qwen2 layout so a local safetensors checkpoint loads as is."""
from __future__ import annotations

import math

import torch
from torch import nn

from prefixguard.engine.attention import AttnBatch, causal_attention, last_row_attention, paged_attention
from prefixguard.engine.config import ModelConfig


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return xf.to(x.dtype) * self.weight


def rope_inv_freq(config: ModelConfig) -> torch.Tensor:
    d = config.head_dim
    inv = 1.0 / (config.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    rs = config.rope_scaling or {}
    if rs.get("rope_type", rs.get("type")) == "llama3":   # Llama 3.1+: stretch low frequencies
        factor, lo, hi = rs["factor"], rs.get("low_freq_factor", 1.0), rs.get("high_freq_factor", 4.0)
        old = rs.get("original_max_position_embeddings", 8192)
        wavelen = 2 * math.pi / inv
        smooth = ((old / wavelen) - lo) / (hi - lo)
        scaled = torch.where(wavelen > old / lo, inv / factor, inv)
        mid = (wavelen <= old / lo) & (wavelen >= old / hi)
        inv = torch.where(mid, (1 - smooth) * inv / factor + smooth * inv, scaled)
    return inv


class Rotary(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        t = torch.arange(config.max_position, dtype=torch.float64)
        freqs = torch.outer(t, rope_inv_freq(config))
        self.register_buffer("cos", freqs.cos().float(), persistent=False)
        self.register_buffer("sin", freqs.sin().float(), persistent=False)

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """x: [T, heads, hd], rotate-half convention (HF Llama)."""
        cos, sin = self.cos[positions].unsqueeze(1), self.sin[positions].unsqueeze(1)
        x1, x2 = x.float().chunk(2, dim=-1)
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, config: ModelConfig, layer: int) -> None:
        super().__init__()
        self.layer = layer
        self.nh, self.nkv, self.hd = config.num_heads, config.num_kv_heads, config.head_dim
        h = config.hidden_size
        self.q_proj = nn.Linear(h, self.nh * self.hd, bias=config.qkv_bias)
        self.k_proj = nn.Linear(h, self.nkv * self.hd, bias=config.qkv_bias)
        self.v_proj = nn.Linear(h, self.nkv * self.hd, bias=config.qkv_bias)
        self.o_proj = nn.Linear(self.nh * self.hd, h, bias=False)

    def forward(self, x: torch.Tensor, positions: torch.Tensor, rotary: Rotary, batch: AttnBatch | None) -> torch.Tensor:
        t = x.shape[0]
        q = rotary(self.q_proj(x).view(t, self.nh, self.hd), positions)
        k = rotary(self.k_proj(x).view(t, self.nkv, self.hd), positions)
        v = self.v_proj(x).view(t, self.nkv, self.hd)
        o = causal_attention(q, k, v) if batch is None else paged_attention(q, k, v, self.layer, batch)
        return self.o_proj(o.reshape(t, self.nh * self.hd))

    def forward_rows(self, x: torch.Tensor, positions: torch.Tensor, rotary: Rotary, batch: AttnBatch,
                     rows: torch.Tensor) -> torch.Tensor:
        """K/V for every token, the output only for `rows` (the last row of each sampled sequence)."""
        t, r = x.shape[0], rows.numel()
        k = rotary(self.k_proj(x).view(t, self.nkv, self.hd), positions)
        v = self.v_proj(x).view(t, self.nkv, self.hd)
        q = rotary(self.q_proj(x[rows]).view(r, self.nh, self.hd), positions[rows])
        return self.o_proj(last_row_attention(q, k, v, self.layer, batch).reshape(r, self.nh * self.hd))


class MLP(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        h, i = config.hidden_size, config.intermediate_size
        self.gate_proj = nn.Linear(h, i, bias=False)
        self.up_proj = nn.Linear(h, i, bias=False)
        self.down_proj = nn.Linear(i, h, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig, layer: int) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_eps)
        self.self_attn = Attention(config, layer)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_eps)
        self.mlp = MLP(config)

    def forward(self, x, positions, rotary, batch):
        x = x + self.self_attn(self.input_layernorm(x), positions, rotary, batch)
        return x + self.mlp(self.post_attention_layernorm(x))

    def forward_rows(self, x, positions, rotary, batch, rows):
        x = x[rows] + self.self_attn.forward_rows(self.input_layernorm(x), positions, rotary, batch, rows)
        return x + self.mlp(self.post_attention_layernorm(x))


class Body(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(config, i) for i in range(config.num_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_eps)


class LlamaModel(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.model = Body(config)
        self.rotary = Rotary(config)
        self.lm_head = None if config.tie_embeddings else nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, batch: AttnBatch | None,
                rows: torch.Tensor | None = None) -> torch.Tensor:
        """Flattened tokens of a batch -> final hidden states [T, hidden]. batch=None: one
        sequence from scratch, no cache. rows (a prefill batch whose `sampled` names them): the
        last layer computes K/V for every token but its output only for these rows, and the result
        is [len(rows), hidden]: the rest of that layer's work would feed no logits."""
        x = self.model.embed_tokens(input_ids)
        layers = self.model.layers
        last = len(layers) - 1 if rows is not None else len(layers)
        for layer in layers[:last]:
            x = layer(x, positions, self.rotary, batch)
        if rows is not None:
            x = layers[last].forward_rows(x, positions, self.rotary, batch, rows)
        return self.model.norm(x)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        w = self.model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        return nn.functional.linear(hidden, w).float()

    @torch.inference_mode()
    def reference_logits(self, ids: list[int], start: int = 0) -> torch.Tensor:
        """Logits of positions start.. of one prompt, computed from scratch without the KV pool."""
        dev = self.model.embed_tokens.weight.device
        t = torch.tensor(ids, device=dev)
        return self.compute_logits(self(t, torch.arange(len(ids), device=dev), None)[start:])

    def init_random(self, seed: int) -> None:
        """Seeded weights: normal(0, 0.02) matrices, unit norms, zero biases."""
        g = torch.Generator(device=self.model.embed_tokens.weight.device).manual_seed(seed)
        for name, p in self.named_parameters():
            if name.endswith("norm.weight"):
                nn.init.ones_(p)
            elif name.endswith("bias"):
                nn.init.zeros_(p)
            else:
                nn.init.normal_(p, std=0.02, generator=g)


def build_model(config: ModelConfig, *, device: str, dtype: torch.dtype, seed: int = 0,
                weights: str | None = None) -> LlamaModel:
    with torch.device("meta"):
        model = LlamaModel(config)
    model = model.to_empty(device=device)
    if weights is None:
        model.init_random(seed)
    elif str(weights).endswith(".gguf"):
        from prefixguard.engine.gguf_model import load_weights
        load_weights(model, weights)
    else:
        from prefixguard.engine.loader import load_weights
        load_weights(model, weights)
    model.to(dtype)
    model.rotary = Rotary(config).to(device)     # computed in float64, kept in float32 whatever the dtype
    return model.eval()
