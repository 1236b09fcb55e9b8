"""Issue 28, items 2 and 3: every malformed input of every command is exit 2 and one line naming the
file, never exit 3 or a traceback; no input blocks or reads without bound (a FIFO, /dev/zero).

The table is generated, deterministically: each cell of a capture row (JSON lines and SQLite), each
field of a kv config.json, each node of a request body in a replay folder and given to lint and diff,
and a set of lint config files, replaced by values of other shapes (null, a list, non-finite and
4,300-digit numbers, a lone surrogate, nesting deeper than the interpreter's stack). Every case runs
the CLI's own entry point in this process, as the console script does."""
from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers.cli import CliRunner

from prefixguard.capture.store import Record, Store
from prefixguard.cli import main

DEEP = "[" * 3000 + "]" * 3000                  # deeper than json's recursion limit
HUGE_INT = "1" + "0" * 5000                     # over the interpreter's 4,300-digit conversion limit
BAD_VALUES = ["null", "true", "-1", "0", "1e400", "-1e400", "NaN", '"x"', '"\\ud800"', "[]", "[null]", "{}",
              '{"a": [1]}', HUGE_INT, DEEP, "123456789012345678901234567890"]


def invoke(argv: list[str], seconds: int = 20) -> tuple[int, str]:
    """Exit status and stderr of `prefixguard ARGV`, in this process, failing after `seconds` (a hang)."""
    with deadline(seconds):
        result = CliRunner().invoke(main, argv, catch_exceptions=False)
    return result.exit_code, result.stderr


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """SIGALRM interrupts a blocking open() or read(): a hang fails the test instead of the suite."""
    def expired(signum: int, frame: object) -> None:
        raise TimeoutError(f"still running after {seconds} s")
    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def assert_clean(code: int, err: str, names: str, must_fail: bool = False) -> None:
    """0/1 (the input was usable) or 2 with one line that names the file; never 3, never a traceback."""
    assert code in ((2,) if must_fail else (0, 1, 2)), err
    assert "Traceback" not in err and "internal error" not in err, err
    assert "sys.set_int_max_str_digits" not in err, err   # the interpreter's advice is not the user's
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("prefixguard: error: "), err
        assert names in lines[0], (names, err)


# ---- the table

