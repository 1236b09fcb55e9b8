"""The data files of rules/ (installed as prefixguard.rules), read once per process, and which of a table's rows
a model falls under (`same_family`).

Every rule about what breaks or keeps a cache is data there; this is the one reader. A parse is kept in
the disk cache (disk_cache.py) by the file's bytes, so a command that needs the rules does not spend
~15 ms re-parsing ~1,000 lines of TOML each time it starts.
"""

from __future__ import annotations

import importlib
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
    gpt-4-1106-preview."""
    bare, want = model.rpartition("/")[2].lower(), prefix.replace(".", "-").lower()
    hosted = [bare[len(p) :] for p in load("encodings.toml")["host_model_prefixes"] if bare.startswith(p)]
    names = (name.replace(".", "-") for name in (bare, *_unqualified(bare), *hosted))
    ends = want[-1:].isdigit()
    return any(name.startswith(want) and not (ends and name[len(want) : len(want) + 1].isdigit()) for name in names)


def _unqualified(model: str) -> list[str]:
    """The id after each leading dotted qualifier: us.anthropic.claude-x -> anthropic.claude-x, claude-x."""
    parts = model.split(".")
    return [".".join(parts[k:]) for k in range(1, min(len(parts), 3))]
