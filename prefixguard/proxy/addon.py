"""prefixguard as a mitmproxy addon: watches LLM API traffic without changing a byte of it.

`prefixguard proxy` runs it in reverse mode; it also loads into mitmproxy itself, for apps whose base
URL cannot change (regular/forward mode with mitmproxy's CA):

    mitmdump -s prefixguard/proxy/addon.py --set prefixguard_store=capture.db

On the request path the addon only takes notes: the request's bytes and times, and for SSE a tap that
returns each chunk unchanged (prefixguard/proxy/tap.py). Everything else runs in one worker process
(prefixguard/proxy/worker.py, analysis.py); a failure there is logged and never fails, delays or alters
a flow. When the worker falls behind by more than MAX_BACKLOG bytes, new flows pass unanalysed.

Response headers (unless prefixguard_headers is off) carry what is known when the response headers
arrive, without waiting: x-prefixguard-verdict (the request-side verdict, see verdict.py: "pending"
when the analysis has not finished yet, "unknown" when the request could not be analysed),
x-prefixguard-cause, x-prefixguard-expected-cached (tokens, in the provider's tokens as far as known).
The final verdict, which needs the reported usage, goes to the console line and the store.
"""
from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from mitmproxy import http

from prefixguard.proxy.analysis import Analyzer, Early, FlowState, Response
from prefixguard.proxy.redact import api_keys, redact_path, redact_text, tenant_of
from prefixguard.proxy.route import Route
from prefixguard.proxy.tap import StreamTap, is_event_stream
from prefixguard.proxy.worker import Worker
from prefixguard.wire import InputError, detect_api

logger = logging.getLogger("prefixguard.proxy")

META = "prefixguard"
PARSE_HEADERS = ("anthropic-version", "anthropic-beta")  # headers that change how a body is read
MAX_BACKLOG = 256 << 20   # request bytes waiting for analysis before new flows go unanalysed
OPTIONS = ("prefixguard_store", "prefixguard_bodies", "prefixguard_headers", "prefixguard_quiet",
           "prefixguard_policy", "prefixguard_upstreams")


def _hook(fn: Callable[[PrefixGuard, http.HTTPFlow], None]) -> Callable[[PrefixGuard, http.HTTPFlow], None]:
    """A hook that can never fail the flow: an error is logged and the flow goes on as it is."""
    def guarded(self: PrefixGuard, flow: http.HTTPFlow) -> None:
        try:
            fn(self, flow)
        except Exception as err:
            logger.warning("prefixguard: %s hook failed on %s: %s", fn.__name__, flow.id,
                           redact_text(repr(err), api_keys(flow.request.headers)))
    guarded.__name__ = fn.__name__
    return guarded


def _plain(headers: http.Headers) -> dict[str, str]:
    """The headers as a plain dict, names lowercase, repeats joined as mitmproxy joins them: one pass,
    where each lookup in mitmproxy's Headers scans every field."""
    out: dict[str, str] = {}
    for name, value in headers.items(multi=True):
        name = name.lower()
        out[name] = f"{out[name]}, {value}" if name in out else value
    return out


