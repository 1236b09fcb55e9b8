"""The analysis process: one Analyzer, fed in order by the addon over a pipe.

Parsing, tokenizing and comparing are CPU work; in the proxy's process they would hold the GIL that the
event loop needs to move bytes, and every flow would wait. In a process of their own, at a lower CPU
priority, they cost the traffic nothing. The parent side (`Worker`) keeps the hand-off off the flow's
path as well: see its docstring.

Messages to the process: two 4-byte big-endian lengths, the message, then a raw payload (a body, sent
beside the message so that it is never copied into it). The first two messages are pickles: the
parent's sys.path, then (analyzer factory, its settings). Then, in marshal (plain tuples: the fastest
way Python has to write and read them), (seq, step, args, to): run analyzer.<step>(arg), where arg is
unpacked(step, args) (analysis.WIRE names the fields) with the payload as arg.body, and send its result `to`:
- REPLY: the answers pipe, which the addon reads when it needs an answer (a tuple, or False for none);
- REPORT: the reports pipe, read as reports come;
- PRINT: this process's stderr, the proxy's console;
- None: nowhere.
A failure goes to REPORT as one line, with the request's secrets removed.

No completed flow is lost when either process is killed: every message is also appended, in order, to
a spool (a memfd: memory both processes hold, never a file on disk, so a key in a header is never
written anywhere) before it goes down the pipe, and before the flow's end is acknowledged to the
client (`durable`). The analysis keeps, in a second memfd, the spool offset before which every flow
is stored, and frees the spool's memory behind it. When the analysis dies, the parent hands the spool
from that offset to the new one first; when the proxy dies, the analysis reads what the pipe did not
bring from the spool and stores it before it ends.
"""
from __future__ import annotations

import asyncio
import fcntl
import io
import itertools
import marshal
import os
import pickle
import queue
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

REPLY, REPORT, PRINT = "reply", "report", "print"
NICE = 10              # where SCHED_IDLE is not available
PIPE_SIZE = 1 << 20    # a large pipe takes a whole body in one write, with no copy in our buffers
DIRECT_MAX = 64 << 10  # bodies up to this size are written from the loop (a copy cheaper than a thread's wake-up)
READ_SIZE = 1 << 16    # answers read at a time (under malloc's mmap threshold: no mmap per read)
KEEP_ANSWERS = 10_000  # answers nobody asked for (their flow failed first) are dropped beyond this
SPOOL_FREE = 4 << 20  # the analysis frees the spool's memory behind it in steps of this
_HEADER = struct.Struct(">II")  # message length, raw payload length
# The checkpoint memfd: the spool offset before which every flow is stored, the number of flows stored
# since the start, then a ring of the ids of the last DONE_SLOTS stored (a successor is not handed a flow
# stored after that offset a second time: no second row, count or console line).
_CHECKPOINT = struct.Struct(">QQ")
DONE_SLOTS, DONE_SLOT = 10_000, 48
_SEQ = itertools.count(1)       # message numbers, unique in this process (a worker may be replaced)


def _frame(data: bytes, payload: bytes = b"") -> list[bytes]:
    head = _HEADER.pack(len(data), len(payload)) + data
    return [head, payload] if payload else [head]


