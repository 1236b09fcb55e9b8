"""Random-looking tokens (mixed case and digits, long, high entropy): the net of
prefixguard/utils/redaction.py that a caller applies where such a token can only be a secret (a system
prompt, a comparison's excerpt)."""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter

from prefixguard.utils.redaction import REDACTED

_TOKEN = re.compile(r"[A-Za-z0-9+/_=!#$%&*?@^~.-]{20,}")
_HEXLIKE = re.compile(r"[0-9a-fA-F-]+|[0-9.:_-]+|[a-z_.-]+|[A-Z_.-]+")
# Ids the providers and SDKs give out carry a lower-case name before their random part (toolu_...,
# chatcmpl-..., container_..., cachedContents/...): public, and what a comparison names when a
# history was rewritten. A name that says credential (sk-, key, token, secret) is no id.
_NAMED_ID = re.compile(r"([a-z][a-zA-Z]{1,20})[_/-]")
_CREDENTIAL_NAME = re.compile(r"sk|rk|pk|key|token|secret|pass|pwd|auth|cred|session|bearer|api", re.I)
MAX_RANDOM_CHARS = 160  # longer runs are data (a thinking block's signature, a file inline), not a credential
MIN_ENTROPY_BITS = 3.5  # per character; English identifiers of 20+ letters stay under it, random keys go well over


def _entropy(token: str) -> float:
    n = len(token)
    return -sum(c / n * math.log2(c / n) for c in Counter(token).values())


def is_random_token(token: str, longest: int | None = MAX_RANDOM_CHARS) -> bool:
    """A token that can only be a secret: 20+ characters mixing upper case, lower case and digits, at
    high entropy; never a hex digest, a UUID, a number, a word, a path or a provider's named id."""
    if (
        len(token) < 20
        or longest is not None
        and len(token) > longest
        or _HEXLIKE.fullmatch(token)
        or token.count("/") > 2
        or token.count(".") > 1
        or _named_id(token)
    ):
        return False
    if not (any(c.isupper() for c in token) and any(c.islower() for c in token) and any(c.isdigit() for c in token)):
        return False
    return _entropy(token) >= MIN_ENTROPY_BITS and not _wraps_prose(token)


def _named_id(token: str) -> bool:
    m = _NAMED_ID.match(token)
    return m is not None and len(m.group(1)) >= 3 and not _CREDENTIAL_NAME.search(m.group(1))


def _wraps_prose(token: str) -> bool:
    """Base64 of plain words (a document inlined): data, not a key."""
    try:
        plain = base64.b64decode(token[: len(token) - len(token) % 4], validate=True).decode("ascii")
    except (binascii.Error, ValueError):
        return False
    return " " in plain and plain.isprintable()


def high_entropy(text: str, longest: int | None = MAX_RANDOM_CHARS) -> list[str]:
    """The random-looking tokens of a text (see is_random_token), each once."""
    return list(
        dict.fromkeys(t for t in (m.group().strip(".-=") for m in _TOKEN.finditer(text)) if is_random_token(t, longest))
    )


def redact_random(text: str) -> str:
    """text with its random-looking tokens replaced too, however long: for short texts that describe a
    change (an excerpt cut from the middle of a wrapped key is no longer recognisable by its shape)."""
    for token in high_entropy(text, None):
        text = text.replace(token, REDACTED)
    return text
