"""The command line's shared parts: the parser (argparse, its errors on the one error path of exits.py)
and the options that mean one thing in every command: -o/--output-format (text, json, ...), --policy
(auto or one cache policy), and the old names of renamed options, kept hidden for one release."""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from prefixguard.cli.exits import fail

HIDDEN = argparse.SUPPRESS
POLICY_HELP = ("Cache policy: auto (each request's own provider contract, from its API shape and model), radix "
               "(reuse any cached prefix), or one provider's contract")


class _Help(argparse.RawDescriptionHelpFormatter):
    """Descriptions as written; an option's value named once (`-o, --output-format FORMAT`)."""

    def __init__(self, prog: str, **kw: Any) -> None:
        # argparse makes a formatter for every add_argument; its default width imports shutil (~4 ms)
        super().__init__(prog, width=kw.pop("width", None) or _columns(), **kw)

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if not action.option_strings or action.nargs == 0:
            return super()._format_action_invocation(action)
        return ", ".join(action.option_strings) + " " + self._format_args(
            action, self._get_default_metavar_for_optional(action))


def _columns() -> int:
    """The terminal's width less 2, as argparse would take it (COLUMNS, else the terminal, else 80)."""
    try:
        return int(os.environ["COLUMNS"]) - 2
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns - 2
    except (AttributeError, OSError, ValueError):
        return 78


def _cleandoc(doc: str) -> str:
    """inspect.cleandoc's result, without importing inspect (~9 ms: ast, dis, tokenize) on every command."""
    first, *rest = doc.expandtabs().splitlines() or [""]
    indent = min((len(line) - len(line.lstrip()) for line in rest if line.strip()), default=0)
    return "\n".join([first.strip(), *(line[indent:].rstrip() for line in rest)]).strip()


class Parser(argparse.ArgumentParser):
    """argparse as the commands want it: no abbreviated options, descriptions printed as written, and a
    usage error as one line that points to the command's --help."""

    def __init__(self, prog: str | None = None, description: str | None = None, **kw: Any) -> None:
        super().__init__(prog=prog, description=description, allow_abbrev=False,
                         formatter_class=_Help, **kw)
        self.set_defaults(_command=self.prog)   # whose --help a usage error found while running points to

    def error(self, message: str) -> NoReturn:
        fail(message, command=self.prog)

    def command(self, run: Callable[..., int | None]) -> None:
        """`run` is what this parser's command does: its docstring is the --help text, its keyword
        arguments the options (by `dest`); it returns the exit status (None: 0)."""
        self.description = _cleandoc(run.__doc__ or "")
        self.set_defaults(run=run)

    def subcommand(self, name: str, run: Callable[..., int | None]) -> Parser:
        """A command under this one (`engine serve`, `capture export`); one of them is required."""
        if self._subparsers is None:
            self._commands = self.add_subparsers(metavar="COMMAND", required=True)
        sub: Parser = self._commands.add_parser(name, help=(run.__doc__ or "").split("\n")[0])
        sub.command(run)
        return sub


def old_name(p: argparse.ArgumentParser, *names: str, **kw: Any) -> None:
    """A renamed option's old name(s), hidden: give `dest` (and `action`/`const`) of the new option."""
    p.add_argument(*names, default=HIDDEN, help=HIDDEN, **kw)


def output_format(p: argparse.ArgumentParser, choices: Sequence[str] = ("text", "json"), default: str = "text",
                  help: str = "What to print.", old: Sequence[str] = ("--format",)) -> None:
    """-o/--output-format FORMAT (into `fmt`), with the old `--format` as a hidden name."""
    p.add_argument("-o", "--output-format", dest="fmt", choices=list(choices), default=default, metavar="FORMAT",
                   help=f"{help} [{'|'.join(choices)}; default: %(default)s]")
    if old:
        old_name(p, *old, dest="fmt", choices=list(choices))


def policy_option(p: argparse.ArgumentParser, default: str | None, help: str = POLICY_HELP,
                  old: Sequence[str] = ()) -> None:
    """--policy auto|radix|anthropic|openai|..., the same choices in proxy, engine serve and replay."""
    from prefixguard.judge.policies import POLICIES  # here, not at import: lint and diff never pay for it

    choices = ["auto", *sorted(POLICIES)]
    p.add_argument("--policy", choices=choices, default=default,
                   help=help + (" [default: %(default)s]." if default is not None else "."))
    if old:
        old_name(p, *old, dest="policy", choices=choices)


class _CompatibleSetting(argparse.Action):
    """One setting of the compatible contract, applied as it is parsed (prefixguard/contracts/serving.py keeps the
    command line's layer over [tool.prefixguard]'s): nothing reaches the command's keyword arguments."""

    def __init__(self, option_strings: Sequence[str], dest: str, key: str, const: Any = None, **kw: Any) -> None:
        super().__init__(option_strings, argparse.SUPPRESS, default=argparse.SUPPRESS, const=const, **kw)
        self.key = key

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        from prefixguard.contracts import serving

        serving.apply(flags={self.key: self.const if self.nargs == 0 else values})


def compatible_options(p: argparse.ArgumentParser) -> None:
    """--server, --block-size, --min-prefix, --no-prefix-caching: how a server one runs (the compatible
    contract) reuses prefixes, the same in proxy, replay, lint and diff."""
    from prefixguard.contracts import serving

    serving.reset()   # a command starts from the rules' defaults (tests run many commands in one process)
    serving.apply(file=serving.from_pyproject(Path.cwd()))   # [tool.prefixguard]'s keys, the flags on top
    g = p.add_argument_group("self-hosted servers (the compatible contract)")
    g.add_argument("--server", action=_CompatibleSetting, key="server", metavar="NAME|URL",
                   help="the server's defaults (vllm, sglang, engine), or its URL to read them from "
                        "(vLLM's /metrics, SGLang's /get_server_info)")
    g.add_argument("--block-size", action=_CompatibleSetting, key="block-size", type=int_range(1), metavar="N",
                   help="tokens per KV block (page): reads are whole blocks")
    g.add_argument("--min-prefix", action=_CompatibleSetting, key="min-prefix", type=int_range(0), metavar="N",
                   help="no read below this many tokens")
    g.add_argument("--no-prefix-caching", action=_CompatibleSetting, key="prefix-caching", nargs=0, const=False,
                   help="the server reuses no prefix (a hybrid Mamba / sliding-window model): reads of 0 are no misses")


def int_range(low: int | None = None, high: int | None = None) -> Callable[[str], int]:
    """A whole number within [low, high] (either end open when None)."""
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if (low is not None and n < low) or (high is not None and n > high):
            span = f"{'' if low is None else low}..{'' if high is None else high}"
            raise argparse.ArgumentTypeError(f"{n} is not in the range {span}")
        return n
    return parse


def positive_float(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not x > 0:
        raise argparse.ArgumentTypeError(f"{text} is not above 0")
    return x
