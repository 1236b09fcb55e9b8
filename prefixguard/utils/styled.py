"""The terminal, one idiom: rich, behind a thin layer. Bold and colour only where they are read (a
terminal, or FORCE_COLOR set; never with NO_COLOR set), plain in a pipe or a CI log; tables drawn by
rich.table; and `printable`, which every text printer applies to what it did not write itself (a model
name, a path, an excerpt of a prompt): a terminal acts on control characters (ESC and CSI sequences, OSC
titles and links, BEL, BS, CR overwriting a line), so none reaches it raw.

rich is imported only where output is styled or a table is drawn (it costs more than a small `lint`'s
whole run: bench/RESULTS.md), and it never reads markup in what it is given: every cell, heading and
styled text goes in as a rich Text, whose brackets are plain characters."""

from __future__ import annotations

import os
import sys
from collections.abc import Collection, Sequence
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

# styles, in rich's words
BOLD, RED, GREEN, YELLOW = "bold", "bold red", "bold green", "bold yellow"
WIDE = 100_000  # the width of a pipe or a log: rich wraps nothing there, as a plain print does not

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}
# C0 controls, DEL, C1 controls, and the invisible marks that reorder or hide text on screen (bidi
# overrides and isolates, zero-width characters, the line and paragraph separators)
_CONTROLS = [
    *range(0x20),
    0x7F,
    *range(0x80, 0xA0),
    0x200B,
    0x200C,
    0x200D,
    0x200E,
    0x200F,
    0x2028,
    0x2029,
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
    0xFEFF,
]
_ESCAPES = str.maketrans({chr(c): _NAMED.get(chr(c), f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}") for c in _CONTROLS})
_ESCAPES_WITH_BACKSLASH = {**_ESCAPES, ord("\\"): "\\\\"}


def printable(text: str, *, backslash: bool = False) -> str:
    """text with every control character written as an escape (ESC as \\x1b, CR as \\r, U+202E as
    \\u202e): one line, shown as sent, acted on by no terminal. backslash: escape '\\' too, so that an
    escape written by the text itself cannot pass for one of ours (for text that must read back exactly)."""
    if text.isprintable() and (not backslash or "\\" not in text):  # the common case: one C-speed scan
        return text
    return text.translate(_ESCAPES_WITH_BACKSLASH if backslash else _ESCAPES)


def printable_lines(text: str) -> str:
    """printable on each line of a text the printer laid out itself in lines."""
    return "\n".join(printable(line) for line in text.split("\n"))


def printable_data(value: Any) -> Any:
    """value with `printable` applied to every string in it (dict keys and values, list and tuple items,
    a NamedTuple's fields): for a renderer that prints a whole record it did not write."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable_data(k): printable_data(v) for k, v in value.items()}
    if isinstance(value, list):
        return [printable_data(v) for v in value]
    if isinstance(value, tuple):
        items = [printable_data(v) for v in value]
        record: Any = type(value)  # a NamedTuple is rebuilt as one
        return record._make(items) if hasattr(value, "_fields") else tuple(items)
    return value


def _isatty(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def _terminal(stream: IO[str]) -> bool:
    """Whether the stream is read as a terminal: FORCE_COLOR (set, not empty) says so in a pipe too."""
    return bool(os.environ.get("FORCE_COLOR")) or _isatty(stream)


def styling(stream: IO[str] | None = None) -> bool:
    """Whether what goes to the stream (stdout by default) is styled: on a terminal, unless NO_COLOR is set."""
    return not os.environ.get("NO_COLOR") and _terminal(sys.stdout if stream is None else stream)


def console(*, stderr: bool = False) -> Console:
    """The console of stdout (or stderr), made now (a test or a caller may have swapped the stream): styled
    as `styling` says; as wide as the terminal, or unbounded in a pipe; reading no markup, no emoji code,
    highlighting nothing of its own accord."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    tty = _isatty(stream)
    colour = styling(stream)
    return Console(
        file=stream,
        force_terminal=_terminal(stream),
        color_system=("auto" if tty else "standard") if colour else None,
        width=None if tty else WIDE,
        markup=False,
        emoji=False,
        highlight=False,
    )


def strong(text: str, colour: str = BOLD) -> str:
    """text in bold (and the colour given, one of the styles above) where stdout is styled; as it is otherwise."""
    if not styling():
        return text
    from rich.color import ColorSystem
    from rich.style import Style  # a style alone renders itself: no console needed for one word

    return Style.parse(colour).render(text, color_system=ColorSystem.STANDARD)


def table(
    head: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    title: str | None = None,
    left: Collection[int] = (0,),
    boxed: bool = True,
) -> Table:
    """A rich table of text cells: the columns in `left` (the first by default) to the left, the others
    (numbers) to the right. boxed: rules around and under the head; otherwise columns apart by two spaces."""
    from rich.table import Table
    from rich.text import Text

    options: dict[str, Any] = {} if boxed else {"box": None, "pad_edge": False, "show_edge": False}
    out = Table(title=None if title is None else Text(title), title_justify="left", **options)
    for i, name in enumerate(head):
        out.add_column(Text(name), justify="left" if i in left else "right")
    for row in rows:
        out.add_row(*(Text(str(cell)) for cell in row))
    return out


def columns(
    head: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "   ", left: Collection[int] = (0,)
) -> str:
    """A table as lines of text for stdout (no rules: columns apart by two spaces), each opening with indent."""
    out = console()
    with out.capture() as captured:
        out.print(table(head, rows, left=left, boxed=False), width=max(20, out.width - len(indent)))
    return "\n".join(indent + line.rstrip() for line in captured.get().rstrip("\n").split("\n"))
