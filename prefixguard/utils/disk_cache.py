"""What prefixguard keeps on disk between runs, so that a `diff` or `lint` of files seen before needs
neither a tokenizer (building cl100k_base costs more than the rest of a run) nor the price package's
data (importing genai-prices costs as much again).

Where: $PREFIXGUARD_CACHE_DIR, else $XDG_CACHE_HOME/prefixguard, else ~/.cache/prefixguard;
PREFIXGUARD_CACHE_DIR=off keeps nothing on disk. Every file here can be deleted at any time.

- counts-<encoding>-v<N>.bin: records of (16-byte xxh3 digest of a segment's exact bytes, uint32 count),
  appended in one write per process; a torn or foreign tail is ignored; past MAX_RECORDS it starts over.
- ranks-<encoding>.marshal: the encoding's parameters, valid while its data file keeps size and mtime.
- prices-<key>.json: the prices read from genai-prices (prices.py), for one version of its data and day.
- rules-<file>-<hash>.marshal: a rules/ TOML file parsed (ruleset.py), by the hash of its bytes.
"""

from __future__ import annotations

import json
import marshal
import os
import struct
from pathlib import Path
from typing import Any

VERSION = 1  # bump when the text a segment's bytes stand for is derived differently
MAX_RECORDS = 1 << 20  # 20 MB of counts at most
_RECORD = struct.Struct("<16sI")


def directory() -> Path | None:
    where = os.environ.get("PREFIXGUARD_CACHE_DIR")
    if where == "off":
        return None
    if where:
        return Path(where)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "prefixguard"


def _counts_file(encoding: str) -> Path | None:
    root = directory()
    return None if root is None else root / f"counts-{encoding}-v{VERSION}.bin"


def load_counts(encoding: str) -> dict[bytes, int]:
    """Counts kept by earlier runs for this encoding (empty when none or unreadable)."""
    path = _counts_file(encoding)
    try:
        data = path.read_bytes() if path else b""
    except OSError:
        return {}
    whole = len(data) - len(data) % _RECORD.size  # a record cut by a crash is dropped
    return dict(_RECORD.iter_unpack(memoryview(data)[:whole]))


def save_counts(encoding: str, new: dict[bytes, int]) -> None:
    """Append counts made by this run; best effort (a read-only home must not fail a lint)."""
    path = _counts_file(encoding)
    if not path or not new:
        return
    records = b"".join(_RECORD.pack(digest, n) for digest, n in new.items() if 0 <= n < 1 << 32)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        full = path.exists() and path.stat().st_size >= MAX_RECORDS * _RECORD.size
        # O_APPEND and one write: runs in parallel interleave whole records, never bytes of two.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if full else os.O_APPEND), 0o644)
        try:
            os.write(fd, records)
        finally:
            os.close(fd)
    except OSError:
        pass


def load_json(name: str) -> Any:
    """A JSON file kept here, or None (none, unreadable, or the cache is off)."""
    root = directory()
    try:
        return json.loads((root / name).read_bytes()) if root else None
    except (OSError, ValueError):
        return None


def save_json(name: str, value: Any, replaces: str = "") -> None:
    """Write a JSON file here; files matching the glob `replaces` go (a price memo of an older day)."""
    _save(name, json.dumps(value).encode(), replaces)


def load_marshal(name: str) -> Any:
    """A marshal file kept here (plain data: dicts, lists, strings, numbers), or None."""
    root = directory()
    try:
        return marshal.loads((root / name).read_bytes()) if root else None
    except (OSError, EOFError, ValueError, TypeError):
        return None


def save_marshal(name: str, value: Any, replaces: str = "") -> None:
    try:
        data = marshal.dumps(value)
    except ValueError:
        return
    _save(name, data, replaces)


def _save(name: str, data: bytes, replaces: str) -> None:
    root = directory()
    if root is None:
        return
    try:
        for old in root.glob(replaces) if replaces and root.is_dir() else ():
            if old.name != name:
                old.unlink(missing_ok=True)
    except OSError:
        pass
    _write_whole(root / name, data)


def _write_whole(path: Path, data: bytes) -> None:
    """Readers see the old file or the whole new one; best effort (a read-only home must not fail a lint)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}")
        tmp.write_bytes(data)
        tmp.replace(path)
    except OSError:
        pass


def load_params(encoding: str, source: Path) -> dict[str, Any] | None:
    """The encoding's parameters as saved from `source`, if that file has not changed since."""
    root = directory()
    if root is None:
        return None
    try:
        stat = source.stat()
        saved = marshal.loads((root / f"ranks-{encoding}.marshal").read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        return None
    if not isinstance(saved, dict) or saved.pop("source", None) != [str(source), stat.st_size, stat.st_mtime_ns]:
        return None
    return saved


def save_params(encoding: str, source: Path, params: dict[str, Any]) -> None:
    root = directory()
    try:
        stat = source.stat()
        data = marshal.dumps({**params, "source": [str(source), stat.st_size, stat.st_mtime_ns]})
    except (OSError, ValueError):
        return
    if root is not None:
        _write_whole(root / f"ranks-{encoding}.marshal", data)
