"""What a model's chat format and its provider write into a prompt beyond the body's own text, from
rules/encodings.toml: the framing around each message ([[framing]]), the system text and tool text a chat
template writes ([template_system], [tool_prompt] `template`), where it writes the tools ([tool_placement]), how
a model reads tools and calls ([tool_render]), what a provider adds in front ([tool_prompt], [citations_prompt]),
and how an assistant's own reasoning renders ([chat_reasoning]). Which facts shape the prompt (a schema in it or
not, where the tools go) are read whether or not anything is counted; their token counts are in the model's own
encoding (model/tokens.py)."""

from __future__ import annotations

from functools import cache
from typing import Any, NamedTuple

from prefixguard.contracts import ruleset
from prefixguard.model import tokens
from prefixguard.model.ids import own_id


@cache
def _rules() -> dict[str, Any]:
    return ruleset.load("encodings.toml")


class Framing(NamedTuple):
    """What a chat format adds to a prompt (rules/encodings.toml [[framing]])."""

    per_message: int  # on the part that opens a message, at these levels
    levels: frozenset[str]
    reply: int  # once, priming the reply
    exact: bool  # the text is counted in the model's own encoding: nothing to fit to it
    schema: bool = True  # a response_format's schema is in the prompt (not where a server constrains decoding)
    per_assistant: int = 0  # more on an assistant's message (harmony's channel: <|channel|>final)


NO_FRAMING = Framing(per_message=0, levels=frozenset(), reply=0, exact=False)


@cache
def message_framing(api: str, model: str | None) -> Framing:
    """The chat format's tokens for this API and model: the first row naming the API whose models this
    one is (its prefixes, or with `own_encoding` any model counted in its own encoding); none where the
    model is unknown or no row applies. Read whether or not counts are made (`schema` shapes the prompt)."""
    if not model:
        return NO_FRAMING
    bare = own_id(model)
    own = any(bare.startswith(p) for p in _rules()["models"])
    for row in _rules()["framing"]:
        of_model = own if row["own_encoding"] else any(ruleset.same_family(model, p) for p in row["model_prefixes"])
        if api in row["apis"] and of_model:
            return Framing(
                per_message=row["per_message"],
                levels=frozenset(row["levels"]),
                reply=row["reply"],
                exact=row.get("exact", row["own_encoding"]),
                schema=row.get("response_schema", True),
                per_assistant=row.get("per_assistant", 0),
            )
    return NO_FRAMING


@cache
def template_system(api: str, model: str | None, own: bool) -> int:
    """The tokens of the system text the model's chat template writes itself (rules/encodings.toml
    [template_system]), for a request that sends a system message of its own (`own`) or none: in front of the
    request's own where the template always writes it, with the format's framing where it opens the message (and
    the prefix it writes the request's own after, in a message of their own: harmony's developer message);
    0 where it writes none."""
    framing = message_framing(api, model)
    row = _family_row(_rules()["template_system"], model) if "system" in framing.levels else None
    if not row or not row["text"] or (own and not row.get("with_own")):
        return 0
    encoding = tokens.encoding_for(model)
    if own and "own_prefix" in row:  # a message of its own, and the request's after this prefix in the next
        return tokens.count(row["text"], encoding) + framing.per_message + tokens.count(row["own_prefix"], encoding)
    return tokens.count(row["text"], encoding) + (0 if own else framing.per_message)


class ToolPlacement(NamedTuple):
    """Where a chat template writes function tools when not in front of the messages, and the tokens of its own
    text around them (rules/encodings.toml [tool_placement])."""

    at: str  # "last_user": in the last message, only where it is the user's
    system: int  # added to its system message whenever the request declares tools
    intro: int  # in front of the tools
    each: int  # after each tool


@cache
def tools_at(api: str, model: str | None) -> str | None:
    """Where this API's model's chat template writes function tools, known without counting anything
    ([tool_placement] `at`: "last_user"); None where it writes them in front of the messages."""
    rows = _rules()["tool_placement"]
    row = _family_row(rows["models"], model) if api in rows["apis"] else None
    return None if row is None else str(row["at"])


