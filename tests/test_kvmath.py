"""KV memory arithmetic, checked against published shapes and the engine pool's real allocation."""
from __future__ import annotations

import json

import pytest
from helpers.cli import CliRunner

from prefixguard.engine import kvmath
from prefixguard.cli import main

MODELS = kvmath.load_models()
GiB = 2**30


def test_llama3_8b_needs_128_kib_per_token_in_bf16():
    arch = MODELS["llama-3-8b"]
    assert kvmath.kv_bytes_per_token(arch) == 2 * 32 * 8 * 128 * 2 == 128 * 1024
    assert kvmath.kv_bytes(arch, 8192, concurrency=16) == 16 * GiB
    assert round(arch.params / 1e9, 2) == 8.03


def test_gqa_and_mqa_shrink_kv_by_the_head_ratio():
    for name in ("llama-3-8b", "qwen2.5-7b", "gemma-2b"):
        p = kvmath.plan(MODELS[name], context=4096)
        a = MODELS[name]
        assert p["kv_bytes_if_mha"] / p["kv_bytes"] == a.heads / a.kv_heads
    assert MODELS["gemma-2b"].attention == "MQA" and MODELS["llama-2-7b"].attention == "MHA"
    assert kvmath.plan(MODELS["llama-2-7b"], context=4096)["gqa_saving"] == 0


def test_quantized_kv_scales_with_bytes_per_value():
    p = kvmath.plan(MODELS["llama-3-70b"], context=32768, concurrency=4)
    by = p["kv_bytes_by_dtype"]
    assert by["bf16"] == 2 * by["fp8"] == 2 * by["int8"] == 4 * by["int4"] == p["kv_bytes"]


def test_capacity_after_weights():
    arch = MODELS["llama-3-8b"]
    weights = kvmath.weight_bytes(arch, "bf16")
    per_seq = kvmath.kv_bytes(arch, 8192)
    p = kvmath.plan(arch, context=8192, concurrency=10, memory=weights + 10 * per_seq + 1)
    assert p["fits"] and p["max_concurrency"] == 10 and p["max_context"] == 8192
    p = kvmath.plan(arch, context=8192, concurrency=11, memory=weights + 10 * per_seq + 1)
    assert not p["fits"] and p["max_context"] == 10 * 8192 // 11
    assert kvmath.plan(arch, context=8192, memory=weights / 2)["max_concurrency"] == 0


@pytest.mark.parametrize("page_size,dtype,kv_dtype", [(1, "float32", "fp32"), (16, "bfloat16", "bf16"), (7, "float16", "fp16")])
def test_matches_the_engine_pool_allocation(page_size, dtype, kv_dtype):
    from prefixguard.engine.llm_engine import LLMEngine
    budget = 3_000_000
    engine = LLMEngine("tiny", dtype=dtype, page_size=page_size, kv_memory_bytes=budget)
    arch = MODELS["engine-tiny"]
    tokens = engine.pool.num_pages * page_size
    assert tokens == kvmath.max_tokens(arch, budget, kv_dtype, page_size)
    assert engine.pool.nbytes == kvmath.kv_bytes(arch, tokens, kv_dtype) <= budget
    assert engine.stats["pool_bytes"] == engine.pool.nbytes
    # a request of n tokens holds ceil(n / page_size) pages: what kvmath charges with page rounding
    prompt = list(range(1, 41))
    engine.add_request(prompt, max_tokens=4)
    engine.step()
    used = engine.pool.allocator.num_used * engine.pool.bytes_per_page
    assert used == kvmath.kv_bytes(arch, 40, kv_dtype, page_size=page_size)


def test_cli_json_and_errors():
    r = CliRunner().invoke(main, ["kv", "-m", "qwen2.5-7b", "-c", "32768", "-n", "8", "--kv-dtype", "fp8",
                                  "--memory", "80GiB", "--format", "json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["kv_bytes"] == 2 * 28 * 4 * 128 * 1 * 32768 * 8 and out["fits"] is True
    assert out["source"].startswith("https://huggingface.co/Qwen/")
    r = CliRunner().invoke(main, ["kv", "-m", "no-such-model"])
    assert r.exit_code == 2 and "unknown model" in r.output
    r = CliRunner().invoke(main, ["kv", "-m", "llama-3-8b", "--memory", "lots"])
    assert r.exit_code == 2 and "not a size" in r.output
    r = CliRunner().invoke(main, ["kv", "--list", "--format", "json"])
    assert {m["model"] for m in json.loads(r.output)["models"]} >= {"llama-3-8b", "llama-3-70b", "mistral-7b", "qwen2.5-72b"}


def test_cli_does_not_import_torch():
    import subprocess
    import sys
    code = "import sys; from prefixguard.cli import main; import prefixguard.cli.kv; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_cli_reads_a_checkpoint_config(tmp_path):
    """A config.json as the engine's loader writes it: kv's per-token bytes equal the pool's."""
    from prefixguard.engine.config import PRESETS
    from prefixguard.engine.llm_engine import LLMEngine
    from prefixguard.engine.loader import save_weights
    engine = LLMEngine("tiny", kv_pages=4, page_size=1)
    save_weights(engine.model, PRESETS["tiny"], tmp_path)
    r = CliRunner().invoke(main, ["kv", "--config", str(tmp_path / "config.json"), "--kv-dtype", "fp32",
                                  "--format", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["kv_bytes_per_token"] == engine.pool.bytes_per_page
    (tmp_path / "broken.json").write_text("{")
    r = CliRunner().invoke(main, ["kv", "--config", str(tmp_path / "broken.json")])
    assert r.exit_code == 2 and "broken.json: not a usable config.json" in r.output
