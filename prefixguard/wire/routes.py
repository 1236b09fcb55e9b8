"""Which API shape a URL path speaks, and the model when the path names it (Bedrock, Vertex, Gemini).

The OpenAI and Anthropic paths end in /v1/...; the others carry the model in the path:
  Bedrock:  /model/{modelId}/converse | /converse-stream           -> bedrock-converse
            /model/{anthropic model}/invoke | /invoke-with-response-stream -> anthropic (no model in the body)
  Gemini:   /v1beta/models/{m}:generateContent | :streamGenerateContent (?alt=sse)
  Vertex:   /v1/projects/{p}/locations/{l}/publishers/google/models/{m}:generateContent ...
            /v1/projects/{p}/locations/{l}/publishers/anthropic/models/{m}:rawPredict | :streamRawPredict
Outside those, a path whose tail names a shape (`tail`) is a candidate only: OpenAI-compatible servers
and gateways put the same endpoints under other prefixes and versions (z.ai /api/coding/paas/v4/chat/
completions, Azure /openai/deployments/{d}/chat/completions, /openrouter/..., /proxy/anthropic/messages),
and the request is read as that shape only when its body has the shape's fields (detect.py).
`template` names a path without what varies in it (ids, deployments, the query) for counts and reports.
"""
from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

_V1 = re.compile(r"/v1/(messages|chat/completions|responses)/?$")
_V1_APIS = {"messages": "anthropic", "chat/completions": "openai-chat", "responses": "openai-responses"}
_BEDROCK = re.compile(r"/model/([^/]+)/(converse|converse-stream|invoke|invoke-with-response-stream)/?$")
_GOOGLE = re.compile(r"/models/([^/:]+):(generateContent|streamGenerateContent|rawPredict|streamRawPredict)$")
_PUBLISHER = re.compile(r"/publishers/([^/]+)/models/[^/:]+:[A-Za-z]+$")
# The cause of a capture row for a request forwarded without analysis, and that of a path of no shape.
NOT_ANALYSED = "not analysed: "
NO_SHAPE = NOT_ANALYSED + "no API shape read at this path"
# /responses/compact: a Responses body whose answer is the compacted input, billed (and cached) like a turn
_TAIL = re.compile(r"/(messages|chat/completions|responses)(?:/compact)?/?$")
_DEPLOYMENT = re.compile(r"/deployments/([^/]+)/(?:chat/completions|responses)/?$")   # Azure OpenAI
# Path segments that name the next one (a deployment, a model, an account): templated by that name.
_NAMED_BY = {"deployments": "deployment", "models": "model", "model": "model", "projects": "project",
             "locations": "location", "accounts": "account", "threads": "thread", "files": "file",
             "batches": "batch", "responses": "response", "messages": "message", "publishers": "publisher"}
_ID_LIKE = re.compile(r"(?=.*\d)[\w.~%-]{8,}|[0-9a-fA-F-]{16,}")
# The shapes read, named in every "unknown shape" message.
KNOWN = ("Anthropic Messages (/v1/messages, Bedrock InvokeModel, Vertex rawPredict)",
         "OpenAI Chat Completions (/v1/chat/completions)", "OpenAI Responses (/v1/responses)",
         "Bedrock Converse (/model/{id}/converse)", "Gemini generateContent (models/{m}:generateContent)")


def known_shapes() -> str:
    return "known shapes: " + "; ".join(KNOWN)


def tail(path: str | None) -> tuple[str, str | None] | None:
    """(API, model named by the path) a path outside `route`'s ends in, by its last segments alone: a
    candidate whose body must still have the shape. Azure names the deployment, which serves one model."""
    if not path:
        return None
    plain = urlsplit(path).path
    found = _TAIL.search(plain)
    if not found:
        return None
    deployment = _DEPLOYMENT.search(plain)
    return _V1_APIS[found.group(1)], unquote(deployment.group(1)) if deployment else None


def template(path: str) -> str:
    """The path with what varies in it replaced by a name ({deployment}, {model}, {id}) and no query: a
    request's endpoint, never its ids or keys."""
    parts = urlsplit(path).path.split("/")
    out = []
    for i, part in enumerate(parts):
        name = _NAMED_BY.get(parts[i - 1]) if i else None
        base, colon, action = part.partition(":")   # Google's models/{m}:generateContent, stores/{s}:upload...
        if name and part and (i < len(parts) - 1 or colon):
            out.append(f"{{{name}}}{colon}{action}")
        elif _ID_LIKE.fullmatch(base):
            out.append(f"{{id}}{colon}{action}")
        else:
            out.append(part)
    return "/".join(out) or "/"


def route(path: str | None) -> tuple[str, str | None] | None:
    """(API, model named by the path or None) of a request path, None when it names no shape we read."""
    if not path:
        return None
    plain = urlsplit(path).path
    found = _V1.search(plain)
    if found:
        return _V1_APIS[found.group(1)], None
    found = _BEDROCK.search(plain)
    if found:
        model = unquote(found.group(1))
        if found.group(2).startswith("converse"):
            return "bedrock-converse", model
        return ("anthropic", model) if "anthropic" in model or "claude" in model else None
    found = _GOOGLE.search(plain)
    if found:
        model = unquote(found.group(1))
        publisher = _PUBLISHER.search(plain)
        maker = publisher.group(1) if publisher else "google"
        if found.group(2).lower().endswith("rawpredict"):
            return ("anthropic", model) if maker == "anthropic" else None
        return ("gemini", model) if maker == "google" else None
    return None
