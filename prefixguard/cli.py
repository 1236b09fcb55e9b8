"""The `prefixguard` command. Subcommands live in their own modules and load only when called,
so `prefixguard lint` never pays for mitmproxy or torch."""
from __future__ import annotations

import importlib

import click

# name -> "module:attribute" of a click command; each module owns one concern.
COMMANDS = {
    "diff": "prefixguard.diff_cmd:diff",
    "lint": "prefixguard.lint.command:lint",
    "rule": "prefixguard.lint.command:rule",
    "rules": "prefixguard.lint.command:rules",
    "proxy": "prefixguard.proxy.command:proxy",
    "capture": "prefixguard.proxy.command:capture",
    "kv": "prefixguard.kv_cmd:kv",
    "engine": "prefixguard.engine_cmd:engine",
    "replay": "prefixguard.replay_cmd:replay",
    "report": "prefixguard.report.command:report",
    "demo": "prefixguard.demo:demo",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module, attr = target.split(":")
        try:
            return getattr(importlib.import_module(module), attr)
        except ImportError as e:  # an extra not installed: say which
            raise click.ClickException(f"'{name}' is not available: {e}. Install prefixguard[all].") from None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="prefixguard")
def main() -> None:
    """Find, explain and price prompt-cache breaks in LLM requests."""
