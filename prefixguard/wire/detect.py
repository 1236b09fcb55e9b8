"""Which API shape a request is: from its URL path when that names one (routes.py); from a path whose
tail names one (any prefix or version: gateways, Azure, OpenAI-compatible servers) when the body has that
shape's fields; else from its body's fields. Bodies that are no generation request (a response, a count,
a cache creation) are NotARequest, so lint skips them with a warning instead of failing. Every rule of a
shape is its adapter's (adapter.py): this module only asks them, in the registry's order."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prefixguard.utils.errors import InputError, NotARequest
from prefixguard.wire import routes
from prefixguard.wire.adapters import ADAPTERS, BY_API
from prefixguard.wire.routes import Routed


def analysable(method: str, path: str | None) -> bool:
    """Whether a request may be one the analysis reads, from its method and path alone (before its
    body arrives): a POST to a path that names a shape, or whose tail does (its body decides)."""
    return method.upper() == "POST" and routes.resolve(path).api is not None


def detect_api(body: dict[str, Any] | None, path: str | None = None) -> str:
    """The API shape: from the URL path when it names one (any prefix before /v1), from its tail when
    the body fits that shape, else from the body."""
    return shape(body, routes.resolve(path))


def shape(body: dict[str, Any] | None, routed: Routed) -> str:
    """detect_api with the path already routed."""
    if routed.api is not None:
        return routed.api if routed.exact else _fitting(routed.api, routed.path, body)
    why = next((w for a in ADAPTERS if (w := a.foreign(body, routed.path))), None)
    if why and not isinstance(body, dict):
        raise NotARequest(why)  # a path that says it (a cache creation), whatever the body
    if not isinstance(body, dict):
        raise InputError("unknown API shape: the body is not a JSON object")
    if why:
        raise NotARequest(why)
    for adapter in ADAPTERS:
        if adapter.claims(body):
            return adapter.API
    raise NotARequest(f"unknown API shape: no 'messages', 'input' or 'contents' ({routes.known_shapes()})")


def _fitting(api: str, path: str, body: Any) -> str:
    """The tail's API when the body has that shape's fields (a path's tail alone is no proof: an app's
    own /messages endpoint is no Anthropic one); NotARequest naming the endpoint otherwise."""
    if isinstance(body, dict) and not any(a.foreign(body, path) for a in ADAPTERS) and BY_API[api].fits(body):
        return api
    raise NotARequest(
        f"POST {routes.template(path)} ends like {api}, but its body is not one ({routes.known_shapes()})"
    )


def counts_only(api: str, body: dict[str, Any], routed: Routed) -> bool:
    """A token-counting request: a token-count endpoint (routes.counts_tokens), or a body its adapter says
    asks for a count (Anthropic's without max_tokens, which the Messages endpoint rejects)."""
    if routes.counts_tokens(routed.path):
        return True
    return BY_API[api].counts_only(body)


def detect(body: dict[str, Any], routed: Routed, headers: Mapping[str, str] | None) -> str:
    """A request's API shape: the path first, then a header only one shape's clients send (every
    Anthropic client sends anthropic-version), then the body."""
    if routed.api is None and headers:
        names = {k.lower() for k in headers}
        for adapter in ADAPTERS:
            if adapter.HEADER is not None and adapter.HEADER in names:
                return adapter.API
    return shape(body, routed)
