"""Token counts: tiktoken offline, or a flagged estimate where no tokenizer loads."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from xxhash import xxh3_128_digest

from prefixguard.model import templates, tokens
from prefixguard.utils import disk_cache
from prefixguard.wire import parse_request

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def fresh_tokenizer(monkeypatch):
    """Each test reads the environment anew, and leaves the default tokenizer loaded after."""
    tokens.reset()
    yield monkeypatch
    monkeypatch.undo()
    tokens.reset()


def test_offline_cl100k(fresh_tokenizer):
    fresh_tokenizer.delenv("PREFIXGUARD_TOKENIZER", raising=False)
    fresh_tokenizer.delenv("PREFIXGUARD_ENCODING", raising=False)
    assert not tokens.is_estimated()
    assert tokens.encoding_name() == "cl100k_base"
    assert tokens.count("hello world") == 2
    assert tokens.count("<|endoftext|>") > 1  # special tokens in user text are plain text
    assert tokens.count("") == 0


def test_forced_estimate_is_flagged_everywhere(fresh_tokenizer):
    fresh_tokenizer.setenv("PREFIXGUARD_TOKENIZER", "estimate")
    assert tokens.is_estimated() and tokens.encoding_name() == "estimate"
    assert tokens.count("abcdefgh") == 2 and tokens.count("é") == 1
    body = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hello " * 100}]})
    prompt = parse_request(body)
    assert prompt.tokens_estimated and prompt.segments[0].tokens == 150


def test_unknown_encoding_falls_back_to_the_bundled_one(fresh_tokenizer, tmp_path):
    fresh_tokenizer.setenv("PREFIXGUARD_ENCODING", "no_such_encoding")
    fresh_tokenizer.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    assert tokens.encoding_name() == "cl100k_base" and not tokens.is_estimated()


def test_segment_counts(shared_data):
    path = shared_data / "recorded/pydantic-ai/test_anthropic_test_anthropic_cache_real_api/0002.request.json"
    counted = parse_request(path.read_bytes())
    estimated = parse_request(path.read_bytes(), count_tokens=False)
    assert not counted.tokens_estimated and estimated.tokens_estimated
    assert all(s.tokens > 0 for s in counted.segments)
    # the provider said 1532 prompt tokens; cl100k is not Claude's tokenizer but lands near it
    assert 0.7 * 1532 < counted.total_tokens < 1.3 * 1532
    text_block = next(s for s in counted.segments if s.kind == "text" and isinstance(s.value, dict))
    framing = templates.message_framing(counted.api, counted.model)  # Claude's format: 3 a message, 4 once
    assert (framing.per_message, framing.reply) == (3, 4)
    # text counts its text, not its JSON (and the format's tokens where it opens a message)
    assert text_block.tokens - tokens.count(text_block.value["text"]) in (0, 3, 3 + 4)


def test_repeated_segments_are_counted_once(fresh_tokenizer, shared_data):
    """A session repeats its prefix: the second request's unchanged segments never reach the tokenizer,
    and their counts are the same as when they were counted."""
    path = shared_data / "recorded/pydantic-ai/test_anthropic_test_anthropic_cache_real_api/0002.request.json"
    body = json.loads(path.read_bytes())
    texts: list[str] = []
    counting = tokens.count
    fresh_tokenizer.setattr(tokens, "count", lambda text, enc=None: texts.append(text) or counting(text, enc))
    first = parse_request(json.dumps(body))
    assert len(texts) == len(first.segments)
    body["messages"].append({"role": "user", "content": "and one more question"})
    texts.clear()
    second = parse_request(json.dumps(body))
    assert texts == ["and one more question"]
    assert [s.tokens for s in second.segments[:-1]] == [s.tokens for s in first.segments]
    tokens.reset()  # another encoding may load: nothing remembered may outlive it
    texts.clear()
    parse_request(json.dumps(body))
    assert len(texts) == len(second.segments)


def test_remembered_counts_are_bounded(fresh_tokenizer):
    fresh_tokenizer.setattr(tokens, "SEEN_MAX", 2)
    asked: list[str] = []

    def text(t: str):
        return lambda: asked.append(t) or t
    for t in ("one", "two", "three", "one"):  # "one" was the oldest of three: forgotten, counted again
        tokens.count_once(t.encode(), text(t))
    assert asked == ["one", "two", "three", "one"]
    tokens.count_once(b"three", text("three"))  # still remembered
    assert asked[-1] == "one"


def test_a_part_too_long_to_tokenize_in_time_is_estimated_and_says_so() -> None:
    import time
    huge = "word " * (tokens.MAX_EXACT // 4)
    body = {"model": "claude-sonnet-4-5", "max_tokens": 5, "messages": [{"role": "user", "content": huge},
                                                                         {"role": "user", "content": "hi"}]}
    started = time.perf_counter()
    prompt = parse_request(json.dumps(body))
    assert time.perf_counter() - started < 1.0
    big, small = prompt.segments
    assert big.estimated and big.tokens == tokens.estimate(huge) + 3 + 4 and not small.estimated  # + the format
    assert prompt.estimated and not prompt.tokens_estimated  # a tokenizer ran, for the small part


def test_counts_kept_on_disk_need_no_tokenizer_next_run(fresh_tokenizer, tmp_path, shared_data):
    """A second process counting the same request loads no encoder: counts and the encoding's tables
    come from the cache directory, and are the same counts."""
    import subprocess
    import sys
    fresh_tokenizer.setenv("PREFIXGUARD_CACHE_DIR", str(tmp_path))
    path = shared_data / "recorded/pydantic-ai/test_anthropic_test_anthropic_cache_real_api/0002.request.json"
    script = ("import sys, json; from prefixguard.model import tokens; from prefixguard.wire import parse_request;"
              f"p = parse_request(open({str(path)!r}, 'rb').read());"
              "print(json.dumps([[s.tokens for s in p.segments], tokens.encoding_name(),"
              " tokens._encoding.cache_info().currsize]))")

    def run() -> list:
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                             env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
        return json.loads(out.stdout)
    first, second = run(), run()
    assert first[2] == 1 and second[2] == 0          # the encoder was built the first time only
    assert first[:2] == second[:2] and first[1] == "cl100k_base"
    assert first[0] == [s.tokens for s in parse_request(path.read_bytes()).segments]
    kept = {p.name for p in tmp_path.iterdir() if not p.name.startswith("rules-")}   # ruleset.py's
    assert kept == {f"counts-cl100k_base-v{disk_cache.VERSION}.tab", "ranks-cl100k_base.marshal"}


def test_counts_on_disk_are_kept_only_where_the_cache_is_on(fresh_tokenizer, tmp_path):
    """Torn, corrupted and foreign slots: tests/test_count_cache.py."""
    from prefixguard.utils import disk_cache
    fresh_tokenizer.setenv("PREFIXGUARD_CACHE_DIR", str(tmp_path))
    disk_cache.count_table("enc").put_many({b"a" * 16: 7, b"b" * 16: 9})
    table = disk_cache.count_table("enc")
    assert (table.get(b"a" * 16), table.get(b"b" * 16), table.get(b"c" * 16)) == (7, 9, None)
    fresh_tokenizer.setenv("PREFIXGUARD_CACHE_DIR", "off")
    disk_cache.count_table("enc").put_many({b"d" * 16: 1})
    assert disk_cache.count_table("enc").get(b"a" * 16) is None
    assert [p.name for p in tmp_path.iterdir()] == [f"counts-enc-v{disk_cache.VERSION}.tab"]


def test_the_data_file_changing_invalidates_the_saved_tables(fresh_tokenizer, tmp_path):
    from prefixguard.utils import disk_cache
    fresh_tokenizer.setenv("PREFIXGUARD_CACHE_DIR", str(tmp_path / "cache"))
    source = tmp_path / "enc.tiktoken"
    source.write_bytes(b"abc")
    disk_cache.save_params("enc", source, {"name": "enc", "mergeable_ranks": {b"a": 0}})
    assert disk_cache.load_params("enc", source) == {"name": "enc", "mergeable_ranks": {b"a": 0}}
    source.write_bytes(b"abcd")
    assert disk_cache.load_params("enc", source) is None


def test_rules_files_are_parsed_once_and_kept(fresh_tokenizer, tmp_path):
    """A rules/ file's parse is kept by the hash of its bytes: the same data from the disk cache as from
    the TOML itself, and a stale copy (the file changed) is never read."""
    import tomllib

    from prefixguard.contracts import ruleset
    from prefixguard.utils import disk_cache
    fresh_tokenizer.setenv("PREFIXGUARD_CACHE_DIR", str(tmp_path))
    ruleset.load.cache_clear()
    try:
        first = ruleset.load("verdict.toml")
        [kept] = [p for p in tmp_path.iterdir() if p.name.startswith("rules-verdict.toml-")]
        assert disk_cache.load_marshal(kept.name) == first
        source = Path(ruleset.__file__).parents[2] / "rules" / "verdict.toml"
        assert first == tomllib.loads(source.read_text("utf-8"))
        disk_cache.save_marshal(kept.name, {"forged": True})      # what the hash names is what is read
        ruleset.load.cache_clear()
        assert ruleset.load("verdict.toml") == {"forged": True}
        disk_cache.save_marshal("rules-verdict.toml-0000000000000000.marshal", {"stale": True},
                                replaces="rules-verdict.toml-*.marshal")
        ruleset.load.cache_clear()
        assert ruleset.load("verdict.toml") == first             # a hash that is not the file's: parsed again
    finally:
        ruleset.load.cache_clear()


def test_a_long_lived_process_keeps_its_new_counts_bounded(fresh_tokenizer, tmp_path):
    """The proxy's analysis runs for days: what it will keep on disk is written as it goes, not held."""
    from prefixguard.utils import disk_cache
    fresh_tokenizer.setenv("PREFIXGUARD_CACHE_DIR", str(tmp_path))
    fresh_tokenizer.setattr(tokens, "SEEN_MAX", 4)
    for i in range(10):
        tokens.count_once(f"segment {i}".encode(), lambda i=i: f"segment {i}")
    assert sum(map(len, tokens._made.values())) < 4
    table = disk_cache.count_table("cl100k_base")
    kept = [table.get(xxh3_128_digest(f"segment {i}".encode())) for i in range(10)]
    assert kept == [tokens.count(f"segment {i}") for i in range(8)] + [None, None]   # two batches of four


