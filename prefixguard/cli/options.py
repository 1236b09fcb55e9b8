"""Options shared by the commands, so each means one thing everywhere:
-o/--output-format (text, json, ...), --output-file, --policy (auto or one cache policy), and the old
names of renamed options, kept hidden for one release (`alias`)."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import click
from click.core import ParameterSource

POLICY_HELP = ("Cache policy: auto (each request's own provider contract, from its API shape and model), radix "
               "(reuse any cached prefix), or one provider's contract")
Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def from_alias(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """The value given under the option's old name when the new one was not given."""
    if ctx.get_parameter_source(param.name or "") in (ParameterSource.DEFAULT, None):
        return ctx.meta.get(f"prefixguard.alias.{param.name}", value)
    return value


def alias(old: str, of: str, flag_value: Any = None, **kw: Any) -> Decorator:
    """A hidden option `old` that sets parameter `of` (a renamed option's old name); with flag_value, a flag
    that sets it to that value (demo --json: -o json)."""
    def remember(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if ctx.get_parameter_source(param.name or "") is ParameterSource.COMMANDLINE:
            ctx.meta[f"prefixguard.alias.{of}"] = flag_value if flag_value is not None else value
    if flag_value is not None:
        kw["is_flag"] = True
    return click.option(old, f"alias_{of}_{old.strip('-').replace('-', '_')}", hidden=True, expose_value=False,
                        callback=remember, is_eager=True, **kw)


def output_format(choices: Sequence[str] = ("text", "json"), default: str = "text", help: str | None = None,
                  old: Sequence[str] = ("--format",)) -> Decorator:
    """-o/--output-format FORMAT, with the old `--format` as a hidden alias."""
    def deco(f: Callable[..., Any]) -> Callable[..., Any]:
        for name in old:
            f = alias(name, "fmt", type=click.Choice(list(choices)))(f)
        return click.option("-o", "--output-format", "fmt", type=click.Choice(list(choices)), default=default,
                            show_default=True, callback=from_alias, help=help or "What to print.")(f)
    return deco


def policy_option(default: str | None, help: str = POLICY_HELP, old: Sequence[str] = ()) -> Decorator:
    """--policy auto|radix|anthropic|openai, the same choices in proxy, engine serve and replay."""
    from prefixguard.policy import POLICIES   # here, not at import: lint and diff never pay for it

    choices = ("auto", *sorted(POLICIES))

    def deco(f: Callable[..., Any]) -> Callable[..., Any]:
        for name in old:
            f = alias(name, "policy", type=click.Choice(choices))(f)
        return click.option("--policy", type=click.Choice(choices), default=default, show_default=default is not None,
                            callback=from_alias, help=help + ".")(f)
    return deco
