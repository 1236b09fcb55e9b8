"""Radix tree from token ids to KV pages (page-aligned keys), after SGLang's RadixCache.

Every edge holds a whole number of pages. A node in use by a request is locked (with all its
ancestors); eviction removes least-recently-used unlocked leaves. The tree owns the pages it holds:
it frees them on eviction and frees duplicates on insert.

Page ids are kept, and a match returned, as array('q'): a flat buffer. Joining the matched edges'
pages is then a copy of memory; with lists it touched every page's int object, which was half of a
multi-turn match (bench/RESULTS.md)."""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Sequence
from typing import Protocol


class Allocator(Protocol):
    def free(self, pages: Sequence[int]) -> None: ...


class Node:
    __slots__ = ("key", "pages", "children", "parent", "lock_ref", "last_access")

    def __init__(self, key: list[int], pages: array, parent: Node | None, last_access: int) -> None:
        self.key = key
        self.pages = pages
        self.children: dict = {}  # first token (page size 1) or first page (a tuple) -> child
        self.parent: Node = parent if parent is not None else self  # the root is its own parent; walks stop at it
        self.lock_ref = 0
        self.last_access = last_access


class RadixTree:
    def __init__(self, page_size: int, allocator: Allocator) -> None:
        self.page_size = page_size
        self.allocator = allocator
        self.root = Node([], array("q"), None, 0)
        self.root.lock_ref = 1  # never evicted
        self.total_pages = 0  # pages held by the tree
        self.evictable_pages = 0  # of those, pages in unlocked nodes
        self.evicted_pages = 0  # freed by evict() since the start
        self._clock = 0

    # -- lookup -------------------------------------------------------------------------------
    def match_prefix(self, tokens: Sequence[int]) -> tuple[array, Node]:
        """Longest cached page-aligned prefix of `tokens`: its pages and the node that ends it
        (an edge is split so that the node ends exactly there; lock it to keep the pages)."""
        ps = self.page_size
        key = tokens if isinstance(tokens, list) else list(tokens)
        n = len(key) // ps * ps
        self._clock += 1
        now = self._clock
        node, i, path = self.root, 0, []
        while i < n:
            child = node.children.get(key[i] if ps == 1 else tuple(key[i : i + ps]))
            if child is None:
                break
            m = len(child.key)
            if i + m > n or key[i : i + m] != child.key:  # ends inside this edge: split it there
                m = self._common(child.key, key, i, n)
                child = self._split(child, m)
            child.last_access = now
            path.append(child.pages)
            node, i = child, i + m
        pages = array("q")
        for part in path:  # after the walk: one pass over the keys' memory, then one over the pages'
            pages += part
        return pages, node

    def peek(self, tokens: Sequence[int]) -> int:
        """Length of the cached prefix of `tokens`, changing nothing (no split, no LRU touch)."""
        ps = self.page_size
        key = tokens if isinstance(tokens, list) else list(tokens)
        n = len(key) // ps * ps
        node, i = self.root, 0
        while i < n:
            child = node.children.get(key[i] if ps == 1 else tuple(key[i : i + ps]))
            if child is None:
                break
            m = len(child.key)
            if i + m > n or key[i : i + m] != child.key:
                return i + self._common(child.key, key, i, n)
            node, i = child, i + m
        return i

    # -- update -------------------------------------------------------------------------------
    def insert(self, tokens: Sequence[int], pages: Sequence[int]) -> int:
        """Cache `tokens[:len(pages) * page_size]` in `pages`. Where the tree already holds a
        position with another page, the given page is a duplicate and is freed. Returns how many
        tokens were already cached.

        `pages` is what a request holds: the tree's own pages for the prefix it matched, then pages
        it computed itself. So along one edge the given pages equal the tree's up to some point and
        differ after it; comparing an edge's first and last page says which case it is without a
        Python loop over its pages (the loop is left for an edge that the point falls inside)."""
        ps = self.page_size
        n = len(pages) * ps
        if len(tokens) < n:
            raise ValueError(f"{len(pages)} pages need {n} tokens, got {len(tokens)}")
        key = tokens if isinstance(tokens, list) else list(tokens)
        self._clock += 1
        now = self._clock
        node, i = self.root, 0
        while i < n:
            first = key[i] if ps == 1 else tuple(key[i : i + ps])
            child = node.children.get(first)
            if child is None:
                new = Node(key[i:n], array("q", pages[i // ps :]), node, now)
                node.children[first] = new
                added = len(new.pages)
                self.total_pages += added
                self.evictable_pages += added
                return i
            m = len(child.key)
            if i + m > n or key[i : i + m] != child.key:
                m = self._common(child.key, key, i, n)
                child = self._split(child, m)
            held = child.pages
            if pages[i // ps] != held[0]:  # the request computed this edge again: its pages go
                self.allocator.free(pages[i // ps : (i + m) // ps])
            elif pages[(i + m) // ps - 1] != held[-1]:
                self.allocator.free([p for p, q in zip(pages[i // ps : (i + m) // ps], held, strict=False) if p != q])
            child.last_access = now
            node, i = child, i + m
        return i

    def lock(self, node: Node) -> None:
        while node is not self.root:
            if node.lock_ref == 0:
                self.evictable_pages -= len(node.pages)
            node.lock_ref += 1
            node = node.parent

    def unlock(self, node: Node) -> None:
        while node is not self.root:
            if node.lock_ref <= 0:
                raise RuntimeError("unlock of a node that is not locked")
            node.lock_ref -= 1
            if node.lock_ref == 0:
                self.evictable_pages += len(node.pages)
            node = node.parent

    def evict(self, n_pages: int) -> int:
        """Free at least `n_pages` pages (whole leaves, least recently used first) if that many
        are unlocked. Returns the number of pages freed."""
        if n_pages <= 0:
            return 0
        heap = [(nd.last_access, id(nd), nd) for nd in self._nodes() if not nd.children and nd.lock_ref == 0]
        heapq.heapify(heap)
        freed = 0
        while freed < n_pages and heap:
            _, _, node = heapq.heappop(heap)
            self.allocator.free(node.pages)
            k = len(node.pages)
            freed += k
            self.total_pages -= k
            self.evictable_pages -= k
            parent = node.parent
            del parent.children[self._first(node.key)]
            if parent is not self.root and not parent.children and parent.lock_ref == 0:
                heapq.heappush(heap, (parent.last_access, id(parent), parent))
        self.evicted_pages += freed
        return freed

    # -- helpers ------------------------------------------------------------------------------
    def _common(self, edge: list, key: list, i: int, n: int) -> int:
        """Length of the common prefix of `edge` and `key[i:n]`, page-aligned; the first page is
        known to match (it is the child's dict key). Binary search over slice comparisons, which
        run in C, instead of a Python loop over tokens."""
        ps = self.page_size
        m = min(len(edge), n - i)
        if key[i : i + m] == edge[:m]:
            return m
        lo, hi = 1, m // ps  # pages: lo known equal, hi known unequal
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if key[i : i + mid * ps] == edge[: mid * ps]:
                lo = mid
            else:
                hi = mid
        return lo * ps

    def _split(self, child: Node, c: int) -> Node:
        """Cut `child`'s edge after c tokens; return the new upper node."""
        ps = self.page_size
        mid = Node(child.key[:c], child.pages[: c // ps], child.parent, child.last_access)
        mid.lock_ref = child.lock_ref
        mid.parent.children[self._first(child.key)] = mid
        child.key = child.key[c:]
        child.pages = child.pages[c // ps :]
        child.parent = mid
        mid.children[self._first(child.key)] = child
        return mid

    def _first(self, key: list):
        """A child's dict key: its first token (page size 1) or its first page."""
        return key[0] if self.page_size == 1 else tuple(key[: self.page_size])

    def _nodes(self):
        stack = list(self.root.children.values())
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.children.values())

    def cached_sequences(self) -> list[tuple[tuple, list[int]]]:
        """Every root-to-leaf path as (tokens, pages): for tests and debugging."""
        out = []
        stack: list[tuple[Node, tuple[int, ...], list[int]]] = [(self.root, (), [])]
        while stack:
            node, key, pages = stack.pop()
            key, pages = key + tuple(node.key), pages + node.pages.tolist()
            if not node.children and node is not self.root:
                out.append((key, pages))
            stack.extend((ch, key, pages) for ch in node.children.values())
        return out
