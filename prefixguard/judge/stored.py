"""What a provider bills of an earlier answer that a request names or sends back, known from that answer.

A stored context (OpenAI Responses' `previous_response_id`, a Gemini interaction's
`previous_interaction_id`): the provider bills the named response's whole context, the input it answered
and what it generated, before the request's own input, and reads its cache there as if the request had
sent all of it.

A request that names one carries a `stored_context` part (prefixguard/wire/openai_responses.py,
gemini_interactions.py), counted as nothing when it is parsed. Once that response was answered here, the
part is counted as what it left, in the provider's tokens; and that response's tools, instructions and the
part itself are kept as a prompt the cache and the session model have seen, so the request that names it
reads and continues it. What each response left is kept where the fits are (a fleet's shared index, else
here: the latest KEEP), a day.

An answer sent back (prefixguard/wire/sent_back.py: the keys it and the request carry) is billed the reasoning
it generated. Signed (Claude's thinking, Converse's reasoningContent), a summary (Claude 4 and later) or no
text stands for it: an assistant message whose signed blocks were all answered here is counted as the output
those answers were billed, where that is more than its parts. A Gemini 3 thought signature holds its answer's
thoughts (estimated by its size where the wire reads it): counted as that answer billed them. Not sent at all
(Chat has no field for it), a provider that puts it back (`restores_reasoning`: xAI) reads and bills it: it is
counted as a reasoning part before the message's answer, as long as that answer generated it.
"""

from __future__ import annotations

from itertools import takewhile

from prefixguard.judge.index import LocalTable, Table
from prefixguard.judge.policies import CachePolicy
from prefixguard.judge.session import Sessions
from prefixguard.model.fingerprint import chain
from prefixguard.model.prompt import STORED_CONTEXT, Prompt, Segment
from prefixguard.model.usage import ResponseMeta, Usage
from prefixguard.wire import gemini_thoughts, sent_back

KEEP = 4096  # responses remembered here (an id and a count each)
# the APIs whose requests may name one, and where
STATEFUL = {"openai-responses": "/previous_response_id", "gemini-interactions": "/previous_interaction_id"}
STORED_LIFETIME = 86_400.0  # how long a shared index keeps what a response left
REASONING = "thinking"  # the kind of a reasoning part, and of the parts a signed block is read as
SIGNED_KINDS = frozenset((REASONING, "redacted_thinking"))
SIGNED_APIS = frozenset(("anthropic", "bedrock-converse", "gemini"))  # whose answers sign their reasoning


