"""Wire adapters: request bytes -> Prompt, response bytes (JSON or SSE) -> Usage.

Nothing outside this package knows a provider's field names. One module per API shape (anthropic, openai_chat,
openai_responses, bedrock_converse, gemini, gemini_interactions), each an Adapter (adapter.py) registered in
adapters.py; routes.py routes a path once, by the adapters' own paths.
"""

from __future__ import annotations

import binascii
import json
import os
import time
from bisect import bisect_left
from collections.abc import Iterator, Mapping
from itertools import islice
from typing import Any

from prefixguard.model.diagnosis import Diagnosis
from prefixguard.model.prompt import PausedGc, Prompt
from prefixguard.model.usage import ResponseMeta, Usage
from prefixguard.utils.errors import InputError, TooLarge, describe
from prefixguard.wire import front, jsonspan, openai_chat, openai_responses, routes
from prefixguard.wire.adapter import NO_SERVER_WORK, Adapter
from prefixguard.wire.adapters import ADAPTERS, APIS, adapter_for
from prefixguard.wire.detect import analysable, counts_only, detect, detect_api
from prefixguard.wire.eventstream import EventStreamDecoder, looks_framed
from prefixguard.wire.segments import Builder

MAX_BYTES = 64 << 20
# The most parts (messages, blocks, tools) a request may have to be analysed: each holds a segment, its
# key and its fingerprint while the request is judged, so the ceiling bounds one analysis's memory and
# time (bench/RESULTS.md, "big bodies"). 200,000 is more messages than a 1M-token context holds at five
# tokens each: no real agent reaches it. Counted before parsing; PREFIXGUARD_MAX_PARTS sets it (0: none).
_PARTS = os.environ.get("PREFIXGUARD_MAX_PARTS", "200000").strip() or "0"
MAX_PARTS = int(_PARTS) if _PARTS.isdigit() else None  # None: not a number, said when first needed

_MERGED: dict[tuple[int, ...], jsonspan.Spec] = {}


def _spans(text: str) -> jsonspan.Spec:
    """The parts whose spans the adapters read, for every shape at once (the shape is known only after
    parsing): every other member is decoded for its value only. Merged once per set of adapter specs."""
    specs = [a.spans(text) for a in ADAPTERS]
    key = tuple(map(id, specs))
    merged = _MERGED.get(key)
    if merged is None:
        merged = _MERGED[key] = jsonspan.merged(specs)
    return merged


def parse_request(
    body: bytes | str,
    *,
    path: str | None = None,
    headers: Mapping[str, str] | None = None,
    source: str | None = None,
    count_tokens: bool = True,
    max_bytes: int = MAX_BYTES,
    routed: routes.Routed | None = None,
    like: Prompt | None = None,
) -> Prompt:
    """A request body -> Prompt (segments in prefix order, settings, fingerprint chain). routed: the
    path's route (routes.resolve) where the caller has it already; else the path is routed here.
    like: a request read before with the same path and headers (a diff's first body): the parts this
    one would make equal to its own are taken from it, not made again (segments.Builder).

    Raises InputError (one line, prefixed by source when given) on anything that is not a request.
    """
    with PausedGc():
        return _parse_request(body, routed or routes.resolve(path), headers, source, count_tokens, max_bytes, like)


