"""prefixguard.utils.styled, the one terminal idiom (rich, behind a thin layer): plain text in a pipe, as
the project printed it before rich drew its tables; bold and colour on a terminal or with FORCE_COLOR,
never with NO_COLOR; rich reads no markup in the text it is given; and rich is not even imported when
nothing is styled and no table drawn (`lint` and `diff` in a pipe start in well under 0.15 s)."""
from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from prefixguard.replay.show import show
from prefixguard.utils import styled

ROOT = Path(__file__).resolve().parent.parent
HEAD = ("model", "requests", "spend", "saved")
ROWS = [("claude-sonnet-4-5", "12", "$1.23", "$0.0001"), ("[bold red]gpt[/] :smile:", "3", "$10", "-"),
        ("a", "", "", "")]


@pytest.fixture
def pipe(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> pytest.CaptureFixture[str]:
    """stdout as a pipe (pytest's capture, no terminal), with neither NO_COLOR nor FORCE_COLOR set."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    return capsys


def test_columns_in_a_pipe_are_aligned_plain_text(pipe: pytest.CaptureFixture[str]) -> None:
    assert styled.columns(HEAD, ROWS) == (
        "   model                     requests  spend    saved\n"
        "   claude-sonnet-4-5               12  $1.23  $0.0001\n"
        "   [bold red]gpt[/] :smile:         3    $10        -\n"
        "   a")
    by_label = styled.columns(("client", "misses", "causes"), [("x", "2", "volatile_content 2"), ("yy", "10", "-")],
                              indent="  ", left=(0, 2))
    assert by_label.split("\n") == ["  client  misses  causes", "  x            2  volatile_content 2",
                                    "  yy          10  -"]
    wide = styled.columns(("cell",), [("x" * 500,)])
    assert wide.split("\n")[1] == "   " + "x" * 500     # a pipe is as wide as the text: nothing wrapped


def test_strong_styles_only_where_it_is_read(pipe: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert styled.strong("BREAK", styled.RED) == "BREAK" and not styled.styling()
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert styled.strong("BREAK", styled.RED) == "\x1b[1;31mBREAK\x1b[0m"
    assert styled.strong("[red]x") == "\x1b[1m[red]x\x1b[0m"             # the brackets are text
    monkeypatch.setenv("NO_COLOR", "1")
    assert styled.strong("BREAK", styled.RED) == "BREAK" and styled.columns(("a",), [("b",)]) == "   a\n   b"


def test_rich_reads_no_markup_in_user_text(pipe: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    coloured = styled.columns(HEAD, ROWS)
    assert "\x1b[1m" in coloured                          # the head is bold on a terminal
    assert "[bold red]gpt[/] :smile:" in coloured and "\x1b[31m" not in coloured
    console = styled.console()
    console.print(styled.table(["name"], [["[link=http://evil.example]x[/link]"]], title="[blink]t[/blink]"))
    console.print("[bold]as written[/bold] :smile:")
    printed = pipe.readouterr().out
    assert "[link=http://evil.example]x[/link]" in printed and "\x1b]8" not in printed    # no hyperlink
    assert "[blink]t[/blink]" in printed and "[bold]as written[/bold] :smile:" in printed


def test_the_console_is_made_for_the_stream_of_the_moment(pipe: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    console = styled.console()
    assert console.file is sys.stdout and not console.is_terminal and console.width == styled.WIDE
    assert console.color_system is None
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert styled.console().is_terminal and styled.console().color_system == "standard"
    monkeypatch.setenv("NO_COLOR", "1")   # a terminal still (a progress bar is drawn), but no colour
    assert styled.console().is_terminal and styled.console().color_system is None
    err = styled.console(stderr=True)
    assert err.file is sys.stderr


def test_replay_summary_is_a_rich_table_of_escaped_text() -> None:
    meta = {"source": "/tmp/[bold]trace\x1b[2J.jsonl", "format": "mooncake", "target": "sim", "policy": "lru"}
    summary = {"requests": 3, "errors": 0, "prompt_tokens": 3000, "cache_read": 1000, "cache_write": 500,
               "uncached": 1500, "hit_ratio": 1 / 3, "request_hit_ratio": 2 / 3, "requests_with_hits": 2,
               "ttft_s": {"with_reuse": {"p50": 0.1, "p90": 0.2}}, "cost_usd": 0.01, "prices": ["[red]list[/red]"],
               "cost_without_cache_usd": 0.02}
    out = io.StringIO()
    show(meta, {"as_is": summary, "no_reuse": summary}, Console(file=out, width=200))
    text = out.getvalue()
    assert "replay of [bold]trace\\x1b[2J.jsonl (mooncake) on sim, policy lru" in text
    assert "[red]list[/red]" in text and "\x1b" not in text
    row = next(line for line in text.splitlines() if "hit ratio, token-weighted" in line)
    assert row.count("33.3%") == 2


def _imports_rich(code: str) -> bool:
    done = subprocess.run([sys.executable, "-c", code + "\nimport sys; print('rich' in sys.modules, file=sys.stderr)"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert done.stderr.strip().splitlines()[-1] in ("True", "False"), done.stderr
    return done.stderr.strip().splitlines()[-1] == "True"


def test_rich_is_imported_only_to_style_or_draw() -> None:
    plain = "from prefixguard.utils import styled\nassert styled.strong('x', styled.RED) == 'x'"
    assert not _imports_rich(plain)
    assert _imports_rich("from prefixguard.utils import styled\nstyled.columns(('a',), [('b',)])")
    small = ROOT / "examples" / "requests" / "anthropic" / "history_rewritten"
    for command in (["lint", "--no-tokens", str(small / "b.json")], ["diff", "--no-tokens", str(small / "a.json"),
                                                                      str(small / "b.json")]):
        run = f"from prefixguard.cli import main\ntry:\n    main({command!r})\nexcept SystemExit:\n    pass"
        assert not _imports_rich(run), command
