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

Fingerprints are computed on the bytes as sent; this applies only to what is kept or shown.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

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


# Credentials by their published formats, wherever they stand in a text.
_FORMATS = (
    r"sk-ant-[A-Za-z0-9_-]{16,}",  # Anthropic (sk-ant-api03-..., sk-ant-admin01-...)
    r"\bsk-(?:proj-|svcacct-|admin-|or-v1-)?[A-Za-z0-9_-]{20,}",  # OpenAI (sk-proj-, legacy sk-), OpenRouter, DeepSeek
    r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b",  # AWS access key ids
    r"\bABSK[A-Za-z0-9+/]{20,}={0,2}",  # Amazon Bedrock API keys (long-term)
    r"\bbedrock-api-key-[A-Za-z0-9+/%=_-]{20,}",  # Amazon Bedrock API keys (short-term)
    r"AIza[0-9A-Za-z_-]{35}",  # Google API keys
    r"\bya29\.[0-9A-Za-z_-]{20,}",  # Google OAuth access tokens
    r"\b1//0[0-9A-Za-z_-]{30,}",  # Google OAuth refresh tokens
    r"\bgh[pousr]_[A-Za-z0-9]{36,}",  # GitHub tokens
    r"\bgithub_pat_[A-Za-z0-9_]{22,}",  # GitHub fine-grained tokens
    r"\bglpat-[A-Za-z0-9_-]{20,}",  # GitLab personal tokens
    r"\bxox[abposre]-[A-Za-z0-9-]{10,}",  # Slack tokens
    r"\bxapp-\d-[A-Za-z0-9-]{20,}",  # Slack app tokens
    r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",  # JWTs (header.payload.signature)
    r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{20,}",  # Stripe secret and restricted keys
    r"\bwhsec_[A-Za-z0-9+/=]{24,}",  # Stripe webhook secrets
    r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{30,}",  # SendGrid
    r"\bhf_[A-Za-z0-9]{30,}",  # Hugging Face
    r"\bnpm_[A-Za-z0-9]{36}\b",  # npm
    r"\bpypi-[A-Za-z0-9_-]{50,}",  # PyPI
    r"\bgsk_[A-Za-z0-9]{40,}",  # Groq
    r"\bxai-[A-Za-z0-9]{40,}",  # xAI
    r"\bpplx-[A-Za-z0-9]{40,}",  # Perplexity
    r"\br8_[A-Za-z0-9]{30,}",  # Replicate
    r"\bdop_v1_[a-f0-9]{64}",  # DigitalOcean
    r"\bdapi[a-f0-9]{32}\b",  # Databricks
    r"\bshp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}",  # Shopify
    r"\blsv2_(?:pt|sk)_[A-Za-z0-9_]{30,}",  # LangSmith
    r"\btvly-[A-Za-z0-9-]{24,}",  # Tavily
    r"\bATATT3[A-Za-z0-9_=-]{40,}",  # Atlassian
    r"\bAccountKey=[A-Za-z0-9+/]{40,}={0,2}",  # Azure storage connection strings
    r"\bSharedAccessSignature=[^\s\"';]{20,}",  # Azure service bus / SAS
    # PEM private keys: the whole block, or from its first line to where the key's characters stop
    r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]{0,16384}?-----END[A-Z0-9 ]{0,40}"
    r"PRIVATE KEY(?: BLOCK)?-----|(?:[A-Za-z0-9+/=:,. \t\r\n-]|\\[nrt])*)",
    # a key cut short by an ellipsis (a diff's excerpt): its start is still the key's (_CUT_MARKS, below)
    "{cut}",
    # ...or cut at its start: a long unbroken run of key characters right after the ellipsis
    r"\u2026(?=[A-Za-z0-9_+/=-]*\d)[A-Za-z0-9_+/=-]{20,}",
)
_CUT_MARKS = (
    "sk-",
    "sk_live_",
    "rk_live_",
    "AKIA",
    "ASIA",
    "ABIA",
    "ACCA",
    "ABSK",
    "bedrock-api-key-",
    "AIza",
    "ya29.",
    "1//0",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xoxa-",
    "xoxb-",
    "xoxp-",
    "xoxo-",
    "xoxs-",
    "xoxr-",
    "xoxe-",
    "xapp-",
    "eyJ",
    "whsec_",
    "SG.",
    "hf_",
    "npm_",
    "pypi-",
    "gsk_",
    "xai-",
    "pplx-",
    "r8_",
    "dop_v1_",
    "dapi",
    "shpat_",
    "shpss_",
    "shpca_",
    "shppa_",
    "lsv2_",
    "tvly-",
    "ATATT3",
    "AccountKey=",
    "-----BEGIN",
)
KEY_FORMATS = re.compile(
    "|".join(_FORMATS).replace("{cut}", "(?:" + "|".join(map(re.escape, _CUT_MARKS)) + r")[A-Za-z0-9_.+/= -]*\u2026")
)
# Every KEY_FORMATS match but a PEM block's and an excerpt's starts with one of these marks, inside a run
# of key characters: the runs are found in one regex pass, the marks looked for in them alone, and the
# formats tried where a mark stands (the formats' regex over a whole large body is far too slow).
_KEY_MARKS = (
    "sk-",
    "sk_",
    "rk_",
    "AKIA",
    "ASIA",
    "ABIA",
    "ACCA",
    "ABSK",
    "bedrock-api-key-",
    "AIza",
    "ya29.",
    "1//0",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xox",
    "xapp-",
    "eyJ",
    "whsec_",
    "SG.",
    "hf_",
    "npm_",
    "pypi-",
    "gsk_",
    "xai-",
    "pplx-",
    "r8_",
    "dop_v1_",
    "dapi",
    "shp",
    "lsv2_",
    "tvly-",
    "ATATT3",
    "AccountKey=",
    "SharedAccessSignature=",
)
_RUN = re.compile(r"[A-Za-z0-9_+/=.-]{16,}")
# A longer unbroken run is data (an image, a file), not a pasted key: not searched.
BLOB_CHARS = 65_536
_ELLIPSIS_REACH = 256  # characters on each side of an ellipsis where a cut key is looked for

