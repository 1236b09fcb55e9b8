"""The analysis process: one Analyzer, fed in order by the addon over a pipe.

Parsing, tokenizing and comparing are CPU work; in the proxy's process they would hold the GIL that the
event loop needs to move bytes, and every flow would wait. In a process of their own, at a lower CPU
priority, they cost the traffic nothing. The parent side (`Worker`) keeps the hand-off off the flow's
path as well: see its docstring.

Messages both ways: two 4-byte big-endian lengths, a pickle, then a raw payload (a body, sent beside
the pickle so that it is never copied into one). The first messages to the process are
the parent's sys.path and (analyzer factory, its settings); then (seq, step, arg); answers are
(seq, result, error).
An exception in a step comes back as a one-line error with the request's secrets removed.
"""
from __future__ import annotations

import asyncio
import fcntl
import os
import pickle
import queue
import select
import signal
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any, BinaryIO

from prefixguard.proxy.redact import redact_text

NICE = 10              # where SCHED_IDLE is not available
PIPE_SIZE = 1 << 20    # a large pipe takes a whole body in one write, with no copy in our buffers
DIRECT_MAX = 64 << 10  # bodies up to this size are written from the loop (a copy cheaper than a thread's wake-up)
_HEADER = struct.Struct(">II")  # pickle length, raw payload length


def _frame(message: Any, payload: bytes = b"") -> list[bytes]:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return [_HEADER.pack(len(data), len(payload)) + data, payload]


class Worker:
    """The parent's handle on the analysis process (use from the event loop thread).

    A small message is written to the pipe at once, when nothing is ahead of it and the pipe has room:
    one system call, cheaper than waking a thread. Anything else goes, in order, to a feeder thread
    that writes without the GIL, beside the loop (copying 1 MB into a pipe takes about 1 ms). Answers
    come back to a reader task on the loop."""

    def __init__(self, factory: Callable[..., Any], settings: dict[str, Any]) -> None:
        self._waiting: dict[int, Callable[[Any, str | None], None]] = {}
        self._seq = 0
        self._ended = False  # a flag, set once the process is gone: no system call per flow to ask
        self._proc = subprocess.Popen([sys.executable, "-m", "prefixguard.proxy.worker"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        self._fd = self._proc.stdin.fileno()
        os.set_blocking(self._fd, False)
        try:
            fcntl.fcntl(self._fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        except (AttributeError, OSError):  # not Linux, or over the system's limit: the default pipe works
            pass
        # Bytes handed to the feeder and bytes it wrote: equal when it has nothing left. Each counter
        # has one writer thread, so neither needs a lock.
        self._queued = self._written = 0
        self._queue: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._feeder = threading.Thread(target=self._feed, name="prefixguard-feeder", daemon=True)
        self._feeder.start()
        # sys.path first, on its own: unpickling the factory may need it
        self._send(b"".join(_frame(list(sys.path)) + _frame((factory, settings))))
        self._loop = asyncio.get_running_loop()
        self._reader = self._loop.create_task(self._read())

    @property
    def alive(self) -> bool:
        """False once the process has ended (it crashed, or was killed)."""
        return not self._ended

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def backlog(self) -> int:
        """Bytes submitted but not yet written to the process."""
        return self._queued - self._written

    def submit(self, step: str, arg: Any, done: Callable[[Any, str | None], None] | None = None,
               body: bytes = b"") -> None:
        """Send arg.<step>; `body` travels raw and arrives as arg.body."""
        self._seq += 1
        header, body = _frame((self._seq, step, arg), body)
        if done is not None:
            self._waiting[self._seq] = done
        if self._queued == self._written and len(body) <= DIRECT_MAX:
            data = header + body
            try:
                sent = os.write(self._fd, data)
            except BlockingIOError:  # the pipe is full
                sent = 0
            except OSError:  # the process ended
                self._ended = True
                return
            if sent < len(data):
                self._send(data[sent:])
        else:
            self._send(header)
            self._send(body)

    def _send(self, data: bytes) -> None:
        self._queued += len(data)
        self._queue.put(data)

    def _feed(self) -> None:
        """Feeder thread: write what comes, in order; wait for room when the pipe is full."""
        room = select.poll()
        room.register(self._fd, select.POLLOUT)
        try:
            while (data := self._queue.get()) is not None:
                view = memoryview(data)
                while view:
                    try:
                        view = view[os.write(self._fd, view):]
                    except BlockingIOError:
                        room.poll()
                self._written += len(data)
            self._proc.stdin.close()
        except OSError:  # the process ended; what is still queued passes unanalysed
            self._ended = True

    async def _read(self) -> None:
        out = asyncio.StreamReader()
        await self._loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(out), self._proc.stdout)
        try:
            while True:
                size, _ = _HEADER.unpack(await out.readexactly(_HEADER.size))
                seq, result, error = pickle.loads(await out.readexactly(size))
                done = self._waiting.pop(seq, None)
                if done is not None:
                    done(result, error)
        except asyncio.IncompleteReadError:  # the process ended
            self._ended = True
            for done in self._waiting.values():
                done(None, "the analysis process ended")
            self._waiting.clear()

    async def close(self) -> None:
        """Let the process finish what it was sent, then end it."""
        self._queue.put(None)
        await asyncio.to_thread(self._feeder.join)
        await self._reader
        await asyncio.to_thread(self._proc.wait)


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
