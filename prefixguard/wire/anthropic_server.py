"""What Anthropic's own tools (web search, web fetch, code execution, an MCP connector's) did between passes
of the model, from a response or its stream: how many ran, and what each pass added to the prompt of the
passes after it (the model's output up to a tool's result, and that result); and what a result costs where
its content comes encrypted."""

from __future__ import annotations

from collections.abc import Mapping
from functools import reduce
from typing import Any

from prefixguard.contracts.providers import providers
from prefixguard.model import tokens
from prefixguard.model.prompt import compact_json
from prefixguard.wire.adapter import NO_SERVER_WORK, ServerWork
from prefixguard.wire.fields import is_server_result

_SERVER_CALLS = frozenset(("server_tool_use", "mcp_tool_use"))  # blocks of tools Anthropic runs itself


def result_tokens(block: Mapping[str, Any]) -> int | None:
    """What a server tool's result costs where it comes encrypted (a web search's pages: rules/providers.toml
    [anthropic] encrypted_result_chars_per_token): its other fields as text, its encrypted characters by that
    rule. None: nothing in it is encrypted (its JSON is counted)."""
    per_token = providers()["anthropic"].encrypted_result_chars_per_token
    found = block.get("content")
    if per_token is None or not isinstance(found, list):
        return None
    encrypted = [r.get("encrypted_content") if isinstance(r, Mapping) else None for r in found]
    if not any(isinstance(e, str) for e in encrypted):
        return None
    rest = [{k: v for k, v in r.items() if k != "encrypted_content"} if isinstance(r, Mapping) else r for r in found]
    chars = sum(len(e) for e in encrypted if isinstance(e, str))
    return tokens.count(compact_json({**block, "content": rest})) + round(chars / per_token)


# a stream's content_block_delta types that add to the next pass's prompt, and the member holding their text
_SAID = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}


def _said(block: Mapping[str, Any]) -> int:
    """The tokens of an output block as the next pass reads it: its text, thinking or a tool call's input."""
    kind = block.get("type")
    if kind == "text" or kind == "thinking":
        text = block.get(kind)
        return tokens.count(text) if isinstance(text, str) else 0
    call = block.get("input")
    return tokens.count(compact_json(call)) if kind in _SERVER_CALLS and call else 0


def _work(block: Any) -> ServerWork:
    if not isinstance(block, Mapping) or not isinstance(kind := block.get("type"), str):
        return NO_SERVER_WORK
    if kind in _SERVER_CALLS:
        return ServerWork(calls=1, said=_said(block))
    if is_server_result(kind):
        cost = result_tokens(block)
        return ServerWork(results=(tokens.count(compact_json(block)) if cost is None else cost,))
    return ServerWork(said=_said(block))


def server_calls(obj: Mapping[str, Any]) -> ServerWork:
    """A whole message's server tool calls (web search, web fetch, code execution, an MCP connector's) and
    what each pass added; or a stream event's: the call or result a content_block_start opens, the output
    a content_block_delta adds."""
    kind = obj.get("type")
    if kind == "content_block_start":
        return _work(obj.get("content_block"))
    if kind == "content_block_delta":
        delta = obj.get("delta")
        piece = delta.get(_SAID.get(str(delta.get("type")), "")) if isinstance(delta, Mapping) else None
        return ServerWork(said=tokens.count(piece)) if isinstance(piece, str) and piece else NO_SERVER_WORK
    content = obj.get("content") if kind == "message" or "usage" in obj else None
    return reduce(ServerWork.then, map(_work, content or ()), NO_SERVER_WORK)._replace(said=0)
