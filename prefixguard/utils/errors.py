"""The one error type users see: a one-line message naming the input and the problem (CLIs exit 2)."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO


class InputError(Exception):
    """Bad input (not JSON, wrong shape, too large, ...). str(err) is one line, fit to print as is."""

    def __init__(self, message: str, source: str | None = None) -> None:
        message = " ".join(message.split())  # one line, whatever the cause's text held
        super().__init__(f"{source}: {message}" if source else message)


class NotARequest(InputError):
    """Valid JSON that is not a request body prefixguard reads: an API response, another provider's
    shape, unrelated JSON (package.json, test expectations). Lint skips such files with a warning."""


class TooLarge(InputError):
    """A request with more parts than the analysis is allowed to hold in memory (PREFIXGUARD_MAX_PARTS)."""


def check_writable(path: str) -> None:
    """Raise InputError now, before a long run, when an output file cannot be written there."""
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise InputError("cannot write: it is a directory", path)
    if not os.path.isdir(parent):
        raise InputError(f"cannot write: no directory {parent}", path)
    if os.path.exists(path) and not os.path.isfile(path):
        _check_writable_special(path)
    if not os.access(path if os.path.exists(path) else parent, os.W_OK):
        raise InputError("cannot write: permission denied", path)


# What one input file may hold at most unless its reader says otherwise: above any request body the
# proxy forwards (wire.MAX_BYTES, 64 MiB) and any config, small against the memory of a CI runner.
MAX_INPUT_BYTES = 256 << 20


def check_regular_file(path: str | os.PathLike[str], what: str = "file") -> None:
    """Raise InputError unless `path` is a regular file: a FIFO would block the read forever and a
    device (/dev/zero) never ends. Follows symlinks, as open() would."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise InputError(f"no such {what}", str(path)) from None
    except OSError as err:
        raise InputError((err.strerror or str(err)).lower(), str(path)) from None
    if not stat.S_ISREG(mode):
        raise InputError(f"not a regular {what} ({_kind(mode)})", str(path))


def read_input(path: str | os.PathLike[str], limit: int = MAX_INPUT_BYTES, what: str = "file") -> bytes:
    """THE reader of an input file for every command: its bytes, at most `limit` of them, never blocking.
    Opened non-blocking, then checked on the open descriptor (no window for a swap): a FIFO, a device, a
    socket or a directory is refused with one line naming it, and so is a file over `limit`."""
    return b"".join(input_chunks(path, limit, what))


def input_chunks(path: str | os.PathLike[str], limit: int = MAX_INPUT_BYTES, what: str = "file") -> Iterator[bytes]:
    """read_input's bytes a megabyte at a time, checked as it checks them: for a reader that need not hold
    them all at once."""
    source = str(path)
    fd, size = _open_regular(path, what)
    try:
        if size > limit:
            raise InputError(f"{what} is {_size(size)}, over the {_size(limit)} limit", source)
        total = 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            total += len(chunk)
            if total > limit:  # it grew while being read
                raise InputError(f"{what} is over the {_size(limit)} limit", source)
            yield chunk
    except OSError as err:
        raise InputError((err.strerror or str(err)).lower(), source) from None
    finally:
        os.close(fd)


def read_text_input(path: str | os.PathLike[str], limit: int = MAX_INPUT_BYTES, what: str = "file") -> str:
    """read_input decoded as UTF-8 (a BOM dropped); not UTF-8 is an InputError naming the file."""
    data = read_input(path, limit, what)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InputError(f"not UTF-8 text (byte {err.start})", str(path)) from None


def parse_json(text: str | bytes, source: str) -> Any:
    """json.loads, with every way it fails (bad syntax, a number of more than 4,300 digits, nesting
    deeper than the interpreter's stack) as one InputError line naming the source."""
    try:
        return json.loads(text)
    except RecursionError:
        raise InputError("not usable JSON: nested too deeply", source) from None
    except UnicodeDecodeError as err:
        raise InputError(f"not UTF-8 text (byte {err.start})", source) from None
    except ValueError as err:
        raise InputError(f"not JSON: {describe(err)}", source) from None


def describe(err: BaseException) -> str:
    """A Python error's message as a user reads it: the interpreter's advice about its own limits out."""
    text = str(err)
    if "Exceeds the limit" in text and "digits" in text:
        return "a number has more than 4,300 digits"
    if isinstance(err, RecursionError):
        return "nested too deeply"
    if isinstance(err, KeyError):
        return f"missing field {text}"
    return " ".join(text.split()) or type(err).__name__


# The errors a reader meets when a file holds a value of a shape it did not expect (a list where it
# looks up a key, a string where it adds, null where it divides, an infinite float it rounds, nesting
# beyond the stack): bad input, not a bug in the reader.
SHAPE_ERRORS = (TypeError, ValueError, AttributeError, KeyError, IndexError, ArithmeticError, RecursionError)


@contextmanager
def reading(source: str | os.PathLike[str], what: str = "") -> Iterator[None]:
    """Inside: reading `source`; an error of the input's shape (SHAPE_ERRORS) leaves as an InputError
    naming it, so bad input is exit 2 with the file's name, never an internal error."""
    try:
        yield
    except InputError as err:
        if str(source) in str(err):
            raise
        raise type(err)(str(err), str(source)) from None  # a reader deeper down named only a row or a request
    except SHAPE_ERRORS as err:
        lead = f"{what}: " if what else ""
        raise InputError(f"{lead}unexpected value ({describe(err)})", str(source)) from None


def _check_writable_special(path: str) -> None:
    """A character device (/dev/null, a terminal) takes what is written; a FIFO only while something
    reads it (else the open would wait forever); anything else cannot be written as a file."""
    mode = os.stat(path).st_mode
    if stat.S_ISCHR(mode):
        return
    if stat.S_ISFIFO(mode):
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:  # ENXIO: no reader at the other end
            raise InputError("cannot write: a FIFO that nothing reads", path) from None
        return
    raise InputError(f"cannot write: {_kind(mode)}, not a regular file", path)


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return name
    return "not a plain file"


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n:,} bytes"


def open_input(path: str | os.PathLike[str], what: str = "file") -> BinaryIO:
    """An input file opened for streaming (JSON lines), with read_input's checks: never a FIFO or a
    device, which would block or never end. A regular file's size bounds what is read."""
    fd, _ = _open_regular(path, what)
    try:
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _open_regular(path: str | os.PathLike[str], what: str) -> tuple[int, int]:
    """(descriptor, size) of a regular file opened non-blocking, checked on the open descriptor (no
    window for a swap): a FIFO, a device, a socket or a directory is refused with one line naming it."""
    source = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise InputError((err.strerror or str(err)).lower(), source) from None
    try:
        info = os.fstat(fd)
    except OSError as err:
        os.close(fd)
        raise InputError((err.strerror or str(err)).lower(), source) from None
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise InputError(f"not a regular {what} ({_kind(info.st_mode)})", source)
    return fd, info.st_size
