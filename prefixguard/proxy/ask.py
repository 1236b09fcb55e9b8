"""Opt-in (`prefixguard proxy --ask-diagnostics`): ask the provider for its own cache diagnosis.

The one place where the proxy changes a request: each Messages / Responses request of a tenant gets the
member that names that tenant's previous response (Anthropic `diagnostics.previous_message_id`, OpenAI
Responses `prompt_cache_options.comparison_response_id`), inserted after the body's opening brace, so the
bytes sent upstream differ from the app's by that member alone. A body that sets it already, an encoded
body, or one too large to hold is left as it is. Off by default: without the flag every byte passes.
"""

from __future__ import annotations

from collections import OrderedDict

from mitmproxy import http

from prefixguard.proxy.redact import tenant_of
from prefixguard.wire import ask_diagnosis, detect_api, response_id

KEEP = 10_000  # tenants remembered (the least recent go first)
HEAD = 4096  # bytes of a response the id is looked for in (a JSON body's or a stream's start)


class Asker:
    def __init__(self) -> None:
        self._last: OrderedDict[tuple[str, str], str] = OrderedDict()  # (tenant, api) -> its last response id

    @staticmethod
    def _key(flow: http.HTTPFlow) -> tuple[str, str]:
        return tenant_of(dict(flow.request.headers)), detect_api(None, flow.request.path)

    def before(self, flow: http.HTTPFlow, body: bytes) -> bytes:
        """The body to send: with the asking member when the tenant has an earlier response."""
        req = flow.request
        if req.headers.get("content-encoding", "identity").lower() != "identity":
            return body
        key = self._key(flow)
        previous = self._last.get(key)
        asked = ask_diagnosis(body, key[1], previous) if previous else None
        if asked is None:
            return body
        req.content = asked  # sets content-length too
        return asked

    def after(self, flow: http.HTTPFlow, head: bytes) -> None:
        """Remember the response's id for the tenant's next request."""
        if flow.response is None or not 200 <= flow.response.status_code < 300:
            return
        key = self._key(flow)
        found = response_id(head[:HEAD], key[1])
        if found:
            self._last[key] = found
            self._last.move_to_end(key)
            while len(self._last) > KEEP:
                self._last.popitem(last=False)