# The password of a URL's userinfo (scheme://user:password@host): a connection string in a prompt.
_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]{1,15}://[^\s/:@'\"<>]*:)([^\s/@'\"<>\u2026]+)(?=@|\u2026)")
# The value of a credential assignment in prose or config text (`password: ...`, `API_KEY=...`): 6+
# characters, not a word alone (a digit, a sign or a capital inside it), so that "password: required"
# or "Required" stays, as the value is replaced wherever it stands. (PWD is no credential name: it is the
# working directory in every environment listing.)
_ASSIGNED = re.compile(
    r"\b((?i:(?:[a-z0-9]+[_-])*(?:password|passwd|passphrase|secret|secret[_-]?key|api[_-]?key|apikey|"
    r"access[_-]?key|private[_-]?key|client[_-]?secret|auth[_-]?token|access[_-]?token|refresh[_-]?token)"
    r"\b\\?[\"']?\s*(?:[:=]|\bis\b)\s*\\?[\"']?))"  # a quote may be escaped: JSON inside a string
    r"((?=[^\s\"'\\,;]*[0-9!#$%&*+/=?@^~]|(?=[^\s\"'\\,;]*[a-z])[^\s\"'\\,;]+[A-Z])[^\s\"'\\,;]{6,})"
)
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+([A-Za-z0-9._~+/=-]{16,})")
# Where a credential is named: a value assigned to it is looked for just after (read in bytes, lowered).
_CREDENTIAL_WORDS = re.compile(
    rb"pass|secret|api.?key|access.?key|private.?key|auth.?token|access.?token|"
    rb"refresh.?token|bearer|basic"
)
_ASSIGNS = re.compile(rb"[a-z0-9_-]{0,24}\\?[\"']?\s{0,4}(?:[:=]|is\s)|\s+[a-z0-9._~+/=-]{16}")
_WORD = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+.")