class PrefixGuard:
    """The addon. Options (also settable with mitmproxy's --set): prefixguard_store, prefixguard_bodies,
    prefixguard_headers, prefixguard_quiet, prefixguard_policy, prefixguard_upstreams.

    `clock` gives the wall time that TTLs count in (tests inject their own); `analyzer` builds the
    Analyzer in the worker process (a picklable callable)."""

    def __init__(self, clock: Callable[[], float] = time.time, console: Callable[[str], None] | None = None,
                 analyzer: Callable[..., Analyzer] = Analyzer) -> None:
        self.clock = clock
        self.console = console or (lambda line: print(line, file=sys.stderr, flush=True))
        self.analyzer = analyzer
        self.routes: list[Route] = []
        self.headers = True
        self.quiet = False
        self._settings: dict[str, Any] = {}
        self._worker: Worker | None = None
        self._skipping = False

    # ---- mitmproxy lifecycle
    def load(self, loader: Any) -> None:
        loader.add_option("prefixguard_store", str, "", "SQLite capture file (empty: none).")
        loader.add_option("prefixguard_bodies", bool, True, "Store redacted request bodies (else fingerprints only).")
        loader.add_option("prefixguard_headers", bool, True, "Add x-prefixguard-* response headers.")
        loader.add_option("prefixguard_quiet", bool, False, "No console line per request.")
        loader.add_option("prefixguard_policy", str, "", "Cache policy: radix, anthropic, openai (empty: by provider).")
        loader.add_option("prefixguard_upstreams", Sequence[str], [],
                          "Reverse-proxy routes PREFIX=URL (a URL alone: every other path).")

    def configure(self, updated: set[str]) -> None:
        from mitmproxy import ctx
        if updated.isdisjoint(OPTIONS):
            return
        opts = ctx.options
        self.routes = sorted((Route.parse(s) for s in opts.prefixguard_upstreams), key=lambda r: -len(r.prefix))
        self.headers, self.quiet = opts.prefixguard_headers, opts.prefixguard_quiet
        settings = {"store": opts.prefixguard_store or None, "bodies": opts.prefixguard_bodies,
                    "policy": opts.prefixguard_policy or None}
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
            if self._worker is not None:
                logger.warning("prefixguard: the analysis process ended; starting a new one")
            self._worker = Worker(self.analyzer, self._settings)
        return self._worker

    def _report(self, step: str, flow_id: str) -> Callable[[Any, str | None], None]:
        def done(result: Any, error: str | None) -> None:
            if error:
                logger.warning("prefixguard: analysis (%s) of %s failed: %s", step, flow_id, error)
            elif step == "finish" and result and not self.quiet:
                self.console(result)
        return done

    # ---- flow hooks
    @_hook
    def request(self, flow: http.HTTPFlow) -> None:
        route = next((r for r in self.routes if r.matches(flow.request.path)), None)
        if route is not None:
            route.apply(flow.request)
        if flow.request.method != "POST":
            return
        try:
            detect_api(None, flow.request.path)
        except InputError:
            return  # not a Messages / Chat Completions / Responses call
        body = flow.request.get_content(strict=False) or b""
        worker = self._start()
        if worker.backlog + len(body) > MAX_BACKLOG:
            if not self._skipping:
                logger.warning("prefixguard: analysis is behind by %d MB; new flows pass unanalysed",
                               worker.backlog >> 20)
            self._skipping = True
            return
        self._skipping = False
        headers = _plain(flow.request.headers)
        state = FlowState(id=flow.id, ts=self.clock(), sent=0.0, path=redact_path(flow.request.path),
                          upstream=f"{flow.request.scheme}://{flow.request.pretty_host}", tenant=tenant_of(headers),
                          secrets=api_keys(headers),
                          headers={k: headers[k] for k in PARSE_HEADERS if k in headers})
        resp = Response(flow.id)
        early: list[Early | None] = []  # filled when step 1 is done; read by responseheaders

        def step1_done(result: Early | None, error: str | None) -> None:
            early.append(result)
            self._report("request", flow.id)(result, error)

        state.sent = time.monotonic()
        worker.submit("request", state, step1_done, body)
        flow.metadata[META] = (early, resp)

    @_hook
    def responseheaders(self, flow: http.HTTPFlow) -> None:
        if META not in flow.metadata or flow.response is None:
            return
        pending, resp = flow.metadata[META]
        resp.headers_at = time.monotonic()
        resp.status = flow.response.status_code
        resp.encoding = flow.response.headers.get("content-encoding")
        if is_event_stream(flow.response.headers.get("content-type")):
            resp.tap = StreamTap()
            flow.response.stream = resp.tap
        if self.headers:
            early: Early | None = pending[0] if pending else None
            h = flow.response.headers
            h["x-prefixguard-verdict"] = early.verdict if early else "unknown" if pending else "pending"
            if early and early.cause:
                h["x-prefixguard-cause"] = early.cause
            if early and early.expected_cached is not None:
                h["x-prefixguard-expected-cached"] = str(early.expected_cached)

    @_hook
    def response(self, flow: http.HTTPFlow) -> None:
        if META not in flow.metadata or flow.response is None:
            return
        _, resp = flow.metadata.pop(META)
        resp.ended_at = time.monotonic()
        body = flow.response.get_content(strict=False) if resp.tap is None else b""
        self._start().submit("finish", resp, self._report("finish", flow.id), body or b"")

    @_hook
    def error(self, flow: http.HTTPFlow) -> None:
        if META not in flow.metadata:
            return
        _, resp = flow.metadata.pop(META)
        resp.ended_at = time.monotonic()
        resp.error = flow.error.msg if flow.error else "error"
        self._start().submit("finish", resp, self._report("finish", flow.id))


addons = [PrefixGuard()]
