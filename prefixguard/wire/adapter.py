"""What a wire adapter is: one API shape's routing, detection, span parsing, usage and diagnostics.

Each adapter module (anthropic, openai_chat, openai_responses, bedrock_converse, gemini) defines every
member of `Adapter` at its top level, and adapters.py registers the modules as Adapters (mypy checks
each against this protocol). The code that reads requests and responses (routes.py, detect.py, the
package's parse functions) asks the registered adapters only through these members: adding a shape is
adding its module and registering it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

from prefixguard.model.diagnosis import Diagnosis
from prefixguard.model.prompt import Prompt
from prefixguard.model.usage import ResponseMeta, Usage
from prefixguard.wire.jsonspan import Node, Spec
from prefixguard.wire.segments import Builder


class Adapter(Protocol):
    """An API shape's adapter (module-level names: read-only here, so a module's constants fit)."""

    # ---- routing: which paths speak this shape
    @property
    def API(self) -> str:
        """The shape's name ("anthropic", "openai-chat", ...)."""
        ...

    @property
    def SHAPE(self) -> str:
        """How an "unknown shape" message names it, with its endpoints."""
        ...

    @property
    def TAIL(self) -> re.Pattern[str] | None:
        """A path ending that may speak it (group "model": an Azure deployment)."""
        ...

    @property
    def ENDPOINT(self) -> str | None:
        """The path a client posts to (None: the path names the model, so a request must give it)."""
        ...

    @property
    def HEADER(self) -> str | None:
        """A request header only this shape's clients send."""
        ...

    def route(self, path: str) -> tuple[str, str | None] | None:
        """(API, model the path names) where the URL path (no query) names this shape, else None."""
        ...

    # ---- detection: which bodies are this shape
    def foreign(self, body: dict[str, Any] | None, path: str) -> str | None:
        """Why a body at this path is no generation request though it looks like this shape's (a
        response, a count, a cache creation), else None."""
        ...

    def claims(self, body: dict[str, Any]) -> bool:
        """Whether a body at a path that names no shape is this shape's (asked in the registry's order)."""
        ...

    def fits(self, body: dict[str, Any]) -> bool:
        """Whether a body at a path whose TAIL this is has this shape's fields (an app's own /messages
        endpoint is no Anthropic one)."""
        ...

    def counts_only(self, body: dict[str, Any]) -> bool:
        """Whether the body asks for a count of tokens, not a generation."""
        ...

    # ---- span parsing: request bytes -> Prompt
    def spans(self, text: str) -> Spec:
        """The members whose text spans `request` reads (walked by jsonspan; the rest decoded whole)."""
        ...

    def request(self, root: Node, out: Builder, headers: Mapping[str, str] | None) -> Prompt: ...

    # ---- responses
    @property
    def JSON_ARRAY_STREAM(self) -> bool:
        """A stream may come as one JSON array of chunks (Gemini without alt=sse)."""
        ...

    @property
    def FINAL_EVENTS(self) -> frozenset[str]:
        """Stream events after which the provider sends nothing more."""
        ...

    @property
    def RESPONSE_ID(self) -> re.Pattern[bytes] | None:
        """A response's id in its first bytes (None: no diagnostics to ask)."""
        ...

    def usage(self, raw: Mapping[str, Any] | None) -> Usage: ...

    def stream_usage(self, event: Mapping[str, Any], current: dict[str, Any] | None) -> dict[str, Any] | None: ...

    def is_content(self, event: Mapping[str, Any]) -> bool: ...

    def server_calls(self, obj: Mapping[str, Any]) -> ServerWork:
        """Tools the provider ran itself, between passes of the model, in a whole response or one stream
        event (each counted once over a stream), and what their results added."""
        ...

    def is_final(self, event: Mapping[str, Any]) -> bool:
        """Whether a stream event is the last one, by its content (beyond FINAL_EVENTS' names)."""
        ...

    def meta(self, obj: Mapping[str, Any], current: ResponseMeta) -> ResponseMeta: ...

    def diagnosis(self, message: Mapping[str, Any]) -> Diagnosis | None:
        """The provider's own cache diagnosis in a whole response, None when it gave none."""
        ...

    def stream_diagnosis(self, event: Mapping[str, Any], current: Diagnosis | None) -> Diagnosis | None: ...

    def diagnostics_field(self, previous_id: str, body: Mapping[str, Any]) -> tuple[str, Any] | None:
        """The body member that asks for a diagnosis against an earlier response, None when none can."""
        ...


# Stream events after which a provider sends nothing more (OpenAI Chat ends with `data: [DONE]`).
FINAL_EVENTS = frozenset({"message_stop", "response.completed", "response.incomplete", "response.failed"})


def no_tail(body: dict[str, Any]) -> bool:
    """A shape with no TAIL (its path names it whole): no other endpoint speaks it."""
    return False


def never_counts(body: dict[str, Any]) -> bool:
    """A shape none of whose bodies asks for a count only."""
    return False


class ServerWork(NamedTuple):
    """What a provider's own tools did between passes of the model, in a response or one stream event: how
    many it ran, and the tokens each pass added to the prompt of the passes after it, in order (the model's
    output up to a tool's result, and that result). said: output in a stream event that no result ends yet."""

    calls: int = 0
    results: tuple[int, ...] = ()
    said: int = 0

    def then(self, later: ServerWork) -> ServerWork:
        """This work followed by a later part of the same response: what was said before a result was added
        by that result's pass."""
        if not later.results:
            return self._replace(calls=self.calls + later.calls, said=self.said + later.said)
        first, *rest = later.results
        return ServerWork(
            calls=self.calls + later.calls, results=(*self.results, self.said + first, *rest), said=later.said
        )


NO_SERVER_WORK = ServerWork()


def no_server_calls(obj: Mapping[str, Any]) -> ServerWork:
    """A shape whose provider runs no tool of its own between passes."""
    return NO_SERVER_WORK


# ---- the diagnostics members of a shape whose provider gives no account of its misses


def no_diagnosis(message: Mapping[str, Any]) -> Diagnosis | None:
    return None


def same_diagnosis(event: Mapping[str, Any], current: Diagnosis | None) -> Diagnosis | None:
    return current


def no_diagnostics_field(previous_id: str, body: Mapping[str, Any]) -> tuple[str, Any] | None:
    return None
