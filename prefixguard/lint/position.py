"""Where a finding is in the file as written: JSON pointer -> character span -> line:column.

A request's segments already know their spans (Segment.start/end, from the wire adapters), so a
pointer is resolved from its nearest known ancestor and only that part is parsed again. Offsets inside a
string value (a matched timestamp) are mapped through the string's escapes to the raw text.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable

from prefixguard.wire import jsonspan
from prefixguard.wire.jsonspan import join_pointer, split_pointer


class Document:
    """The text of one input file, with line starts for offset -> (line, column), both 1-based.

    Columns count characters (Unicode code points), as editors and SARIF's unicodeCodePoints do.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self._starts = [0]
        find = text.find
        i = find("\n")
        while i >= 0:
            self._starts.append(i + 1)
            i = find("\n", i + 1)

    def line_col(self, offset: int) -> tuple[int, int]:
        line = bisect_right(self._starts, offset)
        return line, offset - self._starts[line - 1] + 1

    def excerpt(self, start: int, end: int, width: int = 120) -> tuple[str, int, int]:
        """start's line, or the part of it around [start, end) when it is longer than `width` (such as
        single-line JSON), cut with '…': (text, caret offset in it, caret width)."""
        lo = self._starts[bisect_right(self._starts, start) - 1]
        hi = self.text.find("\n", start)
        hi = len(self.text) if hi < 0 else hi
        if self.text[hi - 1 : hi] == "\r":
            hi -= 1
        end = max(start + 1, min(end, hi))
        left, right = lo, hi
        if hi - lo > width:
            left = max(lo, start - width // 3)
            right = min(hi, left + width)
        head = "…" if left > lo else ""
        tail = "…" if right < hi else ""
        return head + self.text[left:right] + tail, len(head) + start - left, max(1, min(end, right) - start)


def string_offset(text: str, quote: int, index: int) -> int:
    """Offset in text of decoded character `index` of the JSON string literal whose '"' is at quote."""
    i, n = quote + 1, 0  # raw position, decoded characters before it
    while True:
        j = text.find("\\", i)
        if j < 0 or j - i >= index - n:
            return i + (index - n)
        n += j - i
        if text.startswith("u", j + 1):
            code = int(text[j + 2 : j + 6], 16)
            i = j + 6
            # a surrogate pair (two \u escapes) decodes to one character
            if (
                0xD800 <= code < 0xDC00
                and text.startswith("\\u", i)
                and 0xDC00 <= int(text[i + 2 : i + 6], 16) < 0xE000
            ):
                i += 6
        else:
            i = j + 2
        n += 1


class Locator:
    """Resolves JSON pointers of one request body to spans of the file the body came from.

    body: the request body text (Prompt.text); known: pointer -> span in body already known (segments);
    to_file: body offset -> file offset (the body may sit inside a JSONL line, or inside a JSON string).
    """

    def __init__(
        self,
        body: str,
        known: dict[str, tuple[int, int]] | None = None,
        to_file: Callable[[int], int] | None = None,
        find: Callable[[str], tuple[int, int] | None] | None = None,
    ) -> None:
        """find: pointer -> span where known (the segments'), asked on a miss, instead of `known` up front."""
        self.body = body
        self._spans: dict[str, tuple[int, int]] = {"": (0, len(body)), **(known or {})}
        self.to_file = to_file or (lambda offset: offset)
        self._find = find

    def _known(self, pointer: str) -> bool:
        if pointer in self._spans:
            return True
        found = self._find(pointer) if self._find is not None else None
        if found is not None:
            self._spans[pointer] = found
        return found is not None

    def span(self, pointer: str) -> tuple[int, int]:
        """Span in the body of the value at pointer; for a missing member, the span of its nearest parent."""
        if self._known(pointer):
            return self._spans[pointer]
        tokens = split_pointer(pointer)
        depth = len(tokens)
        while not self._known(join_pointer("", *tokens[:depth])):  # the root is always known
            depth -= 1
        base = join_pointer("", *tokens[:depth])
        start, end = self._spans[base]
        node = jsonspan.parse(self.body[start:end], _spec(tokens[depth:]))
        for token in tokens[depth:]:
            kid = _child(node, token)
            if kid is None:
                break
            node = kid
            base = join_pointer(base, token)
            self._spans[base] = (start + node.start, start + node.end)
        return self._spans[base]

    def file_span(self, pointer: str, inner: tuple[int, int] | None = None) -> tuple[int, int]:
        """Span in the file; inner: decoded character offsets inside the string value at pointer."""
        start, end = self.span(pointer)
        if inner is not None and self.body.startswith('"', start):
            start, end = (string_offset(self.body, start, inner[0]), string_offset(self.body, start, inner[1]))
        return self.to_file(start), self.to_file(end)


def _spec(tokens: list[str]) -> jsonspan.Spec | None:
    spec: jsonspan.Spec | None = None
    for token in reversed(tokens):
        spec = {token: spec, "[]": spec}  # either an object member or an array element
    return spec


def _child(node: jsonspan.Node, token: str) -> jsonspan.Node | None:
    if isinstance(node.kids, dict):
        return node.kids.get(token)
    elements = node.elements
    if token.isdigit() and int(token) < len(elements):
        return elements[int(token)]
    return None
