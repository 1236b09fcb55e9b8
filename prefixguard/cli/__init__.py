"""The `prefixguard` command: a click group whose commands are modules of this package, each imported
only when it runs or shows its help (cli/lazy.py).

Every failure a user can cause ends here as one line on stderr and a documented exit code
(prefixguard/cli/exits.py): 0 success, 1 findings / a broken prefix / failed requests (the command
says which), 2 usage or input error, 3 internal error (a bug: PREFIXGUARD_DEBUG=1 shows the traceback),
130 interrupted. Shell completion is click's: `eval "$(_PREFIXGUARD_COMPLETE=bash_source prefixguard)"`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import click

from prefixguard.cli.exits import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, fail, handle
from prefixguard.cli.lazy import LazyGroup

PROG = "prefixguard"

# name -> ("module:attribute" of its click command, its line in `prefixguard --help`)
COMMANDS = {
    "capture": ("prefixguard.cli.proxy:capture", "Work with capture files written by `prefixguard proxy --store`."),
    "check": ("prefixguard.cli.check:check", "Did caching get worse than a baseline capture? For CI (exit 1 if so)."),
    "demo": ("prefixguard.cli.demo:demo", "See what broke an agent's prompt cache, and what fixing it bought."),
    "diff": (
        "prefixguard.cli.diff:diff",
        "Does a later request reuse an earlier one's cached prefix? Where and why not.",
    ),
    "engine": (
        "prefixguard.cli.engine:engine",
        "The local inference engine (PyTorch) with radix-tree prefix KV reuse.",
    ),
    "import": ("prefixguard.cli.import_logs:import_logs", "Read an agent's own session logs into a capture store."),
    "kv": ("prefixguard.cli.kv:kv", "How much KV-cache memory a model needs, and what fits."),
    "lint": ("prefixguard.cli.lint:lint", "Check LLM request bodies for prompt-cache hazards."),
    "proxy": ("prefixguard.cli.proxy:proxy", "Run a transparent reverse proxy that explains every cache hit and miss."),
    "replay": ("prefixguard.cli.replay:replay", "Replay captured traffic or a public trace and measure prefix reuse."),
    "report": ("prefixguard.cli.report:report", "Diagnose a capture: why it is slow, in the order an expert looks."),
    "rule": ("prefixguard.cli.lint:rule", "Explain one lint rule."),
    "rules": ("prefixguard.cli.lint:rules", "List every lint rule."),
}


class Main(LazyGroup):
    """The top command: click parses and runs, and every way it can end becomes an exit status."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Run `prefixguard ARGS...` (default: sys.argv): exit with its status, or return it when not
        `standalone_mode`. A usage error is one line pointing to the command's --help."""
        _printable_streams()
        try:
            code = super().main(args, prog_name or PROG, complete_var, standalone_mode=False, **extra)
        except click.exceptions.NoArgsIsHelpError as e:  # `prefixguard` alone: what it can do, exit 2
            click.echo(e.ctx.get_help())
            code = EXIT_USAGE
        except click.ClickException as e:
            ctx = getattr(e, "ctx", None)
            fail(e.format_message(), e.exit_code, command=ctx.command_path if ctx else PROG)
        except click.Abort:
            fail("interrupted", EXIT_INTERRUPTED)
        except (Exception, KeyboardInterrupt) as err:  # a command's module that cannot be imported
            code = handle(err, None)
        code = EXIT_OK if code is None else code
        if standalone_mode:
            sys.exit(code)
        return code


@click.group(
    PROG,
    cls=Main,
    lazy=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=f"`{PROG} COMMAND --help` explains a command.",
)
@click.version_option(package_name=PROG, message="%(prog)s %(version)s")
def main() -> None:
    """Find, explain and price prompt-cache breaks in LLM requests."""


def run(argv: Sequence[str]) -> int:
    """The exit status of `prefixguard ARGV...`; an error is printed as one line and exits (exits.py)."""
    code: int = main.main(list(argv), standalone_mode=False)
    return code


def _printable_streams() -> None:
    """A lone surrogate (an escaped \\ud800 in a body, valid JSON) is printed escaped rather than
    stopping the output at that line with an encoding error."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):  # not a TextIOWrapper (a test's stand-in)
            pass