def _parse_request(
    body: bytes | str,
    routed: routes.Routed,
    headers: Mapping[str, str] | None,
    source: str | None,
    count_tokens: bool,
    max_bytes: int,
    like: Prompt | None = None,
) -> Prompt:
    try:
        text = _decode(body, max_bytes)
        _check_parts(text)
        try:
            shared = jsonspan.common_prefix(like.text, text) if like is not None else 0
            root = jsonspan.parse(text, _spans(text), _strings_of(like, shared), shared)
        except json.JSONDecodeError as err:
            raise InputError(f"not valid JSON: {err.msg} at line {err.lineno} column {err.colno}") from None
        except ValueError as err:  # an integer of more than 4,300 digits
            raise InputError(f"not valid JSON: {describe(err)}") from None
        if not isinstance(root.value, dict):
            raise InputError(f"request body must be a JSON object, got {type(root.value).__name__}")
        api = detect(root.value, routed, headers)
        path_model = routed.model  # Bedrock, Vertex, Gemini, Azure: the path names the model
        # a model named by the path is not the one `like` was counted with where the bodies name others
        out = Builder(count_tokens, api, root.value.get("model") or path_model, None if path_model else like)
        try:
            prompt = adapter_for(api).request(root, out, headers)
        except (TypeError, AttributeError, KeyError) as err:  # a field of an unexpected JSON type
            raise InputError(f"not a valid {api} request ({type(err).__name__}: {err})") from None
    except RecursionError:
        raise InputError("JSON nested too deeply", source) from None
    except InputError as err:
        if source:
            raise type(err)(str(err), source) from None
        raise
    if path_model and not (api in (openai_chat.API, openai_responses.API) and prompt.model):
        prompt.model = path_model  # on the wire the path names the model (a body's own is not sent; Azure: when none)
    if not out.estimated:  # the provider's own text before the tools: the model is known by now
        front.count(prompt, root.value, routes.compacts(routed.path))
    prompt.text, prompt.source, prompt.tokens_estimated = text, source, out.estimated
    prompt.chain = out.chain_for(prompt.segments)
    prompt.counts_only = counts_only(api, root.value, routed)
    return prompt


def _strings_of(like: Prompt | None, shared: int = 0) -> Iterator[tuple[int, str]] | None:
    """(start, text) of the string parts of `like` past its tools, in their order: what the reader may
    take for a plain message's content at the same start (jsonspan.parse checks the characters). Those
    of the parts in the `shared` text are skipped by halves (the reader takes their runs whole): parts
    in start order are found so; in any other, fewer strings are offered, each still checked."""
    if like is None:
        return None
    segments = like.segments
    first = bisect_left(segments, shared, key=lambda s: s.start) if shared else 0
    return ((s.start, s.value) for s in islice(segments, first, None) if type(s.value) is str and s.level != "tools")


def _check_parts(text: str) -> None:
    """Raise TooLarge before parsing when the body has more parts than MAX_PARTS. A part is an object
    with a "role" or a "type" (messages, blocks, tools): counted in the text at C speed, with no
    memory (a quoted "role" outside a key or value is escaped, so it is never over-counted much)."""
    if MAX_PARTS is None:
        raise InputError(f"PREFIXGUARD_MAX_PARTS must be a whole number (0: no limit), not {_PARTS!r}")
    if MAX_PARTS and len(text) > MAX_PARTS * 8:  # fewer bytes than that cannot hold so many parts
        parts = text.count('"role"') + text.count('"type"')
        if parts > MAX_PARTS:
            raise TooLarge(
                f"too large to analyse: about {parts} parts, over the ceiling of {MAX_PARTS} "
                f"(PREFIXGUARD_MAX_PARTS sets it)"
            )


def _decode(body: bytes | str | bytearray | memoryview, max_bytes: int) -> str:
    if isinstance(body, str):
        size = len(body) if body.isascii() else len(body.encode("utf-8", "surrogatepass"))
        if size > max_bytes:
            raise TooLarge(f"body is {size} bytes, over the {max_bytes}-byte limit")
        text = body
    else:
        body = bytes(body)
        if len(body) > max_bytes:
            raise TooLarge(f"body is {len(body)} bytes, over the {max_bytes}-byte limit")
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(f"not UTF-8 text (binary data?): bad byte at offset {err.start}") from None
    text = text.removeprefix("\ufeff")
    if not text.strip():
        raise InputError("empty body")
    if "\x00" in text:
        raise InputError("binary data (NUL bytes), not a JSON request")
    return text


# ---- responses


def parse_response(body: bytes | str, api: str) -> Usage:
    """Usage of a whole response: one JSON object, or a whole SSE stream."""
    mod = adapter_for(api)
    raw_bytes = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else bytes(body)
    head = raw_bytes.lstrip()[:1]
    if head in (b"{", b"["):
        try:
            obj = json.loads(raw_bytes)
        except (ValueError, RecursionError):
            # JSON lines (a stream without SSE framing) parse below; anything else is not a response
            if b"\n" not in raw_bytes.strip():
                raise InputError("response is not valid JSON") from None
        else:
            if isinstance(obj, list) and mod.JSON_ARRAY_STREAM:  # Gemini without alt=sse
                raw = None
                for item in obj:
                    raw = mod.stream_usage(item, raw) if isinstance(item, dict) else raw
                return mod.usage(raw)
            if not isinstance(obj, dict):
                raise InputError("response must be a JSON object")
            got = mod.usage(obj.get("usage")) if "usage" in obj else mod.usage(mod.stream_usage(obj, None))
            work = mod.server_calls(obj)
            return got.with_passes(work.calls, work.results)
    stream = UsageStream(api)
    stream.feed(raw_bytes)
    stream.feed(b"\n\n")  # end the last event even when the stream lacked its closing blank line
    return stream.usage()


