"""A LiteLLM callback that runs the proxy's analysis in-process, for LiteLLM SDK and proxy users.

Each call LiteLLM makes goes through the same steps as a proxied flow (prefixguard.proxy.analysis:
`Analyzer.request` then `Analyzer.finish`: parse, the session model's comparison, the provider's
contract, the verdict) and lands in the same capture store, spans and metrics. The request is the body
LiteLLM sent to the provider (its `complete_input_dict`), the response the provider's own body; for a
stream, LiteLLM's assembled usage.

The row's call site is the call's metadata "prefixguard_site" (litellm.completion(...,
metadata={"prefixguard_site": "checkout.summarise"})), its client LiteLLM and its version.

SDK:    litellm.callbacks = [PrefixGuardLogger(store="capture.db")]
Proxy:  litellm_settings: {callbacks: prefixguard.integrations.litellm.handler}  (configured by the
        PREFIXGUARD_STORE, PREFIXGUARD_OTLP_ENDPOINT, PREFIXGUARD_METRICS_PORT environment variables)

The analysis runs in LiteLLM's logging callbacks, after the answer: never before the request goes out.
A failure in it is logged and never reaches the caller.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from functools import cache
from typing import Any
from urllib.parse import urlsplit

from litellm.integrations.custom_logger import CustomLogger

from prefixguard.capture.attribution import SITE_HEADER
from prefixguard.proxy.analysis import KEEP_FLOWS, Analyzer
from prefixguard.proxy.flow import FlowState, Response
from prefixguard.utils.errors import InputError
from prefixguard.wire import detect_api, openai_chat, parse_response

logger = logging.getLogger("prefixguard.litellm")


def _mono(at: Any) -> float:
    """A LiteLLM datetime (wall clock) on time.monotonic()'s scale, the one the analysis subtracts in."""
    return time.monotonic() - (time.time() - at.timestamp())


def _path(api_base: str | None, call_type: str) -> str:
    """The URL path the call went to: api_base's own when it names an API (Anthropic's), else the
    OpenAI SDK's endpoint under that base."""
    path = urlsplit(api_base or "").path.rstrip("/")
    try:
        detect_api(None, path)
        return path
    except InputError:
        return path + ("/responses" if "responses" in call_type else "/chat/completions")


SITE_KEY = "prefixguard_site"  # the metadata key that names a call's site


def _fields(kwargs: dict[str, Any]) -> tuple[tuple[bytes, bytes], ...]:
    """The header fields the analysis reads a call's tenant, client and site from, as a proxy would see them."""
    out = []
    key = kwargs.get("api_key") or ""
    if key:
        out.append((b"authorization", f"Bearer {key}".encode()))
    out.append((b"user-agent", f"litellm/{_litellm_version()}".encode()))
    for holder in (kwargs.get("litellm_params"), kwargs):
        metadata = holder.get("metadata") if isinstance(holder, dict) else None
        site = metadata.get(SITE_KEY) if isinstance(metadata, dict) else None
        if isinstance(site, str) and site:
            out.append((SITE_HEADER.encode(), site.encode("utf-8", "surrogateescape")))
            break
    return tuple(out)


@cache
def _litellm_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("litellm")
    except PackageNotFoundError:
        return "unknown"


