"""Find volatile content (timestamps, ids, nonces...) in text, with patterns from rules/volatile.toml."""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Mapping


@dataclass(frozen=True, slots=True)
class VolatileMatch:
    name: str    # pattern name, e.g. "iso-timestamp"
    start: int   # offset in the searched text
    end: int
    text: str


@cache
def catalog_patterns() -> tuple[tuple[str, str], ...]:
    data = tomllib.loads(files("rules").joinpath("volatile.toml").read_text("utf-8"))
    return tuple((p["name"], p["regex"]) for p in data["pattern"])


@cache
def _compiled(extra: tuple[tuple[str, str], ...]) -> tuple[list[str], re.Pattern[str]]:
    pairs = list(catalog_patterns()) + list(extra)
    # One alternation of named groups: a single pass over the text finds the first pattern at each spot.
    names = [name for name, _ in pairs]
    union = "|".join(f"(?P<g{i}>{_scoped(rx)})" for i, (_, rx) in enumerate(pairs))
    return names, re.compile(union)


def _scoped(rx: str) -> str:
    """Global inline flags like (?i) are not allowed inside an alternation: scope them."""
    m = re.match(r"\(\?([aiLmsux]+)\)", rx)
    return f"(?{m.group(1)}:{rx[m.end():]})" if m else rx


def find_volatile(text: str, extra: Mapping[str, str] | None = None) -> list[VolatileMatch]:
    """All non-overlapping volatile matches in text, earliest first."""
    names, rx = _compiled(tuple(sorted((extra or {}).items())))
    out = []
    for m in rx.finditer(text):
        i = int(m.lastgroup[1:])  # the outer group g<i> names the pattern that matched
        out.append(VolatileMatch(names[i], m.start(), m.end(), m.group()))
    return out
