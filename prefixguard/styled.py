"""Plain text for terminals: bold and colour only on a terminal (unless NO_COLOR is set), plain in a pipe
or a CI log; columns aligned without a rendering library (rich takes ~30 ms to import)."""
from __future__ import annotations

import os
import sys
from collections.abc import Sequence

BOLD, RED, GREEN, YELLOW = 0, 31, 32, 33


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