class PrefixGuardLogger(CustomLogger):
    def __init__(
        self,
        store: str | None = None,
        *,
        bodies: bool = True,
        policy: str | None = None,
        otlp_endpoint: str | None = None,
        metrics_port: int | None = None,
        console: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__()
        self.analyzer = Analyzer(
            store=store,
            bodies=bodies,
            policy=policy,
            otlp_endpoint=otlp_endpoint,
            metrics_port=metrics_port,
            service="prefixguard-litellm",
        )
        self.console = console
        self._lock = threading.Lock()  # LiteLLM calls back from several threads; the analysis is one state
        self._sent: OrderedDict[str, FlowState] = OrderedDict()

    # ---- LiteLLM's hooks
    def log_pre_api_call(self, model: Any, messages: Any, kwargs: dict[str, Any]) -> None:
        """Note the request as LiteLLM is about to send it (no analysis here: this is the request path)."""
        try:
            extra = kwargs.get("additional_args") or {}
            sent = extra.get("complete_input_dict")
            if not isinstance(sent, dict) or not kwargs.get("litellm_call_id"):
                return
            base = str(extra.get("api_base") or "")  # a str, or the OpenAI client's URL object
            parts = urlsplit(base)
            flow = FlowState(
                id=kwargs["litellm_call_id"],
                ts=time.time(),
                sent=time.monotonic(),
                path=_path(base, str(kwargs.get("call_type") or "")),
                upstream=f"{parts.scheme}://{parts.netloc}" if parts.netloc else None,
                fields=_fields(kwargs),
                body=json.dumps(sent).encode(),
            )
            with self._lock:
                self._sent[flow.id] = flow
                while len(self._sent) > KEEP_FLOWS:
                    self._sent.popitem(last=False)
        except Exception as err:  # noqa: BLE001 - never in the caller's way
            logger.warning("prefixguard: could not note a LiteLLM call: %s: %s", type(err).__name__, err)

    def log_success_event(self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any) -> None:
        self._guarded(self._success, kwargs, end_time)

    def log_failure_event(self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any) -> None:
        self._guarded(self._failure, kwargs, end_time)

    async def async_log_success_event(
        self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        await asyncio.to_thread(self._guarded, self._success, kwargs, end_time)  # CPU work off the loop

    async def async_log_failure_event(
        self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        await asyncio.to_thread(self._guarded, self._failure, kwargs, end_time)

    # ---- the analysis
    def _guarded(self, step: Callable[[dict[str, Any], Any], None], kwargs: dict[str, Any], end_time: Any) -> None:
        try:
            step(kwargs, end_time)
        except Exception as err:  # noqa: BLE001 - a failed analysis must not fail the caller's call
            logger.warning(
                "prefixguard: analysis of LiteLLM call %s failed: %s: %s",
                kwargs.get("litellm_call_id"),
                type(err).__name__,
                err,
            )

    def _success(self, kwargs: dict[str, Any], end_time: Any) -> None:
        # LiteLLM names a whole stream's answer one way for sync calls, another for async ones
        assembled = kwargs.get("complete_streaming_response") or kwargs.get("async_complete_streaming_response")
        if kwargs.get("stream") and assembled is None:
            return  # a stream not yet whole (LiteLLM may report it before its last chunk): wait for that
        first = kwargs.get("completion_start_time")
        resp = Response(
            id=kwargs.get("litellm_call_id") or "",
            status=200,
            ended_at=_mono(end_time),
            headers_at=_mono(first) if first else None,
        )
        if assembled is not None:
            # LiteLLM hands no raw stream to callbacks: its assembled answer, in OpenAI's chat shape
            resp.usage = parse_response(assembled.model_dump_json().encode(), openai_chat.API)
        elif isinstance(kwargs.get("original_response"), (str, bytes)):
            raw = kwargs["original_response"]
            resp.body = raw.encode() if isinstance(raw, str) else raw  # the provider's own body
        self._analyse(resp)

    def _failure(self, kwargs: dict[str, Any], end_time: Any) -> None:
        err = kwargs.get("exception")
        status = getattr(err, "status_code", None)
        self._analyse(
            Response(
                id=kwargs.get("litellm_call_id") or "",
                status=status if isinstance(status, int) else None,
                ended_at=_mono(end_time),
                error=f"{type(err).__name__}: {err}" if err else "failed",
            )
        )

    def _analyse(self, resp: Response) -> None:
        with self._lock:
            flow = self._sent.pop(resp.id, None)
            if flow is None:  # no request noted (or already analysed: LiteLLM may call both hooks)
                return
            self.analyzer.request(flow)
            line = self.analyzer.finish(resp)
        if line and self.console is not None:
            self.console(line)

    def close(self) -> None:
        with self._lock:
            self.analyzer.close()


def from_env() -> PrefixGuardLogger:
    """The callback as the environment configures it (LiteLLM's proxy names a module attribute)."""
    port = os.environ.get("PREFIXGUARD_METRICS_PORT")
    return PrefixGuardLogger(
        os.environ.get("PREFIXGUARD_STORE") or None,
        otlp_endpoint=os.environ.get("PREFIXGUARD_OTLP_ENDPOINT") or None,
        metrics_port=int(port) if port else None,
    )


_handler: PrefixGuardLogger | None = None


def __getattr__(name: str) -> Any:
    """`handler`: one callback for the process, made on first use (so importing opens no store)."""
    global _handler
    if name != "handler":
        raise AttributeError(name)
    if _handler is None:
        _handler = from_env()
    return _handler