def parse_response_meta(body: bytes | str, api: str) -> ResponseMeta:
    """The response's id, model and finish reasons (OTel gen_ai.response.*) of a whole response: one
    JSON object (or Gemini's array of chunks), or a whole stream. Nothing said: an empty ResponseMeta."""
    mod = adapter_for(api)
    raw_bytes = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else bytes(body)
    if raw_bytes.lstrip()[:1] in (b"{", b"["):
        try:
            obj = json.loads(raw_bytes)
        except (ValueError, RecursionError):
            obj = None
        if isinstance(obj, dict):
            return mod.meta(obj, ResponseMeta())
        if isinstance(obj, list):
            found = ResponseMeta()
            for item in obj:
                found = mod.meta(item, found) if isinstance(item, dict) else found
            return found
    stream = UsageStream(api)
    stream.feed(raw_bytes)
    stream.feed(b"\n\n")
    return stream.meta


def parse_diagnosis(body: bytes | str, api: str) -> Diagnosis | None:
    """The provider's own cache diagnosis in a whole response (JSON or a stream), None when it gave none."""
    mod = adapter_for(api)
    if mod.RESPONSE_ID is None:  # a shape with no diagnostics to ask for: none to read
        return None
    raw_bytes = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else bytes(body)
    if raw_bytes.lstrip()[:1] == b"{":
        try:
            obj = json.loads(raw_bytes)
        except (ValueError, RecursionError):
            obj = None
        if isinstance(obj, dict):
            return mod.diagnosis(obj)
    stream = UsageStream(api)
    stream.feed(raw_bytes)
    stream.feed(b"\n\n")
    return stream.diagnosis


def response_id(head: bytes, api: str) -> str | None:
    """The id of a response (Messages, Responses) from its first bytes (a JSON body or a stream's first
    event): what a later request names to ask for a diagnosis."""
    pattern = adapter_for(api).RESPONSE_ID
    found = pattern.search(head) if pattern is not None else None
    return found.group(1).decode("ascii") if found else None


def ask_diagnosis(body: bytes, api: str, previous_id: str) -> bytes | None:
    """The body with the one member added that asks the provider for its cache diagnosis against an
    earlier response, inserted right after the opening brace: every other byte stays as it was. None
    when the API has no diagnostics, the body sets the member already, or it is not a JSON object."""
    mod = adapter_for(api)
    if mod.RESPONSE_ID is None:  # no earlier response to name
        return None
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError):
        return None
    field = mod.diagnostics_field(previous_id, obj) if isinstance(obj, dict) else None
    start = body.find(b"{")
    if field is None or start < 0:
        return None
    member = json.dumps({field[0]: field[1]}, separators=(",", ":")).encode()[1:-1]
    return body[: start + 1] + member + (b"," if obj else b"") + body[start + 1 :]


