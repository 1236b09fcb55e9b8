"""The HTTP target: a replay sent to an OpenAI- or Anthropic-shaped server, streamed, its TTFT and
cached tokens as the server reports them."""

from __future__ import annotations

import copy
import json
import time
from typing import Any

from prefixguard.replay.outcomes import outcome, priced
from prefixguard.replay.rendering import prompt_of
from prefixguard.replay.results import Outcome
from prefixguard.replay.sources import Request
from prefixguard.utils.errors import InputError
from prefixguard.wire import UsageStream, anthropic, openai_chat, openai_responses
from prefixguard.wire.adapters import adapter_for


class HttpTarget:
    """Any OpenAI- or Anthropic-compatible server: the engine server, vLLM, SGLang, a provider.

    Requests stream, so TTFT is measured at the first content event; cached tokens come from the
    usage fields the server reports (a server that reports none gives no cached count, never zero)."""

    realtime = True
    needs_bodies = True

    def __init__(
        self,
        base_url: str,
        *,
        max_tokens: int = 16,
        model: str | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 600.0,
        max_retries: int | None = None,
    ) -> None:
        from prefixguard.replay.http_client import MAX_RETRIES, Client

        self.base_url = base_url.rstrip("/")
        self.max_tokens = max_tokens
        self.model = model
        self.headers = headers or {}
        self.timeout = timeout
        # One pooled client for the whole replay: keep-alive, HTTP/2 where offered, retries.
        self.client = Client(self.base_url, timeout, MAX_RETRIES if max_retries is None else max_retries)

    def close(self) -> None:
        self.client.close()

    def run(self, req: Request, now: float) -> Outcome:
        import httpx

        from prefixguard.replay.http_client import auth_headers

        prompt = prompt_of(req, self.model)
        path = req.path or adapter_for(prompt.api).ENDPOINT
        if path is None:
            raise InputError(
                f"a {prompt.api} request names its model in its path: the trace must give the path", req.ref
            )
        want = min(req.output_tokens or self.max_tokens, self.max_tokens)
        body = streaming(req.body or {}, prompt.api, want, self.model)
        data = json.dumps(body, ensure_ascii=False).encode()
        headers = {"content-type": "application/json", **auth_headers(prompt.api, self.headers), **self.headers}
        if prompt.api == anthropic.API:
            headers.setdefault(anthropic.HEADER, "2023-06-01")
        stream = UsageStream(prompt.api)
        try:
            with self.client.stream(path, data, headers) as (attempt, chunks):
                start = attempt.started  # the last try's: waits before retries are not TTFT
                for chunk in chunks:
                    stream.feed(chunk)
        except httpx.HTTPError as e:
            return outcome(req, prompt.total_tokens, 0, model=prompt.model, error=f"{type(e).__name__}: {e}")
        if attempt.status >= 400:
            return outcome(
                req,
                prompt.total_tokens,
                0,
                model=prompt.model,
                error=f"HTTP {attempt.status}: {attempt.error_body}"
                + (f" (after {attempt.tries} tries)" if attempt.tries > 1 else ""),
            )
        end = time.monotonic()
        stream.feed(b"\n\n")
        usage = stream.usage()
        first = stream.first_content_at
        ttft = (first - start) if first is not None else end - start
        decode = (usage.output - 1) / (end - first) if first is not None and usage.output > 1 and end > first else None
        if not usage.reported:
            return outcome(
                req,
                prompt.total_tokens,
                0,
                model=prompt.model,
                ttft_s=ttft,
                decode_tps=decode,
                error="the server reported no cached-token field",
            )
        o = outcome(
            req,
            usage.prompt_total,
            usage.cache_read,
            cache_write=usage.cache_write,
            uncached=usage.uncached,
            output_tokens=usage.output,
            ttft_s=ttft,
            decode_tps=decode,
            reason="hit" if usage.cache_read else "cold",
            model=prompt.model,
        )
        return priced(o, prompt.api, prompt.model, write_1h=usage.cache_write_1h)


def streaming(body: dict[str, Any], api: str, max_tokens: int, model: str | None) -> dict[str, Any]:
    """The body to send: streamed with usage, answer length capped, the model replaced if asked."""
    out = copy.copy(body)
    out["stream"] = True
    if model:
        out["model"] = model
    if api == openai_chat.API:
        out["stream_options"] = {**(out.get("stream_options") or {}), "include_usage": True}
        out.pop("max_tokens", None)
        out["max_completion_tokens"] = max_tokens
    elif api == openai_responses.API:
        out["max_output_tokens"] = max_tokens
    else:
        out["max_tokens"] = max_tokens
    return out
