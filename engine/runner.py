"""The bridge between the asyncio HTTP server and the engine, which steps in a thread of its own.

Requests enter through `Runner.submit` (on the event loop); the engine thread steps while anything is
unfinished and hands each new token to its request's asyncio queue. Admission is bounded: past
`max_queue` requests in flight, `submit` raises Overloaded (the server answers 429), so memory stays
bounded however many clients connect.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


class Overloaded(Exception):
    """Too many requests in flight; retry after `retry_after` seconds."""

    def __init__(self, in_flight: int, retry_after: float) -> None:
        super().__init__(f"{in_flight} requests in flight; the queue is full")
        self.retry_after = retry_after


class EngineFailed(RuntimeError):
    """The engine raised while stepping; every request in flight ends with this."""


@dataclass(slots=True)
class Event:
    """What one engine step did for one request: new token ids, and the numbers known so far."""

    token_ids: list[int]
    cached_tokens: int
    finished: bool = False
    finish_reason: str | None = None
    ttft: float | None = None  # seconds, once finished
    decode_tps: float | None = None
    prefill_seconds: float | None = None
    error: str | None = None


class Stream:
    """One request's events, in order, as an async iterator. `abort` frees it in the engine."""

    def __init__(self, runner: Runner, seq: Any) -> None:
        self.seq_id = seq.seq_id
        self.prompt_tokens = len(seq.prompt_ids)
        self._runner = runner
        self._queue: asyncio.Queue[Event] = asyncio.Queue()
        self.done = False

    async def events(self) -> AsyncIterator[Event]:
        """Events in order; those that piled up while the client was slow come merged into one."""
        while not self.done:
            event = await self._queue.get()
            while not event.finished and not event.error and not self._queue.empty():
                later = self._queue.get_nowait()
                later.token_ids = event.token_ids + later.token_ids
                event = later
            self.done = event.finished
            if event.error:
                raise EngineFailed(event.error)
            yield event

    def abort(self) -> None:
        """Free the request in the engine (its pages and tree locks); a no-op once finished."""
        if not self.done:
            self.done = True
            self._runner.abort(self.seq_id)


class Runner:
    def __init__(self, engine: Any, *, max_queue: int = 64, retry_after: float = 1.0) -> None:
        self.engine = engine
        self.max_queue = max_queue
        self.retry_after = retry_after
        self._streams: dict[int, tuple[Stream, asyncio.AbstractEventLoop, list[int]]] = {}
        self._lock = threading.Lock()  # guards _streams between the loop and the engine thread
        self._wake = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="engine", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._closed = True
        self._wake.set()
        self._thread.join(timeout=10)

    @property
    def in_flight(self) -> int:
        return len(self._streams)

    @property
    def waiting(self) -> int:
        """Requests admitted that have no token yet (queued or in prefill)."""
        with self._lock:
            return sum(1 for _, _, sent in self._streams.values() if not sent[0])

    def submit(self, prompt_ids: list[int], **options: Any) -> Stream:
        """Queue a request; call on the event loop. Raises Overloaded, or the engine's ValueError for a
        prompt that can never fit."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if len(self._streams) >= self.max_queue:
                raise Overloaded(len(self._streams), self.retry_after)
            seq = self.engine.add_request(prompt_ids, **options)
            stream = Stream(self, seq)
            self._streams[seq.seq_id] = (stream, loop, [0])
        self._wake.set()
        return stream

    def abort(self, seq_id: int) -> None:
        with self._lock:
            self._streams.pop(seq_id, None)
        self.engine.abort(seq_id)
        self._wake.set()

    def _run(self) -> None:
        while not self._closed:
            self._wake.wait()
            self._wake.clear()  # before stepping, so a submit during the step wakes us again
            if self._closed:
                break
            try:
                done = self.engine.step()
            except Exception as e:  # keep serving: fail the requests in flight, not the process
                log.exception("engine step failed")
                self._fail_all(f"{type(e).__name__}: {e}")
                continue
            self._dispatch(done)
            if self.engine.has_unfinished():
                self._wake.set()

    def _dispatch(self, seqs: list[Any]) -> None:
        batches: dict[asyncio.AbstractEventLoop, list[tuple[Stream, Event]]] = {}
        with self._lock:
            for seq in seqs:
                entry = self._streams.get(seq.seq_id)
                if entry is None:  # aborted meanwhile
                    continue
                stream, loop, sent = entry
                new = list(seq.output_ids[sent[0] :])
                sent[0] += len(new)
                event = Event(
                    token_ids=new,
                    cached_tokens=seq.cached_tokens,
                    finished=seq.finished,
                    finish_reason=seq.finish_reason,
                )
                if seq.finished:
                    event.ttft, event.decode_tps = seq.ttft, seq.decode_tps
                    event.prefill_seconds = seq.prefill_seconds
                    del self._streams[seq.seq_id]
                batches.setdefault(loop, []).append((stream, event))
        for loop, batch in batches.items():  # one wake-up of the event loop per step, not one per request
            loop.call_soon_threadsafe(_deliver, batch)

    def _fail_all(self, message: str) -> None:
        with self._lock:
            entries = list(self._streams.items())
            self._streams.clear()
        for seq_id, (stream, loop, _) in entries:
            self.engine.abort(seq_id)
            failed = Event(token_ids=[], cached_tokens=0, finished=True, finish_reason="error", error=message)
            loop.call_soon_threadsafe(_deliver, [(stream, failed)])


def _deliver(batch: list[tuple[Stream, Event]]) -> None:
    for stream, event in batch:
        stream._queue.put_nowait(event)
