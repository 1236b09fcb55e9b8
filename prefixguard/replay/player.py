"""Drive a trace through a target: in trace order, at the trace's pace (scaled) or as fast as it goes,
with at most `concurrency` requests in flight, and a progress bar when a person is watching."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn, TimeRemainingColumn
from rich.text import Text

from prefixguard.replay.results import Outcome
from prefixguard.replay.sources import Request
from prefixguard.replay.targets import Target
from prefixguard.utils import styled


class RateColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        return Text(f"{task.speed:,.1f} req/s" if task.speed else "- req/s", style="progress.data.speed")


def replay(
    requests: list[Request],
    target: Target,
    *,
    speed: float = 1.0,
    timestamps: bool = True,
    concurrency: int = 1,
    progress: bool = True,
    label: str = "replay",
    console: Console | None = None,
) -> list[Outcome]:
    """Outcomes in trace order.

    The clock a target is given is the trace's time scaled by `speed` (0 when timestamps are ignored):
    the sim's policies count TTLs on it. A realtime target is also *sent* requests at that pace.
    """

    def clock(req: Request) -> float:
        return req.ts / speed if timestamps else 0.0

    console = console or styled.console(stderr=True)
    show = progress and console.is_terminal
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=not show,
        transient=True,
    )
    with bar:
        task = bar.add_task(label, total=len(requests))
        if not target.realtime:
            out = []
            for req in requests:
                out.append(target.run(req, clock(req)))
                bar.advance(task)
            return out
        return _realtime(requests, target, clock, concurrency, lambda: bar.advance(task))


def _realtime(
    requests: list[Request],
    target: Target,
    clock: Callable[[Request], float],
    concurrency: int,
    advance: Callable[[], None],
) -> list[Outcome]:
    slots = threading.Semaphore(max(1, concurrency))
    failed = threading.Event()  # a request the target could not even build: stop sending
    start = time.monotonic()
    results: dict[int, Outcome] = {}

    def one(req: Request, at: float) -> None:
        try:
            results[req.index] = target.run(req, at)
        except BaseException:
            failed.set()
            raise
        finally:
            slots.release()
            advance()

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        futures = []
        for req in requests:
            at = clock(req)
            wait = start + at - time.monotonic()
            if wait > 0 and failed.wait(wait):
                break
            slots.acquire()  # at most `concurrency` in flight: later requests queue here
            if failed.is_set():
                slots.release()
                break
            futures.append(pool.submit(one, req, at))
    for f in futures:
        f.result()  # the failure, if any, raises here
    return [results[r.index] for r in requests]
