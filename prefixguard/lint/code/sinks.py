"""The SDK calls that send a prompt, and the parts of each call in prompt order: which part is in the
cached prefix, and where the cache breakpoints are. Providers that write the cache only at breakpoints
(Anthropic, Bedrock) and providers that cache every prefix (OpenAI, Gemini, and the front-ends that may
reach any of them: LiteLLM, LangChain) differ in what a volatile value costs (see python.py)."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import NamedTuple

EXPLICIT = frozenset({"anthropic", "bedrock"})  # providers that cache only up to a breakpoint
_BREAKPOINT_KEYS = frozenset({"cache_control", "cachePoint"})
_AI_SDK = ("generateText", "streamText", "generateObject", "streamObject")  # Vercel's `ai` package

Resolve = Callable[[ast.expr], ast.expr]  # a Name -> the literal last assigned to it (else the Name)


class Sink(NamedTuple):
    provider: str  # anthropic | openai | bedrock | gemini | litellm | langchain | ai-sdk
    api: str  # what a message calls it: "Anthropic messages.create"
    call: ast.Call


class Region(NamedTuple):
    label: str  # "system prompt", "tools", "message 2", "instructions"
    node: ast.expr  # the value that becomes this part of the prompt
    tools: bool  # a tools list (its order matters, not only its text)
    cached: bool  # in the cached prefix (False: the latest message, after every cached part)
    breakpoint: bool  # carries a cache breakpoint (cache_control / cachePoint)
    block: ast.Dict | None = None  # the content block (dict literal) holding node, when there is one


def find(call: ast.Call, qualified: str) -> Sink | None:
    """The sink a call is, by the function's dotted name (import aliases resolved)."""
    name = qualified
    if name.endswith(("messages.create", "messages.stream")) and "chat." not in name:
        return Sink(provider="anthropic", api="Anthropic messages." + name.rsplit(".", 1)[-1], call=call)
    if name.endswith(("chat.completions.create", "chat.completions.parse", "chat.completions.stream")):
        return Sink(provider="openai", api="OpenAI chat.completions." + name.rsplit(".", 1)[-1], call=call)
    if name.endswith(("responses.create", "responses.parse", "responses.stream")):
        return Sink(provider="openai", api="OpenAI responses." + name.rsplit(".", 1)[-1], call=call)
    if name.endswith((".converse", ".converse_stream")):
        return Sink(provider="bedrock", api="Bedrock " + name.rsplit(".", 1)[-1], call=call)
    if name.endswith(("generate_content", "generate_content_stream")):
        return Sink(provider="gemini", api="Gemini " + name.rsplit(".", 1)[-1], call=call)
    if name.endswith(("litellm.completion", "litellm.acompletion")):  # also a lazy wrapper: aider.llm.litellm
        return Sink(provider="litellm", api="litellm." + name.rsplit(".", 1)[-1], call=call)
    if name.startswith("ai.") and name.endswith(_AI_SDK):
        return Sink(provider="ai-sdk", api="AI SDK " + name.rsplit(".", 1)[-1], call=call)
    if name.startswith("langchain") and name.endswith(
        (
            ".SystemMessage",
            ".ChatPromptTemplate.from_messages",
            ".ChatPromptTemplate.fromMessages",
            ".ChatPromptTemplate",
        )
    ):
        return Sink(provider="langchain", api="LangChain " + name.split(".", 1)[1].split(".", 1)[-1], call=call)
    return None


def regions(sink: Sink, resolve: Resolve) -> list[Region]:
    """The parts of the prompt this call builds, in prompt order (tools, system, messages)."""
    call, kw = sink.call, _keywords(sink.call, resolve)
    out: list[Region] = []
    if sink.provider == "langchain":
        if call.func and _last_name(call.func) == "SystemMessage":
            text = kw.get("content", call.args[0] if call.args else None)
            return (
                [Region(label="system message", node=text, tools=False, cached=True, breakpoint=False)]
                if text is not None
                else []
            )
        listing = kw.get("messages", call.args[0] if call.args else None)
        return _messages(resolve(listing), resolve, template=True) if listing is not None else []
    if sink.provider == "gemini":
        config = kw.get("config")
        if config is not None:
            parts = _config_fields(resolve(config))
            if "tools" in parts:
                out.append(Region(label="tools", node=parts["tools"], tools=True, cached=True, breakpoint=False))
            if "system_instruction" in parts:
                out += _system(resolve(parts["system_instruction"]), resolve, "system instruction")
        if "contents" in kw:
            out += _messages(resolve(kw["contents"]), resolve)
        return out
    if sink.provider == "bedrock":
        tool_config = resolve(kw["toolConfig"]) if "toolConfig" in kw else None
        if isinstance(tool_config, ast.Dict):
            tools = _dict_get(tool_config, "tools")
            if tools is not None:
                out.append(Region(label="tools", node=tools, tools=True, cached=True, breakpoint=False))
    elif "tools" in kw:
        out.append(
            Region(
                label="tools",
                node=kw["tools"],
                tools=True,
                cached=True,
                breakpoint=_has_breakpoint(resolve(kw["tools"]), resolve),
            )
        )
    if "system" in kw:
        out += _system(resolve(kw["system"]), resolve, "system prompt")
    if "instructions" in kw:
        out.append(Region(label="instructions", node=kw["instructions"], tools=False, cached=True, breakpoint=False))
    listing = kw.get("messages", kw.get("input"))
    if listing is not None:
        out += _messages(resolve(listing), resolve)
    return out


