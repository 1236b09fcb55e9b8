r"""Secrets in text, by their shape: what every writer of the project (store, shared index, console,
lint output, exports) removes before it keeps or prints anything. The proxy adds what it knows of one
request (its own keys, credential fields: prefixguard/proxy/redact.py); lint and the console use this
alone.

Five nets, each precise enough to leave cache-relevant text alone (ids, hex digests, UUIDs):
- keys of published formats (KEY_FORMATS), also cut short by an excerpt's ellipsis;
- PEM private-key blocks, whole or cut;
- the password of a URL's userinfo and the value of a credential assignment (`password=...`);
- base64 that decodes to one of the above (a key wrapped once more);
- `high_entropy(text)`: random-looking tokens (mixed case and digits, long), which the caller applies
  where such a token can only be a secret (a system prompt, a comparison's excerpt).
The patterns live in secret_shapes.py, the random-token net in random_tokens.py; the search and the
replacing live here.

Fingerprints are computed on the bytes as sent; this applies only to what is kept or shown.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from prefixguard.utils.secret_shapes import (
    ASSIGNED,
    ASSIGNS,
    B64,
    BEARER,
    BLOB_CHARS,
    CREDENTIAL_WORDS,
    ELLIPSIS_REACH,
    KEY_FORMATS,
    KEY_MARKS,
    KEY_RUN,
    USERINFO,
    WORD,
    WRAPPED,
    WRAPPED_ANCHOR,
    WRAPPED_WINDOW,
)

REDACTED = "[redacted]"
# The secrets of the request being handled (its own keys, its system prompt's random values), for a
# writer that is handed only its prompt (the shared session index): the proxy's analysis sets them
# around the step that writes (`request_secrets`).
_REQUEST_SECRETS: ContextVar[tuple[str, ...]] = ContextVar("request_secrets", default=())


@contextmanager
def request_secrets(secrets: Iterable[str]) -> Iterator[None]:
    token = _REQUEST_SECRETS.set(tuple(secrets))
    try:
        yield
    finally:
        _REQUEST_SECRETS.reset(token)


def current_secrets() -> tuple[str, ...]:
    """The secrets set by the innermost `request_secrets` (none outside one)."""
    return _REQUEST_SECRETS.get()


def _word_start(text: str, at: int, most: int = 48) -> int:
    lo = at
    while lo > 0 and at - lo < most and text[lo - 1] in WORD:
        lo -= 1
    return lo


def _unwrapped_secret(run: str, cut: bool = False) -> bool:
    """Whether base64 text (at any alignment) decodes to text holding a secret; cut: the text stops at an
    excerpt's ellipsis, so its decoding is cut short too (read as cut, so a key's start is enough)."""
    run = run.rstrip("=").replace("-", "+").replace("_", "/")
    for skip in range(4):
        piece = run[skip:]
        piece = piece[: len(piece) - len(piece) % 4]
        try:
            plain = base64.b64decode(piece, validate=True).decode("latin-1")
        except (binascii.Error, ValueError):
            continue
        plain += "\u2026" if cut else ""
        if redact_shapes(plain, wrapped=False) != plain:
            return True
    return False


def _wrapped_span(text: str, lo: int, hi: int) -> tuple[int, int] | None:
    """The base64 stretch of text[lo:hi] around an anchor, when it decodes to a secret."""
    for m in WRAPPED_ANCHOR.finditer(text, lo, hi):
        a, b = m.start(), m.end()
        while a > lo and text[a - 1] in B64 and m.start() - a < WRAPPED_WINDOW:
            a -= 1
        while b < hi and text[b] in B64 and b - m.end() < WRAPPED_WINDOW:
            b += 1
        if b - a >= 16 and _unwrapped_secret(text[a:b], cut=text.startswith("\u2026", b)):
            return a, b
    return None


def _spans(text: str, wrapped: bool) -> list[tuple[int, int]]:
    """(start, end) of every secret found by its shape."""
    spans: list[tuple[int, int]] = []
    for run in KEY_RUN.finditer(text):
        lo, hi = run.span()
        if hi - lo > BLOB_CHARS:
            continue
        piece = run.group()
        for mark in KEY_MARKS:
            at = piece.find(mark)
            while at >= 0:
                m = KEY_FORMATS.match(text, lo + at)
                if m is not None:
                    spans.append(m.span())
                at = piece.find(mark, at + 1)
        if wrapped and any(anchor in piece for anchor in WRAPPED):
            found = _wrapped_span(text, lo, hi)
            if found is not None:
                spans.append(found)
    at = text.find("-----BEGIN")
    while at >= 0:
        m = KEY_FORMATS.match(text, at)
        if m is not None:
            spans.append(m.span())
        at = text.find("-----BEGIN", at + 1)
    at = text.find("\u2026")
    while at >= 0:
        spans += [
            m.span()
            for m in KEY_FORMATS.finditer(text, max(0, at - ELLIPSIS_REACH), at + ELLIPSIS_REACH)
            if m.start() <= at < m.end()
        ]
        at = text.find("\u2026", at + 1)
    at = text.find("://")
    while at >= 0:
        m = USERINFO.match(text, _word_start(text, at, 16))
        if m is not None:
            spans.append(m.span(2))
        at = text.find("://", at + 1)
    return spans


def _assigned_values(text: str) -> set[str]:
    """The values assigned to credential names in text (`password: ...`, `Bearer ...`)."""
    raw = text.encode("utf-8", "surrogatepass")
    lowered = raw.lower()  # ASCII letters only: byte offsets stay
    values: set[str] = set()
    for hit in CREDENTIAL_WORDS.finditer(lowered):
        if not ASSIGNS.match(lowered, hit.end()):  # a word that names no value ("pass the test")
            continue
        window = raw[max(0, hit.start() - 48) : hit.end() + 320].decode("utf-8", "ignore")
        values.update(m.group(2) for m in ASSIGNED.finditer(window))
        values.update(m.group(2) for m in BEARER.finditer(window))
    return {v for v in values if REDACTED not in v}


def redact_shapes(text: str, wrapped: bool = True) -> str:
    """text with every secret recognised by its shape replaced (the high-entropy net excepted)."""
    spans = _spans(text, wrapped)
    if spans:
        out, last = [], 0
        for lo, hi in sorted(spans, key=lambda s: (s[0], -s[1])):
            if hi <= last:  # inside one replaced already
                continue
            out += [text[last : max(lo, last)], REDACTED if lo >= last else ""]
            last = hi
        out.append(text[last:])
        text = "".join(out)
    for value in sorted(_assigned_values(text), key=len, reverse=True):
        text = text.replace(value, REDACTED)
    return text


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """text with every occurrence of each given secret, and every secret of a known shape, replaced."""
    for secret in secrets:
        if len(secret) >= 8:  # shorter strings are not keys, and replacing them would mangle text
            text = text.replace(secret, REDACTED)
    return redact_shapes(text)


# ---- URLs shown

_USERINFO_PART = re.compile(r"(?<=://)[^/?#\s]*@")


def url_for_display(text: str) -> str:
    """A URL (or `PREFIX=URL`, or any text) with the userinfo (user and password) of each URL in it
    removed, for console lines."""
    return _USERINFO_PART.sub("", text) if "@" in text else text
