"""Hash chains (the longest-prefix index over them is judge/index.Chains: tests/test_session_index.py)."""
from __future__ import annotations

from prefixguard.model.fingerprint import chain, common_prefix


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
