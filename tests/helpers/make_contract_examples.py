"""Writes examples/requests/contracts/: pairs whose read depends on the contract, not on a cause alone.

Each folder holds `a.json` (a request of the example session, tests/helpers/make_examples.py), `b.json`
(the session's next request) and `contract.json`: the contract the pair is judged by, the settings of
that contract it needs (the command line's flags of `prefixguard diff`, as [tool.prefixguard] keys) and
what b reads of what a wrote: 0, "all of a" (every token of a's prompt, exactly) or "whole blocks of a";
where it says, `reason` is the reason the policy must give.

    .venv/bin/python tests/helpers/make_contract_examples.py
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import make_examples as gen  # noqa: E402

HERE = Path(__file__).resolve().parents[2] / "examples" / "requests" / "contracts"
GPT = "gpt-5.6"
SELF_HOSTED = "Qwen/Qwen3-32B"   # a model repository's name: a server one runs (the compatible contract)


def _short(model: str, extra: bool) -> dict[str, Any]:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi."}]
    if extra:
        messages += [{"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Totals?"}]
    return {"model": model, "messages": messages}


PAIRS: dict[str, tuple[dict, dict, dict[str, Any]]] = {
    # GPT-5.6 and later, implicit (default) mode: the breakpoint sits on the latest user or tool message and a
    # read matches exactly there: a timestamp edited in the system prompt leaves nothing to read (the rule
    # before 5.6 reads the longest unchanged prefix, up to the timestamp, in 128-token steps).
    "gpt-5.6-implicit-prefix-edited": (
        gen.request("openai-chat", model=GPT, now=gen.TIME_A),
        gen.request("openai-chat", model=GPT, now=gen.TIME_B, history=gen.next_history()),
        {"contract": "openai", "mode": "implicit", "settings": {}, "reads": 0}),
    # ... and an appended turn reads all of the earlier prompt, exactly (no 128-token rounding).
    "gpt-5.6-implicit-appended-turn": (
        gen.request("openai-chat", model=GPT),
        gen.request("openai-chat", model=GPT, history=gen.next_history()),
        {"contract": "openai", "mode": "implicit", "settings": {}, "reads": "all of a"}),
    "gpt-5.6-implicit-appended-turn-responses": (
        gen.request("openai-responses", model=GPT),
        gen.request("openai-responses", model=GPT, history=gen.next_history()),
        {"contract": "openai", "mode": "implicit", "settings": {}, "reads": "all of a"}),
    # vLLM reuses whole 16-token blocks: an appended turn reads a's prompt down to a block's end.
    "vllm-blocks-appended-turn": (
        gen.request("openai-chat", model=SELF_HOSTED),
        gen.request("openai-chat", model=SELF_HOSTED, history=gen.next_history()),
        {"contract": "compatible", "settings": {"server": "vllm"}, "reads": "whole blocks of a"}),
    # A shared prefix shorter than one block is no read (any-prefix reuse would promise one): two short messages
    # and the reply's opening are 18 tokens in Qwen's chat format, under a block of 32.
    "blocks-short-prefix": (
        _short(SELF_HOSTED, False), _short(SELF_HOSTED, True),
        {"contract": "compatible", "settings": {"block-size": 32}, "reads": 0}),
    # A server that caches no prefix (a hybrid Mamba / sliding-window model) reads nothing, and says so.
    "no-prefix-caching": (
        gen.request("openai-chat", model=SELF_HOSTED),
        gen.request("openai-chat", model=SELF_HOSTED, history=gen.next_history()),
        {"contract": "compatible", "settings": {"prefix-caching": False}, "reads": 0}),
    # Groq caches the prompts of the models its page lists only (kimi-k2, gpt-oss): another reads nothing, and says so.
    "groq-model-not-cached": (
        gen.request("openai-chat", model="llama-3.3-70b-versatile"),
        gen.request("openai-chat", model="llama-3.3-70b-versatile", history=gen.next_history()),
        {"contract": "groq", "host": "api.groq.com", "settings": {}, "reads": 0, "reason": "no_prefix_caching"}),
}


# One appended turn per provider contract that has no pair above: each reads the earlier prompt whole, in
# its token steps (xAI: 128), judged by that provider's own table (found by the model's name, or for a
# provider known by its host only, by the host in contract.json). Adding a provider adds its line here.
PROVIDERS: dict[str, tuple[str, str, str | None]] = {
    "anthropic": ("anthropic", "claude-sonnet-4-5", None),
    "bedrock": ("bedrock-converse", "us.anthropic.claude-sonnet-4-5-20250929-v1:0", None),
    "gemini": ("gemini", "gemini-2.5-flash", None),
    "deepseek": ("openai-chat", "deepseek-chat", None),
    "mistral": ("openai-chat", "mistral-large-latest", None),
    "xai": ("openai-chat", "grok-4", None),
    "moonshot": ("openai-chat", "kimi-k2-0905-preview", None),
    "zai": ("openai-chat", "glm-4.6", None),
    "groq": ("openai-chat", "openai/gpt-oss-120b", "api.groq.com"),
    "minimax": ("openai-chat", "minimax-m2", None),
    "qwen": ("openai-chat", "qwen3-max", None),
    "bedrock_mantle": ("openai-chat", "openai.gpt-oss-120b", "bedrock-mantle.us-east-1.api.aws"),
}
for _name, (_shape, _model, _host) in PROVIDERS.items():
    PAIRS[f"{_name}-appended-turn"] = (
        gen.request(_shape, model=_model),
        gen.request(_shape, model=_model, history=gen.next_history()),
        {"contract": _name, **({"host": _host} if _host else {}), "settings": {}, "reads": "all of a, in its steps"})


def main() -> None:
    for name, (a, b, contract) in PAIRS.items():
        gen.write(HERE / name / "a.json", a)
        gen.write(HERE / name / "b.json", b)
        gen.write(HERE / name / "contract.json", contract)


if __name__ == "__main__":
    main()