# ---- each model's own encoding (rules/encodings.toml)

OPENAI_CHAT = "recorded/crewai/llms_openai_test_openai_completions_cached_prompt_tokens/0001.request.json"


def test_encoding_by_model_is_data(fresh_tokenizer):
    fresh_tokenizer.delenv("PREFIXGUARD_ENCODING", raising=False)
    fresh_tokenizer.delenv("PREFIXGUARD_TOKENIZER", raising=False)
    o200k = ("gpt-4o", "gpt-4o-mini-2024-07-18", "gpt-4.1-mini", "gpt-5", "gpt-5.6-sol", "o3-mini", "o4-mini",
             "openai/gpt-4o")   # OpenRouter's id: the model's own encoding
    assert {tokens.encoding_for(m) for m in o200k} == {"o200k_base"}
    cl100k = ("gpt-4", "gpt-4-turbo", "gpt-3.5-turbo-0125", "claude-sonnet-4-5", None)
    assert {tokens.encoding_for(m) for m in cl100k} == {"cl100k_base"}
    assert tokens.encoding_for("gemini-2.5-flash") == "cl100k_digits"  # estimated: the default, digits apart
    assert tokens.encoding_name("gpt-4.1") == "o200k_base" and tokens.encoding_name() == "cl100k_base"


