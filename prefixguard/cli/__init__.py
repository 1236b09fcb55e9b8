"""The `prefixguard` command. Each subcommand is a module of this package and loads only when called,
so `prefixguard lint` never pays for mitmproxy or torch (nor for the other commands' options).

Every failure a user can cause ends here as one line on stderr and a documented exit code
(prefixguard/cli/exits.py): 0 success, 1 findings / a broken prefix / failed requests (the command
says which), 2 usage or input error, 3 internal error (a bug: PREFIXGUARD_DEBUG=1 shows the traceback),
130 interrupted.
"""
from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from prefixguard.cli.exits import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, CommandError, fail
from prefixguard.utils.errors import InputError, describe

PROG = "prefixguard"
ABOUT = "Find, explain and price prompt-cache breaks in LLM requests."

# name -> ("module:function" that adds the command's arguments to its parser, one line of help)
COMMANDS = {
    "capture": ("prefixguard.cli.proxy:build_capture", "Work with capture files written by `prefixguard proxy --store`."),
    "check": ("prefixguard.cli.check:build", "Did caching get worse than a baseline capture? For CI (exit 1 if so)."),
    "demo": ("prefixguard.cli.demo:build", "See what broke an agent's prompt cache, and what fixing it bought."),
    "diff": ("prefixguard.cli.diff:build", "Does a later request reuse an earlier one's cached prefix? Where and why not."),
    "engine": ("prefixguard.cli.engine:build", "The local inference engine (PyTorch) with radix-tree prefix KV reuse."),
    "import": ("prefixguard.cli.import_logs:build", "Read an agent's own session logs into a capture store."),
    "kv": ("prefixguard.cli.kv:build", "How much KV-cache memory a model needs, and what fits."),
    "lint": ("prefixguard.cli.lint:build", "Check LLM request bodies for prompt-cache hazards."),
    "proxy": ("prefixguard.cli.proxy:build", "Run a transparent reverse proxy that explains every cache hit and miss."),
    "replay": ("prefixguard.cli.replay:build", "Replay captured traffic or a public trace and measure prefix reuse."),
    "report": ("prefixguard.cli.report:build", "Diagnose a capture: why it is slow, in the order an expert looks."),
    "rule": ("prefixguard.cli.lint:build_rule", "Explain one lint rule."),
    "rules": ("prefixguard.cli.lint:build_rules", "List every lint rule."),
}

# The optional dependencies and the extra that brings each.
EXTRAS = {"torch": "engine", "fastapi": "engine", "uvicorn": "engine", "safetensors": "engine",
          "numpy": "engine", "mitmproxy": "proxy", "httpx": "http", "opentelemetry": "telemetry",
          "prometheus_client": "telemetry", "litellm": "litellm"}


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Run `prefixguard ARGV...` (default: sys.argv) and exit with its status."""
    sys.exit(run(list(sys.argv[1:] if argv is None else argv)))


def run(argv: list[str]) -> int:
    """The exit status of `prefixguard ARGV...`; an error is printed as one line (exits.py)."""
    _printable_streams()
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return EXIT_OK if argv else EXIT_USAGE
    if argv[0] == "--version":
        from importlib.metadata import version
        print(f"{PROG} {version(PROG)}")
        return EXIT_OK
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        fail(f"no such command {name!r} (commands: {', '.join(COMMANDS)})", command=PROG)
    command = f"{PROG} {name}"
    try:
        from prefixguard.cli.options import Parser
        target, summary = COMMANDS[name]
        module, function = target.split(":")
        parser = Parser(command, description=summary)   # a command's own docstring replaces it
        getattr(importlib.import_module(module), function)(parser)
        args = vars(parser.parse_args(rest) if parser._subparsers else parser.parse_intermixed_args(rest))
        command = args.pop("_command")
        code = args.pop("run")(**args)
        return EXIT_OK if code is None else code
    except CommandError as e:
        fail(str(e), e.code, command=command)
    except KeyboardInterrupt:
        fail("interrupted", EXIT_INTERRUPTED)
    except BrokenPipeError:  # the reader stopped (`| head -1`): what it wanted was written; not an error
        _quiet_stdout()
        return EXIT_OK
    except (InputError, OSError, UnicodeError, ValueError, RecursionError) as e:
        if os.environ.get("PREFIXGUARD_DEBUG"):
            raise
        fail(_input_message(e))
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


def _printable_streams() -> None:
    """A lone surrogate (an escaped \\ud800 in a body, valid JSON) is printed escaped rather than
    stopping the output at that line with an encoding error."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError, OSError):   # not a TextIOWrapper (a test's stand-in)
            pass


def _input_message(err: BaseException) -> str:
    """The one line of an input error: the file first where the error knows it (readers raise InputError
    naming it; an OSError carries its filename), then what is wrong, without Python's own advice."""
    if isinstance(err, InputError):
        return str(err)
    if isinstance(err, OSError) and err.filename is not None:
        return f"{err.filename}: {(err.strerror or describe(err)).lower()}"
    return describe(err)


def _quiet_stdout() -> None:
    """No second broken-pipe error when the interpreter flushes stdout at exit."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"usage: {PROG} [-h] [--version] COMMAND [ARGS]...", "", ABOUT, "", "commands:"]
    lines += [f"  {name:<{width}}  {summary}" for name, (_, summary) in COMMANDS.items()]
    lines += ["", f"`{PROG} COMMAND --help` explains a command."]
    return "\n".join(lines)


def _missing_extra(err: ImportError) -> str:
    top = (err.name or "").split(".")[0]
    extra = EXTRAS.get(top)
    if extra is None:
        return f"cannot import {err.name or err}: reinstall prefixguard"
    # the name prefixguard on PyPI is not this project's: the install is from a clone of the repository
    return (f"this command needs {top}, which the {extra} extra brings: `pip install '.[{extra}]'` (or "
            "'.[all]') in a clone of the prefixguard repository")
