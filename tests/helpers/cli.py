"""Run `prefixguard ARGS...` in this process, as a user's shell would see it: what went to stdout and to
stderr (apart and as one interleaved stream) and the exit status. In-process, so a test costs no
interpreter start; tests/test_cli.py runs the installed console script for what only a process shows."""
from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str
    output: str                      # stdout and stderr interleaved, as a terminal shows them
    exception: BaseException | None  # what the command raised, apart from its exit


class _Both(io.BytesIO):
    """A stream's bytes, also copied into the interleaved one."""

    def __init__(self, both: io.BytesIO) -> None:
        super().__init__()
        self.both = both

    def write(self, data: Any) -> int:
        self.both.write(data)
        return super().write(data)

    def close(self) -> None:  # the text wrapper closes it when collected: the bytes stay readable
        pass


@contextmanager
def _environ(env: Mapping[str, str | None]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in env}
    try:
        for k, v in env.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        yield
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


class CliRunner:
    def invoke(self, cli: Callable[[list[str]], Any], args: Sequence[str] = (), input: str | bytes | None = None,
               env: Mapping[str, str | None] | None = None, catch_exceptions: bool = True) -> Result:
        both = io.BytesIO()
        out, err = _Both(both), _Both(both)
        data = input.encode() if isinstance(input, str) else input or b""
        streams = (sys.stdin, sys.stdout, sys.stderr)
        sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
        sys.stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
        sys.stderr = io.TextIOWrapper(err, encoding="utf-8", write_through=True)
        code, exception = 0, None
        try:
            with _environ(env or {}):
                cli([str(a) for a in args])
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except Exception as e:
            if not catch_exceptions:
                raise
            code, exception = 1, e
        finally:
            sys.stdin, sys.stdout, sys.stderr = streams
        return Result(code, out.getvalue().decode(), err.getvalue().decode(), both.getvalue().decode(), exception)
