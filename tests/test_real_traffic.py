"""prefixguard's predictions and verdicts against what providers really did: every cassette of the
recorded traffic (crewAI, OpenLLMetry, pydantic-ai) through the proxy's analysis and replay's sim
(bench/real_traffic.py prints the same figures). The floors are what this build measures; issue 11
asks for 90% on reads, which first requests that read a cache left by unrecorded runs rule out."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.bench import load_bench


@pytest.fixture(scope="module")
def bench():
    return load_bench("real_traffic")


@pytest.fixture(scope="module")
def figures(bench, shared_data: Path):
    return bench.measure(shared_data / "recorded")


def test_requests_that_read_nothing_are_predicted_to_read_nothing(figures) -> None:
    for who in ("proxy_expected", "sim_predicted"):
        ok, n = figures.share(who, read=False)
        assert n > 300 and ok >= 0.95 * n, (who, ok, n)


def test_reads_are_predicted_within_five_percent(figures) -> None:
    """Of all reads, and of those after the first request to their model in their cassette (before it
    the recording shows nothing of that model's cache: earlier, unrecorded runs may have filled it; and
    after it too, where a request reads a prefix no recorded request wrote: bench/RESULTS.md names them).
    A compacting request's first pass is the one on the prompt as sent: pydantic-ai's streamed compaction
    test reads 55,096 there, written by the test before it (one more first-request read, 0.46 -> 0.45).
    What the provider adds after every part is on no part: four Claude reads at a last-block breakpoint are
    now exact (1,163, 1,165, 1,590, 2,091: each 2-4 over before), and crewAI's "Paris" after "Tokyo", read
    whole with nothing written (so a cache of "Paris" no recorded request wrote), is no longer predicted to
    read the Tokyo request's system prompt by a lookback the write of 0 rules out (0.84 -> 0.81). A token
    count is no request of its session (it writes nothing): pydantic-ai's count-then-create cassette's read
    of 1,111 is its first request's, a cache an earlier run left (25/31, 0.81 -> 0.80)."""
    for who in ("proxy_expected", "sim_predicted"):
        ok, n = figures.share(who, read=True)
        later_ok, later = figures.share(who, read=True, later=True)
        assert n > 50 and later > 30
        assert later_ok >= 0.80 * later and ok >= 0.44 * n, (who, ok, n, later_ok, later)
    # the proxy (which judges as requests arrive) and replay's sim agree on what the cache holds
    assert figures.share("proxy_expected", True) == figures.share("sim_predicted", True)


def test_no_false_breaks(figures) -> None:
    """No miss_prefix_changed where the provider read what it owed had the prefix not changed."""
    assert figures.false_breaks() == []
    assert any(r.verdict == "hit" for r in figures.rows)


@pytest.fixture(scope="module")
def provider_figures(bench, shared_data: Path):
    return bench.measure(shared_data / "recorded", bench.PROVIDER_SOURCES)


def test_bedrock_and_gemini_recordings(provider_figures) -> None:
    """Bedrock Converse (cachePoint contract) and Gemini (implicit, and an explicit cachedContents read
    whole): the floors this build measures (bench/RESULTS.md)."""
    for who in ("proxy_expected", "sim_predicted"):
        zeros_ok, zeros = provider_figures.share(who, read=False)
        reads_ok, reads = provider_figures.share(who, read=True)
        assert zeros >= 100 and zeros_ok >= 0.95 * zeros, (who, zeros_ok, zeros)
        assert reads >= 10 and reads_ok >= 9, (who, reads_ok, reads)
    assert provider_figures.false_breaks() == []
    assert {r.source for r in provider_figures.rows} == {"pydantic-ai-bedrock", "pydantic-ai-gemini"}


def test_held_out_recordings_in_another_layout_are_measured(bench, shared_data: Path, tmp_path: Path) -> None:
    """Recordings that are not ours, laid out as a root of sources, one source, or one cassette."""
    import shutil
    cassette = tmp_path / "held" / "theirs" / "one"
    shutil.copytree(shared_data / "recorded" / "openllmetry" / "test_prompt_caching_test_openai_prompt_caching",
                    cassette)
    assert bench.groups(tmp_path / "held") == [("theirs",)]
    assert bench.groups(tmp_path / "held" / "theirs") == bench.groups(cassette) == [(".",)]
    rows = bench.measure(cassette, (".",)).rows
    assert [r.reported_read for r in rows] == [0, 1024, 0, 0]   # what the provider reported, in order
    # requests 3 and 4 were recorded a year after 1 and 2 (their answers' `created`): the cache had expired
    assert rows[1].proxy_expected == 1024 and rows[2].verdict == "miss_ttl_expired" and rows[2].proxy_expected == 0
    assert bench.groups(shared_data / "recorded")[:2] == [bench.SOURCES, bench.PROVIDER_SOURCES]


