"""The in-process session index (prefixguard/judge/index.py) and the session model's record of a request
(prefixguard/judge/session.py): the same answers as a search of every kept chain and a set of every
part's hash, and nothing kept per part beyond the prompt itself."""
from __future__ import annotations

import json
import tracemalloc

from hypothesis import given, settings
from hypothesis import strategies as st
from xxhash import xxh3_64_digest

from prefixguard.judge.index import Chains
from prefixguard.judge.redis_seen import decode_seen, encode_seen
from prefixguard.judge.session import Seen, Sessions
from prefixguard.model.fingerprint import chain, common_prefix
from prefixguard.model.prompt import Prompt
from prefixguard.wire import parse_request


def naive_longest(kept: list[tuple[list[bytes], int]], query: list[bytes]) -> tuple[int, int | None]:
    """Every kept chain compared from its first segment; the latest of the longest wins."""
    best, item = 0, None
    for c, it in kept:
        n = common_prefix(c, query)
        if n and n >= best:
            best, item = n, it
    return best, item


segments = st.lists(st.sampled_from([b"t", b"s", b"a", b"b", b"c"]), max_size=7)


@settings(max_examples=200, deadline=None)
@given(adds=st.lists(segments, max_size=25), queries=st.lists(segments, min_size=1, max_size=10),
       bound=st.integers(1, 8))
def test_chains_find_what_a_search_of_every_kept_chain_finds(adds, queries, bound):
    index = Chains(bound)
    kept: list[tuple[list[bytes], int]] = []
    for item, segs in enumerate(adds):
        index.add(chain(segs), item)
        kept = [*kept, (chain(segs), item)][-bound:]  # only the latest `bound` chains are kept
        assert len(index) == len(kept)
        for q in queries:
            assert index.longest(chain(q)) == naive_longest(kept, chain(q))


def test_the_latest_of_equally_long_matches_wins_and_an_evicted_chain_is_gone():
    index = Chains(2)
    index.add(chain([b"sys", b"a"]), "first")
    index.add(chain([b"sys", b"b"]), "second")
    assert index.longest(chain([b"sys", b"c"])) == (1, "second")
    assert index.longest(chain([b"sys", b"a", b"more"])) == (2, "first")
    index.add(chain([b"other"]), "third")   # "first" goes
    assert index.longest(chain([b"sys", b"a", b"more"])) == (1, "second")
    assert index.longest([]) == (0, None)


def body(messages: list[str], system: str = "You are terse.") -> str:
    return json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 16, "system": system,
                       "messages": [{"role": "user" if i % 2 == 0 else "assistant", "content": m}
                                    for i, m in enumerate(messages)]})


def prompt(messages: list[str], system: str = "You are terse.") -> Prompt:
    return parse_request(body(messages, system), path="/v1/messages")


def test_parts_in_common_are_those_of_the_sets_of_every_key_hash():
    a = prompt(["one", "two", "three", "two", "four"])
    b = prompt(["zero", "two", "three", "five"], system="Another system prompt.")
    sets = [frozenset(xxh3_64_digest(s.key) for s in p.segments) for p in (a, b)]
    seen_a, seen_b = Seen(prompt=a, item=1, ts=None), Seen(prompt=b, item=2, ts=None)
    assert seen_a.shared(seen_b) == seen_b.shared(seen_a) == len(sets[0] & sets[1]) > 0
    assert len(seen_a.parts) == len(sets[0]) and sorted(seen_a.parts) == list(seen_a.parts)   # distinct, ascending
    back = decode_seen(encode_seen(seen_a))   # as the shared index stores it
    assert list(back.parts) == list(seen_a.parts) and back.shared(seen_b) == seen_a.shared(seen_b)


def test_with_no_prefix_shared_the_request_with_most_parts_in_common_is_named():
    sessions = Sessions()
    sessions.observe(prompt(["alpha", "beta", "gamma"], system="S1 at 10:00"), "first")
    sessions.observe(prompt(["delta"], system="S2 at 10:01"), "second")
    m = sessions.observe(prompt(["alpha", "beta", "gamma", "epsilon"], system="S3 at 10:02"), "third")
    assert m.earlier == "first"   # most parts in common, though "second" is the latest


def test_the_index_keeps_nothing_per_part_beyond_the_prompt():
    big = prompt([f"message {i}" for i in range(20_000)])
    sessions = Sessions()
    tracemalloc.start()
    try:
        sessions.observe(big, "first")
        sessions.observe(big, "second")   # found by its prefix: the parts' hashes are never made
        grown = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert grown < 20 * len(big.segments), grown   # a compare of the two, no dict or set of every part
