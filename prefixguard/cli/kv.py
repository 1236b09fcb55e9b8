"""`prefixguard kv`: how much KV-cache memory a model needs, and what fits in a given memory."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import click

from prefixguard.cli.exits import UsageError
from prefixguard.cli.options import command, option, output_format
from prefixguard.engine import kvmath
from prefixguard.schemas import versioned
from prefixguard.utils.errors import InputError, parse_json, read_input, reading
from prefixguard.utils.styled import printable, printable_lines

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 1e3,
    "mb": 1e6,
    "gb": 1e9,
    "tb": 1e12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}


def parse_size(text: str) -> float:
    """'80GiB', '24GB', '1.5e9' -> bytes."""
    m = re.fullmatch(r"\s*([0-9.]+(?:e[0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        raise UsageError(f"{text!r} is not a size (examples: 80GiB, 24GB, 1e9)", option="--memory")
    return float(m.group(1)) * _UNITS[m.group(2).lower()]


# config.json fields the KV arithmetic divides by or multiplies with: each a whole number above 0.
_REQUIRED = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
_OPTIONAL = ("num_key_value_heads", "max_position_embeddings")  # absent: a default; null: an error
_OPTIONAL_OR_NULL = ("head_dim",)  # null: hidden_size / heads
CONFIG_MAX_BYTES = 16 << 20  # a config.json is kilobytes


def arch_from_file(path: str) -> kvmath.Arch:
    from prefixguard.engine.config import from_hf_config

    try:
        check_config(parse_json(read_input(path, CONFIG_MAX_BYTES, "config file"), path))
        with reading(path):
            return kvmath.from_config(Path(path).parent.name or path, from_hf_config(path), source=path)
    except InputError as e:
        detail = str(e).removeprefix(f"{path}: ")
        raise UsageError(f"{path}: not a usable config.json ({detail})", option="--config") from None


def check_config(cfg: object) -> None:
    """Raise InputError naming the field when a config.json cannot describe a model's shape."""
    if not isinstance(cfg, dict):
        raise InputError(f"expected a JSON object, got {type(cfg).__name__}")
    for key in (
        *_REQUIRED,
        *(k for k in _OPTIONAL if k in cfg),
        *(k for k in _OPTIONAL_OR_NULL if cfg.get(k) is not None),
    ):
        value = cfg.get(key)
        if key not in cfg:
            raise InputError(f"missing field '{key}'")
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InputError(f"'{key}' is {json.dumps(value)[:40]}, expected a whole number above 0")
    heads, kv_heads = cfg["num_attention_heads"], cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
    if heads % kv_heads:
        raise InputError(f"'num_attention_heads' ({heads}) is not a multiple of 'num_key_value_heads' ({kv_heads})")
    if not cfg.get("head_dim") and cfg["hidden_size"] % heads:
        raise InputError(f"'hidden_size' ({cfg['hidden_size']}) is not a multiple of 'num_attention_heads' ({heads})")
    for key in ("rope_theta", "rms_norm_eps"):
        value = cfg.get(key)
        if key in cfg and (
            not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0
        ):
            raise InputError(f"'{key}' is {json.dumps(value)[:40]}, expected a number above 0")


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} TiB"


@command()
@option("--model", "-m", "model_name", help="Model name (see --list).")
@option(
    "--config", "config_file", help="A local Hugging Face config.json (Llama/Qwen2/Mistral layout) instead of --model."
)
@option("--context", "-c", type=click.IntRange(1), default=8192, help="Tokens per sequence [default: 8192].")
@option("--concurrency", "-n", type=click.IntRange(1), default=1, help="Sequences at once [default: 1].")
@option("--kv-dtype", type=click.Choice(sorted(kvmath.BYTES)), default="bf16", help="[default: bf16]")
@option("--weight-dtype", type=click.Choice(sorted(kvmath.BYTES)), default="bf16", help="[default: bf16]")
@option("--memory", help="Accelerator memory, e.g. 80GiB: report what fits after the weights.")
@option("--page-size", type=click.IntRange(1, 64), default=1, help="KV page size of a paged pool [default: 1].")
@option("--list", "list_models", is_flag=True, help="List the known models and exit.")
@output_format()
def kv(
    model_name: str | None,
    config_file: str | None,
    context: int,
    concurrency: int,
    kv_dtype: str,
    weight_dtype: str,
    memory: str | None,
    page_size: int,
    list_models: bool,
    fmt: str,
) -> None:
    """KV-cache bytes = 2 x layers x kv_heads x head_dim x tokens x bytes per value x sequences."""
    models = kvmath.load_models()
    if list_models:
        rows = [
            {
                "model": a.name,
                "attention": a.attention,
                "params": a.params,
                "kv_heads": a.kv_heads,
                "heads": a.heads,
                "kv_bytes_per_token_bf16": kvmath.kv_bytes_per_token(a),
                "source": a.source,
            }
            for a in models.values()
        ]
        if fmt == "json":
            print(json.dumps(versioned({"models": rows}), indent=2))
        else:
            for r in rows:
                print(
                    f"{printable(r['model']):<16} {r['attention']}  {r['params'] / 1e9:6.2f}B params  "
                    f"{r['kv_heads']:>2}/{r['heads']:<2} kv heads  "
                    f"{human(r['kv_bytes_per_token_bf16'])}/token (bf16)"
                )
        return
    if config_file:
        arch = arch_from_file(config_file)
    elif not model_name:
        raise UsageError("give --model NAME or --config config.json (--list shows the names)")
    elif model_name not in models:
        raise UsageError(f"unknown model {model_name!r}; known: {', '.join(models)}")
    else:
        arch = models[model_name]
    mem = parse_size(memory) if memory else None
    out = kvmath.plan(
        arch,
        context=context,
        concurrency=concurrency,
        kv_dtype=kv_dtype,
        weight_dtype=weight_dtype,
        memory=mem,
        page_size=page_size,
    )
    if fmt == "json":
        print(json.dumps(versioned(out), indent=2))
        return
    print(printable_lines(render(out)))  # a config file's model name is the user's text


def render(p: dict) -> str:
    lines = [
        f"{p['model']}: {p['layers']} layers, {p['heads']} heads, {p['kv_heads']} KV heads ({p['attention']}), "
        f"head_dim {p['head_dim']}, {p['params'] / 1e9:.2f}B params",
        f"KV per token       {human(p['kv_bytes_per_token'])} ({p['kv_dtype']})",
        f"KV per sequence    {human(p['kv_bytes_per_sequence'])} at {p['context']} tokens",
        f"KV total           {human(p['kv_bytes'])} for {p['concurrency']} sequence(s)",
        f"  if MHA           {human(p['kv_bytes_if_mha'])} ({p['attention']} saves {p['gqa_saving']:.0%})",
        "  by KV dtype      " + ", ".join(f"{d} {human(b)}" for d, b in p["kv_bytes_by_dtype"].items()),
        f"Weights            {human(p['weight_bytes'])} ({p['weight_dtype']})",
    ]
    if "memory" in p:
        lines += [
            f"Memory             {human(p['memory'])}: {human(p['kv_memory'])} left for KV -> "
            f"{'fits' if p['fits'] else 'does NOT fit'}",
            f"  max sequences    {p['max_concurrency']} at {p['context']} tokens",
            f"  max context      {p['max_context']} tokens at {p['concurrency']} sequence(s)",
        ]
    if "warning" in p:
        lines.append(f"warning: {p['warning']}")
    return "\n".join(lines)
