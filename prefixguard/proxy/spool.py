"""The spool: no completed flow is lost when the proxy or its analysis process is killed.

Every message is also appended, in order, to a spool (a memfd: memory both processes hold, never a file
on disk, so a key in a header is never written anywhere) before it goes down the pipe, and before the
flow's end is acknowledged to the client (`durable`). The analysis keeps, in a second memfd (the
checkpoint), the spool offset before which every flow is stored, and frees the spool's memory behind
it. When the analysis dies, the parent hands the spool from that offset to the new one first
(`SpoolWriter.unfinished`); when the proxy dies, the analysis reads what the pipe did not bring from the
spool and stores it before it ends (`SpoolKeeper.rest`).

The checkpoint holds the spool offset before which every flow is stored, the number of flows stored
since the start, then a ring of the ids of the last DONE_SLOTS stored (a successor is not handed a flow
stored after that offset a second time: no second row, count or console line).
"""

from __future__ import annotations

import os
import queue
import struct
import threading
import time

from prefixguard.proxy.frames import whole_frames, without

DIRECT_MAX = 64 << 10  # frames up to this size are written from the loop, to the spool or the pipe (a copy
# is cheaper than a thread's wake-up); larger ones from a thread of their own
SPOOL_FREE = 4 << 20  # the analysis frees the spool's memory behind it in steps of this
KEEP_OPEN = 10_000  # as the analysis's KEEP_FLOWS: requests whose end may still come
CHECKPOINT = struct.Struct(">QQ")  # the offset before which every flow is stored, flows stored so far
DONE_SLOTS, DONE_SLOT = 10_000, 48


class SpoolWriter:
    """The proxy's side: frames put in their place in the spool, in the order they were submitted."""

    def __init__(self) -> None:
        self.spool, self.checkpoint = memfd("prefixguard-spool"), memfd("prefixguard-checkpoint")
        self._unspooled: list[bytes] = []  # frames submitted, not yet in the spool (in order)
        self._end = 0  # where the next frames go in the spool (each write has its place)
        # Large writes go to a thread of their own (a large copy into fresh pages would hold the loop);
        # the counters have one writer thread each, so neither needs a lock.
        self._spooler: queue.SimpleQueue[tuple[bytes, int] | None] = queue.SimpleQueue()
        self._queued = self._written = 0
        self._thread: threading.Thread | None = None

    @property
    def fds(self) -> tuple[int, ...]:
        """The memfds the analysis process inherits."""
        return tuple(fd for fd in (self.spool, self.checkpoint) if fd is not None)

    def add(self, frames: list[bytes]) -> None:
        """Frames to spool at the next `write`, after those added before."""
        self._unspooled += frames

    def write(self, durable: bool = False) -> None:
        """Put the frames not yet spooled in their place: one write into memory (no wake-up of anyone),
        from the caller when small or durable, else from the spooler thread, beside the loop."""
        if not self._unspooled:
            return
        data = b"".join(self._unspooled) if len(self._unspooled) > 1 else self._unspooled[0]
        self._unspooled = []
        if self.spool is None:
            return
        at, self._end = self._end, self._end + len(data)
        if durable or len(data) <= DIRECT_MAX:
            put(self.spool, data, at)
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._spool_beside, name="prefixguard-spooler", daemon=True)
            self._thread.start()
        self._queued += len(data)
        self._spooler.put((data, at))

    def _spool_beside(self) -> None:
        """Spooler thread: write each large frame in its place."""
        while (item := self._spooler.get()) is not None:
            data, at = item
            spool = self.spool
            if spool is not None:
                put(spool, data, at)
            self._written += len(data)

    def unfinished(self) -> bytes:
        """Once the analysis is gone: the spooled messages from the first flow it had not stored on, in
        order (with what was still waiting to be spooled), for its successor to analyse."""
        self.write()
        if self.spool is None or self.checkpoint is None:
            return b""
        deadline = time.monotonic() + 2
        while self._written < self._queued and time.monotonic() < deadline:
            time.sleep(0.005)  # the spooler's last large frames (a rare event: the analysis died)
        try:
            mark = os.pread(self.checkpoint, CHECKPOINT.size + DONE_SLOTS * DONE_SLOT, 0)
            start, stored = CHECKPOINT.unpack_from(mark) if len(mark) >= CHECKPOINT.size else (0, 0)
            ring = mark[CHECKPOINT.size : CHECKPOINT.size + min(stored, DONE_SLOTS) * DONE_SLOT]
            done = {
                ring[i : i + DONE_SLOT].rstrip(b"\0").decode("utf-8", "replace") for i in range(0, len(ring), DONE_SLOT)
            }
            end = os.fstat(self.spool).st_size
            chunks = []
            while start < end:
                chunk = os.pread(self.spool, min(end - start, 1 << 24), start)
                if not chunk:
                    break
                chunks.append(chunk)
                start += len(chunk)
            return without(whole_frames(b"".join(chunks)), done)
        except OSError:
            return b""

    def release(self) -> None:
        """Give the spool's memory back (after close, or once a successor has what it needs)."""
        self._spooler.put(None)
        for fd in (self.spool, self.checkpoint):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.spool = self.checkpoint = None