def test_openai_requests_count_exactly_in_their_encoding(fresh_tokenizer, shared_data):
    """A gpt-4.1 request's text counts the same as bpe-openai's own tokenizer (another implementation of
    the same encoding), and with Chat's per-message framing it is the prompt total OpenAI billed."""
    import bpe_openai

    from prefixguard.wire import parse_response
    path = shared_data / OPENAI_CHAT
    prompt = parse_request(path.read_bytes())
    assert prompt.model == "gpt-4.1" and not prompt.tokens_estimated
    reference = bpe_openai.get_encoding("o200k_base")
    text = sum(len(reference.encode_ordinary(seg.value)) for seg in prompt.segments)
    billed = parse_response((path.parent / "0001.response.json").read_bytes(), prompt.api).prompt_total
    # <|im_start|>role ... <|im_end|> around each message, and the reply's start (rules/encodings.toml)
    assert prompt.total_tokens == text + 4 * len(prompt.segments) + 3 == billed == 1144
    # a four-message gpt-4o-mini request: exact in o200k_base, 4 tokens over in cl100k_base (the old count)
    path = shared_data / "recorded/crewai/test_crew_train_success/0002.request.json"
    billed = parse_response((path.parent / "0002.response.json").read_bytes(), "openai-chat").prompt_total
    prompt = parse_request(path.read_bytes())
    assert prompt.total_tokens == billed == 912
    fresh_tokenizer.setenv("PREFIXGUARD_ENCODING", "cl100k_base")
    tokens.reset()
    assert parse_request(path.read_bytes()).total_tokens == billed + 4


