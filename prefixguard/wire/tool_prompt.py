"""The tool-use system prompt: what a provider puts in front of the tool definitions whenever a request
declares tools of the client's own (rules/encodings.toml [tool_prompt], by API, model and tool_choice).
The body does not show it, yet every such request is billed for it and a breakpoint on the tools holds it."""

from __future__ import annotations

from itertools import takewhile
from typing import Any

from prefixguard.model import tokens
from prefixguard.model.prompt import Prompt
from prefixguard.wire.fields import provider_tool


def count(prompt: Prompt, body: dict[str, Any]) -> None:
    """Count the tool-use prompt in front of the request (Prompt.front, on its first part, which is a tool
    then) where it declares a tool of the client's own that the model sees (not one deferred to a tool
    search). Once a bill is seen, the scale takes it as far as the bill bears it out (judge/scale.py)."""
    tools = takewhile(lambda s: s.level == "tools", prompt.segments)  # the first parts: not a body's every part
    if any(s.kind == "tool" and _rendered_own(s.value) for s in tools):
        n = tokens.tool_prompt(prompt.api, prompt.model, choice(body))
        prompt.segments[0].tokens += n
        prompt.front = n


def _rendered_own(tool: Any) -> bool:
    return provider_tool(tool) is None and not (isinstance(tool, dict) and tool.get("defer_loading"))


def choice(body: dict[str, Any]) -> str:
    """A request's tool_choice as one word: "auto" (also none and absent), "any" (some tool is required),
    "tool" (a named one); from Anthropic's, OpenAI Chat's or Bedrock Converse's form."""
    chosen = body.get("tool_choice")
    config = body.get("toolConfig")
    if chosen is None and isinstance(config, dict):
        chosen = config.get("toolChoice")  # Converse: {"auto": {}}, {"any": {}}, {"tool": {"name": ...}}
    if isinstance(chosen, dict):
        kind = chosen.get("type", next(iter(chosen), None))
        return "any" if kind == "any" else "tool" if kind in ("tool", "function") else "auto"
    return "any" if chosen == "required" else "auto"
