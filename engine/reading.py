"""Reading a request body: the prompt, the body, the API's options and the token ids, or Unreadable
with one line saying why (answered 400 in the API's own error shape)."""

from __future__ import annotations

import json
import re
from typing import Any

from prefixguard.engine import api_anthropic, chat_template
from prefixguard.engine.served import Served
from prefixguard.model.prompt import Prompt
from prefixguard.utils.errors import InputError
from prefixguard.wire import parse_request


class Unreadable(Exception):
    """A request this server cannot parse or check: answered 400 in the API's own error shape, and counted."""


# What reading a body can raise besides InputError, whatever shape the body takes (a list where a string
# belongs, a 4,300-digit integer, nesting deeper than the recursion limit, a lone surrogate).
READ_ERRORS = (
    InputError,
    ValueError,
    TypeError,
    KeyError,
    IndexError,
    AttributeError,
    RecursionError,
    UnicodeError,
    OverflowError,
)
LONE_SURROGATE_ESCAPE = re.compile(rb"\\[uU][dD][89a-fA-F][0-9a-fA-F]{2}")


def read_request(
    served: Served, body: bytes, path: str, headers: Any, shape: Any
) -> tuple[Prompt, dict[str, Any], Any, list[int]]:
    """(prompt, body, options, token ids) of a request, or Unreadable saying why not."""
    try:
        # count_tokens=False: the template's render counts each segment in the engine's own tokens below
        prompt = parse_request(body, path=path, headers=headers, count_tokens=False)
        data = json.loads(body)
        if LONE_SURROGATE_ESCAPE.search(body):  # a pair is one character; a lone half cannot be answered in UTF-8
            json.dumps(data, ensure_ascii=False).encode("utf-8")
        opts = shape.options(data, served.default_max_tokens)
        if prompt.api == api_anthropic.Messages.API:
            api_anthropic.check(prompt)
        if not isinstance(prompt.model, str):
            raise InputError("'model' must be a string")
        messages = any(s.level == "messages" for s in prompt.segments)
        ids = chat_template.prompt_ids(served.template, prompt) if messages else []
    except READ_ERRORS as e:
        raise Unreadable(reason(e)) from None
    return prompt, data, opts, ids


def reason(err: BaseException) -> str:
    """One line for the client: the input error's own words, else what kind of value broke the reading."""
    if isinstance(err, InputError):
        return str(err)
    if isinstance(err, RecursionError):
        return "the body is nested too deeply to read"
    if isinstance(err, UnicodeError):
        return "the body holds a lone surrogate (\\ud800-\\udfff), which is no character"
    if isinstance(err, ValueError) and "digits" in str(err):
        return "the body holds an integer too long to read (over 4,300 digits)"
    if isinstance(err, ValueError):
        return f"the body is not valid JSON: {str(err)[:200]}"
    return f"a field of the body has the wrong type ({type(err).__name__}: {str(err)[:200]})"