@cache
def tool_placement(api: str, model: str | None) -> ToolPlacement | None:
    """tools_at, with the tokens of the template's own text around the tools; None where it writes them in
    front, or nothing is counted."""
    at, encoding = tools_at(api, model), tokens.encoding_for(model)
    if at is None or encoding == tokens.ESTIMATE:
        return None
    row = _family_row(_rules()["tool_placement"]["models"], model)
    texts = {k: tokens.count(row[k], encoding) if row.get(k) else 0 for k in ("system", "intro", "each")}
    return ToolPlacement(at=at, **texts)


@cache
def template_tools(model: str | None) -> bool:
    """Whether the model's tool-use prompt is its chat template's own text, the request's like its messages
    (rules/encodings.toml [tool_prompt] `template`), not a provider's."""
    row = _family_row(_rules()["tool_prompt"]["models"], model)
    return bool(row and row.get("template"))


@cache
def tool_prompt(api: str, model: str | None, choice: str = "auto") -> int:
    """The tokens of the tool-use system prompt a provider adds for this API and model when a request
    declares tools of its own, with this tool_choice ("auto", "none", "any", "tool"): rules/encodings.toml
    [tool_prompt]; 0 where no row applies or nothing is counted."""
    row = _tool_row(api, model)
    if row is None:
        return 0
    order = {"any": ("any", "tool"), "tool": ("tool", "any"), "none": ("none",)}.get(choice, ())
    return int(next((row[k] for k in order if k in row), row["auto"]))


@cache
def tool_prompt_after(api: str, model: str | None) -> int:
    """The tokens a chat template writes after the tool list it puts in front (GLM's format instructions): the
    [tool_prompt] row's `after`; 0 where no row applies."""
    row = _tool_row(api, model)
    return int(row.get("after", 0)) if row is not None else 0


def _tool_row(api: str, model: str | None) -> dict[str, Any] | None:
    """The [tool_prompt] row for this API and model, with what it says for that API (`by_api`); None where none
    applies or nothing is counted (no tokenizer)."""
    rows = _rules()["tool_prompt"]
    if api not in rows["apis"] or not model or tokens.encoding_for(model) == tokens.ESTIMATE:
        return None
    best = _family_row(rows["models"], model)
    if best is None or api not in best.get("apis", rows["apis"]):
        return None
    return {**best, **best.get("by_api", {}).get(api, {})}


@cache
def citations_prompt(api: str, model: str | None) -> int:
    """The tokens Claude's API adds in front of a request with a document whose citations are enabled
    (rules/encodings.toml [citations_prompt], by model); 0 where no row applies."""
    return int(_prompt_row("citations_prompt", api, model) or 0)


def thinking_prompt(api: str, model: str | None, thinking: Any) -> int:
    """The tokens Claude's API adds to a request whose extended thinking is on (`thinking`: the body's setting,
    {"type": "enabled", ...}) and that declares no tools of its own, after every part (wire/front.py):
    rules/encodings.toml [thinking_prompt], by model; 0 where no row applies."""
    on = isinstance(thinking, dict) and thinking.get("type") in _rules()["thinking_prompt"]["types"]
    return int(_prompt_row("thinking_prompt", api, model) or 0) if on else 0


@cache
def added_tools_prompt(api: str, model: str | None) -> int:
    """The tokens an input item adding tools mid-conversation (Responses' additional_tools) costs beyond its tools'
    declarations and its message's framing (rules/encodings.toml [added_tools_prompt]); 0 where no row applies."""
    return int(_prompt_row("added_tools_prompt", api, model) or 0)


@cache
def compaction_prompt(api: str, model: str | None) -> int:
    """The tokens a compaction endpoint adds after the input it compacts (rules/encodings.toml [compaction_prompt]);
    0 where no row applies."""
    return int(_prompt_row("compaction_prompt", api, model) or 0)


@cache
def json_output_prompt(api: str, model: str | None, with_tools: bool) -> int:
    """The tokens Claude's API adds in front of a request asking for a JSON output (a response schema), beyond
    the schema itself: rules/encodings.toml [json_output_prompt], by model and whether the request declares
    tools of its own; 0 where no row applies."""
    found = _prompt_row("json_output_prompt", api, model)
    return int(found.get("with_tools" if with_tools else "alone", 0)) if found else 0


@cache
def provider_tool_prompt(api: str, model: str | None, tool: str) -> int:
    """The tokens a provider adds in front of a request declaring one of its own tools (`tool`: its type, such as
    OpenAI's web_search_preview), beyond the tool's JSON: rules/encodings.toml [provider_tool_prompt], by API,
    tool and model; 0 where no row applies."""
    return int(_prompt_row("provider_tool_prompt", api, model, tool) or 0)


