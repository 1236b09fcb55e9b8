"""The records of the parts jsonspan walks: Node (a value and its span), and for an array of messages
the plain messages kept as strings and offsets (PlainMessage, Elements) and the runs of them read beside
another body (Run), made into nodes only when read."""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterator, Sequence
from itertools import islice
from typing import Any

_WS = r"[ \t\n\r]*"
# One plain user or assistant message and the comma after it: 1 its role, 2 its content (quoted).
RUN_MESSAGE = (
    rf'\{{{_WS}"role"{_WS}:{_WS}"(user|assistant)"{_WS},{_WS}"content"{_WS}:{_WS}("[^"\\\x00-\x1f]*")'
    rf"{_WS}\}}{_WS},{_WS}"
)
_run_message = re.compile(RUN_MESSAGE)


class Node:
    """A decoded value and its span in the text; kids for the containers the spec walked."""

    __slots__ = ("value", "start", "end", "kids")

    def __init__(
        self, value: Any, start: int, end: int, kids: dict[str, Node] | list[Node] | Elements | None = None
    ) -> None:
        self.value = value
        self.start = start
        self.end = end
        self.kids = kids

    def get(self, key: str) -> Node | None:
        return self.kids.get(key) if isinstance(self.kids, dict) else None

    @property
    def elements(self) -> Sequence[Node]:
        """An array's element nodes, as walked by its spec (none for any other value)."""
        kids = self.kids
        return kids if isinstance(kids, (list, Elements)) else []

    @property
    def members(self) -> dict[str, Node]:
        """An object's member nodes, as walked by its spec (none for any other value)."""
        kids = self.kids
        return kids if type(kids) is dict else {}


ABSENT = Node(None, 0, 0)  # a member the body lacks, where a Node is easier to hold than None


class PlainMessage(Node):
    """A message matched by _plain_message: its role and content strings and three offsets; no dict of
    its members (its value and its content's node are made when asked for: the adapters ask neither)."""

    __slots__ = ("role", "content", "content_start")

    def __init__(self, role: str, content: str, start: int, end: int, content_start: int) -> None:
        self.role, self.content, self.start, self.end, self.content_start = role, content, start, end, content_start

    @property
    def value(self) -> dict[str, Any]:
        return {"role": self.role, "content": self.content}

    def get(self, key: str) -> Node | None:
        """The content member's node."""
        return Node(self.content, self.content_start, self.content_end) if key == "content" else None

    @property
    def content_end(self) -> int:
        """Where the content string ends: it has no escapes, so its span is its length and two quotes."""
        return self.content_start + len(self.content) + 2

    @property
    def kids(self) -> dict[str, Node]:  # type: ignore[override]  # made when asked for, never set
        return {"content": Node(self.content, self.content_start, self.content_end)}


class Run:
    """Plain user and assistant messages of a body read beside another (`parse(shared=...)`), standing
    where the other's text has the same characters: one record for all of them, none decoded. Their
    parts are the other body's parts at the same places (segments.Builder.take_run); `messages` reads
    them for any other use."""

    __slots__ = ("first", "count", "start", "end", "text")

    def __init__(self, first: int, count: int, start: int, end: int, text: str) -> None:
        self.first, self.count, self.start, self.end, self.text = first, count, start, end, text

    def messages(self) -> Iterator[PlainMessage]:
        """Its messages, read now (each matched again: no other body needed)."""
        idx, text = self.start, self.text
        for _ in range(self.count):
            found = _run_message.match(text, idx)
            assert found is not None  # matched as a run already
            quote, close = found.span(2)
            yield PlainMessage(
                found[1], text[quote + 1 : close - 1], idx, text.rindex("}", close, found.end()) + 1, quote
            )
            idx = found.end()


# What a run holds in its array's decoded value, for the readers of the decoded body (shape detection):
# a role object, as each of its messages is; which role is not said (user or assistant, each neutral).
RUN_VALUE: dict[str, Any] = {"role": None}


class Elements(Sequence[Any]):
    """The element nodes of an array that may hold plain messages: a plain message keeps its role (in a
    role object shared by its role's messages, the array's decoded value) and three offsets, and its
    node and content string are made when read; only the other elements' nodes are kept. A run (a
    body read beside another) holds one slot of each for all its messages."""

    __slots__ = ("values", "text", "contents", "spans", "nodes", "runs", "size")

    def __init__(self, values: list[Any], text: str, known: bool) -> None:
        self.values = values  # the array's decoded elements: a plain message's role object; a run's RUN_VALUE
        self.text = text
        # known: a plain message's content string where another body's is taken (None: read from the text)
        self.contents: list[str | None] | None = [] if known else None
        # start, end and content start of each slot (-1: not a plain message), in 4 bytes where they fit
        self.spans = array("i" if len(text) < 2**31 else "q")
        self.nodes: dict[int, Node] = {}  # the elements that are not plain messages, by element index
        self.runs: list[Run] = []  # in order
        self.size = 0  # elements

    def __len__(self) -> int:
        return self.size

    def slot(self, i: int) -> int | Run:
        """Element i's slot in values, contents and spans; or the run it is in."""
        k = i
        for run in self.runs:
            if i < run.first:
                break
            if i < run.first + run.count:
                return run
            k -= run.count - 1
        return k

    def __getitem__(self, i: Any) -> Any:
        if type(i) is not int:
            raise TypeError("elements are read one at a time")
        n = len(self)
        if not -n <= i < n:
            raise IndexError(i)
        i %= n
        node = self.nodes.get(i)
        if node is not None:
            return node
        k = self.slot(i)
        if type(k) is Run:
            return next(islice(k.messages(), i - k.first, None))
        return self._plain(k)  # type: ignore[arg-type]  # not a Run

    def _plain(self, k: int) -> PlainMessage | None:
        """The node of the plain message in slot k; None for another element, or once released."""
        fields, spans = self.values[k], self.spans
        start, end, quote = spans[3 * k], spans[3 * k + 1], spans[3 * k + 2]
        if start < 0 or fields is None:
            return None
        content = self.contents[k] if self.contents is not None else None
        if content is None:  # it has no escapes: its characters are its value
            content = self.text[quote + 1 : self.text.rindex('"', quote + 1, end)]
        return PlainMessage(fields["role"], content, start, end, quote)

    def release(self, i: int) -> None:
        """Let go of element i (segments.release); a run holds nothing to let go of."""
        self.nodes.pop(i, None)
        k = self.slot(i)
        if type(k) is not Run:
            self.values[k] = None  # type: ignore[index]  # not a Run
            if self.contents is not None:
                self.contents[k] = None  # type: ignore[index]  # not a Run

    def __iter__(self) -> Iterator[Any]:
        for _, node in self.items():
            if type(node) is Run:
                yield from node.messages()
            else:
                yield node

    def items(self) -> Iterator[tuple[int, Any]]:
        """(element index, node) of each element, but (first index, Run) once for each run."""
        nodes, runs = self.nodes, iter(self.runs)
        run = next(runs, None)
        i = k = 0
        n = len(self)
        while i < n:
            if run is not None and i == run.first:
                yield i, run
                i, k = i + run.count, k + 1
                run = next(runs, None)
                continue
            node = nodes.get(i)
            yield i, node if node is not None else self._plain(k)
            i, k = i + 1, k + 1


def items(elements: Sequence[Node]) -> Iterator[tuple[int, Any]]:
    """Elements.items of an array's elements; enumerate for any other."""
    return elements.items() if type(elements) is Elements else enumerate(elements)
