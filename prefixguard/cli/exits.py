"""The one error and exit path of every command: one line on stderr, a documented exit code.

0 success, 1 findings / a broken prefix / failed requests (the command says which), 2 usage or input
error, 3 internal error (a bug: PREFIXGUARD_DEBUG=1 shows the traceback), 130 interrupted.
"""
from __future__ import annotations

import sys
from typing import NoReturn

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


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
