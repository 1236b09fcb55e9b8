"""The README's lint commands run verbatim on the files of this repository (in order: the baseline is
written before it is applied), and lint over examples/ exits 0 or 1, never 2."""
from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest
from helpers.cli import CliRunner

from prefixguard.cli import main

ROOT = Path(__file__).resolve().parents[1]


def readme_lint_commands() -> list[str]:
    text = (ROOT / "README.md").read_text("utf-8")
    section = text[text.index("### In CI: `prefixguard lint`"):]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return [line for line in block.splitlines() if line.startswith("prefixguard ")]


def test_readme_lint_commands_run_verbatim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    commands = readme_lint_commands()
    assert len(commands) >= 8 and any("--baseline" in c for c in commands)
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    for command in commands:
        args = shlex.split(command, comments=True)
        assert args[0] == "prefixguard"
        for arg in args[1:]:   # every path the command names exists in the repository
            if "/" in arg and not arg.startswith("-") and "baseline" not in arg:
                assert (ROOT / arg).exists(), (command, arg)
        result = CliRunner().invoke(main, args[1:])
        assert result.exit_code in (0, 1), (command, result.stderr)
        assert "error:" not in result.stderr, (command, result.stderr)
        if "--baseline" in args and "--write-baseline" not in args:
            assert result.exit_code == 0, (command, result.stdout)   # only new findings fail
    assert Path("prefixguard.sarif").is_file() and Path(".prefixguard-baseline.json").is_file()


def test_lint_over_examples_never_exits_2():
    result = CliRunner().invoke(main, ["lint", "--no-tokens", str(ROOT / "examples")])
    assert result.exit_code in (0, 1), result.stderr
    assert result.stderr.count("\n") <= 1     # at most the one "skipped ... not request bodies" warning
