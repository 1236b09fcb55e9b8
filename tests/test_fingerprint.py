"""Hash chains and the longest-prefix index (checked against a naive reference)."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from prefixguard.model.fingerprint import PrefixIndex, chain, common_prefix


def test_chain_covers_every_earlier_segment():
    a = chain([b"tools", b"system", b"user: hi"])
    b = chain([b"tools", b"system!", b"user: hi"])
    assert len(a) == 3 and all(len(fp) == 16 for fp in a)
    assert a[0] == b[0]
    assert a[1] != b[1] and a[2] != b[2]  # same last segment, different history
    assert chain([b"tools", b"system"]) == a[:2]
    assert chain([]) == []


def test_segment_boundaries_count():
    # the same bytes cut into segments differently are different prompts
    assert chain([b"ab", b"c"])[-1] != chain([b"a", b"bc"])[-1]


def test_common_prefix():
    a = chain([b"1", b"2", b"3", b"4"])
    assert common_prefix(a, a) == 4
    assert common_prefix(a, chain([b"1", b"2", b"x", b"4"])) == 2
    assert common_prefix(a, chain([b"1", b"2"])) == 2
    assert common_prefix(a, chain([b"x"])) == 0


def naive_longest(history: list[tuple[list[bytes], int]], query: list[bytes]) -> tuple[int, int | None]:
    best, item = 0, None
    for fps, it in history:  # oldest first: a later chain wins a tie
        n = 0
        while n < min(len(fps), len(query)) and fps[n] == query[n]:
            n += 1
        if n and n >= best:
            best, item = n, it
    return best, item


segments = st.lists(st.sampled_from([b"t", b"s", b"a", b"b", b"c"]), max_size=7)


@settings(max_examples=150, deadline=None)
@given(adds=st.lists(segments, max_size=25), queries=st.lists(segments, min_size=1, max_size=10),
       bound=st.integers(1, 8))
def test_prefix_index_matches_a_naive_search(adds, queries, bound):
    index = PrefixIndex(max_chains=bound)
    history: list[tuple[list[bytes], int]] = []
    for item, segs in enumerate(adds):
        index.add(chain(segs), item)
        history = [*history, (chain(segs), item)][-bound:]  # only the latest `bound` chains are kept
        assert len(index) == len(history)
        for q in queries:
            assert index.longest(chain(q)) == naive_longest(history, chain(q))


def test_prefix_index_stays_bounded():
    index = PrefixIndex(max_chains=100)
    for i in range(1000):
        index.add(chain([b"sys", str(i).encode(), b"tail"]), i)
    assert len(index) == 100
    assert len(index._owner) == 1 + 2 * 100  # the shared head and each live chain's own fingerprints
    assert index.longest(chain([b"sys", b"999", b"tail"])) == (3, 999)
    assert index.longest(chain([b"sys", b"5", b"tail"])) == (1, 999)  # evicted: only the head remains
    assert index.longest(chain([b"other"])) == (0, None)
