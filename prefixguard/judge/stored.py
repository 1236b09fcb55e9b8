"""A provider's stored context (OpenAI Responses' `previous_response_id`, a Gemini interaction's
`previous_interaction_id`): the provider bills the named response's whole context, the input it answered
and what it generated, before the request's own input, and reads its cache there as if the request had
sent all of it.

A request that names one carries a `stored_context` part (prefixguard/wire/openai_responses.py,
gemini_interactions.py), counted as nothing when it is parsed. Once that response was answered here, the
part is counted as what it left, in the provider's tokens; and that response's tools, instructions and the
part itself are kept as a prompt the cache and the session model have seen, so the request that names it
reads and continues it. What each response left is kept where the fits are (a fleet's shared index, else
here: the latest KEEP), a day.
"""

from __future__ import annotations

from itertools import takewhile

from prefixguard.judge.index import LocalTable, Table
from prefixguard.judge.policies import CachePolicy
from prefixguard.judge.session import Sessions
from prefixguard.model.fingerprint import chain
from prefixguard.model.prompt import STORED_CONTEXT, Prompt, Segment
from prefixguard.model.usage import Usage

KEEP = 4096  # responses remembered here (an id and a count each)
# the APIs whose requests may name one, and where
STATEFUL = {"openai-responses": "/previous_response_id", "gemini-interactions": "/previous_interaction_id"}
STORED_LIFETIME = 86_400.0  # how long a shared index keeps what a response left


class StoredResponses:
    """left: response id -> the context it left, in the provider's tokens (a fleet's shared table, else here)."""

    def __init__(self, left: Table | None = None) -> None:
        self._left: Table = left if left is not None else LocalTable(KEEP)

    def filled(self, prompt: Prompt) -> Prompt:
        """The prompt with its stored-context part counted as what the named response left (as it was,
        where that response was not answered here)."""
        i = next((i for i, seg in enumerate(prompt.segments) if seg.kind == STORED_CONTEXT), None)
        if i is None:
            return prompt
        named = prompt.segments[i].value
        self._left.load(lambda: [named], 0.0)
        left = int(self._left.get(named) or 0)
        if not left:
            return prompt
        segments = list(prompt.segments)
        segments[i] = _counted(segments[i], left)
        return prompt.with_segments(segments)

    def answered(
        self,
        response_id: str | None,
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
        and instructions, is what a later request naming the id holds: cached, and continued."""
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


def _counted(part: Segment, left: int) -> Segment:
    """The part counted as `left` tokens more, in the provider's tokens already (a scale leaves them)."""
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
        part.media_tokens + left,
        False,
    )
