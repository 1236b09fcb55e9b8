"""Find volatile content (timestamps, ids, nonces...) in text, with patterns from rules/volatile.toml."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from typing import NamedTuple

from prefixguard.contracts import ruleset


class VolatileMatch(NamedTuple):
    name: str  # pattern name, e.g. "iso-timestamp"
    start: int  # offset in the searched text
    end: int
    text: str
    varies: str = ""  # "clock" | "request": the pattern alone is evidence that the value varies (volatile.toml)

    @property
    def evidence(self) -> bool:
        """Whether the match alone says the value changes between requests (a clock, a per-request id)."""
        return bool(self.varies)


@cache
def _catalog() -> tuple[dict, ...]:
    return tuple(ruleset.load("volatile.toml")["pattern"])


def catalog_patterns() -> tuple[tuple[str, str], ...]:
    return tuple((p["name"], p["regex"]) for p in _catalog())


@cache
def id_patterns() -> frozenset[str]:
    """Names of the patterns whose value names something (a session, a request): volatile.toml `id`."""
    return frozenset(p["name"] for p in _catalog() if p.get("id"))


@cache
def _compiled(
    extra: tuple[tuple[str, str], ...],
) -> tuple[list[tuple[str, str, re.Pattern[str] | None]], re.Pattern[str]]:
    pairs = list(catalog_patterns()) + list(extra)
    # A user's own pattern is evidence: they say the value varies.
    kinds = [
        (p["name"], p.get("varies", ""), re.compile(p["evidence_if"]) if "evidence_if" in p else None)
        for p in _catalog()
    ] + [(name, "user", None) for name, _ in extra]
    # One alternation of named groups: a single pass over the text finds the first pattern at each spot.
    union = "|".join(f"(?P<g{i}>{_scoped(rx)})" for i, (_, rx) in enumerate(pairs))
    return kinds, re.compile(union)


def _scoped(rx: str) -> str:
    """Global inline flags like (?i) are not allowed inside an alternation: scope them."""
    m = re.match(r"\(\?([aiLmsux]+)\)", rx)
    return f"(?{m.group(1)}:{rx[m.end() :]})" if m else rx


def find_volatile(text: str, extra: Mapping[str, str] | None = None) -> list[VolatileMatch]:
    """All non-overlapping volatile matches in text, earliest first."""
    kinds, rx = _compiled(tuple(sorted((extra or {}).items())))
    out = []
    for m in rx.finditer(text):
        group = m.lastgroup
        assert group is not None  # every alternative is a named group: the outer g<i> names the pattern
        name, varies, only_if = kinds[int(group[1:])]
        if only_if is not None and not only_if.search(m.group()):
            varies = ""
        out.append(VolatileMatch(name=name, start=m.start(), end=m.end(), text=m.group(), varies=varies))
    return out
