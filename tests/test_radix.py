"""The radix tree against a naive reference: a dict from every cached page-aligned prefix to its page."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixguard.engine.kv_pool import PageAllocator
from prefixguard.engine.radix import RadixTree

keys = st.lists(st.integers(0, 2), max_size=14)
ops = st.lists(st.one_of(
    st.tuples(st.just("insert"), keys),
    st.tuples(st.just("match"), keys),
    st.tuples(st.just("lock"), keys),
    st.tuples(st.just("unlock"), st.integers(0, 20)),
    st.tuples(st.just("evict"), st.integers(0, 6)),
), max_size=40)


class Reference:
    def __init__(self, ps: int) -> None:
        self.ps = ps
        self.page_of: dict[tuple, int] = {}

    def prefixes(self, key):
        n = len(key) // self.ps
        return [tuple(key[:(j + 1) * self.ps]) for j in range(n)]

    def match(self, key) -> list[int]:
        out = []
        for p in self.prefixes(key):
            if p not in self.page_of:
                break
            out.append(self.page_of[p])
        return out


def tree_prefixes(tree: RadixTree) -> dict[tuple, int]:
    ps, out = tree.page_size, {}
    for key, pages in tree.cached_sequences():
        for j, page in enumerate(pages):
            out[key[:(j + 1) * ps]] = page
    return out


def check_invariants(tree: RadixTree, alloc: PageAllocator) -> None:
    held = [p for _, pages in tree.cached_sequences() for p in pages]
    nodes = list(tree._nodes())
    all_pages = [p for nd in nodes for p in nd.pages]
    assert len(all_pages) == len(set(all_pages)), "a page is held twice"
    assert set(held) <= set(all_pages)
    assert tree.total_pages == len(all_pages) == alloc.num_used, "a page leaked"
    assert all(alloc.is_used(p) for p in all_pages)
    assert tree.evictable_pages == sum(len(nd.pages) for nd in nodes if nd.lock_ref == 0)
    for nd in nodes:   # a locked node's ancestors are locked at least as often
        if nd.parent is not tree.root:
            assert nd.parent.lock_ref >= nd.lock_ref


@pytest.mark.parametrize("ps", [1, 2, 4])
@settings(max_examples=150, deadline=None)
@given(script=ops)
def test_tree_matches_reference(ps, script):
    alloc = PageAllocator(1000)
    tree = RadixTree(ps, alloc)
    ref = Reference(ps)
    locked: list[tuple[object, list[tuple]]] = []
    for op, arg in script:
        if op == "insert":
            pages = alloc.alloc(len(arg) // ps)
            expected_dups = sum(p in ref.page_of for p in ref.prefixes(arg))
            already = tree.insert(arg, pages)
            assert already == expected_dups * ps
            for p, page in zip(ref.prefixes(arg), pages):
                ref.page_of.setdefault(p, page)
        elif op in ("match", "lock"):
            pages, node = tree.match_prefix(arg)
            assert pages.tolist() == ref.match(arg)
            if op == "lock":
                tree.lock(node)
                locked.append((node, ref.prefixes(arg)[:len(pages)]))
        elif op == "unlock" and locked:
            node, _ = locked.pop(arg % len(locked))
            tree.unlock(node)
        elif op == "evict":
            evictable, before = tree.evictable_pages, dict(ref.page_of)
            freed = tree.evict(arg)
            after = tree_prefixes(tree)
            assert freed >= min(arg, evictable)
            assert len(before) - len(after) == freed
            assert after.items() <= before.items(), "eviction changed a kept page"
            for p in after:   # prefix-closed: no hole left behind
                assert len(p) == ps or p[:-ps] in after
            for _, prefixes in locked:
                assert all(p in after for p in prefixes), "a locked prefix was evicted"
            ref.page_of = after
        check_invariants(tree, alloc)
    assert tree_prefixes(tree) == ref.page_of


def test_split_keeps_both_halves():
    alloc = PageAllocator(100)
    tree = RadixTree(2, alloc)
    a = alloc.alloc(4)
    tree.insert([1, 1, 2, 2, 3, 3, 4, 4], a)
    b = alloc.alloc(4)
    assert tree.insert([1, 1, 2, 2, 9, 9, 9, 9], b) == 4
    assert alloc.num_used == 6                         # b's first two pages were duplicates
    assert tree.match_prefix([1, 1, 2, 2, 3, 3, 4, 4, 5])[0].tolist() == a
    assert tree.match_prefix([1, 1, 2, 2, 9, 9, 9, 9])[0].tolist() == a[:2] + b[2:]
    assert tree.match_prefix([1, 1, 2])[0].tolist() == a[:1]    # page-aligned: the half page does not count
    assert tree.peek([1, 1, 2, 2, 3, 3, 7, 7]) == 6


def test_lru_evicts_oldest_unlocked_leaf():
    alloc = PageAllocator(100)
    tree = RadixTree(1, alloc)
    tree.insert([1, 2, 3], alloc.alloc(3))
    tree.insert([4, 5], alloc.alloc(2))
    tree.insert([6], alloc.alloc(1))
    tree.match_prefix([1, 2, 3])                       # [1,2,3] is now the most recent
    _, node = tree.match_prefix([6])
    tree.lock(node)                                    # [6] is in use
    assert tree.evict(1) == 2                          # whole leaf [4,5] goes first
    assert tree.peek([4, 5]) == 0 and tree.peek([1, 2, 3]) == 3
    assert tree.evict(10) == 3                         # [6] stays: locked
    assert tree.peek([6]) == 1 and tree.total_pages == 1 == alloc.num_used
    tree.unlock(node)
    assert tree.evict(10) == 1 and alloc.num_used == 0


def test_allocator_never_hands_out_a_page_twice():
    alloc = PageAllocator(8)
    got = alloc.alloc(5) + alloc.alloc(3)
    assert sorted(got) == list(range(8))
    with pytest.raises(RuntimeError):
        alloc.alloc(1)
    alloc.free(got[:2])
    with pytest.raises(RuntimeError, match="freed twice"):
        alloc.free(got[:1])
    assert sorted(alloc.alloc(2)) == sorted(got[:2])


@pytest.mark.parametrize("reused", [0, 1, 3, 4])
def test_insert_frees_exactly_the_pages_a_request_computed_again(reused):
    """A request's pages are the tree's for the prefix it matched, then its own: along one edge the
    first `reused` given pages are the tree's and the rest are duplicates, freed, whatever the split."""
    alloc = PageAllocator(100)
    tree = RadixTree(2, alloc)
    a = alloc.alloc(4)
    tree.insert([1, 1, 2, 2, 3, 3, 4, 4], a)
    fresh = alloc.alloc(4 - reused)
    assert tree.insert([1, 1, 2, 2, 3, 3, 4, 4], a[:reused] + fresh) == 8
    assert alloc.num_used == 4 and not any(alloc.is_used(p) for p in fresh)
    assert tree.match_prefix([1, 1, 2, 2, 3, 3, 4, 4])[0].tolist() == a