class Worker:
    """The parent's handle on the analysis process (use from the event loop thread).

    Waking another process costs more than the bytes it is sent, on the loop and on the CPU the flow
    needs next, so the hand-off batches and the loop is never woken:
    - A message waits up to the `within` its sender allows, and goes with everything pending then, in
      one write: one wake-up of the process for several flows, after (not during) the short ones. A
      write is one system call when nothing is ahead of it and the pipe has room, cheaper than waking a
      thread; a large body goes, in order, to a feeder thread that writes without the GIL, beside the
      loop (copying 1 MB takes about 1 ms).
    - Answers (REPLY) are not read as they come: `answers()` reads them when one is needed. Only
      reports (failures; console lines for a console in this process) wake the loop."""

    def __init__(self, factory: Callable[..., Any], settings: dict[str, Any],
                 on_report: Callable[[str, str], None], resend: bytes = b"") -> None:
        """resend: the frames a dead predecessor had not finished (its `unfinished()`), sent first."""
        self._on_report = on_report
        self._ended = False  # a flag, set once the process is gone: no system call per flow to ask
        reports, child_reports = os.pipe()
        self._spool, self._checkpoint = _memfd("prefixguard-spool"), _memfd("prefixguard-checkpoint")
        self._unspooled: list[bytes] = []  # frames submitted, not yet in the spool (in order)
        self._spool_end = 0                # where the next frames go in the spool (each write has its place)
        # Large writes go to a thread of their own (a 1 MB copy into fresh pages costs the loop ~0.4 ms);
        # like the feeder's, the counters have one writer thread each.
        self._spooler: queue.SimpleQueue[tuple[bytes, int] | None] = queue.SimpleQueue()
        self._spool_queued = self._spool_written = 0
        self._spooler_thread: threading.Thread | None = None
        shared = [fd for fd in (self._spool, self._checkpoint) if fd is not None]
        self._proc = subprocess.Popen([sys.executable, "-m", "prefixguard.proxy.worker", str(child_reports),
                                       str(-1 if self._spool is None else self._spool),
                                       str(-1 if self._checkpoint is None else self._checkpoint)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0,
                                      pass_fds=(child_reports, *shared))
        os.close(child_reports)
        self._fd = self._proc.stdin.fileno()
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
        self._soon = False               # a flush is queued on the loop
        self._timer: asyncio.TimerHandle | None = None
        # Bytes handed to the feeder and bytes it wrote: equal when it has nothing left. Each counter
        # has one writer thread, so neither needs a lock.
        self._queued = self._written = 0
        self._queue: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._feeder = threading.Thread(target=self._feed, name="prefixguard-feeder", daemon=True)
        self._feeder.start()
        self._loop = asyncio.get_running_loop()
        # sys.path first, on its own: unpickling the factory may need it
        setup = _frame(pickle.dumps(list(sys.path))) + _frame(pickle.dumps((factory, settings)))
        self._write(setup, sum(map(len, setup)))   # not spooled: the spool holds messages only
        if resend:
            self._pending.append(resend)
            self._pending_bytes += len(resend)
            self._unspooled.append(resend)
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

    def submit(self, step: str, args: tuple[Any, ...] | None, body: bytes = b"", to: str | None = None,
               within: float = 0.0, durable: bool = False) -> int:
        """Send a step (args: plain values, see the module's docstring); `body` travels raw. Returns the
        message's number, which its REPLY answer carries. The message is written within `within`
        seconds, with whatever else is pending then (0: once the loop has finished its current step);
        durable: it is in the spool when this returns (a flow's end, before the client has it)."""
        seq = next(_SEQ)
        frames = _frame(marshal.dumps((seq, step, args, to)), body)
        self._pending += frames
        self._pending_bytes += sum(map(len, frames))
        self._unspooled += frames
        if durable:
            self._spool_now(durable=True)
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
        self._spool_now()
        if self._pending:
            pending, size = self._pending, self._pending_bytes
            self._pending, self._pending_bytes = [], 0
            self._write(pending, size)

    def _spool_now(self, durable: bool = False) -> None:
        """Put the frames not yet spooled in their place: one write into memory (no wake-up of anyone),
        from the loop when small or durable, else from the spooler thread, beside the loop."""
        if not self._unspooled:
            return
        data = b"".join(self._unspooled) if len(self._unspooled) > 1 else self._unspooled[0]
        self._unspooled = []
        if self._spool is None:
            return
        at, self._spool_end = self._spool_end, self._spool_end + len(data)
        if durable or len(data) <= DIRECT_MAX:
            _put(self._spool, data, at)
            return
        if self._spooler_thread is None:
            self._spooler_thread = threading.Thread(target=self._spool_beside, name="prefixguard-spooler", daemon=True)
            self._spooler_thread.start()
        self._spool_queued += len(data)
        self._spooler.put((data, at))

    def _spool_beside(self) -> None:
        """Spooler thread: write each large frame in its place."""
        while (item := self._spooler.get()) is not None:
            data, at = item
            spool = self._spool
            if spool is not None:
                _put(spool, data, at)
            self._spool_written += len(data)

    def unfinished(self) -> bytes:
        """Once the process is gone: the spooled messages from the first flow it had not stored on, in
        order (with what was still waiting to be spooled), for its successor to analyse."""
        self._spool_now()
        if self._spool is None or self._checkpoint is None:
            return b""
        deadline = time.monotonic() + 2
        while self._spool_written < self._spool_queued and time.monotonic() < deadline:
            time.sleep(0.005)   # the spooler's last large frames (a rare event: the analysis died)
        try:
            mark = os.pread(self._checkpoint, _CHECKPOINT.size + DONE_SLOTS * DONE_SLOT, 0)
            start, stored = _CHECKPOINT.unpack_from(mark) if len(mark) >= _CHECKPOINT.size else (0, 0)
            ring = mark[_CHECKPOINT.size:_CHECKPOINT.size + min(stored, DONE_SLOTS) * DONE_SLOT]
            done = {ring[i:i + DONE_SLOT].rstrip(b"\0").decode("utf-8", "replace")
                    for i in range(0, len(ring), DONE_SLOT)}
            end = os.fstat(self._spool).st_size
            chunks = []
            while start < end:
                chunk = os.pread(self._spool, min(end - start, 1 << 24), start)
                if not chunk:
                    break
                chunks.append(chunk)
                start += len(chunk)
            return _without(_whole_frames(b"".join(chunks)), done)
        except OSError:
            return b""

    def release(self) -> None:
        """Give the spool's memory back (after close, or once a successor has what it needs)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._pending, self._pending_bytes = [], 0   # its successor has them (unfinished)
        self._spooler.put(None)
        for fd in (self._spool, self._checkpoint):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._spool = self._checkpoint = None

    def _on_timer(self) -> None:
        self._timer = None
        self.flush()

    def _write(self, frames: list[bytes], size: int) -> None:
        if self._ended:   # its stdin is closed (or soon): the number may already be another pipe's
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
            for frame in frames:
                self._send(frame)

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
        while len(buf) - at >= _HEADER.size:
            size, _ = _HEADER.unpack_from(buf, at)
            if len(buf) - at - _HEADER.size < size:
                break
            seq, result = marshal.loads(buf[at + _HEADER.size:at + _HEADER.size + size])
            self._answers[seq] = result
            at += _HEADER.size + size
        self._partial = buf[at:]
        while len(self._answers) > KEEP_ANSWERS:
            del self._answers[next(iter(self._answers))]
        return self._answers

    async def _read_reports(self, pipe: BinaryIO) -> None:
        out = asyncio.StreamReader()
        await self._loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(out), pipe)
        try:
            while True:
                size, _ = _HEADER.unpack(await out.readexactly(_HEADER.size))
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


def _flow_id(args: Any) -> str | None:
    """The flow a message is about: the first of its args for every step that has one (see analysis.WIRE)."""
    return args[0] if isinstance(args, (tuple, list)) and args and isinstance(args[0], str) else None


def _without(data: bytes, done: set[str]) -> bytes:
    """The frames of `data` whose flow is not among those stored."""
    if not done:
        return data
    kept, at = [], 0
    while len(data) - at >= _HEADER.size:
        size, payload = _HEADER.unpack_from(data, at)
        end = at + _HEADER.size + size + payload
        try:
            _, _, args, _ = marshal.loads(data[at + _HEADER.size:at + _HEADER.size + size])
        except (ValueError, EOFError, TypeError):
            args = None
        if _flow_id(args) not in done:
            kept.append(data[at:end])
        at = end
    return b"".join(kept)


def _whole_frames(data: bytes) -> bytes:
    """`data` up to its first frame that is cut or empty (a place whose write never came)."""
    at = 0
    while len(data) - at >= _HEADER.size:
        size, payload = _HEADER.unpack_from(data, at)
        end = at + _HEADER.size + size + payload
        if size == 0 or end > len(data):
            break
        at = end
    return data[:at]


def _put(fd: int, data: bytes, at: int) -> None:
    """Write all of `data` at offset `at`; out of memory for the spool, the pipe still carries it."""
    try:
        view = memoryview(data)
        while view:
            n = os.pwrite(fd, view, at)
            view, at = view[n:], at + n
    except OSError:
        pass


def _memfd(name: str) -> int | None:
    """An anonymous file in memory (Linux), inherited by the analysis; None where there is none."""
    try:
        fd = os.memfd_create(name, 0)   # not MFD_CLOEXEC: pass_fds gives it to the child
    except (AttributeError, OSError):
        return None
    return fd


class _Spool:
    """The analysis side of the spool: where in it each message began, the offset before which every
    flow is stored (written to the checkpoint after each message), and freeing memory behind that."""

    def __init__(self, spool: int, checkpoint: int) -> None:
        self.spool = spool if spool >= 0 else None
        self.checkpoint = checkpoint if checkpoint >= 0 else None
        self.offset = 0                    # bytes of messages read so far (the pipe is a prefix of the spool)
        self.open: dict[str, int] = {}     # flow id -> offset of its request message, oldest first
        self.freed = 0
        self.stored = 0                    # flows stored (the ring's next slot is stored % DONE_SLOTS)

    def _stored(self, flow_id: str) -> None:
        slot = flow_id.encode()
        if self.checkpoint is None or len(slot) > DONE_SLOT:
            return
        try:
            os.pwrite(self.checkpoint, slot.ljust(DONE_SLOT, b"\0"),
                      _CHECKPOINT.size + (self.stored % DONE_SLOTS) * DONE_SLOT)
            self.stored += 1
        except OSError:
            pass

    def done(self, step: str, flow_id: str | None, start: int, size: int) -> None:
        self.offset = start + size
        if step == "request" and flow_id is not None:
            self.open[flow_id] = start
            while len(self.open) > KEEP_OPEN:   # a flow whose end never comes (the analysis forgets it too)
                del self.open[next(iter(self.open))]
        elif flow_id is not None:   # its end (or a flow not analysed): stored
            self.open.pop(flow_id, None)
            self._stored(flow_id)
        safe = next(iter(self.open.values())) if self.open else self.offset
        if self.checkpoint is not None:
            try:
                os.pwrite(self.checkpoint, _CHECKPOINT.pack(safe, self.stored), 0)
            except OSError:
                pass
        if self.spool is not None and safe - self.freed >= SPOOL_FREE:
            self.freed = _punch(self.spool, self.freed, safe)

    def rest(self) -> bytes:
        """What the spool holds past what the pipe brought (the proxy died before writing it)."""
        if self.spool is None:
            return b""
        try:
            end = os.fstat(self.spool).st_size
            return os.pread(self.spool, max(0, end - self.offset), self.offset) if end > self.offset else b""
        except OSError:
            return b""


KEEP_OPEN = 10_000   # as the analysis's KEEP_FLOWS: requests whose end may still come


def _punch(fd: int, start: int, end: int) -> int:
    """Free the spool's memory in [start, end) (FALLOC_FL_PUNCH_HOLE | KEEP_SIZE: offsets stay); the
    new start, or the old one where the system cannot."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
        if libc.fallocate(fd, 0x02 | 0x01, start, end - start) == 0:
            return end
    except (OSError, AttributeError):
        pass
    return start


def main() -> None:
    from prefixguard.proxy.analysis import WIRE, unpacked
    from prefixguard.proxy.redact import redact_text

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the proxy, which then stops us cleanly
    _lower_priority()
    answers = os.fdopen(os.dup(1), "wb")
    reports = os.fdopen(int(sys.argv[1]), "wb")
    os.dup2(2, 1)  # a stray print must not land in the answers
    inp = sys.stdin.buffer
    sys.path[:] = pickle.loads(_read(inp)[0])
    factory, settings = pickle.loads(_read(inp)[0])
    spool = _Spool(int(sys.argv[2]), int(sys.argv[3])) if len(sys.argv) > 3 else _Spool(-1, -1)
    analyzer = factory(**settings)
    for data, body in _messages(inp, spool):
        start = spool.offset
        try:
            seq, step, args, to = marshal.loads(data)
        except (ValueError, EOFError, TypeError):   # the spool's tail cut by the proxy's death mid-write
            break
        arg = unpacked(step, args) if step in WIRE else args
        if body:
            arg.body = body
        try:
            result = getattr(analyzer, step)(arg)
        except Exception as err:  # noqa: BLE001 - reported by the proxy, never raised into a flow
            secrets = getattr(arg, "secrets", None) or analyzer.secrets_of(getattr(arg, "id", ""))
            error = redact_text(f"{type(err).__name__}: {err}", secrets)
            _answer(reports, ("error", f"analysis ({step}) of {getattr(arg, 'id', '?')} failed: {error}"))
            result = None
        spool.done(step, _flow_id(args), start, _HEADER.size + len(data) + len(body))
        if to == REPLY:  # always: False tells the addon the analysis is done and found nothing to say
            _answer(answers, (seq, False if result is None else tuple(result)))
        elif result is None:
            continue
        elif to == REPORT:
            _answer(reports, ("line", result))
        elif to == PRINT:
            try:
                print(result, file=sys.stderr, flush=True)
            except BrokenPipeError:  # the console is gone with the proxy
                pass
    analyzer.close()


def _messages(inp: BinaryIO, spool: _Spool) -> Iterator[tuple[bytes, bytes]]:
    """The messages down the pipe; once it ends (the proxy closed it, or died), those only the spool
    holds: a flow the proxy had answered but not yet written down the pipe is still stored."""
    while (message := _read(inp)) is not None:
        yield message
    rest = io.BytesIO(spool.rest())
    while (message := _read(rest)) is not None and message[0]:   # empty: a place whose write never came
        yield message


def _answer(out: BinaryIO, message: tuple[Any, ...]) -> None:
    """Send to the proxy; nothing when it is gone (killed): what it sent before is still analysed and
    stored, up to the end of our input."""
    try:
        out.write(b"".join(_frame(marshal.dumps(message))))
        out.flush()
    except (BrokenPipeError, ValueError):  # ValueError: already failed once, and closed
        pass


def _lower_priority() -> None:
    """Run only on CPU time the traffic leaves over (Linux SCHED_IDLE), else at a high nice value."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        try:
            os.nice(NICE)
        except OSError:
            pass


def _read(inp: BinaryIO) -> tuple[bytes, bytes] | None:
    head = inp.read(_HEADER.size)
    if len(head) < _HEADER.size:
        return None
    size, payload = _HEADER.unpack(head)
    data, body = inp.read(size), inp.read(payload)
    if len(data) < size or len(body) < payload:   # cut short: the writer died mid-message
        return None
    return data, body


if __name__ == "__main__":
    main()