def test_one_proxy_sees_what_another_cassette_wrote_when_they_say_when(bench, shared_data: Path, tmp_path: Path) -> None:
    """Two cassettes of one test run, each with one request, their answers' Date headers kept: alone, the second's
    read is its own first request's (nothing seen wrote it); through one proxy in the order they were recorded,
    it reads what the first cassette's request wrote a minute before, and is predicted so. A source whose
    cassettes say nothing of when stays one session each."""
    import shutil
    recorded = shared_data / "recorded" / "openllmetry" / "test_prompt_caching_test_anthropic_prompt_caching_legacy"
    for n, name, when in ((1, "b_writes", "Fri, 20 Feb 2026 01:16:47 GMT"), (2, "a_reads", "Fri, 20 Feb 2026 01:17:47 GMT")):
        folder = tmp_path / "suite" / "run" / name
        folder.mkdir(parents=True)
        for kind in ("request", "response"):
            shutil.copy(recorded / f"{n:04d}.{kind}.json", folder / f"0001.{kind}.json")
        meta = json.loads((recorded / "meta.json").read_text())
        call = {**meta["interactions"][n - 1], "n": 1, "date": when}
        (folder / "meta.json").write_text(json.dumps({**meta, "interactions": [call]}))
    alone, merged = (bench.measure(tmp_path / "suite", ("run",), one_proxy=one) for one in (False, True))
    read = next(r for r in alone.rows if r.reported_read)
    assert read.reported_read > 1000 and read.first and read.proxy_expected == 0
    assert [r.cassette for r in merged.rows] == ["b_writes", "a_reads"]
    later = merged.rows[1]
    assert not later.first and abs(later.proxy_expected - later.reported_read) <= 0.05 * later.reported_read
    assert merged.share("proxy_expected", True, True) == (1, 1) and alone.share("proxy_expected", True, True) == (0, 0)
    for folder in (tmp_path / "suite" / "run").iterdir():
        meta = json.loads((folder / "meta.json").read_text())
        (folder / "meta.json").write_text(json.dumps({**meta, "interactions": [
            {k: v for k, v in c.items() if k != "date"} for c in meta["interactions"]]}))
    untimed = bench.measure(tmp_path / "suite", ("run",), one_proxy=True)
    assert [(r.cassette, r.first) for r in untimed.rows] == [("a_reads", True), ("b_writes", True)]


PUBLIC = Path(__file__).resolve().parent / "data" / "public"


def test_public_sessions_from_another_language(bench) -> None:
    """tmc/langchaingo's recorded sessions (Go; tests/data/public/langchaingo): Claude over three and four
    turns (thinking and tool loops, a history edited mid-session) and Bedrock Converse with a cachePoint
    added at turn 3. Every read within 5%; the edit is a miss naming the rewritten message, though the
    provider read the entry request 1 wrote (through its lookback): that is the changed prompt's read, no
    false break (it owed 205 more had the history stayed)."""
    f = bench.measure(PUBLIC, ("langchaingo",))
    reads = [r for r in f.rows if r.reported_read]
    assert len(reads) == 8 and all(abs(r.proxy_expected - r.reported_read) <= 0.05 * r.reported_read for r in reads)
    assert all(r.proxy_expected == r.sim_predicted for r in f.rows)
    (edit,) = [r for r in f.rows if r.verdict == "miss_prefix_changed"]
    assert edit.cause.startswith("history_rewritten") and edit.reprefill > 0
    assert f.false_breaks() == []


def test_a_token_count_is_no_request_of_its_session(bench) -> None:
    """pydantic-ai's count-then-create cassette (tests/data/public/pydantic_ai): Claude counts the prompt at
    /v1/messages/count_tokens, then the same prompt with automatic caching reads 0 and writes 1,111. The
    count is no row and wrote nothing: the create is its model's first request, predicted to read 0 (it
    was predicted 1,114 and called miss_server_side) by the proxy and by replay's sim alike."""
    f = bench.measure(PUBLIC, ("pydantic_ai",))
    rows = [r for r in f.rows if r.cassette == "anthropic_automatic_caching_count_tokens"]
    assert [(r.n, r.first, r.reported_read) for r in rows] == [(1, True, 0)]
    assert rows[0].proxy_expected == rows[0].sim_predicted == 0 and rows[0].verdict == "cold"


def test_bedrocks_openai_endpoint_caches_by_itself_in_blocks(bench) -> None:
    """openai.gpt-oss-20b on Amazon Bedrock's OpenAI-compatible endpoint (llama-stack's recordings,
    tests/data/public/llama_stack): every request reads with no breakpoint sent, in whole 16-token blocks
    ([bedrock_mantle] in rules/providers.toml). Judged by Converse's cachePoint contract it was predicted to
    read nothing, as a model Bedrock does not cache; the question sent again reads 48 of 72 (a block short
    of the prompt, as predicted), and the tool loop's second request reads where the first one's prompt ended."""
    from prefixguard.contracts.providers import provider_for
    assert provider_for("openai-chat", "openai.gpt-oss-20b", "https://bedrock-mantle.us-east-2.api.aws") == (
        "bedrock_mantle")
    f = bench.measure(PUBLIC, ("llama_stack",))
    rows = {(r.cassette, r.n): r for r in f.rows}
    mantle = [r for r in f.rows if r.cassette.startswith("mantle_")]  # the source's other cassettes: other hosts
    assert len(mantle) == 4
    assert all(r.reported_read and r.reported_read % 16 == 0 and r.proxy_expected % 16 == 0 for r in mantle)
    again = rows["mantle_question_twice", 2]
    assert again.proxy_expected == again.sim_predicted == again.reported_read == 48
    loop = rows["mantle_tool_loop", 2]
    assert loop.verdict == "hit" and abs(loop.proxy_expected - loop.reported_read) <= 16
    assert f.false_breaks() == []
