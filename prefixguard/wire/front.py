"""What a provider puts in front of a request's first part, unseen in its body yet billed and read with every
prefix: the tool-use system prompt whenever a request declares tools of the client's own (rules/encodings.toml
[tool_prompt], by API, model and tool_choice), the citations prompt where a document has citations enabled
([citations_prompt]), the JSON-output prompt where a response schema is ([json_output_prompt]), the prompt of a
tool the provider runs itself ([provider_tool_prompt]: OpenAI's web search preview), and the system text a chat
template writes itself ([template_system]: where a request sends none, or always; [tool_placement]: around the
tools, where it writes them elsewhere); and what it adds after every part where extended thinking is on and no tool
is declared ([thinking_prompt]), or a compaction endpoint's own prompt after the input it compacts
([compaction_prompt])."""

from __future__ import annotations

from itertools import takewhile
from typing import Any

from prefixguard.model import templates
from prefixguard.model.prompt import Prompt
from prefixguard.wire.fields import provider_tool


def count(prompt: Prompt, body: dict[str, Any], compacting: bool = False) -> None:
    """Count, on the request's first part, what the provider puts in front of it: the tool-use prompt where it
    declares a tool of the client's own that the model sees (not one deferred to a tool search), the citations
    prompt where a document cites, the JSON-output prompt with a response schema and the prompt of a tool the
    provider runs itself, in the provider's tokens by its figures (Prompt.front: once a bill is seen, the scale
    takes them as far as the bill bears them out, judge/scale.py); and what the chat template writes itself (its
    system text, Qwen's tool text), text like the body's own, counted and scaled with it. The thinking prompt of a
    request without tools follows every part (Prompt.after): a change of thinking keeps the tools' and the system's
    caches (rules/providers.toml); so does a compaction endpoint's own prompt (`compacting`)."""
    placed = templates.tool_placement(prompt.api, prompt.model)
    if placed is not None:  # the template writes its text around the tools where it writes them
        _around_tools(prompt, placed, declared=bool(body.get("tools") or body.get("functions")))
    tools = list(takewhile(lambda s: s.level == "tools", prompt.segments))  # the first parts: not a body's every part
    own_tool = any(s.kind == "tool" and _rendered_own(s.value) for s in tools)
    tool_text = templates.tool_prompt(prompt.api, prompt.model, choice(body)) if own_tool else 0
    if own_tool:  # what the template writes after the tool list: a part of the last tool's, changing with the tools
        _add(prompt, len(tools) - 1, templates.tool_prompt_after(prompt.api, prompt.model))
    ruled, written = (0, tool_text) if templates.template_tools(prompt.model) else (tool_text, 0)
    if prompt.settings.get("citations"):
        ruled += templates.citations_prompt(prompt.api, prompt.model)
    if not own_tool:
        prompt.after += templates.thinking_prompt(prompt.api, prompt.model, prompt.settings.get("thinking"))
    if compacting:
        prompt.after += templates.compaction_prompt(prompt.api, prompt.model)
    if any(s.kind == "schema" for s in tools):
        ruled += templates.json_output_prompt(prompt.api, prompt.model, own_tool)
    for kind in {provider_tool(s.value) for s in tools if s.kind == "tool"} - {None}:
        ruled += templates.provider_tool_prompt(prompt.api, prompt.model, str(kind))
    if templates.template_system(prompt.api, prompt.model, own=False):  # the template writes system text of its own
        own = any(s.level == "system" for s in takewhile(lambda s: s.level != "messages", prompt.segments))
        written += templates.template_system(prompt.api, prompt.model, own)
    if (ruled or written) and prompt.segments:
        _add(prompt, 0, ruled + written)
        prompt.front = ruled


def _around_tools(prompt: Prompt, placed: templates.ToolPlacement, declared: bool) -> None:
    """A template's own text where it writes the tools elsewhere than in front (rules/encodings.toml
    [tool_placement]): in its system message whenever the request declares tools, in front of the tools and
    after each where it writes them."""
    tools = [i for i, s in enumerate(prompt.segments) if s.level == "tools" and s.kind == "tool"]
    for i in tools:
        _add(prompt, i, placed.each + (placed.intro if i == tools[0] else 0))
    if declared and prompt.segments:
        _add(prompt, 0, placed.system)


def _add(prompt: Prompt, i: int, tokens: int) -> None:
    """Tokens onto a part, as a copy of it: the part may be an earlier prompt's (a diff's B takes A's parts)."""
    if tokens:
        prompt.segments[i] = prompt.segments[i].plus(tokens)


def _rendered_own(tool: Any) -> bool:
    return provider_tool(tool) is None and not (isinstance(tool, dict) and tool.get("defer_loading"))


def choice(body: dict[str, Any]) -> str:
    """A request's tool_choice as one word: "auto" (also absent), "none", "any" (some tool is required), "tool" (a
    named one); from Anthropic's, OpenAI Chat's or Bedrock Converse's form."""
    chosen = body.get("tool_choice")
    config = body.get("toolConfig")
    if chosen is None and isinstance(config, dict):
        chosen = config.get("toolChoice")  # Converse: {"auto": {}}, {"any": {}}, {"tool": {"name": ...}}
    if isinstance(chosen, dict):
        kind = chosen.get("type", next(iter(chosen), None))
        return _CHOSEN_KINDS.get(kind, "auto") if isinstance(kind, str) else "auto"
    return _CHOSEN_WORDS.get(chosen, "auto") if isinstance(chosen, str) else "auto"


_CHOSEN_KINDS = {"any": "any", "tool": "tool", "function": "tool", "none": "none"}  # {"type": ...} / Converse's key
_CHOSEN_WORDS = {"required": "any", "none": "none"}  # OpenAI's strings
