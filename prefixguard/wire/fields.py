"""Field names inside request content that the core and the lint checks look for, for every shape the
adapters read, so that only wire/ knows provider field names: which members hold a tool call's
arguments, which hold no prompt text (encoded payloads, signatures, ids), and which item kinds are a
provider's own compaction of the history or its own tools' results, and which declared tools it runs itself."""

from __future__ import annotations

from prefixguard.model.prompt import MARKER_KEYS

# A tool call's arguments: Anthropic and Converse `input`; Chat and Responses `arguments` (a JSON
# string); Gemini `args`.
ARGUMENT_KEYS = ("input", "arguments", "args")

# Values that are not prompt text: encoded payloads and signatures (Anthropic `signature`, `data`;
# Responses `encrypted_content`; Converse `bytes`; Gemini `thoughtSignature`), and the breakpoint markers.
NOT_TEXT_KEYS = ("signature", "data", "encrypted_content", "bytes", "thoughtSignature", *MARKER_KEYS)

# Where a block keeps its text, in the order looked at (text blocks, tool results, summaries).
TEXT_KEYS = ("text", "content", "output", "summary", "encrypted_content")

# Items a provider writes when it compacts the history itself (OpenAI Responses).
COMPACTION_KINDS = frozenset({"compaction", "compaction_summary"})


def is_server_result(kind: str) -> bool:
    """A block holding the result of a tool the provider ran itself (Anthropic's web_search_tool_result,
    mcp_tool_result...), not a client's tool_result."""
    return kind.endswith("_tool_result") and kind != "tool_result"


# Tools a provider runs itself declared by a key of their own, not a `type` (Gemini's, Converse's systemTool).
PROVIDER_TOOL_KEYS = frozenset({"googleSearch", "googleSearchRetrieval", "codeExecution", "urlContext", "systemTool"})


def provider_tool(tool: object) -> str | None:
    """A declared tool's type where the provider runs it (web_search, code_execution_20250825, googleSearch,
    systemTool); None for the client's own (function, custom, a name and a schema)."""
    if not isinstance(tool, dict):
        return None
    kind = tool.get("type")
    if isinstance(kind, str):
        return None if kind in ("function", "custom") else kind
    own = next(iter(tool), "")
    return own if own in PROVIDER_TOOL_KEYS else None


def is_id(key: str) -> bool:
    """An id member (`id`, `tool_use_id`, Converse's `toolUseId`): random-looking, yet the same for the
    same item."""
    return key == "id" or key.endswith("_id") or key.endswith("Id")


def reasoning_text(value: object) -> str:
    """The text a Chat message's reasoning field holds: the string itself, or (OpenRouter's `reasoning_details`)
    its items' text and summaries; an encrypted item's data is no text of it."""
    if isinstance(value, str):
        return value
    items = value if isinstance(value, list) else ()
    return "".join(str(i.get("text") or i.get("summary") or "") for i in items if isinstance(i, dict))
