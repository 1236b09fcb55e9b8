"""The data files of rules/ (installed as prefixguard.rules), read once per process.

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