def body() -> dict:
    return {"model": "claude-sonnet-4-5", "max_tokens": 10, "system": "be brief",
            "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                         {"role": "user", "content": [{"type": "text", "text": "again"}]}]}


def row(i: int) -> dict:
    return {"id": f"r{i}", "ts": 1.0 + i, "path": "/v1/messages", "api": "anthropic", "model": "claude-sonnet-4-5",
            "tenant": "t", "request": body(), "status": 200, "verdict": "hit", "cause": None,
            "usage": {"prompt_total": 100, "cache_read": 50, "cache_write_5m": 0, "cache_write_1h": 0,
                      "uncached": 50, "output": 5, "reported": True},
            "timings": {"ttft_s": 0.5, "decode_tps": 40.0, "total_s": 1.0}, "expected_cached": 50,
            "upstream": "https://api.anthropic.com", "detail": None, "reprefill_tokens": 0, "cost_usd": 0.0,
            "diagnosis": None}


def nodes(value: object, at: tuple = ()) -> Iterator[tuple]:
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        yield at + (k,)
        yield from nodes(v, at + (k,))


def with_raw(doc: dict, where: tuple, raw: str) -> str:
    """`doc` as JSON text with the node at `where` replaced by the raw JSON text `raw` (which may be
    no value json.dumps writes: 1e400, NaN, a 5,000-digit number, 3,000 levels of nesting)."""
    marker = "\u2603MARK\u2603"
    doc = json.loads(json.dumps(doc))
    node = doc
    for k in where[:-1]:
        node = node[k]
    node[where[-1]] = marker
    return json.dumps(doc).replace(json.dumps(marker), raw)


def capture_cases() -> list[tuple[str, tuple, str]]:
    """(command, node, raw value): every cell of a row for report, a fixed sample for replay and lint."""
    pick = random.Random(28)
    cells = list(nodes(row(1)))
    out = [("report", where, raw) for where in cells for raw in BAD_VALUES]
    out += [(cmd, pick.choice(cells), pick.choice(BAD_VALUES)) for cmd in ("replay", "lint") for _ in range(60)]
    return out


@pytest.mark.parametrize("command,where,raw", capture_cases(),
                         ids=lambda v: "/".join(map(str, v))[:40] if isinstance(v, tuple) else str(v)[:12])
def test_capture_cell(tmp_path: Path, command: str, where: tuple, raw: str) -> None:
    f = tmp_path / "capture.jsonl"
    f.write_text(json.dumps(row(0)) + "\n" + with_raw(row(1), where, raw) + "\n")
    argv = {"report": ["report", str(f)], "replay": ["replay", str(f), "--no-progress"],
            "lint": ["lint", "--no-tokens", str(f)]}[command]
    code, err = invoke(argv)
    must_fail = command != "lint" and raw in ("1e400", "-1e400", "NaN", HUGE_INT, DEEP) and where[0] != "request"
    assert_clean(code, err, str(f), must_fail)


COLUMN_VALUES = ["'x'", "1.5", "x'00ff'", "-1", "9e999", "NULL", "'" + "[" * 3000 + "'", "'{\"a\": 1'",
                 "'\"\\ud800\"'", "'[1, 2]'", "'null'"]
COLUMNS = ["ts", "path", "api", "model", "tenant", "request", "request_bytes", "fingerprints", "segments",
           "status", "prompt_total", "cache_read", "output", "reported", "ttft_s", "decode_tps", "verdict",
           "expected_cached", "cost_usd", "detail", "diagnosis", "tokens_estimated"]


@pytest.fixture(scope="module")
def good_db(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    db = tmp_path_factory.mktemp("db") / "c.db"
    with Store(db) as store:
        for i in range(3):
            store.add(Record(id=f"r{i}", ts=1.0 + i, path="/v1/messages", api="anthropic",
                             model="claude-sonnet-4-5", request=json.dumps(body()), status=200))
    return db.read_bytes()


@pytest.mark.parametrize("column", COLUMNS)
@pytest.mark.parametrize("command", ["export", "report"])
def test_capture_store_column(tmp_path: Path, good_db: bytes, column: str, command: str) -> None:
    db = tmp_path / "c.db"
    for value in COLUMN_VALUES:
        db.write_bytes(good_db)
        con = sqlite3.connect(db)
        try:
            with con:
                con.execute(f"UPDATE flows SET {column} = {value} WHERE id = 'r1'")
        except sqlite3.IntegrityError:   # NOT NULL: SQLite itself keeps that value out
            continue
        finally:
            con.close()
        code, err = invoke(["capture", "export", str(db)] if command == "export" else ["report", str(db)])
        assert_clean(code, err, str(db))


def test_export_survives_an_escaped_lone_surrogate(tmp_path: Path) -> None:
    """A body holding "\\ud800" (valid JSON the store accepted) is exported, and the rows after it."""
    db = tmp_path / "c.db"
    with Store(db) as store:
        for i in range(67):
            text = json.dumps(body() | {"system": "x\ud800y" if i == 45 else "be brief"})
            store.add(Record(id=f"r{i}", ts=1.0 + i, path="/v1/messages", request=text))
    result = CliRunner().invoke(main, ["capture", "export", str(db)])
    assert result.exit_code == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(rows) == 67 and rows[45]["request"]["system"] == "x\ud800y"


KV_FIELDS = ["vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
             "num_key_value_heads", "head_dim", "max_position_embeddings", "rope_theta", "rms_norm_eps",
             "tie_word_embeddings", "rope_scaling", "model_type"]


def kv_config() -> dict:
    return {"vocab_size": 32000, "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
            "num_key_value_heads": 8, "intermediate_size": 11008, "max_position_embeddings": 8192,
            "rope_theta": 10000.0, "rms_norm_eps": 1e-5, "model_type": "llama"}


@pytest.mark.parametrize("field", KV_FIELDS)
def test_kv_config_field(tmp_path: Path, field: str) -> None:
    f = tmp_path / "config.json"
    for raw in BAD_VALUES:
        f.write_text(with_raw(kv_config() | {field: 1}, (field,), raw))
        code, err = invoke(["kv", "--config", str(f)])
        assert_clean(code, err, str(f), must_fail=field in KV_FIELDS[:5] and raw != "123456789012345678901234567890")
        if code == 2:
            assert field in err or "JSON" in err, err   # the field named where the file parsed


@pytest.mark.parametrize("raw", [DEEP, HUGE_INT, "[1]", "null", "not json", "\xff\xfe"])
def test_kv_config_file(tmp_path: Path, raw: str) -> None:
    f = tmp_path / "config.json"
    f.write_bytes(raw.encode("latin-1"))
    code, err = invoke(["kv", "--config", str(f)])
    assert_clean(code, err, str(f), must_fail=True)


def body_cases() -> list[tuple[tuple, str]]:
    pick = random.Random(2028)
    where = list(nodes(body()))
    return [(w, raw) for w in where for raw in pick.sample(BAD_VALUES, 5)]


@pytest.mark.parametrize("where,raw", body_cases(),
                         ids=lambda v: "/".join(map(str, v))[:30] if isinstance(v, tuple) else str(v)[:12])
def test_request_body_node(tmp_path: Path, where: tuple, raw: str) -> None:
    """The same body to replay (a folder of bodies), lint and diff."""
    folder = tmp_path / "bodies"
    folder.mkdir()
    good, bad = folder / "0001.json", folder / "0002.json"
    good.write_text(json.dumps(body()))
    bad.write_text(with_raw(body(), where, raw))
    code, err = invoke(["replay", str(folder), "--no-progress"])
    assert_clean(code, err, str(folder))
    for argv in (["lint", "--no-tokens", str(bad)], ["diff", "--no-tokens", str(good), str(bad)]):
        code, err = invoke(argv)
        assert_clean(code, err, str(bad))


CONFIGS = ["tool = 'x'\n", "[tool]\nprefixguard = 'x'\n", "[tool.prefixguard]\nselect = 5\n",
           "[tool.prefixguard]\nselect = [1]\n", "[tool.prefixguard]\nignore = {}\n",
           "[tool.prefixguard]\nper-file-ignores = 5\n", "[tool.prefixguard]\nper-file-ignores = {a = 5}\n",
           "[tool.prefixguard]\nfail-on = 5\n", "[tool.prefixguard]\nfail-on = 'x'\n",
           "[tool.prefixguard]\nextra-volatile-patterns = {a = 5}\n",
           "[tool.prefixguard]\nextra-volatile-patterns = {a = '('}\n", "[tool.prefixguard]\nexclude = 5\n",
           "[tool.prefixguard]\nnope = 1\n", "[tool.prefixguard]\nselect = ['NOPE999']\n",
           f"[tool.prefixguard]\nselect = {'[' * 3000}{']' * 3000}\n", f"[tool.prefixguard]\nx = {HUGE_INT}\n",
           "[tool.prefixguard\n", "\xff\xfe\n", "[tool.prefixguard]\nselect = 1e400\n"]


@pytest.mark.parametrize("text", CONFIGS, ids=lambda t: t[:30])
def test_lint_config_file(tmp_path: Path, text: str) -> None:
    f = tmp_path / "pyproject.toml"
    f.write_bytes(text.encode("latin-1") if text.startswith("\xff") else text.encode())
    req = tmp_path / "req.json"
    req.write_text(json.dumps(body()))
    code, err = invoke(["lint", "--no-tokens", "--config", str(f), str(req)])
    assert_clean(code, err, str(f), must_fail=True)


# ---- nothing blocks, nothing reads without bound

def special_files(tmp_path: Path) -> list[str]:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    return [str(fifo), "/dev/zero"]


def reading(special: str, good: str, db: str, out: Path) -> list[list[str]]:
    """Every place a command reads a file a user names (and the capture store it writes with SQLite)."""
    return [["diff", special, good], ["diff", good, special], ["lint", special], ["lint", "--config", special, good],
            ["lint", "--baseline", special, good], ["replay", special], ["report", special],
            ["capture", "export", special], ["kv", "--config", special],
            ["import", "codex", str(out), "--store", special]]


def writing(special: str, good: str, db: str) -> list[list[str]]:
    """Every place a command writes a report or a baseline to a file a user names."""
    return [["lint", "--baseline", special, "--write-baseline", good], ["lint", "--output-file", special, good],
            ["replay", db, "--no-progress", "--output-file", special], ["report", db, "--html", special]]


@pytest.mark.parametrize("which", [0, 1], ids=["fifo", "dev-zero"])
def test_fifo_and_device_are_refused_at_once(tmp_path: Path, which: int) -> None:
    """Read: refused, one line. Written: a FIFO nothing reads is refused (its open would wait forever);
    a character device takes the output (`--output-file /dev/null` works)."""
    special = special_files(tmp_path)[which]
    good = tmp_path / "a.json"
    good.write_text(json.dumps(body()))
    db = tmp_path / "c.jsonl"
    db.write_text(json.dumps(row(0)) + "\n")
    for argv in reading(special, str(good), str(db), tmp_path) + writing(special, str(good), str(db)) * (which == 0):
        code, err = invoke(argv, seconds=10)
        assert code == 2, (argv, err)
        assert_clean(code, err, special)
    for argv in writing(special, str(good), str(db)) * (which == 1):
        code, err = invoke(argv, seconds=10)
        assert code in (0, 1), (argv, err)


def test_a_fifo_with_a_reader_takes_the_report(tmp_path: Path) -> None:
    """`--output-file` into a pipe something reads (process substitution, /dev/stdout in a pipeline)."""
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    good = tmp_path / "a.json"
    good.write_text(json.dumps(body()))
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        code, err = invoke(["lint", "--no-tokens", "-o", "json", "--output-file", str(fifo), str(good)], seconds=10)
        assert code in (0, 1), err
        assert json.loads(os.read(reader, 1 << 20))
    finally:
        os.close(reader)
