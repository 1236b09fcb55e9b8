"""Plain text for terminals: bold and colour only on a terminal (unless NO_COLOR is set), plain in a pipe
or a CI log; columns aligned without a rendering library (rich takes ~30 ms to import); and `printable`,
which every text printer applies to what it did not write itself (a model name, a path, an excerpt of a
prompt): a terminal acts on control characters (ESC and CSI sequences, OSC titles and links, BEL, BS, CR
overwriting a line), so none reaches it raw."""
from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

BOLD, RED, GREEN, YELLOW = 0, 31, 32, 33

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}
# C0 controls, DEL, C1 controls, and the invisible marks that reorder or hide text on screen (bidi
# overrides and isolates, zero-width characters, the line and paragraph separators)
_CONTROLS = [*range(0x20), 0x7F, *range(0x80, 0xA0), 0x200B, 0x200C, 0x200D, 0x200E, 0x200F, 0x2028, 0x2029,
             *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0xFEFF]
_ESCAPES = str.maketrans({chr(c): _NAMED.get(chr(c), f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}")
                          for c in _CONTROLS})
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
        return type(value)._make(items) if hasattr(value, "_fields") else tuple(items)
    return value


def strong(text: str, colour: int = BOLD) -> str:
    """Bold, and coloured unless colour is BOLD."""
    if os.environ.get("NO_COLOR") or not sys.stdout.isatty():
        return text
    return f"\033[1{f';{colour}' if colour else ''}m{text}\033[0m"


def columns(head: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "   ") -> str:
    """A table as aligned text: the first column to the left, numbers (the others) to the right."""
    widths = [max(len(str(c)) for c in col) for col in zip(head, *rows)]

    def line(cells: Sequence[str]) -> str:
        return indent + "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                                  for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return "\n".join([line(head), *map(line, rows)])
