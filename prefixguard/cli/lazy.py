"""A click group that lists its commands from a table (name -> "module:attribute", one line of help) and
imports a command's module only when that command runs or shows its help: `prefixguard lint` never pays
for mitmproxy or torch, nor for the other commands' options."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem


class LazyGroup(click.Group):
    """click's lazily loading group: `lazy` maps each name to ("module:attribute", one line of help)."""

    def __init__(self, *args: Any, lazy: Mapping[str, tuple[str, str]], **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.lazy = dict(lazy)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.lazy)  # the table's order

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.lazy:
            return None
        target, summary = self.lazy[name]
        module, attribute = target.split(":")
        found = getattr(importlib.import_module(module), attribute)
        if not isinstance(found, click.Command):
            raise TypeError(f"{target} is not a click command")
        if found.help is None:  # a group of subcommands (engine, capture): the table's line is its help
            found.help = summary
        return found

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The table's lines: listing the commands imports none of them."""
        with formatter.section("Commands"):
            formatter.write_dl([(name, summary) for name, (_, summary) in self.lazy.items()])

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        """Command names with their line of help, from the table; options as click completes them."""
        from click.shell_completion import CompletionItem

        names = [
            CompletionItem(name, help=summary)
            for name, (_, summary) in self.lazy.items()
            if name.startswith(incomplete)
        ]
        return names + click.Command.shell_complete(self, ctx, incomplete)
