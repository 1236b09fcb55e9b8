"""Which API shape a URL path speaks, and the model when the path names it (Bedrock, Vertex, Gemini).

The OpenAI and Anthropic paths end in /v1/...; the others carry the model in the path:
  Bedrock:  /model/{modelId}/converse | /converse-stream           -> bedrock-converse
            /model/{anthropic model}/invoke | /invoke-with-response-stream -> anthropic (no model in the body)
  Gemini:   /v1beta/models/{m}:generateContent | :streamGenerateContent (?alt=sse)
  Vertex:   /v1/projects/{p}/locations/{l}/publishers/google/models/{m}:generateContent ...
            /v1/projects/{p}/locations/{l}/publishers/anthropic/models/{m}:rawPredict | :streamRawPredict
"""
from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

_V1 = re.compile(r"/v1/(messages|chat/completions|responses)/?$")
_V1_APIS = {"messages": "anthropic", "chat/completions": "openai-chat", "responses": "openai-responses"}
_BEDROCK = re.compile(r"/model/([^/]+)/(converse|converse-stream|invoke|invoke-with-response-stream)/?$")
_GOOGLE = re.compile(r"/models/([^/:]+):(generateContent|streamGenerateContent|rawPredict|streamRawPredict)$")
_PUBLISHER = re.compile(r"/publishers/([^/]+)/models/[^/:]+:[A-Za-z]+$")
# The shapes read, named in every "unknown shape" message.
KNOWN = ("Anthropic Messages (/v1/messages, Bedrock InvokeModel, Vertex rawPredict)",
         "OpenAI Chat Completions (/v1/chat/completions)", "OpenAI Responses (/v1/responses)",
         "Bedrock Converse (/model/{id}/converse)", "Gemini generateContent (models/{m}:generateContent)")


def known_shapes() -> str:
    return "known shapes: " + "; ".join(KNOWN)


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
