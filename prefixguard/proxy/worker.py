"""The proxy's handle on its analysis process (prefixguard/proxy/process.py): the hand-off of each
flow's messages, kept off the flow's path (see `Worker`), the answers and reports that come back, and
the process's end. What crosses the pipes is in proxy/frames.py; what survives a death, in proxy/spool.py.
"""

from __future__ import annotations

import asyncio
import fcntl
import itertools
import marshal
import os
import pickle
import queue
import select
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any, BinaryIO

from prefixguard.proxy.frames import HEADER, frame
from prefixguard.proxy.spool import DIRECT_MAX, SpoolWriter

PIPE_SIZE = 1 << 20  # a large pipe takes a whole body in one write, with no copy in our buffers
READ_SIZE = 1 << 16  # answers read at a time (under malloc's mmap threshold: no mmap per read)
KEEP_ANSWERS = 10_000  # answers nobody asked for (their flow failed first) are dropped beyond this
_SEQ = itertools.count(1)  # message numbers, unique in this process (a worker may be replaced)


class Worker:
    """The parent's handle on the analysis process (use from the event loop thread).

    Waking another process costs more than the bytes it is sent, on the loop and on the CPU the flow
    needs next, so the hand-off batches and the loop is never woken:
    - A message waits up to the `within` its sender allows, and goes with everything pending then, in
      one write: one wake-up of the process for several flows, after (not during) the short ones. A
      write is one system call when nothing is ahead of it and the pipe has room, cheaper than waking a
      thread; a large body goes, in order, to a feeder thread that writes without the GIL, beside the
      loop (a large copy would hold the loop).
    - Answers (REPLY) are not read as they come: `answers()` reads them when one is needed. Only
      reports (failures; console lines for a console in this process) wake the loop."""

    def __init__(
        self,
        factory: Callable[..., Any],
        settings: dict[str, Any],
        on_report: Callable[[str, str], None],
        resend: bytes = b"",
    ) -> None:
        """resend: the frames a dead predecessor had not finished (its `unfinished()`), sent first."""
        self._on_report = on_report
        self._ended = False  # a flag, set once the process is gone: no system call per flow to ask
        reports, child_reports = os.pipe()
        self._spool = SpoolWriter()
        spool, checkpoint = self._spool.spool, self._spool.checkpoint
        fds = [str(-1 if fd is None else fd) for fd in (spool, checkpoint)]
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "prefixguard.proxy.process", str(child_reports), *fds],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
            pass_fds=(child_reports, *self._spool.fds),
        )
        os.close(child_reports)
        assert self._proc.stdin is not None and self._proc.stdout is not None  # both asked for as PIPE
        self._stdin = self._proc.stdin
        self._fd = self._stdin.fileno()
        self._answers_fd = self._proc.stdout.fileno()
        for fd in (self._fd, self._answers_fd):
            os.set_blocking(fd, False)
            try:
                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
            except (AttributeError, OSError):  # not Linux, or over the system's limit: the default pipe works
                pass
        self._answers: dict[int, Any] = {}
        self._partial = b""
        self._pending: list[bytes] = []  # frames not yet written, in order
        self._pending_bytes = 0
        self._soon = False  # a flush is queued on the loop
        self._timer: asyncio.TimerHandle | None = None
        # Bytes handed to the feeder and bytes it wrote: equal when it has nothing left. Each counter
        # has one writer thread, so neither needs a lock.
        self._queued = self._written = 0
        self._queue: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._feeder = threading.Thread(target=self._feed, name="prefixguard-feeder", daemon=True)
        self._feeder.start()
        self._loop = asyncio.get_running_loop()
        # sys.path first, on its own: unpickling the factory may need it
        setup = frame(pickle.dumps(list(sys.path))) + frame(pickle.dumps((factory, settings)))
        self._write(setup, sum(map(len, setup)))  # not spooled: the spool holds messages only
        if resend:
            self._pending.append(resend)
            self._pending_bytes += len(resend)
            self._spool.add([resend])
            self.flush()
        self._reader = self._loop.create_task(self._read_reports(os.fdopen(reports, "rb", buffering=0)))

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
        return self._pending_bytes + self._queued - self._written

    def submit(
        self,
        step: str,
        args: tuple[Any, ...] | None,
        body: bytes = b"",
        to: str | None = None,
        within: float = 0.0,
        durable: bool = False,
    ) -> int:
        """Send a step (args: plain values, see proxy/process.py); `body` travels raw. Returns the
        message's number, which its REPLY answer carries. The message is written within `within`
        seconds, with whatever else is pending then (0: once the loop has finished its current step);
        durable: it is in the spool when this returns (a flow's end, before the client has it)."""
        seq = next(_SEQ)
        frames = frame(marshal.dumps((seq, step, args, to)), body)
        self._pending += frames
        self._pending_bytes += sum(map(len, frames))
        self._spool.add(frames)
        if durable:
            self._spool.write(durable=True)
        if within <= 0:
            if not self._soon:
                self._soon = True
                self._loop.call_soon(self.flush)
            return seq
        due = self._loop.time() + within
        if self._timer is None or due < self._timer.when():
            if self._timer is not None:
                self._timer.cancel()
            self._timer = self._loop.call_at(due, self._on_timer)
        return seq

    def flush(self) -> None:
        """Write what is pending now (to the spool first)."""
        self._soon = False
        self._spool.write()
        if self._pending:
            pending, size = self._pending, self._pending_bytes
            self._pending, self._pending_bytes = [], 0
            self._write(pending, size)

    def unfinished(self) -> bytes:
        """Once the process is gone: the spooled messages from the first flow it had not stored on, in
        order (with what was still waiting to be spooled), for its successor to analyse."""
        return self._spool.unfinished()

    def release(self) -> None:
        """Give the spool's memory back (after close, or once a successor has what it needs)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._pending, self._pending_bytes = [], 0  # its successor has them (unfinished)
        self._spool.release()

    def _on_timer(self) -> None:
        self._timer = None
        self.flush()

    def _write(self, frames: list[bytes], size: int) -> None:
        if self._ended:  # its stdin is closed (or soon): the number may already be another pipe's
            return
        if self._queued == self._written and size <= DIRECT_MAX:
            data = b"".join(frames)
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
            for piece in frames:
                self._send(piece)

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
                        view = view[os.write(self._fd, view) :]
                    except BlockingIOError:
                        room.poll()
                self._written += len(data)
            self._stdin.close()
        except OSError:  # the process ended; what is still queued passes unanalysed
            self._ended = True

    def answers(self) -> dict[int, Any]:
        """The REPLY answers come so far, by message number (read now, without waiting); the caller
        pops the ones it takes."""
        chunks = [self._partial]
        while True:
            try:
                data = os.read(self._answers_fd, READ_SIZE)
            except OSError:  # BlockingIOError: nothing more has come
                break
            if not data:  # end of file: the process ended
                self._ended = True
                break
            chunks.append(data)
            if len(data) < READ_SIZE:  # the pipe is empty: no second system call to learn it
                break
        buf, at = b"".join(chunks), 0
        while len(buf) - at >= HEADER.size:
            size, _ = HEADER.unpack_from(buf, at)
            if len(buf) - at - HEADER.size < size:
                break
            seq, result = marshal.loads(buf[at + HEADER.size : at + HEADER.size + size])
            self._answers[seq] = result
            at += HEADER.size + size
        self._partial = buf[at:]
        while len(self._answers) > KEEP_ANSWERS:
            del self._answers[next(iter(self._answers))]
        return self._answers

    async def _read_reports(self, pipe: BinaryIO) -> None:
        out = asyncio.StreamReader()
        await self._loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(out), pipe)
        try:
            while True:
                size, _ = HEADER.unpack(await out.readexactly(HEADER.size))
                self._on_report(*marshal.loads(await out.readexactly(size)))
        except asyncio.IncompleteReadError:  # the process ended
            self._ended = True
            self._queue.put(None)  # the feeder stops
            await asyncio.to_thread(self._proc.wait)  # reaped now, not left a zombie until the proxy exits

    async def close(self) -> None:
        """Let the process finish what it was sent, then end it."""
        if self._timer is not None:
            self._timer.cancel()
        self.flush()
        self._queue.put(None)
        await asyncio.to_thread(self._feeder.join)
        await self._reader
        await asyncio.to_thread(self._proc.wait)
        self.release()
