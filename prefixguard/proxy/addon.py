"""prefixguard as a mitmproxy addon: watches LLM API traffic without changing a byte of it.

`prefixguard proxy` runs it in reverse mode; it also loads into mitmproxy itself, for apps whose base
URL cannot change (regular/forward mode with mitmproxy's CA):

    mitmdump -s prefixguard/proxy/addon.py --set prefixguard_store=capture.db

On the request path the addon only takes notes: the request's bytes, header fields and times as they
are, and for SSE a tap that returns each chunk unchanged (prefixguard/proxy/tap.py). Nothing is held
back: flows the analysis does not read stream through both ways, and a body it reads that is larger
than STREAM_OVER (or of unknown size) streams through a tap whose copy goes to the analysis. Everything else,
reading headers and keys included, runs in one worker process (prefixguard/proxy/process.py,
analysis.py); a failure there is logged and never fails, delays or alters a flow. When the worker falls
behind by more than MAX_BACKLOG bytes, new flows pass unanalysed. The console line of each request is
printed by the worker (or handed to the `console` given to PrefixGuard).

Response headers (unless prefixguard_headers is off) carry what is known when the response headers
arrive, without waiting: x-prefixguard-verdict (verdict.judge without a usage: the verdict the request
gets when its provider reports what its contract predicts, the stored one then; "pending" when the
analysis has not finished yet, as for answers faster than REQUEST_WAIT_S; "unknown" when the request
could not be analysed), x-prefixguard-cause, x-prefixguard-expected-cached (the tokens it reuses, in the
provider's tokens as far as known), x-prefixguard-reprefill-tokens (what a change makes it prefill
again, when it does). The verdict with the reported usage goes to the console line and the store.
The fields are written by prefixguard/proxy/headers.py; the options are declared in options.py.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from mitmproxy import http

from prefixguard.proxy.analysis import Analyzer
from prefixguard.proxy.ask import Asker
from prefixguard.proxy.flow import Response, packed
from prefixguard.proxy.frames import PRINT, REPLY, REPORT
from prefixguard.proxy.headers import add_verdict, content_headers
from prefixguard.proxy.options import OPTIONS, add_options
from prefixguard.proxy.redact import api_keys, redact_text
from prefixguard.proxy.route import Route
from prefixguard.proxy.tap import StreamTap, is_event_stream
from prefixguard.proxy.trailers import install as pass_trailers
from prefixguard.proxy.worker import Worker
from prefixguard.utils.styled import printable
from prefixguard.wire import files
from prefixguard.wire.gemini import is_cache_creation
from prefixguard.wire.routes import NO_SHAPE, NOT_ANALYSED, TOKEN_COUNT, counts_tokens, resolve

logger = logging.getLogger("prefixguard.proxy")
pass_trailers()  # a chunked message with trailers passes whole instead of hanging its client

META = "prefixguard"
BODY = "prefixguard-body"  # the tap of a body that streams through and is read afterwards
ROUTED = "prefixguard-route"  # the path's route, from requestheaders to request: the path is routed once
STREAM_OVER = 1 << 20  # bodies larger than this (or of unknown size) stream instead of being buffered
MAX_BACKLOG = 256 << 20  # request bytes waiting for analysis before new flows go unanalysed
# How long a flow's hand-off to the analysis may wait to share one write (and one wake-up of the
# analysis process) with others. A request's: short, so its early verdict is ready for any answer slower
# than this (every real LLM call); a flow's end: nothing waits for it.
REQUEST_WAIT_S = 0.005
END_WAIT_S = 0.05


def _hook(fn: Callable[[PrefixGuard, http.HTTPFlow], None]) -> Callable[[PrefixGuard, http.HTTPFlow], None]:
    """A hook that can never fail the flow: an error is logged and the flow goes on as it is."""

    def guarded(self: PrefixGuard, flow: http.HTTPFlow) -> None:
        try:
            fn(self, flow)
        except Exception as err:
            logger.warning(
                "prefixguard: %s hook failed on %s: %s",
                fn.__name__,
                flow.id,
                printable(redact_text(repr(err), api_keys(flow.request.headers))),
            )

    guarded.__name__ = fn.__name__
    return guarded


def _route(req: http.Request) -> tuple[str | None, str | None, bool, str] | None:
    """The path's route (wire.routes.Routed as a plain tuple: the analysis takes it, and routes no path
    again) of a request the analysis reads, else None. It reads a POST to a path of an API shape (or whose
    tail names one: its body decides), the creation of a Gemini explicit cache or a file upload (later
    requests that name the cache or the file read what it holds)."""
    if req.method.upper() != "POST":
        return None
    routed = resolve(req.path)
    if routed.api is not None or is_cache_creation(req.path) or files.is_upload(req.path):
        return routed.api, routed.model, routed.exact, routed.path
    return None


class PrefixGuard:
    """The addon. Options (also settable with mitmproxy's --set): prefixguard_store, prefixguard_index,
    prefixguard_bodies, prefixguard_headers, prefixguard_quiet, prefixguard_policy, prefixguard_upstreams.

    `clock` gives the wall time that TTLs count in (tests inject their own); `console` takes each
    request's console line in this process (by default the worker prints it); `analyzer` builds the
    Analyzer in the worker process (a picklable callable)."""

    def __init__(
        self,
        clock: Callable[[], float] = time.time,
        console: Callable[[str], None] | None = None,
        analyzer: Callable[..., Analyzer] = Analyzer,
    ) -> None:
        self.clock = clock
        self.console = console
        self.analyzer = analyzer
        self.routes: list[Route] = []
        self.headers = True
        self.quiet = False
        self._settings: dict[str, Any] = {}
        self._worker: Worker | None = None
        self._skipping = False
        self.asker: Asker | None = None  # --ask-diagnostics: the one option that changes a request body

    # ---- mitmproxy lifecycle
    def load(self, loader: Any) -> None:
        add_options(loader)

    def configure(self, updated: set[str]) -> None:
        from mitmproxy import ctx

        if updated.isdisjoint(OPTIONS):
            return
        opts = ctx.options
        self.routes = sorted((Route.parse(s) for s in opts.prefixguard_upstreams), key=lambda r: -len(r.prefix))
        self.headers, self.quiet = opts.prefixguard_headers, opts.prefixguard_quiet
        if opts.prefixguard_diagnostics != (self.asker is not None):
            self.asker = Asker() if opts.prefixguard_diagnostics else None
        settings = {
            "store": opts.prefixguard_store or None,
            "index": opts.prefixguard_index or None,
            "bodies": opts.prefixguard_bodies,
            "policy": opts.prefixguard_policy or None,
        }
        if opts.prefixguard_otlp_endpoint:  # telemetry runs in the analysis process, like everything else
            settings["otlp_endpoint"] = opts.prefixguard_otlp_endpoint
        if opts.prefixguard_metrics_port:
            settings |= {"metrics_port": opts.prefixguard_metrics_port, "metrics_host": opts.prefixguard_metrics_host}
        if settings != self._settings:
            self._settings = settings
            if self._worker is not None:  # new settings, new worker; the old one finishes its queue
                old, self._worker = self._worker, None
                asyncio.get_running_loop().create_task(old.close())

    def running(self) -> None:
        self._start().submit("warm", None)  # start the process and load the tokenizer now

    async def done(self) -> None:
        if self._worker is not None:  # every flow seen is analysed and stored before exit
            await self._worker.close()
            self._worker = None

    def _start(self) -> Worker:
        if self._worker is None or not self._worker.alive:  # first use, or the last one died: a new one
            resend = b""
            if self._worker is not None:  # the flows it had not stored go to the new one first
                resend = self._worker.unfinished()
                self._worker.release()
                logger.warning(
                    "prefixguard: the analysis process ended; starting a new one (%d KB of "
                    "unfinished flows handed over)",
                    len(resend) >> 10,
                )
            self._worker = Worker(self.analyzer, self._settings, self._report, resend)
        return self._worker

    def _report(self, kind: str, text: str) -> None:
        """A report from the worker: a failed analysis, or a console line for our console."""
        if kind == "error":  # the error's text may quote a body: escaped, as console lines are
            logger.warning("prefixguard: %s", printable(text))
        elif self.console is not None and not self.quiet:
            self.console(text)

    # ---- flow hooks
    @_hook
    def requestheaders(self, flow: http.HTTPFlow) -> None:
        """Route the request (before any byte of it goes upstream) and choose how its body travels:
        a request prefixguard does not read streams through untouched; an LLM request over STREAM_OVER
        streams through a tap that keeps a copy for the analysis; a smaller one is buffered (cheaper)."""
        req = flow.request
        route = next((r for r in self.routes if r.matches(req.path)), None)
        if route is not None:
            route.apply(req)
        routed = _route(req)
        if routed is None:
            req.stream = True
            self._unanalysed(flow, TOKEN_COUNT if counts_tokens(req.path) else NO_SHAPE)
            return
        flow.metadata[ROUTED] = routed
        size = req.headers.get("content-length", "")
        if not size.isdigit() or int(size) > STREAM_OVER:
            tap = StreamTap()
            req.stream = tap
            flow.metadata[BODY] = tap

    @_hook
    def request(self, flow: http.HTTPFlow) -> None:
        req = flow.request
        routed = flow.metadata.pop(ROUTED, None)
        if routed is None:
            return  # not a Messages / Chat Completions / Responses call
        tap = flow.metadata.pop(BODY, None)
        body = b"".join(chunk for _, chunk in tap.chunks) if tap is not None else req.raw_content or b""
        if self.asker is not None and tap is None:  # a body streamed through is already on its way
            body = self.asker.before(flow, body)
        worker = self._start()
        if worker.backlog + len(body) > MAX_BACKLOG:
            if not self._skipping:
                logger.warning(
                    "prefixguard: analysis is behind by %d MB; new flows pass unanalysed", worker.backlog >> 20
                )
            self._skipping = True
            self._unanalysed(flow, NOT_ANALYSED + "the analysis was behind")
            return
        self._skipping = False
        seq = worker.submit(
            "request",
            packed(
                "request",
                id=flow.id,
                ts=self.clock(),
                sent=time.monotonic(),
                path=req.path,
                upstream=(req.scheme, req.host, req.port),
                fields=req.headers.fields,
                routed=routed,
            ),
            body,
            REPLY if self.headers else None,
            REQUEST_WAIT_S,
        )
        # What the flow's later hooks need; plain values: mitmproxy deep-copies metadata to save a flow.
        flow.metadata[META] = (seq, Response(id=flow.id))

    @_hook
    def responseheaders(self, flow: http.HTTPFlow) -> None:
        if flow.response is None:
            return
        if META not in flow.metadata:  # a response nobody reads passes as it comes, SSE or not
            flow.response.stream = True
            return
        seq, resp = flow.metadata[META]
        resp.headers_at = time.monotonic()
        resp.status = flow.response.status_code
        content_type, resp.encoding = content_headers(flow.response.headers.fields)
        if is_event_stream(content_type):
            tap = StreamTap()
            resp.chunks = tap.chunks
            flow.response.stream = tap
        else:
            size = flow.response.headers.get("content-length", "")
            if not size.isdigit() or int(size) > STREAM_OVER:  # large or of unknown size: not held back
                tap = StreamTap()
                flow.response.stream = tap
                flow.metadata[BODY] = tap
        if self.headers:
            worker = self._worker
            add_verdict(flow.response.headers, worker.answers().pop(seq, None) if worker else None)

    @_hook
    def response(self, flow: http.HTTPFlow) -> None:
        if META not in flow.metadata or flow.response is None:
            return
        _, resp = flow.metadata.pop(META)
        resp.ended_at = time.monotonic()
        tap = flow.metadata.pop(BODY, None)
        body: bytes | None
        if resp.chunks is not None:
            body = b""
        elif tap is not None:
            body = b"".join(chunk for _, chunk in tap.chunks)
        else:
            body = flow.response.raw_content
        if self.asker is not None and not resp.encoding:
            self.asker.after(flow, resp.chunks[0][1] if resp.chunks else body or b"")
        self._finish(resp, body)

    @_hook
    def error(self, flow: http.HTTPFlow) -> None:
        if META not in flow.metadata:
            return
        seq, resp = flow.metadata.pop(META)
        if self._worker is not None:  # read them here too: a flow that fails never asks for its answer
            self._worker.answers().pop(seq, None)
        resp.ended_at = time.monotonic()
        resp.error = flow.error.msg if flow.error else "error"
        self._finish(resp)

    def _unanalysed(self, flow: http.HTTPFlow, cause: str) -> None:
        """Count a flow forwarded without analysis: the analysis stores and counts it by its endpoint."""
        req = flow.request
        self._start().submit(
            "unanalysed",
            (flow.id, self.clock(), req.method, req.path, (req.scheme, req.host, req.port), cause),
            b"",
            None,
            END_WAIT_S,
        )

    def _finish(self, resp: Response, body: bytes | None = b"") -> None:
        """Hand the flow's end to the analysis."""
        to = None if self.quiet else PRINT if self.console is None else REPORT
        # durable: in the spool before the client has the response; a dead analysis is replaced and
        # given the flow's request again (Worker.unfinished), so the flow is never dropped here
        self._start().submit(
            "finish",
            packed(
                "finish",
                id=resp.id,
                status=resp.status,
                headers_at=resp.headers_at,
                ended_at=resp.ended_at,
                encoding=resp.encoding,
                error=resp.error,
                chunks=resp.chunks,
            ),
            body or b"",
            to,
            END_WAIT_S,
            durable=True,
        )


addons = [PrefixGuard()]