def _keywords(call: ast.Call, resolve: Resolve) -> dict[str, ast.expr]:
    """The call's keywords, with those of a **options dict literal (a TypeScript call's options object
    spread into it, or one passed whole) in their place."""
    out: dict[str, ast.expr] = {}
    for k in call.keywords:
        if k.arg:
            out[k.arg] = k.value
            continue
        spread = resolve(k.value)
        if isinstance(spread, ast.Dict):
            out.update(
                (key.value, value)
                for key, value in zip(spread.keys, spread.values, strict=True)
                if isinstance(key, ast.Constant) and isinstance(key.value, str)
            )
        elif isinstance(spread, ast.Call) and isinstance(spread.func, ast.Name) and spread.func.id == "dict":
            out.update((key.arg, key.value) for key in spread.keywords if key.arg)  # **dict(model=..., ...)
    return out


def automatic(sink: Sink, resolve: Resolve) -> bool:
    """Anthropic's automatic mode: one cache_control at the top level of the request."""
    return "cache_control" in _keywords(sink.call, resolve)


def _system(node: ast.expr, resolve: Resolve, label: str) -> list[Region]:
    if not isinstance(node, ast.List):
        return [Region(label=label, node=node, tools=False, cached=True, breakpoint=False)]
    out = []
    for i, item in enumerate(node.elts):
        block = resolve(item)
        text = _dict_get(block, "text") if isinstance(block, ast.Dict) else None
        out.append(
            Region(
                label=f"{label} block {i + 1}" if len(node.elts) > 1 else label,
                node=text if text is not None else item,
                tools=False,
                cached=True,
                breakpoint=_has_breakpoint(block, resolve),
                block=block if isinstance(block, ast.Dict) else None,
            )
        )
    return out


def _messages(node: ast.expr, resolve: Resolve, template: bool = False) -> list[Region]:
    """Messages of a list literal; the last one is the latest message (not cached). A list built some
    other way is not followed."""
    if not isinstance(node, (ast.List, ast.Tuple)):
        return []
    items = node.elts
    out: list[Region] = []
    for i, item in enumerate(items):
        if isinstance(item, ast.Starred):
            continue
        cached = i < len(items) - 1
        message = resolve(item)
        if template and isinstance(message, (ast.Tuple, ast.List)) and len(message.elts) == 2:
            kind = message.elts[0]  # ("system", text); a JavaScript template writes ["system", text]
            cached = cached or (isinstance(kind, ast.Constant) and kind.value == "system")
            out.append(
                Region(label=_role_label(kind, i), node=message.elts[1], tools=False, cached=cached, breakpoint=False)
            )
            continue
        if not isinstance(message, ast.Dict):
            out.append(Region(label=f"message {i + 1}", node=item, tools=False, cached=cached, breakpoint=False))
            continue
        role = _dict_get(message, "role")
        content = _dict_get(message, "content")
        if content is None:
            content = _dict_get(message, "parts")
        if content is None:
            continue
        label = _role_label(role, i)
        blocks = resolve(content)
        if isinstance(blocks, ast.List):
            for block in blocks.elts:
                block_dict = resolve(block)
                text = _dict_get(block_dict, "text") if isinstance(block_dict, ast.Dict) else None
                holder = block_dict if isinstance(block_dict, ast.Dict) else None
                out.append(
                    Region(
                        label=label,
                        node=text if text is not None else block,
                        tools=False,
                        cached=cached,
                        breakpoint=_has_breakpoint(block_dict, resolve),
                        block=holder,
                    )
                )
        else:
            out.append(
                Region(
                    label=label,
                    node=content,
                    tools=False,
                    cached=cached,
                    breakpoint=_has_breakpoint(message, resolve),
                    block=message,
                )
            )
    return out


def _role_label(role: ast.expr | None, index: int) -> str:
    if isinstance(role, ast.Constant) and role.value in ("system", "developer"):
        return f"{role.value} message"
    return f"message {index + 1}"


def _config_fields(config: ast.expr) -> dict[str, ast.expr]:
    if isinstance(config, ast.Call):
        return {k.arg: k.value for k in config.keywords if k.arg}
    if isinstance(config, ast.Dict):
        return {
            k.value: v
            for k, v in zip(config.keys, config.values, strict=True)
            if isinstance(k, ast.Constant) and isinstance(k.value, str)
        }
    return {}


def _dict_get(node: ast.Dict, key: str) -> ast.expr | None:
    for k, v in zip(node.keys, node.values, strict=True):
        if isinstance(k, ast.Constant) and k.value == key:
            return v
    return None


def _has_breakpoint(node: ast.expr, resolve: Resolve) -> bool:
    """A dict literal with cache_control / cachePoint, or a list whose last such dict has one."""
    node = resolve(node)
    if isinstance(node, ast.Dict):
        return any(isinstance(k, ast.Constant) and k.value in _BREAKPOINT_KEYS for k in node.keys)
    if isinstance(node, ast.List) and node.elts:
        return any(_has_breakpoint(e, resolve) for e in node.elts)
    return False


def _last_name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
