"""Run `prefixguard ARGS...` in this process, as a user's shell would see it: click's own test runner
(result.stdout, result.stderr, result.output interleaved as a terminal shows them, result.exit_code).
In-process, so a test costs no interpreter start; tests/test_cli.py runs the installed console script
for what only a process shows."""
from __future__ import annotations

from collections.abc import Sequence
from os import PathLike
from typing import Any

import click
from click.testing import CliRunner as _ClickRunner
from click.testing import Result

__all__ = ["CliRunner", "Result"]


class CliRunner(_ClickRunner):
    """click's runner; arguments may also be paths or numbers (tests build them from tmp_path)."""

    def invoke(self, cli: click.Command, args: str | Sequence[str | PathLike[str] | int | float] | None = None,
               *rest: Any, **kw: Any) -> Result:
        given: str | list[str] | None = args if args is None or isinstance(args, str) else [str(a) for a in args]
        return super().invoke(cli, given, *rest, **kw)
