"""Issue 13, items 4 and 7: bad input is one line `prefixguard: error: ...` and exit 2, never an
internal error (exit 3); reading a capture changes nothing beside it; `capture export | head` is quiet.

The property test substitutes nodes of real recorded request bodies with values of other types and
runs lint and diff in-process on each (the same entry point as the console script)."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest
from helpers.cli import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prefixguard.capture.store import Record, Store
from prefixguard.cli import main

ROOT = Path(__file__).resolve().parent.parent
ENV = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def one_error_line(err: str) -> bool:
    lines = err.strip().splitlines()
    return len(lines) == 1 and lines[0].startswith("prefixguard: error: ") and "internal error" not in lines[0]


def anthropic_body(ttl: object) -> dict:
    return {"model": "claude-sonnet-4-5", "max_tokens": 10,
            "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral", "ttl": ttl}}],
            "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize("ttl", [300, ["1h"], {"v": "1h"}])
@pytest.mark.parametrize("command", ["lint", "diff"])
def test_ttl_of_another_type_is_bad_input(tmp_path: Path, ttl: object, command: str) -> None:
    f = tmp_path / "req.json"
    f.write_text(json.dumps(anthropic_body(ttl)))
    code, _, err = run(command, str(f)) if command == "lint" else run(command, str(f), str(f))
    assert code == 2, err
    assert one_error_line(err) and "ttl" in err


GOOD_ROW = {"id": "a", "ts": 1.0, "path": "/v1/messages", "api": "anthropic", "model": "claude-sonnet-4-5",
            "tenant": "t", "request": anthropic_body("5m"), "status": 200,
            "usage": {"prompt_total": 10, "cache_read": 0, "reported": True}}
BAD_ROWS = {"ts a string": {"ts": "yesterday"}, "usage a list": {"usage": [1, 2]}, "path an int": {"path": 5},
            "usage field a string": {"usage": {"cache_read": "many", "reported": True}}}


@pytest.mark.parametrize("bad", sorted(BAD_ROWS))
@pytest.mark.parametrize("command", [("report",), ("replay", "--target", "sim")])
def test_capture_rows_of_the_wrong_type(tmp_path: Path, bad: str, command: tuple[str, ...]) -> None:
    f = tmp_path / "capture.jsonl"
    rows = [dict(GOOD_ROW, id="a"), dict(GOOD_ROW, id="b", **BAD_ROWS[bad])]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, _, err = run(*command, str(f))
    assert code == 2, err
    assert one_error_line(err) and "row 2" in err


@pytest.mark.parametrize("command", [("report",), ("replay", "--target", "sim"), ("lint",)])
def test_capture_row_nested_5000_deep(tmp_path: Path, command: tuple[str, ...]) -> None:
    f = tmp_path / "capture.jsonl"
    f.write_text('{"id": "a", "ts": 1, "path": "/v1/messages", "request": ' + "[" * 5000 + "]" * 5000 + "}\n")
    code, _, err = run(*command, str(f))
    assert code == 2, err
    assert one_error_line(err)


def small_capture(path: Path, n: int = 3) -> None:
    with Store(path) as store:
        for i in range(n):
            store.add(Record(id=f"r{i}", ts=1.0 + i, path="/v1/messages", request=json.dumps(anthropic_body("5m"))))


def test_request_stored_as_blob(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    small_capture(db)
    with sqlite3.connect(db) as con:
        con.execute("UPDATE flows SET request = x'00ff7b' WHERE id = 'r1'")
    con.close()
    code, _, err = run("capture", "export", str(db))
    assert code == 2
    assert one_error_line(err) and "request" in err and "r1" in err


def test_reading_a_capture_creates_no_files(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    small_capture(db)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert before == ["c.db"]  # the writer merged and removed its WAL on close
    code, out, _ = run("capture", "export", str(db))
    assert code == 0 and len(out.splitlines()) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_export_into_a_closed_pipe_is_quiet(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    small_capture(db, 5000)  # more than a pipe holds, so the writer meets the closed end
    # the console entry point, as the installed script calls it
    cmd = (f"{sys.executable} -c 'from prefixguard.cli import main; main()' capture export {db} | head -1;"
           f" echo \"rc=${{PIPESTATUS[0]}}\"")
    done = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=ENV, timeout=60)
    lines = done.stdout.splitlines()
    assert json.loads(lines[0])["id"] == "r0"
    assert lines[-1] == "rc=0"
    assert done.stderr == ""


def test_any_command_into_a_closed_pipe_is_quiet() -> None:
    """One home for a reader that stops early: lint's report (130 KB, more than a pipe holds) too."""
    recorded = ROOT.parent / "shared" / "data" / "recorded" / "pydantic-ai"
    cmd = (f"{sys.executable} -c 'from prefixguard.cli import main; main()' lint --select ALL -o json {recorded}"
           f" | head -c 100 >/dev/null; echo \"rc=${{PIPESTATUS[0]}}\"")
    done = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=ENV, timeout=120)
    assert done.stdout.strip() == "rc=0"
    assert "error" not in done.stderr and "Traceback" not in done.stderr, done.stderr


