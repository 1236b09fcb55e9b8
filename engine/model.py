"""A Llama-style decoder (RMSNorm, RoPE, grouped-query attention, SwiGLU). Parameter names follow
the Hugging Face Llama/Qwen2 layout so a local safetensors checkpoint loads as is."""

from __future__ import annotations

import math
from typing import cast

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
        xf = x if x.dtype == torch.float32 else x.float()
        xf = xf * torch.rsqrt(xf.square().mean(-1, keepdim=True).add_(self.eps))
        return (xf if x.dtype == torch.float32 else xf.to(x.dtype)) * self.weight


def rope_inv_freq(config: ModelConfig) -> torch.Tensor:
    d = config.head_dim
    inv = 1.0 / (config.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    rs = config.rope_scaling or {}
    if rs.get("rope_type", rs.get("type")) == "llama3":  # Llama 3.1+: stretch low frequencies
        factor, lo, hi = rs["factor"], rs.get("low_freq_factor", 1.0), rs.get("high_freq_factor", 4.0)
        old = rs.get("original_max_position_embeddings", 8192)
        wavelen = 2 * math.pi / inv
        smooth = ((old / wavelen) - lo) / (hi - lo)
        scaled = torch.where(wavelen > old / lo, inv / factor, inv)
        mid = (wavelen <= old / lo) & (wavelen >= old / hi)
        inv = torch.where(mid, (1 - smooth) * inv / factor + smooth * inv, scaled)
    return inv


class Rotary(nn.Module):
    """Rotate-half RoPE (HF Llama) as x * cos + swap_halves(x) * sin, with sin's first half negated:
    one flip, one multiply, one multiply-add and one copy back per layer, over q and k together (the
    first heads of the fused q|k|v rows), in float32 whatever the model's dtype."""

    cos: torch.Tensor  # buffers, registered below
    sin: torch.Tensor

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        t = torch.arange(config.max_position, dtype=torch.float64)
        freqs = torch.outer(t, rope_inv_freq(config))
        cos, sin = freqs.cos().float(), freqs.sin().float()
        self.register_buffer("cos", torch.cat((cos, cos), -1), persistent=False)
        self.register_buffer("sin", torch.cat((-sin, sin), -1), persistent=False)

    def tables(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Once per forward pass: [T, 1, hd] cos and sin for these positions."""
        return self.cos.index_select(0, positions)[:, None], self.sin.index_select(0, positions)[:, None]

    @staticmethod
    def apply_(x: torch.Tensor, heads: int, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """Rotate the first `heads` heads of x [T, all heads, hd] in place; returns x."""
        t, _, hd = x.shape
        part = x[:, :heads]
        swapped = part.view(t, heads, 2, hd // 2).flip(2).view(t, heads, hd)
        part.copy_(torch.addcmul(part * cos, swapped, sin))
        return x


def matmul(x: torch.Tensor, weight_t: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return x.mm(weight_t) if bias is None else torch.addmm(bias, x, weight_t)


class Attention(nn.Module):
    """q/k/v keep their checkpoint names as views of one fused [q|k|v] weight (fuse()): one matmul
    per layer instead of three."""

    def __init__(self, config: ModelConfig, layer: int) -> None:
        super().__init__()
        self.layer = layer
        self.nh, self.nkv, self.hd = config.num_heads, config.num_kv_heads, config.head_dim
        h = config.hidden_size
        self.q_proj = nn.Linear(h, self.nh * self.hd, bias=config.qkv_bias)
        self.k_proj = nn.Linear(h, self.nkv * self.hd, bias=config.qkv_bias)
        self.v_proj = nn.Linear(h, self.nkv * self.hd, bias=config.qkv_bias)
        self.o_proj = nn.Linear(self.nh * self.hd, h, bias=False)
        # the fused weights, made by fuse() once the checkpoint is loaded
        self.qkv_t = self.o_t = torch.empty(0)
        self.qkv_bias: torch.Tensor | None = None

    def fuse(self) -> None:
        projs = (self.q_proj, self.k_proj, self.v_proj)
        weight = torch.cat([p.weight.detach() for p in projs])
        sizes = [p.weight.shape[0] for p in projs]
        for p, w in zip(projs, weight.split(sizes), strict=True):
            p.weight = nn.Parameter(w, requires_grad=False)
        self.qkv_t = weight.t()
        if self.q_proj.bias is not None:
            bias = torch.cat([p.bias.detach() for p in projs])
            for p, b in zip(projs, bias.split(sizes), strict=True):
                p.bias = nn.Parameter(b, requires_grad=False)
            self.qkv_bias = bias
        self.o_t = self.o_proj.weight.detach().t()

    def forward(
        self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], batch: AttnBatch | None
    ) -> torch.Tensor:
        t, nh = x.shape[0], self.nh
        qkv = Rotary.apply_(matmul(x, self.qkv_t, self.qkv_bias).view(t, -1, self.hd), nh + self.nkv, *rope)
        q, kv = qkv[:, :nh], qkv[:, nh:]
        if batch is None:
            o = causal_attention(q, kv[:, : self.nkv], kv[:, self.nkv :])
        else:
            o = paged_attention(q, kv, self.layer, batch)
        return o.reshape(t, nh * self.hd).mm(self.o_t)

    def forward_rows(
        self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], batch: AttnBatch, rows: torch.Tensor
    ) -> torch.Tensor:
        """K/V for every token, the output only for `rows` (the last row of each sampled sequence)."""
        t, r, nh, nq = x.shape[0], rows.numel(), self.nh, self.nh * self.hd
        cos, sin = rope
        bias = self.qkv_bias
        kv = Rotary.apply_(
            matmul(x, self.qkv_t[:, nq:], None if bias is None else bias[nq:]).view(t, -1, self.hd), self.nkv, cos, sin
        )
        q = Rotary.apply_(
            matmul(x[rows], self.qkv_t[:, :nq], None if bias is None else bias[:nq]).view(r, nh, self.hd),
            nh,
            cos[rows],
            sin[rows],
        )
        o = last_row_attention(q, kv, self.layer, batch)
        return o.reshape(r, nq).mm(self.o_t)


class MLP(nn.Module):
    """gate and up as views of one fused weight (fuse()): one matmul for both."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        h, i = config.hidden_size, config.intermediate_size
        self.gate_proj = nn.Linear(h, i, bias=False)
        self.up_proj = nn.Linear(h, i, bias=False)
        self.down_proj = nn.Linear(i, h, bias=False)
        self.inter = i
        self.gate_up_t = self.down_t = torch.empty(0)  # made by fuse() once the checkpoint is loaded

    def fuse(self) -> None:
        weight = torch.cat((self.gate_proj.weight.detach(), self.up_proj.weight.detach()))
        gate, up = weight.split(self.inter)
        self.gate_proj.weight = nn.Parameter(gate, requires_grad=False)
        self.up_proj.weight = nn.Parameter(up, requires_grad=False)
        self.gate_up_t = weight.t()
        self.down_t = self.down_proj.weight.detach().t()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate_up = x.mm(self.gate_up_t)
        return (nn.functional.silu(gate_up[:, : self.inter]) * gate_up[:, self.inter :]).mm(self.down_t)


class DecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig, layer: int) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_eps)
        self.self_attn = Attention(config, layer)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_eps)
        self.mlp = MLP(config)

    def forward(self, x, rope, batch):
        x = x + self.self_attn(self.input_layernorm(x), rope, batch)
        return x + self.mlp(self.post_attention_layernorm(x))

    def forward_rows(self, x, rope, batch, rows):
        x = x[rows] + self.self_attn.forward_rows(self.input_layernorm(x), rope, batch, rows)
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

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        batch: AttnBatch | None,
        rows: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Flattened tokens of a batch -> final hidden states [T, hidden]. batch=None: one
        sequence from scratch, no cache. rows (a prefill batch whose `sampled` names them): the
        last layer computes K/V for every token but its output only for these rows, and the result
        is [len(rows), hidden]: the rest of that layer's work would feed no logits."""
        x = self.model.embed_tokens(input_ids)
        rope = self.rotary.tables(positions)
        layers = cast("list[DecoderLayer]", self.model.layers)
        last = len(layers) - 1 if rows is not None else len(layers)
        for layer in layers[:last]:
            x = layer(x, rope, batch)
        if rows is not None:
            x = layers[last].forward_rows(x, rope, batch, rows)
        return self.model.norm(x)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        w = self.model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        logits = nn.functional.linear(hidden, w)
        return logits if logits.dtype == torch.float32 else logits.float()

    @torch.inference_mode()
    def reference_logits(self, ids: list[int], start: int = 0) -> torch.Tensor:
        """Logits of positions start.. of one prompt, computed from scratch without the KV pool."""
        dev = self.model.embed_tokens.weight.device
        t = torch.tensor(ids, device=dev)
        return self.compute_logits(self(t, torch.arange(len(ids), device=dev), None)[start:])

    @torch.no_grad()
    def fuse(self) -> None:
        """One weight for q|k|v and one for gate|up per layer, the checkpoint's names kept as views of
        them (a load, save or in-place edit by name still reaches the weight the model computes with)."""
        for layer in cast("list[DecoderLayer]", self.model.layers):
            layer.self_attn.fuse()
            layer.mlp.fuse()

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


def build_model(
    config: ModelConfig, *, device: str, dtype: torch.dtype, seed: int = 0, weights: str | None = None
) -> LlamaModel:
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
    model.rotary = Rotary(config).to(device)  # computed in float64, kept in float32 whatever the dtype
    model.fuse()
    return model.eval()
