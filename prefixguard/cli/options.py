"""The command line's shared parts: click's Command and Option as the commands want them (help printed
as written, options grouped under their heading, failures on the one error path of exits.py), and the
options that mean one thing in every command: -o/--output-format (text, json, ...), --policy (auto or one
cache policy), the compatible contract's settings, and the old names of renamed options, kept hidden for
one release."""

from __future__ import annotations

import functools
import inspect  # click imports it already
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from prefixguard.cli import exits

POLICY_HELP = (
    "Cache policy: auto (each request's own provider contract, from its API shape and model), radix "
    "(reuse any cached prefix), or one provider's contract"
)
# A file the command reads or writes: its reader names what is wrong with it (missing, a FIFO, too big),
# so click only makes it a Path.
FILE = click.Path(path_type=Path, readable=False)


class Option(click.Option):
    """An option that may sit in a named group of the help, its value named as argparse named it (the
    destination in capitals) unless given."""

    def __init__(self, *args: Any, group: str | None = None, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.group = group
        if self.metavar is None and not self.is_flag and not isinstance(self.type, click.Choice) and self.name:
            self.metavar = self.name.upper()


class Command(click.Command):
    """A command whose docstring is its help as written (tables, TOML examples), whose first line is its
    line in a group's list, and whose failures take the one error path (exits.handle)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        if self.short_help is None and self.help:
            self.short_help = self.help.strip().split("\n")[0]

    def format_help_text(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        text = inspect.cleandoc(self.help or "")
        if text:  # as written: click would refill each paragraph
            formatter.write_paragraph()
            with formatter.indentation():
                pad = " " * formatter.current_indent
                formatter.write("".join(f"{pad}{line}\n" if line else "\n" for line in text.splitlines()))

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        groups: dict[str | None, list[tuple[str, str]]] = {None: []}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None and not isinstance(param, click.Argument):
                groups.setdefault(getattr(param, "group", None), []).append(record)
        for heading, records in groups.items():
            if records:
                with formatter.section(heading or "Options"):
                    formatter.write_dl(records)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except (Exception, KeyboardInterrupt) as err:
            return exits.handle(err, ctx.command_path)


class Group(click.Group):
    """A command of subcommands (`engine serve`, `capture export`): one of them is required."""

    command_class = Command

    def __init__(self, *args: Any, **kw: Any) -> None:
        kw.setdefault("no_args_is_help", False)  # no subcommand: one error line, as for any missing argument
        super().__init__(*args, **kw)


def command(name: str | None = None, **kw: Any) -> Callable[[Callable[..., Any]], Command]:
    """click.command, of this module's Command."""
    return click.command(name, cls=Command, **kw)


def option[F: Callable[..., Any]](*decls: str, **kw: Any) -> Callable[[F], F]:
    """click.option, of this module's Option (group=HEADING puts it under that heading)."""
    return click.option(*decls, cls=Option, **kw)


def old_name[F: Callable[..., Any]](*decls: str, **kw: Any) -> Callable[[F], F]:
    """A renamed option's old name(s), hidden: the last declaration is the new option's name, which both
    fill (click's feature switches: what the command line gives wins over a default)."""
    return option(*decls, hidden=True, **kw)


def _both[F: Callable[..., Any]](*decorators: Callable[[F], F]) -> Callable[[F], F]:
    """Decorators applied so that their options are listed in the order given."""

    def apply(f: F) -> F:
        for decorate in reversed(decorators):
            f = decorate(f)
        return f

    return apply


def output_format[F: Callable[..., Any]](
    choices: Sequence[str] = ("text", "json"),
    default: str = "text",
    help: str = "What to print.",
    old: Sequence[str] = ("--format",),
) -> Callable[[F], F]:
    """-o/--output-format FORMAT (into `fmt`), with the old `--format` as a hidden name."""
    kind = click.Choice(list(choices))
    shown = option(
        "-o",
        "--output-format",
        "fmt",
        type=kind,
        default=default,
        metavar="FORMAT",
        help=f"{help} [{'|'.join(choices)}; default: {default}]",
    )
    return _both(shown, old_name(*old, "fmt", type=kind, default=default)) if old else shown


def policy_option[F: Callable[..., Any]](
    default: str | None, help: str = POLICY_HELP, old: Sequence[str] = ()
) -> Callable[[F], F]:
    """--policy auto|radix|anthropic|openai|..., the same choices in proxy, engine serve and replay."""
    from prefixguard.judge.policies import POLICIES  # here, not at import: lint and diff never pay for it

    kind = click.Choice(["auto", *sorted(POLICIES)])
    shown = option(
        "--policy", type=kind, default=default, help=help + (f" [default: {default}]." if default is not None else ".")
    )
    return _both(shown, old_name(*old, "policy", type=kind, default=default)) if old else shown


COMPATIBLE = "self-hosted servers (the compatible contract)"


def compatible_options[F: Callable[..., Any]](f: F) -> F:
    """--server, --block-size, --min-prefix, --no-prefix-caching: how a server one runs (the compatible
    contract) reuses prefixes, the same in proxy, replay, lint and diff. The command gets none of them:
    they set the contract (prefixguard/contracts/serving.py keeps the command line's layer over
    [tool.prefixguard]'s) before it runs."""

    @functools.wraps(f)
    def run(
        *args: Any,
        server: str | None,
        block_size: int | None,
        min_prefix: int | None,
        no_prefix_caching: bool,
        **kw: Any,
    ) -> Any:
        from prefixguard.contracts import serving

        flags: dict[str, Any] = {
            "server": server,
            "block-size": block_size,
            "min-prefix": min_prefix,
            "prefix-caching": False if no_prefix_caching else None,
        }
        serving.reset()  # a command starts from the rules' defaults (tests run many commands in one process)
        serving.apply(file=serving.from_pyproject(Path.cwd()))  # [tool.prefixguard]'s keys, the flags on top
        given = {k: v for k, v in flags.items() if v is not None}
        if given:
            serving.apply(flags=given)
        return f(*args, **kw)

    return _both(
        option(
            "--server",
            metavar="NAME|URL",
            group=COMPATIBLE,
            help="the server's defaults (vllm, sglang, engine), or its URL to read them from "
            "(vLLM's /metrics, SGLang's /get_server_info)",
        ),
        option(
            "--block-size",
            type=click.IntRange(1),
            metavar="N",
            group=COMPATIBLE,
            help="tokens per KV block (page): reads are whole blocks",
        ),
        option(
            "--min-prefix", type=click.IntRange(0), metavar="N", group=COMPATIBLE, help="no read below this many tokens"
        ),
        option(
            "--no-prefix-caching",
            is_flag=True,
            group=COMPATIBLE,
            help="the server reuses no prefix (a hybrid Mamba / sliding-window model): reads of 0 are no misses",
        ),
    )(run)  # type: ignore[return-value]