# ---- property: every node of a real request replaced by a value of another type

def recorded_bodies() -> list[tuple[str, dict]]:
    """A few small real request bodies of each API shape prefixguard reads."""
    base = ROOT.parent / "shared" / "data" / "recorded"
    picked: dict[str, list[tuple[str, dict]]] = {}
    for meta in sorted(base.glob("*/*/meta.json")):
        for call in json.loads(meta.read_text()).get("interactions", []):
            path = urlparse(call["uri"]).path
            kind = path.rsplit("/", 1)[-1]
            f = meta.parent / f"{call['n']:04d}.request.json"
            if kind in ("messages", "completions", "responses") and f.exists() and f.stat().st_size < 3000:
                if len(picked.setdefault(kind, [])) < 4:
                    picked[kind].append((path, json.loads(f.read_text())))
    return [b for bodies in picked.values() for b in bodies]


BODIES = recorded_bodies()


def nodes(value: object, at: tuple = ()) -> list[tuple]:
    """The path of every node (the root excluded)."""
    out = []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        out.append(at + (k,))
        out.extend(nodes(v, at + (k,)))
    return out


def replaced(body: dict, where: tuple, value: object) -> dict:
    body = json.loads(json.dumps(body))
    node = body
    for k in where[:-1]:
        node = node[k]
    node[where[-1]] = value
    return body


OTHER = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False),
                  st.text(max_size=8), st.just("\ud800"), st.lists(st.integers(), max_size=2),
                  st.dictionaries(st.text(max_size=4), st.integers(), max_size=2), st.just([[[[]]]]),
                  st.just({"type": "text"}), st.just({"cache_control": {"ttl": 7}}))


@pytest.mark.skipif(not BODIES and not os.environ.get("CI"), reason="shared recorded data not found")
@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_substituted_nodes_never_internal_error(tmp_path: Path, data: st.DataObject) -> None:
    path, body = data.draw(st.sampled_from(BODIES))
    where = data.draw(st.sampled_from(nodes(body)))
    value = data.draw(OTHER)
    mutated = replaced(body, where, value)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(body))
    b.write_text(json.dumps(mutated))
    for args in (["lint", str(b)], ["diff", str(a), str(b)], ["diff", str(b), str(a)]):
        code, _, err = run(*args)
        assert code in (0, 1, 2), (args, where, value, err)
        if code == 2:
            assert one_error_line(err), err


@pytest.mark.parametrize("command", ["lint", "diff"])
def test_too_many_parts_is_one_line(tmp_path: Path, command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import prefixguard.wire as wire
    monkeypatch.setattr(wire, "MAX_PARTS", 100)
    f = tmp_path / "big.json"
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": "ok"} for i in range(201)]
    f.write_text(json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 5, "messages": msgs}))
    code, _, err = run(command, str(f)) if command == "lint" else run(command, str(f), str(f))
    assert code == 2 and one_error_line(err) and "too large to analyse" in err


def test_a_ceiling_that_is_not_a_number_is_one_line(tmp_path: Path) -> None:
    body = tmp_path / "a.json"
    body.write_text(json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}))
    env = {"PATH": "", "PREFIXGUARD_MAX_PARTS": "lots"}
    done = subprocess.run([sys.executable, "-c", "from prefixguard.cli import main; main()", "diff", str(body),
                           str(body)], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().endswith("PREFIXGUARD_MAX_PARTS must be a whole number (0: no limit), not 'lots'")


def test_a_key_cut_at_its_start_by_an_excerpt_is_redacted() -> None:
    """compare's excerpts ('…' on either side) can cut a pasted key anywhere: its tail is redacted too."""
    from prefixguard.proxy.redact import redact_text
    key = "sk-ant-api03-" + "Zx9AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
    for excerpt in (f"…{key[9:]} was pasted", f"pasted {key[:20]}…", f"x …{key[4:30]}…"):
        assert "Zx9AbCdEfGh" not in redact_text(excerpt) and "[redacted]" in redact_text(excerpt), excerpt
    assert redact_text("…the configuration of the cache") == "…the configuration of the cache"  # prose stays
