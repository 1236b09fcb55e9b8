"""The proxy loop's cost of the hand-off to the analysis (submit + flush, as the addon's hooks and
timers run them), with the spool (memfd) and without it, on a real Worker whose process analyses
nothing (bench/handoff.py's Null), so only the proxy's side is timed.

    .venv/bin/python bench/handoff.py 1    # with the spool
    .venv/bin/python bench/handoff.py 0    # without (as before issue 28)
"""
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import prefixguard.proxy.spool as spool_module  # noqa: E402
import prefixguard.proxy.worker as w  # noqa: E402
from prefixguard.proxy.analysis import packed  # noqa: E402


class Null:
    """An analysis that does nothing (the worker process imports it from this file, by sys.path)."""

    def __init__(self, **kw): pass
    def warm(self, arg=None): return None
    def finish(self, arg): return None
    def close(self): pass


F = packed("finish", id="f", status=200, headers_at=0.0, ended_at=0.0, encoding=None, error=None, chunks=None)


async def measure(spool: bool) -> dict:
    if not spool:
        spool_module.memfd = lambda name: None
    from handoff import Null as Importable   # by module name, so the worker process can unpickle it
    worker = w.Worker(Importable, {}, lambda *a: None)
    out = {}
    for size in (10 << 10, 1 << 20):
        body = os.urandom(size)
        req, fin = [], []
        for i in range(200):
            t = time.perf_counter()
            worker.submit("finish", F, body, None, 0.005)     # a request's hand-off (its body)
            worker.flush()                                      # the 5 ms timer's flush
            req.append(time.perf_counter() - t)
            t = time.perf_counter()
            worker.submit("finish", F, b"x" * 2000, None, 0.05, **({"durable": True} if spool else {}))  # a flow's end
            fin.append(time.perf_counter() - t)
            await asyncio.sleep(0.002 if size < (1 << 20) else 0.01)   # let the feeder and the process drain
        out[f"{size >> 10}KB request+flush p50_us"] = round(statistics.median(req) * 1e6, 1)
        out[f"{size >> 10}KB finish p50_us"] = round(statistics.median(fin) * 1e6, 1)
    assert worker.alive
    await worker.close()
    return out

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    print("spool" if sys.argv[1] == "1" else "no spool", asyncio.run(measure(sys.argv[1] == "1")))