# Base64 that wraps a key: the encodings of the formats' first characters, at each of the three
# alignments a wrapped key can start at, found first; then the run around them decoded and searched.
_WRAPPED_PREFIXES = (
    "sk-ant-",
    "sk-proj-",
    "sk-",
    "AKIA",
    "ASIA",
    "ABSK",
    "AIza",
    "ghp_",
    "github_pat_",
    "xoxb-",
    "eyJ",
    "-----BEGIN",
    "hf_",
    "sk_live_",
    "glpat-",
    "password",
    "api_key",
    "apikey",
)


def _anchors(prefix: str) -> list[str]:
    out = []
    raw = prefix.encode()
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw).decode()
        first, last = -(-8 * shift // 6), 8 * (shift + len(raw)) // 6
        if last - first >= 4:
            out.append(encoded[first:last])
    return out


_WRAPPED = tuple(dict.fromkeys(a for p in _WRAPPED_PREFIXES for a in _anchors(p)))
_WRAPPED_ANCHOR = re.compile("|".join(map(re.escape, _WRAPPED)))
_B64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_")
_WRAPPED_WINDOW = 8192  # characters of a base64 run read around an anchor: keys are short


def _word_start(text: str, at: int, most: int = 48) -> int:
    lo = at
    while lo > 0 and at - lo < most and text[lo - 1] in _WORD:
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
    for m in _WRAPPED_ANCHOR.finditer(text, lo, hi):
        a, b = m.start(), m.end()
        while a > lo and text[a - 1] in _B64 and m.start() - a < _WRAPPED_WINDOW:
            a -= 1
        while b < hi and text[b] in _B64 and b - m.end() < _WRAPPED_WINDOW:
            b += 1
        if b - a >= 16 and _unwrapped_secret(text[a:b], cut=text.startswith("\u2026", b)):
            return a, b
    return None


def _spans(text: str, wrapped: bool) -> list[tuple[int, int]]:
    """(start, end) of every secret found by its shape."""
    spans: list[tuple[int, int]] = []
    for run in _RUN.finditer(text):
        lo, hi = run.span()
        if hi - lo > BLOB_CHARS:
            continue
        piece = run.group()
        for mark in _KEY_MARKS:
            at = piece.find(mark)
            while at >= 0:
                m = KEY_FORMATS.match(text, lo + at)
                if m is not None:
                    spans.append(m.span())
                at = piece.find(mark, at + 1)
        if wrapped and any(anchor in piece for anchor in _WRAPPED):
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
            for m in KEY_FORMATS.finditer(text, max(0, at - _ELLIPSIS_REACH), at + _ELLIPSIS_REACH)
            if m.start() <= at < m.end()
        ]
        at = text.find("\u2026", at + 1)
    at = text.find("://")
    while at >= 0:
        m = _USERINFO.match(text, _word_start(text, at, 16))
        if m is not None:
            spans.append(m.span(2))
        at = text.find("://", at + 1)
    return spans


def _assigned_values(text: str) -> set[str]:
    """The values assigned to credential names in text (`password: ...`, `Bearer ...`)."""
    raw = text.encode("utf-8", "surrogatepass")
    lowered = raw.lower()  # ASCII letters only: byte offsets stay
    values: set[str] = set()
    for hit in _CREDENTIAL_WORDS.finditer(lowered):
        if not _ASSIGNS.match(lowered, hit.end()):  # a word that names no value ("pass the test")
            continue
        window = raw[max(0, hit.start() - 48) : hit.end() + 320].decode("utf-8", "ignore")
        values.update(m.group(2) for m in _ASSIGNED.finditer(window))
        values.update(m.group(2) for m in _BEARER.finditer(window))
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


# ---- random-looking tokens

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


# ---- URLs shown

_USERINFO_PART = re.compile(r"(?<=://)[^/?#\s]*@")


def url_for_display(text: str) -> str:
    """A URL (or `PREFIX=URL`, or any text) with the userinfo (user and password) of each URL in it
    removed, for console lines."""
    return _USERINFO_PART.sub("", text) if "@" in text else text
