"""The per-request analysis behind the proxy, in two steps that run in order in one worker process
(prefixguard/proxy/process.py), away from the proxy's event loop:

1. `request`: parse, fingerprint, find the best earlier request of the same tenant (the core's session
   model), compare, and ask the provider's policy what it should read (lookup).
2. `finish`: usage from the response (JSON or the tapped stream), timings, the final verdict; commit the
   request's reads and writes to the policy; one console line and one store row.
Token counts come from our tokenizer, not the provider's: the policy sees them scaled to the provider's
(prefixguard/judge/scale.py), so minimums hold.
It knows nothing of mitmproxy: the addon sends a FlowState, then a Response.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from prefixguard.capture.store import Record, open_capture
from prefixguard.judge import verdict as verdicts
from prefixguard.judge.agreement import agreement
from prefixguard.judge.index import IndexDown
from prefixguard.judge.policies import CachePolicy, answered, predicted
from prefixguard.judge.state import State, open_index
from prefixguard.model import tokens
from prefixguard.model.prompt import Prompt
from prefixguard.model.usage import ResponseMeta, Usage
from prefixguard.proxy.encoding import decoded
from prefixguard.proxy.flow import WIRE, Early, FlowState, Response, packed, unpacked
from prefixguard.proxy.redact import redact_body, redact_fields, redact_path, redact_text, storable, system_secrets
from prefixguard.proxy.tap import read_stream
from prefixguard.utils.errors import InputError, TooLarge
from prefixguard.utils.redaction import request_secrets
from prefixguard.utils.styled import printable
from prefixguard.wire import (
    MAX_BYTES,
    files,
    gemini,
    parse_diagnosis,
    parse_request,
    parse_response,
    parse_response_meta,
)
from prefixguard.wire.routes import NOT_ANALYSED, TOKEN_COUNT, Routed, counts_tokens, template

KEEP_FLOWS = 10_000  # requests in flight whose response has not been seen
__all__ = ["KEEP_FLOWS", "WIRE", "Analyzer", "Early", "FlowState", "Response", "packed", "unpacked"]


def _line(rec: Record) -> str:
    """One concise console line for a finished request."""
    u = rec.usage
    est = "~" if rec.tokens_estimated else ""  # our counts (not the provider's) are estimates
    parts = [
        time.strftime("%H:%M:%S", time.localtime(rec.ts)),
        rec.tenant or "-",
        rec.model or "-",
        str(rec.status or "---"),
        rec.verdict or "-",
    ]
    if rec.cause:
        parts.append(f"({rec.cause})")
    if u.reported:
        parts.append(f"read {u.cache_read} write {u.cache_write} of {u.prompt_total}")
    if rec.expected_cached is not None:
        parts.append(f"exp {est}{rec.expected_cached}")
    if rec.reprefill_tokens:
        parts.append(f"re-prefill {est}{rec.reprefill_tokens} tok ${rec.cost_usd or 0:.4f}")
    if rec.ttft_s is not None:
        parts.append(f"ttft {rec.ttft_s:.3f}s")
    if rec.decode_tps is not None:
        parts.append(f"{rec.decode_tps:.1f} tok/s")
    if rec.degraded:
        parts.append("degraded")
    if rec.total_s is not None:
        parts.append(f"total {rec.total_s:.3f}s")
    said = diagnosis_said(rec)
    return "prefixguard " + " ".join(parts) + (f" | {said}" if said else "")


def _upstream(flow: FlowState) -> str | None:
    """Where the request went (a provider may be known by its host alone), once read_transport made it a URL."""
    return flow.upstream if isinstance(flow.upstream, str) else None


def _readable(flow: FlowState) -> bytes | str:
    """The body for the reader: its text when it is UTF-8 within the size limit, and the flow then lets
    the bytes go (the prompt keeps the text as it is: one copy of the body, not two, while its parts
    are built and while the flow waits for its response; a body that opens with a byte order mark is
    kept, as the text leaves the mark out). Else the bytes, whose fault the reader names."""
    if len(flow.body) > MAX_BYTES:
        return flow.body
    try:
        text = flow.body.decode("utf-8")
    except UnicodeDecodeError:
        return flow.body
    if not text.startswith("\ufeff"):
        flow.body = b""
    return text


def diagnosis_said(rec: Record) -> str | None:
    """The provider's diagnosis beside ours: "provider says: system_changed (1,234 missed) |
    prefixguard: volatile_content at /system/0 -- agree"."""
    diag, verdict = rec.diagnosis, rec.agreement
    if diag is None:
        return None
    ours = rec.cause if rec.verdict == verdicts.VerdictName.MISS_PREFIX_CHANGED else "no break"
    agreed = f" -- {verdict.replace('_', ' ')}" if verdict else ""
    return f"provider says: {diag.said()} | prefixguard: {ours}{agreed}"


