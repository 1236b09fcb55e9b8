"""The analysis process: one Analyzer, fed in order by the addon over a pipe.

Parsing, tokenizing and comparing are CPU work; in the proxy's process they would hold the GIL that the
event loop needs to move bytes, and every flow would wait. In a process of their own, at a lower CPU
priority, they cost the traffic nothing. The parent side (`Worker`) lives on the proxy's event loop and
uses no threads: writes go into asyncio's pipe buffer, results come back to a reader task.

Messages both ways: two 4-byte big-endian lengths, a pickle, then a raw payload (a body, sent beside
the pickle so that it is never copied into one). The first messages to the process are
the parent's sys.path and (analyzer factory, its settings); then (seq, step, arg); answers are
(seq, result, error).
An exception in a step comes back as a one-line error with the request's secrets removed.
"""
from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import pickle
import signal
import struct
import sys
from collections.abc import Callable
from typing import Any, BinaryIO

from prefixguard.proxy.redact import redact_text

logger = logging.getLogger("prefixguard.proxy")

NICE = 10              # where SCHED_IDLE is not available
PIPE_SIZE = 1 << 20    # a large pipe takes a whole body in one write, with no copy in our buffers
_HEADER = struct.Struct(">II")  # pickle length, raw payload length


def _frame(message: Any, payload: bytes = b"") -> list[bytes]:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return [_HEADER.pack(len(data), len(payload)) + data, payload]


class Worker:
    """The parent's handle on the analysis process (use from the event loop thread only)."""

    def __init__(self, factory: Callable[..., Any], settings: dict[str, Any]) -> None:
        # sys.path first, on its own: unpickling the factory may need it
        self._init = _frame(list(sys.path)) + _frame((factory, settings))
        self._proc: asyncio.subprocess.Process | None = None
        self._early: list[bytes] = []   # frames sent before the process was up
        self._waiting: dict[int, Callable[[Any, str | None], None]] = {}
        self._seq = 0
        self._started = asyncio.get_running_loop().create_task(self._start())

    async def _start(self) -> None:
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "prefixguard.proxy.worker", stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE)
        try:
            fcntl.fcntl(self._proc.stdin.transport.get_extra_info("pipe").fileno(), fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        except (AttributeError, OSError):  # not Linux, or over the system's limit: the default pipe works
            pass
        self._proc.stdin.write(b"".join(self._init + self._early))
        self._early.clear()
        self._reader = asyncio.get_running_loop().create_task(self._read())

    @property
    def alive(self) -> bool:
        """False once the process has ended (it crashed, or was killed)."""
        return self._proc is None or (self._proc.returncode is None and not self._proc.stdin.is_closing())

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def backlog(self) -> int:
        """Bytes written but not yet taken by the process."""
        if self._proc is None:
            return sum(map(len, self._early))
        return self._proc.stdin.transport.get_write_buffer_size()

    def submit(self, step: str, arg: Any, done: Callable[[Any, str | None], None] | None = None,
               body: bytes = b"") -> None:
        """Queue arg.<step>; `body` travels raw and arrives as arg.body."""
        self._seq += 1
        if done is not None:
            self._waiting[self._seq] = done
        # Written on the loop's next turn: the hook returns first, so the flow moves on before the copy.
        asyncio.get_running_loop().call_soon(self._send, _frame((self._seq, step, arg), body))

    def _send(self, frame: list[bytes]) -> None:
        if self._proc is None:
            self._early += frame
        elif not self._proc.stdin.is_closing():
            for part in frame:
                self._proc.stdin.write(part)

    async def _read(self) -> None:
        out = self._proc.stdout
        try:
            while True:
                size, _ = _HEADER.unpack(await out.readexactly(_HEADER.size))
                seq, result, error = pickle.loads(await out.readexactly(size))
                done = self._waiting.pop(seq, None)
                if done is not None:
                    done(result, error)
        except asyncio.IncompleteReadError:  # the process ended
            for done in self._waiting.values():
                done(None, "the analysis process ended")
            self._waiting.clear()

    async def close(self) -> None:
        """Let the process finish what it was sent, then end it."""
        await self._started
        self._proc.stdin.close()
        await self._proc.wait()
        await self._reader


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the proxy, which then stops us cleanly
    _lower_priority()
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a stray print must not land in the answers
    inp = sys.stdin.buffer
    sys.path[:] = _read(inp)[0]
    factory, settings = _read(inp)[0]
    analyzer = factory(**settings)
    while (message := _read(inp)) is not None:
        (seq, step, arg), body = message
        if body:
            arg.body = body
        try:
            answer = (seq, getattr(analyzer, step)(arg), None)
        except Exception as err:  # noqa: BLE001 - reported by the proxy, never raised into a flow
            secrets = getattr(arg, "secrets", None) or analyzer.secrets_of(getattr(arg, "id", ""))
            answer = (seq, None, redact_text(f"{type(err).__name__}: {err}", secrets))
        out.write(b"".join(_frame(answer)))
        out.flush()
    analyzer.close()


def _lower_priority() -> None:
    """Run only on CPU time the traffic leaves over (Linux SCHED_IDLE), else at a high nice value."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        try:
            os.nice(NICE)
        except OSError:
            pass


def _read(inp: BinaryIO) -> tuple[Any, bytes] | None:
    head = inp.read(_HEADER.size)
    if len(head) < _HEADER.size:
        return None
    size, payload = _HEADER.unpack(head)
    return pickle.loads(inp.read(size)), inp.read(payload)


if __name__ == "__main__":
    main()
