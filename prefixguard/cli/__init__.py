"""The `prefixguard` command. Each subcommand is a module of this package and loads only when called,
so `prefixguard lint` never pays for mitmproxy or torch.

Every failure a user can cause ends here as one line on stderr and a documented exit code
(prefixguard/cli/exits.py): 0 success, 1 findings / a broken prefix / failed requests (the command
says which), 2 usage or input error, 3 internal error (a bug: PREFIXGUARD_DEBUG=1 shows the traceback),
130 interrupted.
"""
from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import click

from prefixguard.cli.exits import EXIT_INTERNAL, EXIT_INTERRUPTED, fail
from prefixguard.errors import InputError

# name -> "module:attribute" of a click command; each module owns one concern.
COMMANDS = {
    "diff": "prefixguard.cli.diff:diff",
    "lint": "prefixguard.cli.lint:lint",
    "rule": "prefixguard.cli.lint:rule",
    "rules": "prefixguard.cli.lint:rules",
    "proxy": "prefixguard.cli.proxy:proxy",
    "capture": "prefixguard.cli.proxy:capture",
    "kv": "prefixguard.cli.kv:kv",
    "engine": "prefixguard.cli.engine:engine",
    "replay": "prefixguard.cli.replay:replay",
    "report": "prefixguard.cli.report:report",
    "demo": "prefixguard.cli.demo:demo",
    "import": "prefixguard.cli.import_logs:import_logs",
}

# The optional dependencies and the extra that brings each.
EXTRAS = {"torch": "engine", "fastapi": "engine", "uvicorn": "engine", "safetensors": "engine",
          "numpy": "engine", "mitmproxy": "proxy", "httpx": "http", "opentelemetry": "telemetry",
          "prometheus_client": "telemetry", "litellm": "litellm"}

def _missing_extra(err: ImportError) -> str:
    top = (err.name or "").split(".")[0]
    extra = EXTRAS.get(top)
    if extra is None:
        return f"cannot import {err.name or err}: reinstall prefixguard"
    return f"this command needs {top}, which `pip install 'prefixguard[{extra}]'` (or [all]) brings"


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module, attr = target.split(":")
        return getattr(importlib.import_module(module), attr)

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        """click's main, with every error turned into one line (click prints a usage block)."""
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.Exit as e:
            sys.exit(e.exit_code)
        except click.ClickException as e:
            usage = isinstance(e, click.UsageError) and e.ctx
            fail(e.format_message(), command=e.ctx.command_path if usage else None)
        except click.Abort:
            fail("interrupted", EXIT_INTERRUPTED)
        except (InputError, OSError, UnicodeError, ValueError) as e:
            if os.environ.get("PREFIXGUARD_DEBUG"):
                raise
            fail(str(e) if isinstance(e, InputError) else f"{type(e).__name__}: {e}")
        except ImportError as e:
            fail(_missing_extra(e))
        except Exception as e:  # a bug, not the user's input: still one line, the traceback on demand
            if os.environ.get("PREFIXGUARD_DEBUG"):
                raise
            db = sys.modules.get("sqlite3")  # a capture file's error (a command that read none never imported it)
            if db is not None and isinstance(e, db.Error):
                fail(f"{type(e).__name__}: {e}")
            fail(f"internal error ({type(e).__name__}: {e}); PREFIXGUARD_DEBUG=1 shows the traceback",
                 EXIT_INTERNAL)
        if standalone_mode:
            sys.exit(rv if isinstance(rv, int) else 0)
        return rv


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="prefixguard")
def main() -> None:
    """Find, explain and price prompt-cache breaks in LLM requests."""
