"""What prefixguard keeps on disk between runs, so that a `diff` or `lint` of files seen before needs
neither a tokenizer (building cl100k_base costs more than the rest of a run) nor the price package's
data (importing genai-prices costs as much again).

Where: $PREFIXGUARD_CACHE_DIR, else $XDG_CACHE_HOME/prefixguard, else ~/.cache/prefixguard;
PREFIXGUARD_CACHE_DIR=off keeps nothing on disk. Every file here can be deleted at any time.

- counts-<encoding>-v<N>.tab: a table of SLOTS fixed slots (a sparse file), each (16-byte xxh3 digest of
  a segment's exact bytes, uint32 count, uint32 check); a digest's low bits name its slot, so a lookup
  reads one slot however full the table is, and a new count overwrites whatever held its slot. A slot
  torn by two runs writing at once, or never written, fails its check: a miss, never a wrong count.
- ranks-<encoding>.marshal: the encoding's parameters, valid while its data file keeps size and mtime.
- prices-<key>.json: the prices read from genai-prices (prices.py), for one version of its data and day.
- rules-<file>-<hash>.marshal: a rules/ TOML file parsed (ruleset.py), by the hash of its bytes.
"""

from __future__ import annotations

import json
import marshal
import mmap
import os
import struct
from pathlib import Path
from typing import Any

VERSION = 11  # bump when the text a segment's bytes stand for is derived differently, or the table's layout
SLOTS = 1 << 20  # a power of two: a digest's low bits are its slot
_SLOT = struct.Struct("<16sII")  # digest, count, check
_TABLE_BYTES = SLOTS * _SLOT.size
_KEYS = struct.Struct("<I4xI4x")  # a digest's first word names its slot, its third checks the count
_CHECK = 0x9E3779B9  # so that a slot never written (all zeros) fails its check
# More new counts than this change most pages of the table: it is read, patched in memory and written
# back in one call, where a write a count would cost more than the counts' own work.
_WHOLE = SLOTS // 64


def directory() -> Path | None:
    where = os.environ.get("PREFIXGUARD_CACHE_DIR")
    if where == "off":
        return None
    if where:
        return Path(where)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "prefixguard"


def _where(digest: bytes) -> tuple[int, int]:
    """Where the digest's slot starts in the table, and what its count is XORed with to make the check:
    digest bits that do not name the slot, so two digests sharing a slot still differ there."""
    low, other = _KEYS.unpack(digest)
    return (low & (SLOTS - 1)) * _SLOT.size, other ^ _CHECK


class CountTable:
    """One encoding's counts kept by earlier runs, and the place this run's new counts go.

    Read through a read-only map of the file, made on the first lookup: a lookup costs one slot, not a
    load of the whole file. Written with pwrite, not through a map: a full disk then fails a write with
    an error (ignored), where a write into a hole of a mapped sparse file would kill the process."""

    def __init__(self, path: Path | None) -> None:
        self._path = path  # None: nothing read or written (PREFIXGUARD_CACHE_DIR=off, tokens.forget())
        self._map: mmap.mmap | None = None
        self._opened = False

    def get(self, digest: bytes) -> int | None:
        """The count kept for this digest, or None (none kept, another digest's, torn, or no table)."""
        if not self._opened:
            self._opened = True
            self._map = _map(self._path)
        if self._map is None:
            return None
        try:
            at, mask = _where(digest)
            kept, n, check = _SLOT.unpack_from(self._map, at)
        except struct.error:  # a file shorter than a table (not ours): no slot there
            return None
        return n if kept == digest and check == n ^ mask else None

    def put_many(self, counts: dict[bytes, int]) -> None:
        """Keep these counts, each in its slot; best effort (a read-only home must not fail a lint)."""
        path = self._path
        if path is None or not counts:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                if os.fstat(fd).st_size < _TABLE_BYTES:  # new: grown, never shrunk, so a map of it stays valid
                    os.ftruncate(fd, _TABLE_BYTES)
                    _remove(path.parent, path.name.rsplit("-v", 1)[0] + "-v*", keep=path.name)
                _put(fd, [(d, n) for d, n in counts.items() if len(d) == 16 and 0 <= n < 1 << 32])
            finally:
                os.close(fd)
        except OSError:
            pass
        if self._map is None:
            self._opened = False  # the table may exist now: the next lookup maps it


def _put(fd: int, counts: list[tuple[bytes, int]]) -> None:
    if len(counts) <= _WHOLE:
        for digest, n in counts:
            at, mask = _where(digest)
            os.pwrite(fd, _SLOT.pack(digest, n, n ^ mask), at)
        return
    # A count another run writes meanwhile is lost: a miss for a later run, never a wrong count.
    table = bytearray(_TABLE_BYTES)
    os.preadv(fd, [table], 0)
    for digest, n in counts:
        at, mask = _where(digest)
        _SLOT.pack_into(table, at, digest, n, n ^ mask)
    os.pwrite(fd, table, 0)


def _map(path: Path | None) -> mmap.mmap | None:
    if path is None:
        return None
    try:
        with open(path, "rb") as file:
            table = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # none, unreadable, or empty (another run is making it)
        return None
    if hasattr(mmap, "MADV_RANDOM"):  # one slot a lookup: reading ahead would only fill memory
        table.madvise(mmap.MADV_RANDOM)
    return table


def count_table(encoding: str) -> CountTable:
    """The counts kept for this encoding (a table that keeps nothing when the cache is off)."""
    root = directory()
    return CountTable(None if root is None else root / f"counts-{encoding}-v{VERSION}.tab")


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
    if replaces:
        _remove(root, replaces, keep=name)
    _write_whole(root / name, data)


def _remove(root: Path, pattern: str, keep: str) -> None:
    """Files of `root` matching the glob `pattern` go, but `keep`: an older form of what was just written."""
    try:
        for old in root.glob(pattern) if root.is_dir() else ():
            if old.name != keep:
                old.unlink(missing_ok=True)
    except OSError:
        pass


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
