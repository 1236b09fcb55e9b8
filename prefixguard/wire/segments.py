"""Shared by the adapters: turn a part of the body into a Segment (canon bytes, tokens, breakpoint), and
read the fields every shape has (the model, token counts in usage)."""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice
from typing import Any

from prefixguard.contracts.providers import equivalences
from prefixguard.model import media as media_cost
from prefixguard.model import templates, tokens
from prefixguard.model.fingerprint import Chain, chain, link
from prefixguard.model.media import Media
from prefixguard.model.prompt import (
    MARKER_KEYS,
    PointerForm,
    Prompt,
    Segment,
    compact_json,
    encode_key,
    without_markers,
)
from prefixguard.utils.errors import InputError
from prefixguard.wire.jsonspan import Elements, Node, Run

# The pointer of a message's string content (Anthropic, Chat): one string for every such part.
MESSAGE_CONTENT = PointerForm("/messages/{}/content")
RENDERED = frozenset(("tool", "tool_use", "tool_result", "additional_tools"))  # text: maybe a rendering of the JSON


class Builder:
    """Collects segments in prefix order; counts tokens with the tokenizer or, if told not to, estimates.
    Images and documents are costed by the provider's formula for the request's API and model."""

    def __init__(self, count_tokens: bool = True, api: str = "", model: Any = None, like: Prompt | None = None) -> None:
        self.segments: list[Segment] = []
        self.chain = Chain()  # fingerprint chain of the segments (model/fingerprint.py)
        self._prev = b""
        self.estimated = not count_tokens or tokens.is_estimated()
        self.api, self.model = api, model if isinstance(model, str) else None
        self.per_call = 0 if self.estimated else templates.call_tokens(api, self.model)  # a rendered call's format
        self.rendering = b"\x00" + ("" if self.estimated else templates.rendering(api, self.model)).encode()
        self.encoding = tokens.ESTIMATE if self.estimated else tokens.encoding_for(self.model)  # the model's own
        # the chat format's tokens around each message and before the reply: prompt tokens too
        self.framing = templates.NO_FRAMING if self.estimated else templates.message_framing(api, self.model)
        self.text_is_string = api in equivalences()["text-block-is-string"]["apis"]
        # `like`: a request read before in the same context (API, model, counting), whose plain message
        # parts are taken where this one's would be made the same (`add_text`): a diff's second body
        # then holds no second copy of the parts the two share
        self._like: tuple[list[Segment], Chain] | None = None
        if (
            like is not None
            and like.api == api
            and like.model == self.model
            and like.tokens_estimated == self.estimated
            and len(like.chain) == len(like.segments)
        ):
            self._like = (like.segments, like.chain)
        self._like_headers: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}  # id -> (header, like's equal)

    def add(
        self,
        level: str,
        pointer: str,
        kind: str,
        node: Node,
        *,
        role: str | None = None,
        message_index: int | None = None,
        header: dict[str, Any] | None = None,
        breakpoint: str | None = None,
        text: str | Callable[[], str] | None = None,
        whole: bool = False,
        media: list[Media] | None = None,
        tokens_by_rule: int | None = None,
    ) -> Segment:
        """header: the message's own fields (role, name, ids...) when this part starts a message;
        whole: this part is the whole message (its value holds those fields already);
        text: what the tokenizer counts (a function: made only where its count is not known); media: the
        images and documents in this part, `text` the rest of it, while the media cost the provider's formula;
        tokens_by_rule: what the part costs by a rule of the provider's, in its tokens."""
        value = node.value
        if type(value) is dict:
            value = without_markers(value)
        if self.text_is_string and type(value) is dict and len(value) == 2 and value.get("type") == "text":
            value = value["text"] if type(value.get("text")) is str else value  # renders as the string would
        key = encode_key(level, role, True if whole else header, value)
        media_tokens, estimated = 0, False
        if tokens_by_rule is not None:  # the provider's own count, by its rule: not scaled, as media
            count, media_tokens, estimated = tokens_by_rule, tokens_by_rule, True
        elif media:
            count, media_tokens, estimated = self._media(key, media, text if isinstance(text, str) else None)
        else:  # a tool's or a call's text may be the provider's rendering of it (tool_render): a key of its own
            rendered = text is not None and kind in RENDERED
            count, estimated = self._count(key + self.rendering if rendered else key, text, value)
            count += self.per_call if rendered and kind == "tool_use" else 0
        if tokens_by_rule is None:
            count += self._opening(level, whole or header is not None, role)
        elif self.framing.reply and not self.segments:
            count += self.framing.reply
        # the key is left for the part to make again when it is the plain encoding of what the part holds
        kept = None if value is node.value and not whole else key
        seg = Segment(
            level,
            pointer,
            kind,
            role,
            node.value,
            node.start,
            node.end,
            kept,
            count,
            breakpoint,
            message_index,
            header,
            media_tokens,
            estimated,
        )
        self._append(seg, key)
        return seg

    def add_text(
        self,
        level: str,
        pointer: str,
        kind: str,
        text: str,
        start: int,
        role: str,
        message_index: int,
        header: dict[str, Any],
    ) -> None:
        """add() of a message's content that is one string without escapes at `start` (no breakpoint, no
        media): the same segment, made without a node of it (a plain message's, a million a body)."""
        if self._like is not None and self._take_like(level, pointer, kind, text, start, role, message_index, header):
            return
        key = encode_key(level, role, header, text)
        count, estimated = self._count(key, text, text)
        self._append(
            Segment(
                level,
                pointer,
                kind,
                role,
                text,
                start,
                None,
                None,
                count + self._opening(level, True, role),
                None,
                message_index,
                header,
                0,
                estimated,
            ),
            key,
        )

    def _take_like(
        self,
        level: str,
        pointer: str,
        kind: str,
        text: str,
        start: int,
        role: str,
        message_index: int,
        header: dict[str, Any],
    ) -> bool:
        """Append the part of `like` at this position when add_text would make it equal: every input the
        same (a plain part's key, count and fields are made of them and of the context, checked the same
        when `like` was taken), and every part before it the same (equal chains)."""
        assert self._like is not None  # the caller checks
        segments, chain = self._like
        j = len(self.segments)
        if j >= len(segments):
            return False
        seg = segments[j]
        if not (
            seg.start == start
            and seg.value == text
            and seg.message_index == message_index
            and seg._end is None
            and seg._key is None
            and seg._rare is None
            and seg.role == role
            and seg.kind == kind
            and seg.level == level
            and type(seg._pointer) is type(pointer)
            and seg._pointer == pointer
            and self._same_header(seg.header, header)
            and self._follows(chain, j)
        ):
            return False
        self.segments.append(seg)
        self._prev = chain[j]
        self.chain.append(self._prev)
        return True

    def _follows(self, chain: Chain, j: int) -> bool:
        """The parts so far are the first j of `like`'s: their chains end alike."""
        return chain.holds(j - 1, self._prev) if j else not self._prev

    def mark_last(self, ttl: str) -> None:
        """A breakpoint marker that is a block of its own (Converse's cachePoint, a block the model never sees)
        marks the part added before it. A copy: that part may be an earlier prompt's (take_run)."""
        if self.segments:
            self.segments[-1] = marked = self.segments[-1].with_tokens(self.segments[-1].tokens)
            marked.breakpoint = ttl

    def take_run(self, run: Run) -> bool:
        """Append the parts of `like` for a run of plain messages (jsonspan.Run): its characters are
        `like`'s at the same places, so `like` read the same messages there, each a part made by
        add_text of them alone and the context, checked the same when `like` was taken. Taken where the
        parts so far are `like`'s (equal chains) and `like`'s next part is the run's first message's,
        its last the run's last; False (nothing taken) otherwise."""
        if self._like is None:
            return False
        segments, chain = self._like
        j, n = len(self.segments), run.count
        if j + n > len(segments) or not self._follows(chain, j):
            return False
        first, last = segments[j], segments[j + n - 1]
        if not (
            first.message_index == run.first
            and last.message_index == run.first + n - 1
            and run.start < first.start <= last.start < run.end
            and first._end is None
            and last._end is None
            and first._key is None  # not made with tokens front.py added (Segment.plus)
        ):
            return False
        self.segments.extend(islice(segments, j, j + n))  # no slice: a million parts' list is not made twice
        self.chain.extend_from(chain, j, j + n)
        self._prev = chain[j + n - 1]
        return True

    def _same_header(self, theirs: dict[str, Any] | None, ours: dict[str, Any]) -> bool:
        """_same_header, remembered for the few headers shared by many messages (MessageHeaders); the
        pair is held, so that no other dict takes the id meanwhile."""
        known = self._like_headers.get(id(ours))
        if known is not None and known[1] is theirs:
            return True
        if not _same_header(theirs, ours):
            return False
        if len(self._like_headers) < 8 and theirs is not None:
            self._like_headers[id(ours)] = (ours, theirs)
        return True

    def _count(self, key: bytes, text: str | Callable[[], str] | None, value: Any) -> tuple[int, bool]:
        """(tokens of a part with no media, whether that is an estimate)."""
        made = text if callable(text) else lambda: text if isinstance(text, str) else compact_json(value)
        if self.estimated or len(key) > tokens.MAX_EXACT:  # sizes only: no need to serialize the value
            # one part too long to tokenize in time: say it is estimated
            return (tokens.estimate(made()) if text is not None else len(key) // 4), not self.estimated
        return tokens.count_once(key, made, self.encoding), False

    def _opening(self, level: str, opens: bool, role: str | None) -> int:
        """Tokens of the chat format around a part: its message's role and delimiters where the message opens
        here; the reply's start on the first part. The reply's start (<|im_start|>assistant) follows the prompt;
        the next request has the same tokens opening that reply right after this prompt, so a read of this
        prompt covers them: they count in every prefix of it, as if on its first part."""
        framing, framed = self.framing, opens and level in self.framing.levels
        extra = framing.per_message + framing.per_assistant * (role == "assistant") if framed else 0
        return extra + framing.reply if not self.segments else extra

    def _append(self, seg: Segment, key: bytes) -> None:
        self.segments.append(seg)
        self._prev = link(self._prev, key)
        self.chain.append(self._prev)

    def chain_for(self, segments: list[Segment]) -> Chain:
        """The fingerprint chain of `segments`: the one made as the parts were added, when they are
        those parts (an adapter may return others)."""
        if segments is self.segments and len(self.chain) == len(segments):
            return self.chain
        return chain(segments)

    def _media(self, key: bytes, media: list[Media], text: str | None) -> tuple[int, int, bool]:
        """(tokens of the whole part, of its media, whether a media cost is an estimate), remembered per
        part and rules: a PDF is decoded once, not on every request that repeats it."""
        rules = media_cost.rules_for(self.api, self.model)
        count_text = tokens.estimate if self.estimated else lambda text: tokens.count(text, self.encoding)

        def compute() -> tuple[int, int, bool]:
            cost = media_cost.cost(media, rules, count_text)
            rest = count_text(text) if text else 0
            return rest + cost.tokens, cost.tokens, cost.estimated

        return tokens.remember(
            key
            + b"\x00"
            + rules.key
            + (b"~" if self.estimated else self.encoding.encode())
            + media_cost.upload_key(media),
            compute,
        )


def _same_header(a: dict[str, Any] | None, b: dict[str, Any]) -> bool:
    """Two message headers that encode the same (key order and string values; a number's type is not
    told apart by ==)."""
    return a is b or (
        a is not None
        and len(a) == len(b)
        and all(type(v) is str for v in b.values())
        and list(a.items()) == list(b.items())
    )


def expect(node: Node | None, kind: type | tuple[type, ...], where: str) -> Node | None:
    """The node if it has the expected JSON type, None if absent or null; else a one-line InputError."""
    if node is None or node.value is None:
        return None
    if isinstance(node.value, kind):
        return node
    raise wrong_type(where, kind, node.value)


def wrong_type(where: str, kind: type | tuple[type, ...], value: Any) -> InputError:
    """The error expect raises, for the loops that check a part's type themselves: they build the
    pointer only when it is needed."""
    return InputError(f"{where} must be {_json_type(kind)}, got {_json_type(type(value))}")


def _json_type(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        type(None): "null",
    }
    return " or ".join(dict.fromkeys(names.get(k, k.__name__) for k in kinds))


def message_header(message: dict[str, Any], *content_keys: str) -> dict[str, Any]:
    """A message's fields other than its content parts: role, name, tool_call_id, ..."""
    return {k: v for k, v in message.items() if k not in content_keys and k not in MARKER_KEYS}


class MessageHeaders:
    """message_header for each message of one request, with one dict per role shared by the messages
    that hold nothing but a role and their content (most of them: a million tiny messages then hold
    two headers, not a million)."""

    def __init__(self, *content_keys: str) -> None:
        self.content_keys = content_keys
        self.content_key_set = frozenset(content_keys)
        self.by_role: dict[str, dict[str, Any]] = {}

    def __call__(self, message: dict[str, Any]) -> dict[str, Any]:
        role = message.get("role")
        if len(message) == 2 and type(role) is str and not self.content_key_set.isdisjoint(message):
            return self.of_role(role)
        return message_header(message, *self.content_keys)

    def of_role(self, role: str) -> dict[str, Any]:
        """The header of a plain message (jsonspan.PlainMessage): its role alone."""
        found = self.by_role.get(role)
        return found if found is not None else self.by_role.setdefault(role, {"role": role})


def release(array: Node, i: int) -> None:
    """Drop the parsed tree's hold on element i of an array once its segments hold what they need of it:
    the decoded message and its node go as the segments come, not after the last one (a million
    messages: a third of the peak)."""
    kids = array.kids
    if type(kids) is Elements:
        kids.release(i)
    else:
        array.value[i] = kids[i] = None  # type: ignore[index, call-overload, assignment]  # an array's, emptied


def model_of(body: dict[str, Any]) -> str | None:
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise InputError("'model' must be a string")
    return model


def as_int(value: Any) -> int:
    """A usage count: an integer, else 0 (absent, null or of the wrong JSON type)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def tool_name(value: Any, server_type: bool = False) -> str | None:
    """A tool definition's name in any shape: Anthropic and Gemini `name`, Chat's `function.name`,
    Converse's `toolSpec.name`; with server_type, a server tool without one by its `type`."""
    if not isinstance(value, dict):
        return None
    inner = value.get("function") or value.get("toolSpec")
    name = value.get("name") or (inner.get("name") if isinstance(inner, dict) else None)
    if name is None and server_type:
        name = value.get("type")
    return name if isinstance(name, str) else None