@cache
def tool_style(api: str, model: str | None) -> str | None:
    """How this API and model read function tools, not as the JSON sent (rules/encodings.toml [tool_render]:
    prefixguard/wire/tool_render.py renders them): "namespace" (OpenAI's typed declarations), "json" (a
    template's json.dumps), "llama" (tools as Ollama's struct, calls as their name and parameters); None where
    they are read as sent."""
    rows = _rules()["tool_render"]
    return _family_row(rows["styles"], model) if api in rows["apis"] else None


@cache
def call_tokens(api: str, model: str | None) -> int:
    """What the model's format adds to a tool call it reads rendered (name and arguments), with its output:
    rules/encodings.toml [tool_render] per_call; 0 where its calls are not rendered."""
    per_call = _family_row(_rules()["tool_render"]["per_call"], model)
    return int(per_call) if per_call is not None and tool_style(api, model) == "namespace" else 0


@cache
def format_dropped() -> tuple[str, ...]:
    """The schema keywords a response format's model is not shown (rules/encodings.toml [tool_render])."""
    return tuple(_rules()["tool_render"]["format_dropped"])


def format_tokens(api: str, model: str | None) -> int:
    """What the API adds around a response format the model reads rendered (name, description, schema):
    rules/encodings.toml [tool_render] per_format; 0 where its formats are not rendered."""
    return int(_rules()["tool_render"]["per_format"].get(api, 0)) if tool_style(api, model) == "namespace" else 0


def rendering(api: str, model: str | None) -> str:
    """What decides how the model reads tools and calls (a part's counted text under it is remembered apart)."""
    return (tool_style(api, model) or "") + ("+name_again" if call_name_again(api, model) else "")


@cache
def call_name_again(api: str, model: str | None) -> bool:
    """Whether the model's format names a call's function again on its output's message (rules/encodings.toml
    [tool_render] name_again: harmony's output is the function's own message)."""
    rows = _rules()["tool_render"]
    return tool_style(api, model) == "namespace" and _family_row(dict.fromkeys(rows["name_again"], True), model) is True


def _prompt_row(section: str, api: str, model: str | None, tool: str | None = None) -> Any:
    """A section of prompts a provider adds ([citations_prompt], ...): the value of its `models` table (of its
    `tools` table's row for `tool`) for this model, where the section names the API; None where none applies."""
    rows = _rules()[section]
    table = rows["models"] if tool is None else rows["tools"].get(tool)
    return _family_row(table, model) if table and api in rows["apis"] else None


def _family_row(table: dict[str, Any], model: str | None) -> Any:
    """The value of the longest of the table's model prefixes this model falls under, by the contracts' match
    (a gateway's claude-sonnet-4.6 is claude-sonnet-4-6; gpt-4.1 is not gpt-4-1106-preview); None for none."""
    best = max((p for p in table if model and ruleset.same_family(model, p)), key=len, default=None)
    return None if best is None else table[best]


class ChatReasoning(NamedTuple):
    """How a Chat assistant message's own reasoning renders (rules/encodings.toml [chat_reasoning])."""

    fields: tuple[str, ...]  # where a message carries it
    dropped_before_last_user_message: bool  # an earlier turn's is not rendered


@cache
def chat_reasoning() -> ChatReasoning:
    row = _rules()["chat_reasoning"]
    return ChatReasoning(
        fields=tuple(row["fields"]), dropped_before_last_user_message=row["dropped_before_last_user_message"]
    )


@cache
def setting_item(api: str, kind: str) -> bool:
    """Whether an input item of this type sets how the model goes on and is read as nothing (rules/encodings.toml
    [setting_items]): a Responses `configuration_update`."""
    row = _rules()["setting_items"]
    return api in row["apis"] and kind in row["types"]


# each answer depends on the encodings tokens.py reads: tokens.reset() forgets them with those
tokens.depends_on(message_framing, template_system, tools_at, tool_placement, template_tools, tool_prompt)
tokens.depends_on(citations_prompt, tool_style, call_tokens, call_name_again, chat_reasoning, format_dropped)
tokens.depends_on(setting_item, compaction_prompt, added_tools_prompt, tool_prompt_after)
