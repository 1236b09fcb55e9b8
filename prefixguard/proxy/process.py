"""The analysis process: one Analyzer, fed in order by the addon over a pipe (run as
`python -m prefixguard.proxy.process REPORTS_FD SPOOL_FD CHECKPOINT_FD` by proxy/worker.py).

Parsing, tokenizing and comparing are CPU work; in the proxy's process they would hold the GIL that the
event loop needs to move bytes, and every flow would wait. In a process of their own, at a lower CPU
priority, they cost the traffic nothing.

Messages come in frames (proxy/frames.py). The first two are pickles: the parent's sys.path, then
(analyzer factory, its settings). Then, in marshal (plain tuples: the fastest way Python has to write
and read them), (seq, step, args, to): run analyzer.<step>(arg), where arg is unpacked(step, args)
(analysis.WIRE names the fields) with the payload as arg.body, and send its result `to`:
- REPLY: the answers pipe, which the addon reads when it needs an answer (a tuple, or False for none);
- REPORT: the reports pipe, read as reports come;
- PRINT: this process's stderr, the proxy's console;
- None: nowhere.
A failure goes to REPORT as one line, with the request's secrets removed. When the pipe ends, what only
the spool holds is analysed too (proxy/spool.py).
"""

from __future__ import annotations

import io
import marshal
import os
import pickle
import signal
import sys
from collections.abc import Callable
from typing import Any, BinaryIO

from prefixguard.proxy.frames import HEADER, PRINT, REPLY, REPORT, flow_id, frame, read_frame
from prefixguard.proxy.spool import SpoolKeeper
from prefixguard.utils.errors import InputError

NICE = 10  # where SCHED_IDLE is not available
NICE_SETTING = "PREFIXGUARD_ANALYSIS_NICE"
LOWEST = 19  # the highest nice value: the lowest priority


def main() -> None:
    from prefixguard.proxy.flow import WIRE, unpacked
    from prefixguard.proxy.redact import redact_text

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the proxy, which then stops us cleanly
    _lower_priority()
    answers = os.fdopen(os.dup(1), "wb")
    reports = os.fdopen(int(sys.argv[1]), "wb")
    os.dup2(2, 1)  # a stray print must not land in the answers
    inp = sys.stdin.buffer
    sys.path[:] = pickle.loads(_setup(inp))
    factory, settings = pickle.loads(_setup(inp))
    spool = SpoolKeeper(int(sys.argv[2]), int(sys.argv[3])) if len(sys.argv) > 3 else SpoolKeeper(-1, -1)
    analyzer = factory(**settings)
    read = _reader(inp, spool)
    while (message := read()) is not None:
        data, body = message
        del message  # the flow alone holds its body: the analysis lets it go once read
        start, size = spool.offset, HEADER.size + len(data) + len(body)
        try:
            seq, step, args, to = marshal.loads(data)
        except (ValueError, EOFError, TypeError):  # the spool's tail cut by the proxy's death mid-write
            break
        arg = unpacked(step, args) if step in WIRE else args
        if body:
            arg.body = body
        del body
        try:
            result = getattr(analyzer, step)(arg)
        except Exception as err:  # noqa: BLE001 - reported by the proxy, never raised into a flow
            secrets = getattr(arg, "secrets", None) or analyzer.secrets_of(getattr(arg, "id", ""))
            error = redact_text(f"{type(err).__name__}: {err}", secrets)
            _answer(reports, ("error", f"analysis ({step}) of {getattr(arg, 'id', '?')} failed: {error}"))
            result = None
        spool.done(step, flow_id(args), start, size)
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


def _setup(inp: BinaryIO) -> bytes:
    """One of the two setup messages; the process ends, with nothing to do, if the proxy died first."""
    message = read_frame(inp)
    if message is None:
        raise SystemExit(0)
    return message[0]


def _reader(inp: BinaryIO, spool: SpoolKeeper) -> Callable[[], tuple[bytes, bytes] | None]:
    """A function that returns the next message down the pipe; once it ends (the proxy closed it, or
    died), those only the spool holds (a flow the proxy had answered but not yet written down the pipe
    is still stored); None after the last. Not a generator: one waiting for the next message would
    still hold the last one, body and all."""
    source: BinaryIO = inp

    def read() -> tuple[bytes, bytes] | None:
        nonlocal source
        if source is inp:
            message = read_frame(inp)
            if message is not None:
                return message
            source = io.BytesIO(spool.rest())
        message = read_frame(source)
        return message if message is not None and message[0] else None  # empty: a place whose write never came

    return read


def _answer(out: BinaryIO, message: tuple[Any, ...]) -> None:
    """Send to the proxy; nothing when it is gone (killed): what it sent before is still analysed and
    stored, up to the end of our input."""
    try:
        out.write(b"".join(frame(marshal.dumps(message))))
        out.flush()
    except (BrokenPipeError, ValueError):  # ValueError: already failed once, and closed
        pass


def _lower_priority() -> None:
    """Run only on CPU time the traffic leaves over (Linux SCHED_IDLE), else at a high nice value. With
    PREFIXGUARD_ANALYSIS_NICE, a batch job at that nice value instead (SCHED_BATCH: it never preempts the
    proxy when it wakes), for a machine whose cores are all busy where the rows must keep up: an idle
    process barely runs there, and a proxy started beside a test suite on every core waits for its rows."""
    try:
        nice = analysis_nice()
    except InputError:  # the CLI said so before the proxy started
        nice = None
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE if nice is None else os.SCHED_BATCH, os.sched_param(0))
    except (AttributeError, OSError):  # not Linux: a high nice value stands for idle
        nice = NICE if nice is None else nice
    if nice is not None:
        try:
            os.nice(nice - os.nice(0))
        except OSError:  # a priority above ours needs a privilege we lack: ours stays
            pass


def analysis_nice() -> int | None:
    """PREFIXGUARD_ANALYSIS_NICE (0-19): the analysis process's nice value, as a batch job; None when unset."""
    value = os.environ.get(NICE_SETTING, "").strip()
    if not value:
        return None
    if not (value.isdigit() and int(value) <= LOWEST):
        raise InputError(f"{NICE_SETTING} must be a whole number from 0 to {LOWEST}, not {value!r}")
    return int(value)


if __name__ == "__main__":
    main()