def test_without_the_encodings_package_the_default_counts(fresh_tokenizer, shared_data):
    """bpe-openai not installed: gpt-4.1 is counted in cl100k_base (scaled like any model), not estimated."""
    real = tokens.find_spec
    fresh_tokenizer.setattr(tokens, "find_spec", lambda name: None if name == "bpe_openai" else real(name))
    tokens.reset()
    assert tokens.encoding_for("gpt-4.1") == "cl100k_base" and not tokens.is_estimated()
    prompt = parse_request((shared_data / OPENAI_CHAT).read_bytes())
    framing = 4 * len(prompt.segments) + 3   # the chat format's own tokens do not depend on our encoding
    assert not prompt.estimated
    assert prompt.total_tokens == sum(tokens.count(s.value) for s in prompt.segments) + framing


def test_o200k_counts_kept_on_disk_need_neither_tokenizer_nor_its_package(fresh_tokenizer, tmp_path, shared_data):
    """The second run of a gpt-4.1 request builds no encoder and never imports bpe_openai (its import alone
    parses both encodings, ~0.5 s): the counts, and the tables, come from the cache directory."""
    import subprocess
    import sys
    fresh_tokenizer.setenv("PREFIXGUARD_CACHE_DIR", str(tmp_path))
    script = ("import sys, json; from prefixguard.model import tokens; from prefixguard.wire import parse_request;"
              f"p = parse_request(open({str(shared_data / OPENAI_CHAT)!r}, 'rb').read());"
              "print(json.dumps([[s.tokens for s in p.segments], tokens.encoding_name(p.model),"
              " tokens._encoding.cache_info().currsize, 'bpe_openai' in sys.modules]))")

    def run() -> list:
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                             env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
        return json.loads(out.stdout)
    first, second = run(), run()
    assert first[1:] == ["o200k_base", 1, False] and second[1:] == ["o200k_base", 0, False]
    assert first[0] == second[0]
    kept = {p.name for p in tmp_path.iterdir() if not p.name.startswith("rules-")}
    assert kept == {f"counts-o200k_base-v{disk_cache.VERSION}.tab", "ranks-o200k_base.marshal"}


def test_gemini_and_gemma_count_every_digit_as_a_token() -> None:
    """Their tokenizer splits digits (rules/encodings.toml [estimated_as]); cl100k joins up to three. Mirascope's
    Fibonacci table in a Gemini 2.5 Flash history (tests/data/public) bills 427: counted 341 as cl100k did, 415 now."""
    from prefixguard.replay.sources import cassette_uris
    from prefixguard.wire import parse_request, parse_response

    words = "There we have it! The first fibonacci number ending in 57, and it is prime."
    for model in ("gemini-2.5-flash", "google/gemini-3-pro-preview", "gemma-3-27b-it"):
        encoding = tokens.encoding_for(model)
        assert [tokens.count(n, encoding) for n in ("28657", "1597", "7")] == [5, 4, 1]
        assert tokens.count(words.replace("57", ""), encoding) == tokens.count(words.replace("57", ""), "cl100k_base")
    assert [tokens.count(n, "cl100k_base") for n in ("28657", "1597", "7")] == [2, 2, 1]
    assert tokens.encoding_for("claude-sonnet-4-5") == tokens.encoding_for(None)  # the default, unsplit
    folder = Path(__file__).parent / "data" / "public" / "mirascope" / "test_call_with_text_encoded_thoughts_google_gemini_2_5_flash"
    for n in ("0001", "0002"):
        prompt = parse_request((folder / f"{n}.request.json").read_text(), path=cassette_uris(folder)[n])
        billed = parse_response((folder / f"{n}.response.json").read_bytes(), prompt.api).prompt_total
        assert billed == 427 and abs(prompt.total_tokens - billed) <= 0.05 * billed, prompt.total_tokens