class UsageStream:
    """Reads usage out of a streamed response fed chunk by chunk, with chunks cut anywhere.

    Takes SSE (event:/data: lines, events end at a blank line), bare JSON lines, and AWS EventStream
    binary frames (Bedrock: told apart by their first bytes). Keeps only what it needs: the provider's
    latest usage object, and when content began (for TTFT).
    """

    def __init__(self, api: str) -> None:
        self.api = api
        self._mod: Adapter = adapter_for(api)
        self._buf = bytearray()
        self._event: str | None = None
        self._data: list[str] = []
        self._raw: dict[str, Any] | None = None
        self.first_content_at: float | None = None  # time.monotonic() of the first content event
        self.output_chunks = 0  # content events seen
        self.finished = False  # the provider's last event came: the answer is whole
        self.frames: EventStreamDecoder | None = None  # set once the stream shows EventStream framing
        self._final = self._mod.FINAL_EVENTS
        self.diagnosis: Diagnosis | None = None  # the provider's own cache diagnosis, when it sent one
        self.meta = ResponseMeta()  # the response's id, model, finish reasons as told so far
        self.server = NO_SERVER_WORK  # what the provider's own tools did, so far
        self._begun = False

    def feed(self, chunk: bytes) -> None:
        if self.frames is not None:
            self._framed(chunk)
            return
        if not self._begun:  # the first bytes tell EventStream frames (a zero length byte) from text
            pending = bytes(self._buf) + chunk
            if pending[:1] == b"\x00" and len(pending) < 12:
                self._buf[:] = pending  # wait for the whole prelude
                return
            self._begun = bool(pending)
            if looks_framed(pending):
                self._buf.clear()
                self.frames = EventStreamDecoder()
                self._framed(pending)
                return
        scan_from = len(self._buf)  # bytes before this chunk hold no newline: do not search them again
        self._buf += chunk
        start = 0
        while (nl := self._buf.find(b"\n", scan_from)) >= 0:
            self._line(bytes(self._buf[start:nl]).rstrip(b"\r").decode("utf-8", "replace"))
            start = scan_from = nl + 1
        del self._buf[:start]

    def _framed(self, chunk: bytes) -> None:
        """EventStream messages: the :event-type header names the event, the payload is its JSON
        (InvokeModelWithResponseStream wraps the model's own event, base64, in "bytes")."""
        frames = self.frames
        if frames is None:  # fed only once the stream showed its framing
            return
        for headers, payload in frames.feed(chunk):
            if headers.get(":message-type", "event") != "event":
                continue  # an exception message: the status and the error say it
            name = headers.get(":event-type")
            try:
                event = json.loads(payload)
                if isinstance(event, dict) and isinstance(event.get("bytes"), str) and len(event) <= 2:
                    event = json.loads(binascii.a2b_base64(event["bytes"]))
                    # a model's own event named by its first key, as ConverseStream's header would name it
                    # (Nova's {"metadata": {"usage": ...}, "amazon-bedrock-invocationMetrics": ...}); Claude's
                    # carry a "type"
                    first = next(iter(event), None) if isinstance(event, dict) and "type" not in event else None
                    if first is not None and isinstance(event[first], dict):
                        name, event = first, dict(event[first])
            except (ValueError, binascii.Error):
                continue
            if isinstance(event, dict):
                self._event_of(name, event)

    def _line(self, line: str) -> None:
        if not line:
            self._dispatch()
        elif line.startswith("data:"):
            self._data.append(line[5:].removeprefix(" "))
        elif line.startswith("event:"):
            self._event = line[6:].strip()
        elif line.startswith("{"):  # JSON lines, no SSE framing
            self._dispatch()
            self._data.append(line)
            self._dispatch()
        # ":" comments, id:, retry: say nothing about usage

    def _dispatch(self) -> None:
        data, name = "\n".join(self._data), self._event
        self._data, self._event = [], None
        if data == "[DONE]":
            self.finished = True
        if not data or data == "[DONE]":
            return
        try:
            event = json.loads(data)
        except ValueError:
            return
        if isinstance(event, dict):
            self._event_of(name, event)

    def _event_of(self, name: str | None, event: dict[str, Any]) -> None:
        if name and "type" not in event:
            event["type"] = name
        if event.get("type") in self._final or self._mod.is_final(event):
            self.finished = True
        self._raw = self._mod.stream_usage(event, self._raw)
        self.server = self.server.then(self._mod.server_calls(event))
        self.meta = self._mod.meta(event, self.meta)
        self.diagnosis = self._mod.stream_diagnosis(event, self.diagnosis)
        if self._mod.is_content(event):
            self.output_chunks += 1
            if self.first_content_at is None:
                self.first_content_at = time.monotonic()

    def usage(self) -> Usage:
        """Usage as far as the stream has told it (reported=False until a usage object arrives)."""
        return self._mod.usage(self._raw).with_passes(self.server.calls, self.server.results)


__all__ = [
    "APIS",
    "ADAPTERS",
    "Adapter",
    "InputError",
    "UsageStream",
    "analysable",
    "detect_api",
    "parse_diagnosis",
    "parse_request",
    "parse_response",
    "parse_response_meta",
]
