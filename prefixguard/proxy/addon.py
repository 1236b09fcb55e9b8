"""prefixguard as a mitmproxy addon: watches LLM API traffic without changing a byte of it.

`prefixguard proxy` runs it in reverse mode; it also loads into mitmproxy itself, for apps whose base
URL cannot change (regular/forward mode with mitmproxy's CA):

    mitmdump -s prefixguard/proxy/addon.py --set prefixguard_store=capture.db

On the request path the addon only takes notes: the request's bytes and times, and for SSE a tap that
returns each chunk unchanged (prefixguard/proxy/tap.py). Everything else runs on one worker thread
(prefixguard/proxy/analysis.py); a failure there is logged and never fails, delays or alters a flow.

Response headers (unless prefixguard_headers is off) carry what is known when the response headers
arrive, without waiting: x-prefixguard-verdict (the request-side verdict, see verdict.EARLY, or
"pending" when the analysis has not finished yet), x-prefixguard-cause, x-prefixguard-expected-cached.
The final verdict, which needs the reported usage, goes to the console line and the store.
"""
from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from mitmproxy import http

from prefixguard import tokens
from prefixguard.proxy.analysis import Analyzer, FlowState
from prefixguard.proxy.redact import api_keys, redact_path, redact_text, tenant_of
from prefixguard.proxy.route import Route
from prefixguard.proxy.tap import StreamTap, is_event_stream
from prefixguard.store import Store
from prefixguard.wire import InputError, detect_api

logger = logging.getLogger("prefixguard.proxy")

META = "prefixguard"
PARSE_HEADERS = ("anthropic-version", "anthropic-beta")  # headers that change how a body is read


def _hook(fn: Callable[[PrefixGuard, http.HTTPFlow], None]) -> Callable[[PrefixGuard, http.HTTPFlow], None]:
    """A hook that can never fail the flow: an error is logged and the flow goes on as it is."""
    def guarded(self: PrefixGuard, flow: http.HTTPFlow) -> None:
        try:
            fn(self, flow)
        except Exception as err:
            state = flow.metadata.get(META)
            logger.warning("prefixguard: %s failed on %s: %s", fn.__name__, flow.id,
                           redact_text(repr(err), state.secrets if state else ()))
    guarded.__name__ = fn.__name__
    return guarded


class PrefixGuard:
    """The addon. Options (also settable with mitmproxy's --set): prefixguard_store, prefixguard_bodies,
    prefixguard_headers, prefixguard_quiet, prefixguard_policy, prefixguard_upstreams."""

    def __init__(self, clock: Callable[[], float] = time.time,
                 console: Callable[[str], None] | None = None) -> None:
        self.clock = clock              # wall time for TTLs; tests inject their own
        self._console = console or (lambda line: print(line, file=sys.stderr, flush=True))
        self.routes: list[Route] = []
        self.headers = True
        self.analyzer = Analyzer()
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="prefixguard")

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
        opts = ctx.options
        if not updated & {"prefixguard_store", "prefixguard_bodies", "prefixguard_headers", "prefixguard_quiet",
                          "prefixguard_policy", "prefixguard_upstreams"}:
            return
        self.routes = sorted((Route.parse(s) for s in opts.prefixguard_upstreams), key=lambda r: -len(r.prefix))
        self.headers = opts.prefixguard_headers
        old = self.analyzer.store
        store = Store(opts.prefixguard_store) if opts.prefixguard_store else None
        if old is not None:
            self._worker.submit(old.close)
        self.analyzer = Analyzer(store=store, bodies=opts.prefixguard_bodies,
                                 policy=opts.prefixguard_policy or None,
                                 console=None if opts.prefixguard_quiet else self._console)

    def running(self) -> None:
        self._worker.submit(tokens.count, "load the tokenizer before the first request needs it")

    def done(self) -> None:
        self._worker.shutdown(wait=True)  # every flow seen is analysed and stored before exit
        if self.analyzer.store is not None:
            self.analyzer.store.close()

    # ---- the worker
    def _submit(self, step: Callable[[FlowState], Any], state: FlowState) -> Future:
        def run() -> None:
            try:
                step(state)
            except Exception as err:
                logger.warning("prefixguard: analysis (%s) of %s failed: %s", step.__name__, state.id,
                               redact_text(repr(err), state.secrets))
        return self._worker.submit(run)

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
        headers = flow.request.headers
        state = FlowState(id=flow.id, ts=self.clock(), sent=0.0, path=redact_path(flow.request.path),
                          upstream=f"{flow.request.scheme}://{flow.request.pretty_host}", tenant=tenant_of(headers),
                          secrets=api_keys(headers), body=flow.request.get_content(strict=False) or b"",
                          headers={k: headers[k] for k in PARSE_HEADERS if k in headers})
        flow.metadata[META] = state
        state.pending = self._submit(self.analyzer.request, state)
        state.sent = time.monotonic()

    @_hook
    def responseheaders(self, flow: http.HTTPFlow) -> None:
        state: FlowState | None = flow.metadata.get(META)
        if state is None or flow.response is None:
            return
        state.headers_at = time.monotonic()
        state.status = flow.response.status_code
        state.encoding = flow.response.headers.get("content-encoding")
        if is_event_stream(flow.response.headers.get("content-type")):
            state.tap = StreamTap()
            flow.response.stream = state.tap
        if self.headers:
            done = state.pending is not None and state.pending.done()
            early = state.early if done else None
            h = flow.response.headers
            h["x-prefixguard-verdict"] = early.verdict if early else ("pending" if not done else "unknown")
            if early and early.cause:
                h["x-prefixguard-cause"] = early.cause
            if early and state.expected is not None:
                h["x-prefixguard-expected-cached"] = str(state.expected.read_tokens)

    @_hook
    def response(self, flow: http.HTTPFlow) -> None:
        state: FlowState | None = flow.metadata.pop(META, None)
        if state is None or flow.response is None:
            return
        state.ended_at = time.monotonic()
        if state.tap is None:
            state.response = flow.response.get_content(strict=False)
        self._submit(self.analyzer.finish, state)

    @_hook
    def error(self, flow: http.HTTPFlow) -> None:
        state: FlowState | None = flow.metadata.pop(META, None)
        if state is None:
            return
        state.ended_at = time.monotonic()
        state.error = flow.error.msg if flow.error else "error"
        self._submit(self.analyzer.finish, state)


addons = [PrefixGuard()]