class StoredResponses:
    """left: response id -> the context it left; answers: an answer's key -> the output it was billed ("o",
    on its first key only: an answer counts once) and its reasoning ("r"); in the provider's tokens, in a
    fleet's shared tables, else here."""

    def __init__(self, left: Table | None = None, answers: Table | None = None) -> None:
        self._left: Table = left if left is not None else LocalTable(KEEP)
        self._answers: Table = answers if answers is not None else LocalTable(KEEP)

    def filled(self, prompt: Prompt, restores: bool = False) -> Prompt:
        """The prompt with its stored-context part counted as what the named response left, and the answers
        it sends back counted as billed (their reasoning put back where `restores`); each as it was, where that
        answer was not seen here."""
        segments = self._sent_back(prompt.segments, restores, prompt.model)
        i = next((i for i, seg in enumerate(segments) if seg.kind == STORED_CONTEXT), None)
        if i is not None:
            named = segments[i].value
            self._left.load(lambda: [named], 0.0)
            if left := int(self._left.get(named) or 0):
                segments = list(segments)
                segments[i] = _counted(segments[i], left)
        if segments is prompt.segments:
            return prompt
        return prompt.with_segments(segments, chain=None if len(segments) == len(prompt.segments) else chain(segments))

    def _sent_back(self, segments: list[Segment], restores: bool, model: str | None) -> list[Segment]:
        """The parts with each answer sent back counted as billed (the same list where none is known here)."""
        keyed, estimates = _keyed(segments, restores, model)
        if not keyed:
            return segments
        self._answers.load(lambda: [k + kind for k in keyed.values() for kind in "or"], 0.0)
        out = segments
        for i, estimate in estimates.items():  # a Gemini signature: the thoughts its answer billed
            if (billed := self._answers.get(keyed[i] + "r")) is not None:
                out = list(out) if out is segments else out
                out[i] = _counted(segments[i], int(billed) - estimate)
        messages: dict[int, list[int]] = {}  # each assistant message that carries a key -> its parts
        sent = {segments[i].message_index for i in keyed if i not in estimates}
        for i, seg in enumerate(segments):
            if seg.message_index is not None and seg.message_index in sent and seg.role == "assistant":
                messages.setdefault(seg.message_index, []).append(i)
        for parts in reversed(messages.values()):  # from the last: an inserted part moves none before it
            signed = [i for i in parts if segments[i].kind in SIGNED_KINDS and i in keyed]
            if signed:  # counted as generated: the output its answers were billed, where more than its parts
                billed = [self._answers.get(keyed[i] + "o") for i in signed]
                more = int(sum(b or 0 for b in billed)) - sum(segments[i].tokens for i in parts)
                if all(b is not None for b in billed) and more > 0:
                    out = list(out) if out is segments else out
                    for i in parts:
                        out[i] = _counted(segments[i], more if i == signed[0] else 0, whole=True)
                continue
            called = [keyed[i] for i in parts if i in keyed]  # its reasoning put back, where its answer had one
            reasoning = int(self._answers.get(called[0] + "r") or 0)
            if reasoning and not any(segments[i].kind == REASONING for i in parts):  # sent back, even empty: none
                out = list(out) if out is segments else out
                out.insert(parts[0], _restored(segments[parts[0]], called[0], reasoning))
        return out

    def answered(
        self,
        said: ResponseMeta,
        prompt: Prompt,
        usage: Usage,
        policy: CachePolicy,
        now: float,
        tenant: str = "",
        sessions: Sessions | None = None,
        item: object = None,
    ) -> None:
        """A request (`prompt`, in the provider's tokens) was answered as `response_id`: what it left is its
        billed prompt past its tools and instructions (its input, and any context it named), and its output
        (without its reasoning where the provider keeps none: Gemini's). That context, after the same tools
        and instructions, is what a later request naming the id holds: cached, and continued. What it
        generated is kept by the keys it carries."""
        keys = tuple(dict.fromkeys(said.keys))  # a stream may tell a signature twice
        several = len(keys) > 1 and prompt.api == "gemini"  # its thoughts' count tells no signature's share
        wanted = prompt.api in SIGNED_APIS or policy.contract.restores_reasoning
        if keys and usage.output and wanted and not several:
            self._answers.load(list, now)
            for n, key in enumerate(keys):
                self._answers.put(key + "o", float(usage.output if n == 0 else 0), now)
                self._answers.put(key + "r", float(usage.reasoning), now)
            self._answers.save()
        response_id = said.id
        if not response_id or not usage.prompt_total or prompt.api not in STATEFUL:
            return
        head = list(takewhile(_before_input, prompt.segments))
        kept = usage.output if policy.contract.stored_reasoning else usage.output - usage.reasoning
        left = max(0, usage.prompt_total - sum(s.tokens for s in head)) + kept
        self._left.load(list, now)
        self._left.put(response_id, float(left), now)
        self._left.save()
        part = Segment("messages", STATEFUL[prompt.api], STORED_CONTEXT, None, response_id, 0, 0, None)
        segments = [*head, _counted(part, left)]
        context = prompt.with_segments(segments, chain=chain(segments))
        policy.commit(context, now, tenant)
        if sessions is not None:
            sessions.add(context, item, tenant, now)


def _before_input(seg: Segment) -> bool:
    """A part of what a request sends before any context or input: tools, output format, instructions."""
    return seg.kind != STORED_CONTEXT and not seg.pointer.startswith("/input")


def _counted(part: Segment, left: int, whole: bool = False) -> Segment:
    """The part counted as `left` tokens more, in the provider's tokens already (a scale leaves them); with
    `whole`, all of the part is (as counted)."""
    return Segment(
        part.level,
        part.pointer,
        part.kind,
        part.role,
        part.value,
        part.start,
        part.end,
        part.key,
        part.tokens + left,
        part.breakpoint,
        part.message_index,
        part.header,
        (part.tokens if whole else part.media_tokens) + left,
        False,
    )


def _keyed(segments: list[Segment], restores: bool, model: str | None) -> tuple[dict[int, str], dict[int, int]]:
    """(part -> the key of the answer it sends back, a Gemini part -> its signature's thoughts as estimated): a
    signed reasoning block's signature, a tool call's id where the provider restores reasoning, a Gemini
    signature whose thoughts the part holds by its size."""
    keyed: dict[int, str] = {}
    estimates: dict[int, int] = {}
    for i, seg in enumerate(segments):
        mark = sent_back.signature(seg.value) if seg.kind in SIGNED_KINDS else None
        if mark is None and restores and seg.kind == "tool_use" and isinstance(seg.value, dict):
            mark = seg.value.get("id") if isinstance(seg.value.get("id"), str) else None
        if mark is None and seg.estimated and (sign := sent_back.thought_signature(seg.value)):
            estimate = gemini_thoughts.held(sign, model)
            if estimate and seg.media_tokens >= estimate:
                mark, estimates[i] = sign, estimate
        if mark:
            keyed[i] = sent_back.key(mark)
    return keyed, estimates


def _restored(first: Segment, key: str, reasoning: int) -> Segment:
    """The reasoning a provider puts back before an answer sent back without it: a part of its own (the
    message's first), in the provider's tokens."""
    return Segment(
        level=first.level,
        pointer=f"/messages/{first.message_index}",
        kind=REASONING,
        role="assistant",
        value=key,
        start=first.start,
        end=first.start,
        key=None,
        tokens=reasoning,
        message_index=first.message_index,
        media_tokens=reasoning,  # a scale leaves them
    )
