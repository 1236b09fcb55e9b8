"""Which API shape a URL path speaks, and the model when the path names it (Bedrock, Vertex, Gemini).

The OpenAI and Anthropic paths end in /v1/...; the others carry the model in the path:
  Bedrock:  /model/{modelId}/converse | /converse-stream           -> bedrock-converse
            /model/{anthropic model}/invoke | /invoke-with-response-stream -> anthropic (no model in the body)
  Gemini:   /v1beta/models/{m}:generateContent | :streamGenerateContent (?alt=sse)
            /v1beta/interactions                                      -> gemini-interactions (model in the body)
  Vertex:   /v1/projects/{p}/locations/{l}/publishers/google/models/{m}:generateContent ...
            /v1/projects/{p}/locations/{l}/publishers/anthropic/models/{m}:rawPredict | :streamRawPredict
Outside those, a path whose tail names a shape (`tail`) is a candidate only: OpenAI-compatible servers
and gateways put the same endpoints under other prefixes and versions (z.ai /api/coding/paas/v4/chat/
completions, Azure /openai/deployments/{d}/chat/completions, /openrouter/..., /proxy/anthropic/messages),
and the request is read as that shape only when its body has the shape's fields (detect.py).
Each adapter holds its own paths (`route`, `TAIL`); `resolve` asks them once per request and the
result (`Routed`) is passed on to detection and parsing. `template` names a path without what varies in
it (ids, deployments, the query) for counts and reports.
"""

from __future__ import annotations

import re
from typing import NamedTuple
from urllib.parse import unquote, urlsplit

from prefixguard.wire.adapters import ADAPTERS

# The cause of a capture row for a request forwarded without analysis, and that of a path of no shape.
NOT_ANALYSED = "not analysed: "
NO_SHAPE = NOT_ANALYSED + "no API shape read at this path"
TOKEN_COUNT = NOT_ANALYSED + "a token count: nothing generated, no cache read or written"
# Token-count endpoints: Anthropic's messages/count_tokens, OpenAI's responses/input_tokens, Bedrock's
# count-tokens, Gemini's models/{m}:countTokens. A count never touches a cache (a request after it reads
# nothing it "wrote"), so it is no turn of a session either.
_TOKEN_COUNT = re.compile(r"/(?:count_tokens|input_tokens|count-tokens)/?$|:countTokens$")
# Path segments that name the next one (a deployment, a model, an account): templated by that name.
_NAMED_BY = {
    "deployments": "deployment",
    "models": "model",
    "model": "model",
    "projects": "project",
    "locations": "location",
    "accounts": "account",
    "threads": "thread",
    "files": "file",
    "batches": "batch",
    "responses": "response",
    "messages": "message",
    "publishers": "publisher",
}
_ID_LIKE = re.compile(r"(?=.*\d)[\w.~%-]{8,}|[0-9a-fA-F-]{16,}")


class Routed(NamedTuple):
    """What a request's path says: routed once, then passed to detection and parsing."""

    api: str | None  # None: the path speaks no shape we read
    model: str | None  # the model the path names (Bedrock, Vertex, Gemini; Azure: the deployment)
    exact: bool  # True: the path names the shape; False: only its tail does (the body must fit)
    path: str  # the URL path, without the query


def resolve(path: str | None) -> Routed:
    """The shape a request path speaks or may speak (its tail); api None when neither."""
    plain = urlsplit(path).path if path else ""
    for adapter in ADAPTERS if plain else ():
        found = adapter.route(plain)
        if found:
            return Routed(api=found[0], model=found[1], exact=True, path=plain)
    for adapter in ADAPTERS if plain else ():
        tail_match = adapter.TAIL.search(plain) if adapter.TAIL is not None else None
        if tail_match:
            deployment = tail_match.groupdict().get("model")
            return Routed(api=adapter.API, model=unquote(deployment) if deployment else None, exact=False, path=plain)
    return Routed(api=None, model=None, exact=False, path=plain)


def counts_tokens(path: str | None) -> bool:
    """Whether a request path is a token-count endpoint (any prefix, no query)."""
    return path is not None and _TOKEN_COUNT.search(urlsplit(path).path) is not None


def compacts(path: str | None) -> bool:
    """Whether a request path is a compaction endpoint (/v1/responses/compact, /v1/messages/compact)."""
    return path is not None and urlsplit(path).path.rstrip("/").endswith("/compact")


def known_shapes() -> str:
    return "known shapes: " + "; ".join(a.SHAPE for a in ADAPTERS)


def tail(path: str | None) -> tuple[str, str | None] | None:
    """(API, model named by the path) a path outside `route`'s ends in, by its last segments alone: a
    candidate whose body must still have the shape. Azure names the deployment, which serves one model."""
    found = resolve(path)
    return (found.api, found.model) if found.api and not found.exact else None


def template(path: str) -> str:
    """The path with what varies in it replaced by a name ({deployment}, {model}, {id}) and no query: a
    request's endpoint, never its ids or keys."""
    parts = urlsplit(path).path.split("/")
    out = []
    for i, part in enumerate(parts):
        name = _NAMED_BY.get(parts[i - 1]) if i else None
        base, colon, action = part.partition(":")  # Google's models/{m}:generateContent, stores/{s}:upload...
        if name and part and (i < len(parts) - 1 or colon):
            out.append(f"{{{name}}}{colon}{action}")
        elif _ID_LIKE.fullmatch(base):
            out.append(f"{{id}}{colon}{action}")
        else:
            out.append(part)
    return "/".join(out) or "/"


def route(path: str | None) -> tuple[str, str | None] | None:
    """(API, model named by the path or None) of a request path, None when it names no shape we read."""
    found = resolve(path)
    return (found.api, found.model) if found.api and found.exact else None