class Analyzer:
    """Per-flow analysis with the state across flows: earlier prompts, policies, the store."""

    def __init__(
        self,
        *,
        store: str | None = None,
        bodies: bool = True,
        policy: str | None = None,
        otlp_endpoint: str | None = None,
        metrics_port: int | None = None,
        metrics_host: str = "127.0.0.1",
        service: str = "prefixguard-proxy",
        index: str | None = None,
    ) -> None:
        """store: a capture file, or a postgresql:// URL; index: a fleet's shared session index
        (redis:// URL), else this process keeps it."""
        self.store = open_capture(store, create=True) if store else None
        self.telemetry = None
        if otlp_endpoint or metrics_port is not None:  # spans and metrics of each record, beside the store
            from prefixguard.telemetry.sink import Telemetry

            self.telemetry = Telemetry(
                otlp_endpoint=otlp_endpoint, metrics_port=metrics_port, metrics_host=metrics_host, service=service
            )
        self.bodies = bodies
        self.forced_policy = policy
        self._state = State(open_index(index) if index else None, policy)
        self._local: State | None = None  # the fallback while the shared index is down
        self._flows: OrderedDict[str, FlowState] = OrderedDict()  # requests waiting for their response
        self._answers = 0  # answers learnt from so far

    def warm(self, _: object = None) -> None:
        """Load the tokenizer before the first request needs it."""
        tokens.count("warm up")

    def secrets_of(self, flow_id: str) -> list[str]:
        flow = self._flows.get(flow_id)
        return flow.secrets if flow else []

    def close(self, _: object = None) -> None:
        if self.store is not None:
            self.store.close()
        if self.telemetry is not None:
            self.telemetry.close()
        if self._state.shared is not None:
            self._state.shared.close()

    def policy_for(self, prompt: Prompt, upstream: str | None = None) -> CachePolicy:
        return self._state.policy_for(prompt, upstream)

    def unanalysed(self, args: tuple[Any, ...]) -> None:
        """A request forwarded without analysis (a path of no shape read here, or the analysis behind):
        a row named by its method and endpoint (routes.template: no ids, no query, no key), counted on /metrics."""
        flow_id, ts, method, path, (scheme, host, port), cause = args
        default = port == (443 if scheme == "https" else 80)
        rec = Record(
            id=flow_id,
            ts=ts,
            path=redact_path(template(path)),
            method=method,
            route=template(path),
            upstream=f"{scheme}://{host}" if default else f"{scheme}://{host}:{port}",
            note=cause if cause.startswith(NOT_ANALYSED) else NOT_ANALYSED + cause,
            analysed=False,
        )
        if self.store is not None:
            self.store.add(rec)
        if self.telemetry is not None:
            self.telemetry.unanalysed(rec)

    def _judged(self, flow: FlowState, step: Callable[[State], None]) -> None:
        """step(state) with the shared state; with the local one when the shared index is down (the
        flow is then marked degraded, and stays judged locally to its end)."""
        if not flow.degraded:
            try:
                return step(self._state)
            except IndexDown:
                flow.degraded = True
        if self._local is None:
            self._local = State(None, self.forced_policy)
        step(self._local)

    # ---- step 1
    def request(self, flow: FlowState) -> Early | None:
        self._flows[flow.id] = flow
        while len(self._flows) > KEEP_FLOWS:  # a flow whose end never came
            self._flows.popitem(last=False)
        if counts_tokens(flow.path):  # no turn of a session: nothing generated, no cache touched
            flow.skip, flow.unread = TOKEN_COUNT, True
            return None
        undecodable = flow.read_transport()
        if undecodable:
            flow.skip = f"cannot undo content-encoding {undecodable!r}"
            return None
        body = _readable(flow)
        try:
            routed = Routed._make(flow.routed) if flow.routed is not None else None
            prompt = parse_request(body, path=flow.path, headers=flow.headers, source=flow.id, routed=routed)
        except InputError as err:
            if isinstance(body, str) and not flow.body:
                flow.body = body.encode("utf-8")  # no prompt: the bytes are what is kept (the exact ones)
            flow.skip = redact_text(str(err), flow.secrets)
            if isinstance(err, TooLarge):
                why = flow.skip.removeprefix(f"{flow.id}: ").removeprefix("too large to analyse: ")
                flow.skip, flow.unread = f"{NOT_ANALYSED}too large ({why})", True
            return None
        flow.prompt, flow.answers = prompt, self._answers
        flow.secrets += system_secrets(prompt)  # random-looking values of its system prompt: kept nowhere either

        def judge(state: State) -> None:
            policy = state.policy_for(prompt, _upstream(flow))
            # a stored context it names, as that was left; as the provider renders it
            held = flow.prompt = policy.rendered(state.stored.filled(prompt, policy.contract.restores_reasoning))
            theirs = state.scale.scaled(held)  # scaled once: for the comparison and the prediction

            def scaled(p: Prompt) -> Prompt:
                return theirs if p is held else state.scale.scaled(p)

            with request_secrets(flow.secrets):  # a shared index keeps the prompt redacted of them
                match = state.sessions.observe(held, flow.id, flow.tenant, flow.ts, scaled)
            flow.previous_id = match.earlier
            flow.comparison = match.comparison if match.broken else None  # a new turn is new content, not a break
            flow.expected = predicted(policy, state.scale, held, flow.ts, flow.tenant, theirs)

        self._judged(flow, judge)
        early = verdicts.judge(flow.expected, flow.comparison)
        # plain values: marshal carries them
        return Early(
            verdict=early.verdict.value,
            cause=early.cause,
            expected_cached=early.reused_tokens,
            reprefill_tokens=early.reprefill_tokens,
        )

    # ---- step 2
    def finish(self, resp: Response) -> str | None:
        """Store the flow; returns its console line (None when it was no LLM request). A flow whose
        analysis fails still gets its row, with the failure as its error (and the failure is raised,
        for the console)."""
        flow = self._flows.pop(resp.id, None)
        if flow is None:  # its request step never ran
            return None
        try:
            return self._finish(flow, resp)
        except Exception as err:
            if self.store is not None:
                rec = Record(
                    id=flow.id,
                    ts=flow.ts,
                    path=flow.path,
                    method=flow.method,
                    upstream=flow.upstream if isinstance(flow.upstream, str) else None,
                    tenant=flow.tenant,
                    client=flow.client or None,
                    route=template(flow.path),
                    site=flow.site,
                    request_bytes=flow.size,
                    status=resp.status,
                    error=f"analysis failed: {type(err).__name__}: {err}",
                    verdict=verdicts.VerdictName.ERROR,
                )
                redact_fields(rec, flow.secrets)
                self.store.add(rec)
            raise

    def _finish(self, flow: FlowState, resp: Response) -> str | None:
        prompt = flow.prompt
        api = prompt.api if prompt else None
        ok = resp.status is not None and 200 <= resp.status < 300 and not resp.error
        if prompt is None and gemini.is_cache_creation(flow.path, flow.method):
            if ok and resp.body:  # no row: not a generation; remembered for the requests that name it
                gemini.remember_cached(decoded(resp.body, resp.encoding)[0])
            return None
        usage, first, output, diag, said = Usage(), None, 0, None, ResponseMeta()
        if resp.usage is not None:
            usage, first, output = resp.usage, resp.headers_at, resp.usage.output
        elif api and resp.chunks is not None:
            stream, first = read_stream(resp.chunks, api, resp.encoding)
            usage, diag, said = stream.usage(), stream.diagnosis, stream.meta
            output = usage.output or stream.output_chunks
            if resp.error and stream.finished and resp.status is not None and 200 <= resp.status < 300:
                # The client closed the connection after the provider's last event (an SDK stops
                # reading at [DONE]): the answer was whole, and its usage counts.
                resp.error, ok = None, True
        elif api and resp.body and ok:
            try:
                plain = decoded(resp.body, resp.encoding)[0]
                usage, said = parse_response(plain, api), parse_response_meta(plain, api)
                diag = parse_diagnosis(plain, api) if b"diagnostic" in plain else None  # asked for: rare
            except InputError as err:  # a 200 whose body is no answer: the row says so
                resp.error = f"unreadable response: {err}"
            first = resp.headers_at  # a whole JSON body: its first token arrives with the last
        elif prompt is None and ok and resp.body and files.is_upload(flow.path, flow.method):
            files.remember(flow.body, decoded(resp.body, resp.encoding)[0])  # later ids cost what it holds
        rec = Record(
            id=flow.id,
            ts=flow.ts,
            path=flow.path,
            method=flow.method,
            upstream=flow.upstream,
            api=api,
            model=prompt.model if prompt else None,
            tenant=flow.tenant,
            request_bytes=flow.size,
            status=resp.status,
            error=resp.error,
            usage=usage,
            client=flow.client or None,
            route=template(flow.path),
            site=flow.site,
            response_id=said.id,
            response_model=said.model,
            finish_reasons=list(said.finish_reasons) or None,
            response_keys=list(said.keys) or None,
        )
        if self.bodies and not flow.unread:  # a body too large to read is not kept
            sent = flow.body.decode("utf-8", "replace") if prompt is None or flow.body else prompt.text
            rec.request = storable(redact_body(sent, flow.secrets))
        if prompt is not None:
            rec.tokens_estimated = prompt.estimated
            rec.fingerprints = bytes(prompt.chain)
            rec.segments = [[s.level, s.pointer, s.tokens] for s in prompt.segments]
        if resp.ended_at is not None:
            rec.total_s = resp.ended_at - flow.sent
        if first is not None:
            rec.ttft_s = first - flow.sent
            last = resp.chunks[-1][0] if resp.chunks else None
            if output and last is not None and last > first:
                rec.decode_tps = output / (last - first)
        if prompt is not None and (self._state.shared is not None or flow.answers != self._answers):
            # The answer before this request may have been learnt from after this one was read (a stream's end
            # reaches the analysis after the client's next request; in a fleet, another proxy's): the final
            # verdict reads the state now, when it holds what ended before.
            def relook(state: State) -> None:
                flow.expected = predicted(
                    state.policy_for(prompt, _upstream(flow)), state.scale, prompt, flow.ts, flow.tenant
                )

            self._judged(flow, relook)
        if prompt is None:
            rec.note, rec.analysed = flow.skip, not flow.unread
        else:
            if flow.expected is not None:
                flow.expected = self.policy_for(prompt, _upstream(flow)).billed(flow.expected, prompt, usage)
            v = verdicts.judge(flow.expected, flow.comparison, usage, resp.status, resp.error)
            rec.judged(v)
            if flow.expected is not None:
                rec.expected_cached, rec.expected_reason = flow.expected.cache_read, flow.expected.reason
            rec.previous_id = flow.previous_id
            cmp = flow.comparison
            if diag is not None:
                broke = cmp if v.verdict is verdicts.VerdictName.MISS_PREFIX_CHANGED else None  # ours: the verdict's
                rec.diagnosis, rec.agreement = diag, agreement(diag, broke)
            if cmp is not None and cmp.broken:  # what the change cost, as judged: nothing on a hit with a note
                rec.reprefill_tokens, rec.cost_usd = v.reprefill_tokens, v.cost_usd
                rec.detail = redact_text(cmp.detail, flow.secrets)
        if prompt is not None and ok:

            def learn(state: State) -> None:
                policy = state.policy_for(prompt, _upstream(flow))
                held = answered(policy, state.scale, prompt, usage, flow.ts, flow.tenant, said)
                state.stored.answered(said, held, usage, policy, flow.ts, flow.tenant, state.sessions, flow.id)

            self._judged(flow, learn)
            self._answers += 1
        rec.degraded = flow.degraded
        redact_fields(rec, flow.secrets)  # every text field, whatever put a key or a lone surrogate there
        if self.store is not None:
            self.store.add(rec)
        if self.telemetry is not None and prompt is not None:
            lag = time.monotonic() - resp.ended_at if resp.ended_at is not None else None
            self.telemetry.add(rec, lag)
        elif self.telemetry is not None:  # forwarded, not analysed: counted by its endpoint
            self.telemetry.unanalysed(rec)
        if prompt is None and rec.cause and rec.cause.startswith("not analysed: "):  # said, not silent
            return printable(f"prefixguard warning: {rec.id} {rec.path}: {rec.cause}")
        return printable(_line(rec)) if prompt is not None else None  # a model name may hold an escape sequence
