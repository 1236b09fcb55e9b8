"""The token counts kept on disk (utils/disk_cache.py's CountTable): one slot read a lookup, so a full
table costs a small lint nothing; a torn or corrupted slot is a miss, never a wrong count."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from xxhash import xxh3_128_digest

from prefixguard.model import tokens
from prefixguard.utils import disk_cache

ROOT = Path(__file__).resolve().parent.parent
SMALL = ROOT / "examples" / "requests" / "anthropic" / "history_rewritten" / "b.json"
PG = Path(sys.executable).parent / "prefixguard"
# One process counts a text; it says the count and whether it had to build the encoder for it.
COUNT = (
    "import json, sys; from prefixguard.model import tokens;"
    "n = tokens.count_once(sys.argv[1].encode(), lambda: sys.argv[1]);"
    "print(json.dumps([n, tokens._encoding.cache_info().currsize]))"
)

MEASURE = (
    "import json, resource, subprocess, sys; code = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL);"
    "u = resource.getrusage(resource.RUSAGE_CHILDREN);"
    "print(json.dumps([code, u.ru_utime + u.ru_stime, u.ru_maxrss]))"
)


@pytest.fixture
def cache_dir(monkeypatch, tmp_path):
    """The disk store on, in a temporary directory, for this process and the ones it starts."""
    tokens.reset()
    monkeypatch.setenv("PREFIXGUARD_CACHE_DIR", str(tmp_path / "cache"))
    yield tmp_path / "cache"
    monkeypatch.undo()
    tokens.reset()


def count_in_a_process(text: str) -> list[int]:
    out = subprocess.run(
        [sys.executable, "-c", COUNT, text],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
    )
    return json.loads(out.stdout)


def test_counts_survive_across_processes_and_the_older_file_goes(cache_dir):
    cache_dir.mkdir()
    old = cache_dir / "counts-cl100k_base-v1.bin"
    old.write_bytes(b"\x00" * 40)
    other = cache_dir / "counts-o200k_base-v1.bin"  # another encoding's: not this table's to remove
    other.write_bytes(b"\x00" * 40)
    text = "The prefix that caches well is the one that never changes."
    first, second = count_in_a_process(text), count_in_a_process(text)
    assert first == [tokens.count(text), 1]  # counted: the encoder was built
    assert second == [first[0], 0]  # read from the table: no encoder at all
    assert not old.exists() and other.exists()
    table = cache_dir / f"counts-cl100k_base-v{disk_cache.VERSION}.tab"
    assert table.stat().st_size == disk_cache.SLOTS * 24
    assert table.stat().st_blocks * 512 < 1 << 20  # sparse: a few written slots take a few blocks


def test_a_corrupted_torn_or_foreign_slot_is_a_miss_never_a_wrong_count(cache_dir):
    text = "hello from a table"
    right = tokens.count(text)
    digest = xxh3_128_digest(text.encode())
    assert count_in_a_process(text) == [right, 1]
    path = cache_dir / f"counts-cl100k_base-v{disk_cache.VERSION}.tab"
    at, _ = disk_cache._where(digest)
    with path.open("r+b") as file:
        file.seek(at + 16)
        file.write((right + 1).to_bytes(4, "little"))  # the count changed, its check not
    assert count_in_a_process(text) == [right, 1]  # recounted, and the right count written back
    assert count_in_a_process(text) == [right, 0]
    with path.open("r+b") as file:  # two runs' slots torn: one's digest, the other's count
        foreign = bytes(digest[:4]) + bytes(range(12))  # a digest sharing the slot
        n = right + 7
        file.seek(at)
        file.write(foreign + n.to_bytes(4, "little") + (n ^ disk_cache._where(foreign)[1]).to_bytes(4, "little"))
        file.seek(at)
        file.write(digest)
    assert count_in_a_process(text) == [right, 1]
    table = disk_cache.count_table("cl100k_base")
    assert table.get(bytes(16)) is None  # a slot never written (zeros) fails its check
    path.write_bytes(b"\x01" * 10)  # a file that is no table: nothing read from it
    assert disk_cache.count_table("cl100k_base").get(digest) is None
    disk_cache.count_table("cl100k_base").put_many({digest: right})  # ...and made a table again
    assert disk_cache.count_table("cl100k_base").get(digest) == right
    assert path.stat().st_size == disk_cache.SLOTS * 24


def test_a_lookup_in_the_same_process_sees_what_it_saved(cache_dir):
    """A long-lived process (the proxy's analysis) saves as it goes: what it saved is found again, even
    where the table did not exist when it first looked."""
    table = disk_cache.count_table("enc")
    keys = [xxh3_128_digest(f"segment {i}".encode()) for i in range(5)]
    assert table.get(keys[0]) is None
    table.put_many({k: i for i, k in enumerate(keys)})
    assert [table.get(k) for k in keys] == [0, 1, 2, 3, 4]
    table.put_many({keys[0]: 41})  # a slot holds the latest count written
    assert disk_cache.count_table("enc").get(keys[0]) == 41
    used = {disk_cache._where(k)[0] // 24 for k in keys}
    many = {i.to_bytes(4, "little") + b"m" * 12: 3 for i in range(2 * disk_cache._WHOLE) if i not in used}
    table.put_many(many)  # so many that the table is written whole: the slots it had stay
    assert [table.get(k) for k in keys] == [41, 1, 2, 3, 4]
    assert all(table.get(k) == 3 for k in many)


def test_an_unwritable_cache_is_harmless(cache_dir, tmp_path):
    """No table can be made (the cache directory's parent is a file, the table's name a directory, or
    the directory read-only): the command's output and exit code are those of a run with no cache."""

    def lint(where: str) -> tuple[int, str, str]:
        run = subprocess.run(
            [str(PG), "lint", str(SMALL)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PREFIXGUARD_CACHE_DIR": where},
        )
        return run.returncode, run.stdout, run.stderr

    expected = lint("off")
    assert expected[0] == 1 and expected[2] == ""
    (tmp_path / "a-file").write_text("")
    blocked = tmp_path / "blocked"
    (blocked / f"counts-cl100k_base-v{disk_cache.VERSION}.tab").mkdir(parents=True)
    places = [tmp_path / "a-file" / "cache", blocked]
    if os.geteuid() != 0:  # root writes anywhere: no read-only directory for it
        read_only = tmp_path / "read-only"
        read_only.mkdir(mode=0o555)
        places.append(read_only)
    for place in places:
        assert lint(str(place)) == expected, place
    assert disk_cache.count_table("x").get(bytes(16)) is None  # the fixture's directory, never made
    disk_cache.CountTable(tmp_path / "a-file" / "t.tab").put_many({bytes(16): 1})  # no error raised


def test_a_full_table_does_not_slow_a_small_lint(tmp_path):
    """Every slot written: a lint of a small file reads a few slots of it, so it takes the time and the
    memory of a lint with an empty table (a load of the whole store took five times the time)."""
    full, empty = tmp_path / "full", tmp_path / "empty"
    table = disk_cache.CountTable(full / f"counts-cl100k_base-v{disk_cache.VERSION}.tab")
    table.put_many({i.to_bytes(4, "little") + bytes(12): 5 for i in range(disk_cache.SLOTS)})
    assert table.get((disk_cache.SLOTS - 1).to_bytes(4, "little") + bytes(12)) == 5
    assert (full / table._path.name).stat().st_blocks * 512 >= disk_cache.SLOTS * 24  # really full

    def lint(where: Path) -> tuple[float, int]:
        """CPU seconds and max RSS (KB) of one lint, as its parent sees them: a small process of its own,
        since a child's max RSS starts at its parent's RSS (this one's holds the million counts above)."""
        out = subprocess.run(
            [sys.executable, "-c", MEASURE, str(PG), "lint", str(SMALL)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PREFIXGUARD_CACHE_DIR": str(where)},
        )
        code, cpu, rss = json.loads(out.stdout)
        assert code == 1, out.stderr
        return cpu, rss

    lint(full), lint(empty)  # the first runs count, and keep their counts
    runs = {where: [lint(where) for _ in range(3)] for where in (empty, full)}
    cpu = {where: min(t for t, _ in r) for where, r in runs.items()}
    rss = {where: max(m for _, m in r) for where, r in runs.items()}
    assert rss[full] < rss[empty] + 8 * 1024 and rss[full] < 60 * 1024, rss
    assert cpu[full] < 2 * cpu[empty] + 0.05, cpu
