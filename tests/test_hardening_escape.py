"""Issue 28 item 5: no raw control character in anything the tool prints. Hostile strings (ESC and CSI
sequences, an OSC title and link, C1 CSI, BEL, BS, CR, a bidi override) go in through a model name, a
file name, a system prompt and a message, and come out of the proxy's console lines, `lint`'s text,
concise and github output and `diff`'s text output written as escapes (prefixguard.utils.styled.printable)."""
from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from helpers.cli import CliRunner
from helpers.proxy import tenant_rows
from helpers.upstream import Upstream

from prefixguard.cli import main
from prefixguard.proxy.addon import PrefixGuard
from prefixguard.proxy.serve import ProxyThread
from prefixguard.utils.styled import printable

HOSTILE = ("\x1b[2J\x1b[31m", "\x1b]0;owned\x07", "\x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\", "\x9b31m",
           "\x07", "\x08\x08\x08", "\rOK ", "\u202egnp.exe", "\x00\x7f\x85")
LEGACY_JSON = "openllmetry/test_prompt_caching_test_anthropic_prompt_caching_legacy"


def raw_controls(text: str) -> list[str]:
    """The control characters in printed text, line breaks apart (the printer's own)."""
    return sorted({hex(ord(c)) for c in text
                   if c != "\n" and (ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0
                                     or 0x202A <= ord(c) <= 0x202E or 0x2066 <= ord(c) <= 0x2069)})


def test_printable_escapes_each_control_and_keeps_the_rest() -> None:
    for s in HOSTILE:
        out = printable(s)
        assert raw_controls(out) == [] and "\n" not in printable(s + "\n")
    assert printable("\x1b[31m") == "\\x1b[31m" and printable("\x9b") == "\\x9b" and printable("\u202e") == "\\u202e"
    assert printable("plain é 日本 ☃") == "plain é 日本 ☃"
    assert printable("a\\x1b", backslash=True) == "a\\\\x1b"   # an escape the text wrote stays told apart


def _body(recorded: Path, model: str, system: str) -> dict:
    body = json.loads((recorded / LEGACY_JSON / "0001.request.json").read_text())
    return {**body, "model": model, "system": [{"type": "text", "text": system + " You are helpful." * 40}]}


def test_proxy_console_lines_escape_a_hostile_model_name(shared_data: Path, tmp_path: Path) -> None:
    recorded = shared_data / "recorded"
    lines: list[str] = []
    key = "sk-ant-api03-escape" + "q" * 30
    with Upstream(recorded) as up:
        with ProxyThread([up.url], addon=PrefixGuard(console=lines.append), store=str(tmp_path / "c.db")) as px:
            for n, hostile in enumerate(HOSTILE):
                body = _body(recorded, "claude-3-5-sonnet-20240620" + hostile, f"Rules v{n} {hostile}")
                r = httpx.post(px.url + "/v1/messages", json=body, headers={"x-api-key": key}, timeout=30)
                assert r.status_code == 200
            assert len(tenant_rows(tmp_path / "c.db", key, len(HOSTILE), 30)) == len(HOSTILE)
    text = "\n".join(lines)
    assert len(lines) >= len(HOSTILE) and "\\x1b" in text and "\\u202e" in text  # shown, as escapes
    assert raw_controls(text) == []
    report = CliRunner().invoke(main, ["report", str(tmp_path / "c.db")])   # the same capture, read back
    assert report.exit_code == 0, report.stderr
    assert "claude-3-5-sonnet-20240620\\x1b" in report.stdout and raw_controls(report.stdout) == []


@pytest.fixture
def hostile_files(shared_data: Path, tmp_path: Path) -> list[Path]:
    """Two requests whose system prompts differ by hostile strings, in files whose names hold one."""
    recorded = shared_data / "recorded"
    paths = []
    for n, hostile in enumerate(HOSTILE[:2]):
        path = tmp_path / f"req{n}{hostile.replace('/', '_').replace(chr(0), '')}.json"
        path.write_text(json.dumps(_body(recorded, "claude-3-5-sonnet" + hostile, " ".join(HOSTILE) + f" turn {n}")))
        paths.append(path)
    sequence = tmp_path / "sequence\x1b[2J.jsonl"
    sequence.write_text("".join(p.read_text() + "\n" for p in paths))
    return [*paths, sequence]


@pytest.mark.parametrize("fmt", ["text", "concise", "github"])
def test_lint_output_escapes_hostile_strings(hostile_files: list[Path], fmt: str) -> None:
    result = CliRunner().invoke(main, ["lint", "--no-tokens", "--select", "ALL", "-o", fmt, *map(str, hostile_files)])
    assert result.exit_code == 1, result.stderr   # findings: the system prompt changed, by the hostile strings
    assert len(result.stdout) > 200 and "\\x1b" in result.stdout
    assert raw_controls(result.stdout) == []


def test_diff_text_output_escapes_hostile_strings(hostile_files: list[Path]) -> None:
    a, b = hostile_files[:2]
    result = CliRunner().invoke(main, ["diff", "--no-tokens", str(a), str(b)])
    assert result.exit_code == 1, result.stderr
    assert "BREAK" in result.stdout and "\\x1b" in result.stdout
    assert raw_controls(result.stdout) == []


def test_an_error_line_naming_a_hostile_file_is_escaped(tmp_path: Path) -> None:
    bad = tmp_path / "req\x1b]0;owned\x07\r.json"
    bad.write_text("{ not json")
    result = CliRunner().invoke(main, ["diff", "--no-tokens", str(bad), str(bad)])
    assert result.exit_code == 2
    assert "prefixguard: error:" in result.stderr and "\\x1b" in result.stderr
    assert raw_controls(result.stderr) == []