class SpoolKeeper:
    """The analysis's side: where in the spool each message began, the offset before which every flow
    is stored (written to the checkpoint after each message), and freeing memory behind that."""

    def __init__(self, spool: int, checkpoint: int) -> None:
        self.spool = spool if spool >= 0 else None
        self.checkpoint = checkpoint if checkpoint >= 0 else None
        self.offset = 0  # bytes of messages read so far (the pipe is a prefix of the spool)
        self.open: dict[str, int] = {}  # flow id -> offset of its request message, oldest first
        self.freed = 0
        self.stored = 0  # flows stored (the ring's next slot is stored % DONE_SLOTS)

    def _stored(self, flow_id: str) -> None:
        slot = flow_id.encode()
        if self.checkpoint is None or len(slot) > DONE_SLOT:
            return
        try:
            os.pwrite(
                self.checkpoint, slot.ljust(DONE_SLOT, b"\0"), CHECKPOINT.size + (self.stored % DONE_SLOTS) * DONE_SLOT
            )
            self.stored += 1
        except OSError:
            pass

    def done(self, step: str, flow_id: str | None, start: int, size: int) -> None:
        """The message of `size` bytes at `start` is analysed."""
        self.offset = start + size
        if step == "request" and flow_id is not None:
            self.open[flow_id] = start
            while len(self.open) > KEEP_OPEN:  # a flow whose end never comes (the analysis forgets it too)
                del self.open[next(iter(self.open))]
        elif flow_id is not None:  # its end (or a flow not analysed): stored
            self.open.pop(flow_id, None)
            self._stored(flow_id)
        safe = next(iter(self.open.values())) if self.open else self.offset
        if self.checkpoint is not None:
            try:
                os.pwrite(self.checkpoint, CHECKPOINT.pack(safe, self.stored), 0)
            except OSError:
                pass
        if self.spool is not None and safe - self.freed >= SPOOL_FREE:
            self.freed = punch(self.spool, self.freed, safe)

    def rest(self) -> bytes:
        """What the spool holds past what the pipe brought (the proxy died before writing it)."""
        if self.spool is None:
            return b""
        try:
            end = os.fstat(self.spool).st_size
            return os.pread(self.spool, max(0, end - self.offset), self.offset) if end > self.offset else b""
        except OSError:
            return b""


def memfd(name: str) -> int | None:
    """An anonymous file in memory (Linux), inherited by the analysis; None where there is none."""
    try:
        return os.memfd_create(name, 0)  # not MFD_CLOEXEC: pass_fds gives it to the child
    except (AttributeError, OSError):
        return None


def put(fd: int, data: bytes, at: int) -> None:
    """Write all of `data` at offset `at`; out of memory for the spool, the pipe still carries it."""
    try:
        view = memoryview(data)
        while view:
            n = os.pwrite(fd, view, at)
            view, at = view[n:], at + n
    except OSError:
        pass


def punch(fd: int, start: int, end: int) -> int:
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
