"""Function tools as the model reads them, not as the JSON sent (rules/encodings.toml [tool_render] names the
models, measured: bench/tool_prompt.py). OpenAI's: a TypeScript-like declaration each, inside a namespace
(`namespace functions { ... }`) whose opening, closing and heading are the tool-use prompt of [tool_prompt],
and a call as its name and arguments (harmony's: and its name again, on its output). Qwen's template and Mistral's
tokenizer: each tool as Python's json.dumps writes it. Ollama's Llama 3.2: each tool as Ollama's own struct of
it, a call as its name and parameters. OpenAI's response format: its name, description and schema without the
keywords its model is not shown. Any other tool, or model, is counted as its JSON."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

from prefixguard.model import templates

MAX_DEPTH = 16  # nested schemas rendered; deeper (a schema that refers to itself) is `any`
_NAMED = frozenset(("properties", "$defs", "definitions"))  # maps of names to schemas, not keywords
_PRIMITIVES = {"integer": "number", "string": "string", "number": "number", "boolean": "boolean", "null": "null"}


def rendered(tool: Any, api: str, model: str | None) -> str | None:
    """The declaration of one function tool (Chat's {"type": "function", "function": {...}}, the legacy
    `functions` entry, Responses' flat {"type": "function", "name": ...}), or None where the model's rendering
    is not known or the tool is none of these; "" for one deferred to a tool search."""
    make = renderer(tool, api, model)
    return make() if make is not None else None


def renderer(tool: Any, api: str, model: str | None) -> Callable[[], str] | None:
    """What makes `rendered`'s text, made only when called: a segment's count already known (the same tool as
    in the last request) needs none, and a request's analysis renders no tool twice."""
    style = templates.tool_style(api, model)
    if not isinstance(tool, dict) or style is None:
        return None
    if style == "json":
        return partial(json.dumps, tool, ensure_ascii=False)
    if style == "llama":
        return partial(_ollama_tool, tool)
    fn = tool.get("function") if tool.get("type") == "function" and "function" in tool else tool
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or tool.get("type", "function") != "function":
        return None
    if tool.get("defer_loading") or fn.get("defer_loading"):  # left to a tool search: not read until found
        return str  # str() is ""
    return partial(_declaration, fn)


def _declaration(fn: dict[str, Any]) -> str:
    params = fn.get("parameters")
    params = params if isinstance(params, dict) else {}
    lines = [_comment(fn["description"], 0)] if fn.get("description") else []
    if isinstance(params.get("properties"), dict) and params["properties"]:
        lines += [f"type {fn['name']} = (_: {{", _properties(params, 0, params, 0), "}) => any;"]
    else:
        lines.append(f"type {fn['name']} = () => any;")
    return "\n".join(lines) + "\n\n"


def _ollama_tool(tool: dict[str, Any]) -> str:
    """A tool as Ollama's template reads it: its api.Tool struct as Go's JSON encoder writes it (the fields the
    struct keeps, in its order, "description" and "required" even where empty, a map's keys sorted; other schema
    keywords, such as "title", "default" and "$ref", dropped)."""
    fn = tool["function"] if isinstance(tool.get("function"), dict) else tool  # Responses' flat tool: its own
    params: dict[str, Any] = fn["parameters"] if isinstance(fn.get("parameters"), dict) else {}
    props: dict[str, Any] = params["properties"] if isinstance(params.get("properties"), dict) else {}
    kept: dict[str, Any] = {"type": params.get("type", "")}
    kept |= {k: _sorted(params[k]) for k in ("$defs", "items") if params.get(k)}
    kept |= {"required": params.get("required"), "properties": {k: _ollama_property(props[k]) for k in sorted(props)}}
    described = {"name": fn.get("name", ""), "description": fn.get("description", ""), "parameters": kept}
    return _go_json({"type": tool.get("type", "function"), "function": described})


def _ollama_property(prop: Any) -> dict[str, Any]:
    prop = prop if isinstance(prop, dict) else {}
    kind = prop.get("type")
    out: dict[str, Any] = {"type": kind[0] if isinstance(kind, list) and len(kind) == 1 else kind}
    out |= {"items": _sorted(prop["items"])} if prop.get("items") else {}
    out["description"] = prop.get("description", "")
    return out | ({"enum": prop["enum"]} if prop.get("enum") else {})


def _sorted(value: Any) -> Any:
    """A schema Ollama keeps as a Go map: its keys sorted, as Go writes a map."""
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    return [_sorted(v) for v in value] if isinstance(value, list) else value


def _go_json(value: Any) -> str:
    """Go's encoding/json: compact, <, > and & escaped."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def rendered_call(item: Any, api: str, model: str | None) -> str | None:
    """A tool call (Chat's {"id", "function": {"name", "arguments"}}, Responses' function_call item) as the model
    reads it, its name and arguments, without the ids and the wrapper (OpenAI's: one a line; Llama's template:
    {"name": ..., "parameters": ...}); a Responses function_call_output item, its output (of a list of parts, their
    texts: the images and files in it are media); an additional_tools item, its tools' declarations. None where the
    model's rendering is not known or the item is none of these."""
    style = templates.tool_style(api, model)
    if not isinstance(item, dict) or style not in ("namespace", "llama"):
        return None
    call: dict[str, Any] = item["function"] if isinstance(item.get("function"), dict) else item
    if isinstance(call.get("name"), str) and isinstance(call.get("arguments"), str):
        if style == "llama":
            return f'{{"name": {json.dumps(call["name"], ensure_ascii=False)}, "parameters": {call["arguments"]}}}'
        again = f"\n{call['name']}" if templates.call_name_again(api, model) else ""  # the output's author
        return f"{call['name']}\n{call['arguments']}{again}"
    added = item.get("tools") if item.get("type") == "additional_tools" and style == "namespace" else None
    if isinstance(added, list):
        declared = [rendered(tool, api, model) for tool in added]
        return None if None in declared else "".join(filter(None, declared))
    output = item.get("output") if item.get("type") == "function_call_output" and style == "namespace" else None
    if isinstance(output, list):
        return "".join(p["text"] for p in output if isinstance(p, dict) and isinstance(p.get("text"), str))
    return output if isinstance(output, str) else None


def rendered_format(fmt: Any, api: str, model: str | None) -> str | None:
    """A response format as the model reads it (rules/encodings.toml [tool_render] format_dropped): its name, its
    description, its JSON schema compact without the keywords the model is not shown, a line each, not the
    request's wrapper around them (type, strict: Chat's {"type": "json_schema", "json_schema": {...}}, Responses'
    flat one); None where the model's rendering is not known or the format holds no schema."""
    if templates.tool_style(api, model) != "namespace" or not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        return None
    spec = fmt["json_schema"] if isinstance(fmt.get("json_schema"), dict) else fmt
    schema = spec.get("schema")
    if not isinstance(schema, dict):
        return None
    shown = _without(schema, frozenset(templates.format_dropped()))
    lines = [spec.get("name"), spec.get("description"), json.dumps(shown, separators=(",", ":"), ensure_ascii=False)]
    return "\n".join(line for line in lines if isinstance(line, str) and line)


def _without(value: Any, dropped: frozenset[str]) -> Any:
    """A schema without the keywords `dropped`, at every depth (a property, or a definition, of that name stays)."""
    if isinstance(value, list):
        return [_without(v, dropped) for v in value]
    if not isinstance(value, dict):
        return value
    named = {k for k, v in value.items() if k in _NAMED and isinstance(v, dict)}
    return {
        k: {name: _without(s, dropped) for name, s in v.items()} if k in named else _without(v, dropped)
        for k, v in value.items()
        if k not in dropped
    }


def _comment(text: Any, indent: int) -> str:
    """A comment line per line of the text."""
    return "\n".join(" " * indent + "// " + line for line in str(text).split("\n"))


def _properties(schema: dict[str, Any], indent: int, root: dict[str, Any], depth: int) -> str:
    """An object's properties, one a line: its title, description and default as comments, then
    `name?: type,` (no `?` where it is required)."""
    required: list[Any] = schema["required"] if isinstance(schema.get("required"), list) else []
    lines = []
    for name, prop in schema["properties"].items():
        prop = _resolved(prop, root)
        for key in ("title", "description"):
            if isinstance(prop, dict) and prop.get(key):
                lines.append(_comment(prop[key], indent))
        if isinstance(prop, dict) and "default" in prop:
            lines.append(" " * indent + f"// default: {json.dumps(prop['default'], ensure_ascii=False)}")
        lines.append(" " * indent + f"{name}{'' if name in required else '?'}: {_type(prop, indent, root, depth)},")
    return "\n".join(lines)


def _type(schema: Any, indent: int, root: dict[str, Any], depth: int) -> str:
    schema, depth = _resolved(schema, root), depth + 1
    if not isinstance(schema, dict) or depth > MAX_DEPTH:  # a schema that refers to itself ends here
        return "any"
    if "enum" in schema and isinstance(schema["enum"], list):
        return " | ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"], ensure_ascii=False)
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return " | ".join(_type(s, indent, root, depth) for s in schema[key])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(_type({**schema, "type": k}, indent, root, depth) for k in kind)
    if kind == "array":
        inner = _type(schema.get("items", {}), indent, root, depth)
        return f"({inner})[]" if " | " in inner else f"{inner}[]"
    if kind == "object" or "properties" in schema:
        if not isinstance(schema.get("properties"), dict) or not schema["properties"]:
            return "object"
        return "{\n" + _properties(schema, indent + 2, root, depth) + "\n" + " " * indent + "}"
    return _PRIMITIVES.get(kind, "any") if isinstance(kind, str) else "any"


def _resolved(schema: Any, root: dict[str, Any]) -> Any:
    """A local reference (`{"$ref": "#/$defs/Entity"}`) as the schema it names, with its own other keys."""
    ref = schema.get("$ref") if isinstance(schema, dict) else None
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return schema
    node: Any = root
    for part in ref[2:].split("/"):
        node = node.get(part) if isinstance(node, dict) else None
    if not isinstance(node, dict) or node is schema:
        return {k: v for k, v in schema.items() if k != "$ref"}
    return {**node, **{k: v for k, v in schema.items() if k != "$ref"}}
