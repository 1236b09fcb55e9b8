"""The data files of rules/ (installed as prefixguard.rules), read once per process, and which of a table's rows
a model falls under (`same_family`, `version`, `as_named`).

Every rule about what breaks or keeps a cache is data there; this is the one reader. A parse is kept in
the disk cache (disk_cache.py) by the file's bytes, so a command that needs the rules does not spend
~15 ms re-parsing ~1,000 lines of TOML each time it starts.
"""

from __future__ import annotations

import importlib
import re
from functools import cache
from pathlib import Path
from typing import Any

from xxhash import xxh3_64_hexdigest

from prefixguard.utils import disk_cache


@cache
def load(name: str) -> dict[str, Any]:
    """The parsed rules/<name> (a .toml file)."""
    # The package's folder, not importlib.resources: that import alone costs ~10 ms at every start.
    data = (Path(importlib.import_module("prefixguard.rules").__path__[0]) / name).read_bytes()
    kept = f"rules-{name}-{xxh3_64_hexdigest(data)}.marshal"
    parsed = disk_cache.load_marshal(kept)
    if not isinstance(parsed, dict):
        import tomllib  # only when the disk cache does not hold this parse: ~4 ms of every start otherwise

        parsed = tomllib.loads(data.decode("utf-8"))
        disk_cache.save_marshal(kept, parsed, replaces=f"rules-{name}-*.marshal")
    return parsed


def same_family(model: str, prefix: str) -> bool:
    """Whether a model id falls under a table's prefix; a gateway's `maker/` is dropped, and dots and
    dashes in version numbers match each other (claude-sonnet-4.6 is claude-sonnet-4-6). Bedrock's
    region and maker qualifiers (us.anthropic.claude-..., amazon.nova-...) are dropped too, and a host's own
    prefix (rules/encodings.toml host_model_prefixes). A prefix ending in a number ends there: gpt-4.1 is not
    gpt-4-1106-preview. A later version than the rows name is read as the latest they name (`as_named`)."""
    bare, want = model.rpartition("/")[2].lower(), prefix.replace(".", "-").lower()
    hosted = [bare[len(p) :] for p in load("encodings.toml")["host_model_prefixes"] if bare.startswith(p)]
    names = (as_named(name).replace(".", "-") for name in (bare, *_unqualified(bare), *hosted))
    ends = want[-1:].isdigit()
    return any(name.startswith(want) and not (ends and name[len(want) : len(want) + 1].isdigit()) for name in names)


def _unqualified(model: str) -> list[str]:
    """The id after each leading dotted qualifier: us.anthropic.claude-x -> anthropic.claude-x, claude-x."""
    parts = model.split(".")
    return [".".join(parts[k:]) for k in range(1, min(len(parts), 3))]


_VERSION = re.compile(r"([a-z]+)-(\d+)(?:\.(\d+))?")


def version(model: str) -> tuple[str, tuple[int, int]] | None:
    """("gpt", (5, 6)) for gpt-5.6-mini-2026-07-01 (a gateway's maker/ dropped); None for another form."""
    found = _VERSION.match(model.rpartition("/")[2].lower())
    return _version_of(found) if found else None


def _version_of(found: re.Match[str]) -> tuple[str, tuple[int, int]]:
    return found[1], (int(found[2]), int(found[3] or 0))


@cache
def as_named(model: str) -> str:
    """The id the rows read a model as: a later version of a family than any of them names (rules/encodings.toml
    latest_versions) as the latest they name, the rest of its id kept (gpt-6-astra -> gpt-5.6-astra); else the
    id itself. A gateway's maker/ is kept."""
    maker, slash, bare = model.rpartition("/")
    found = _VERSION.match(bare.lower())
    if found is None:
        return model
    family, have = _version_of(found)
    latest = load("encodings.toml")["latest_versions"].get(family, "")
    named = version(latest)
    return maker + slash + latest + bare[found.end() :] if named and have > named[1] else model
