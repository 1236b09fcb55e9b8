"""The one error and exit path of every command: one line on stderr, a documented exit code.

0 success, 1 findings / a broken prefix / failed requests (the command says which), 2 usage or input
error, 3 internal error (a bug: PREFIXGUARD_DEBUG=1 shows the traceback), 130 interrupted.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

# The optional dependencies and the extra that brings each.
EXTRAS = {
    "torch": "engine",
    "fastapi": "engine",
    "uvicorn": "engine",
    "safetensors": "engine",
    "numpy": "engine",
    "mitmproxy": "proxy",
    "httpx": "http",
    "opentelemetry": "telemetry",
    "prometheus_client": "telemetry",
    "litellm": "litellm",
}


class CommandError(Exception):
    """The command cannot do what was asked: one line on stderr, exit `code`."""

    code = EXIT_FINDINGS


class UsageError(CommandError):
    """The arguments cannot work: one line with a pointer to the command's --help, exit 2."""

    code = EXIT_USAGE

    def __init__(self, message: str, option: str | None = None) -> None:
        super().__init__(f"{option}: {message}" if option else message)


def error(message: str, hint: str = "") -> None:
    """One error line on stderr, `prefixguard: error: MESSAGE`, whitespace folded so it stays one line and
    control characters escaped (a file name may hold any)."""
    from prefixguard.utils.styled import printable

    print(f"prefixguard: error: {printable(' '.join(str(message).split()))}{hint}", file=sys.stderr, flush=True)


def fail(message: str, code: int = EXIT_USAGE, command: str | None = None) -> NoReturn:
    """Print the error (with a `--help` hint for a usage error) and exit."""
    error(message, f" (see {command} --help)" if command and code == EXIT_USAGE else "")
    sys.exit(code)


def handle(err: BaseException, command: str | None) -> int:
    """What a command raised, as one line and its exit code (a broken pipe: 0, quietly); `command` is
    whose --help a usage error points to. Raises SystemExit, or returns the status to exit with."""
    from prefixguard.utils.errors import InputError

    if isinstance(err, CommandError):
        fail(str(err), err.code, command=command)
    if isinstance(err, KeyboardInterrupt):
        fail("interrupted", EXIT_INTERRUPTED)
    if isinstance(err, BrokenPipeError):  # the reader stopped (`| head -1`): what it wanted was written
        _quiet_stdout()
        return EXIT_OK
    debug = bool(os.environ.get("PREFIXGUARD_DEBUG"))
    if isinstance(err, (InputError, OSError, UnicodeError, ValueError, RecursionError)):
        if debug:
            raise err
        fail(_input_message(err))
    if isinstance(err, ImportError):
        fail(_missing_extra(err))
    if debug:  # a bug, not the user's input: still one line, the traceback on demand
        raise err
    db = sys.modules.get("sqlite3")  # a capture file's error (a command that read none never imported it)
    if db is not None and isinstance(err, db.Error):
        fail(f"{type(err).__name__}: {err}")
    fail(f"internal error ({type(err).__name__}: {err}); PREFIXGUARD_DEBUG=1 shows the traceback", EXIT_INTERNAL)


def _input_message(err: BaseException) -> str:
    """The one line of an input error: the file first where the error knows it (readers raise InputError
    naming it; an OSError carries its filename), then what is wrong, without Python's own advice."""
    from prefixguard.utils.errors import InputError, describe

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


def _missing_extra(err: ImportError) -> str:
    top = (err.name or "").split(".")[0]
    extra = EXTRAS.get(top)
    if extra is None:
        return f"cannot import {err.name or err}: reinstall prefixguard"
    # the name prefixguard on PyPI is not this project's: the install is from a clone of the repository
    return (
        f"this command needs {top}, which the {extra} extra brings: `pip install '.[{extra}]'` (or "
        "'.[all]') in a clone of the prefixguard repository"
    )
