"""Provider usage normalized to one shape: what was read from cache, written to it, and not cached."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple


class Usage(NamedTuple):
    prompt_total: int = 0  # all prompt tokens: cache_read + cache_write + uncached
    cache_read: int = 0
    cache_write_5m: int = 0
    cache_write_1h: int = 0
    uncached: int = 0  # neither read nor written
    output: int = 0
    reported: bool = False  # False when the provider sent no cache field at all: never a miss
    reasoning: int = 0  # of the output, the reasoning tokens (generated first; a client may not send them back)
    # tools the provider ran itself between passes of the model (web search, code execution): the counts sum
    # server_calls + 1 passes, each over the prompt so far
    server_calls: int = 0
    server_added: int = 0  # the tokens their results added to the passes after them (our estimate)
    first_pass: int = 0  # of several passes, the first's prompt: the one the request sent

    @classmethod
    def of_export(cls, usage: Mapping[str, Any] | None) -> Usage:
        """A usage as a capture row's export shape holds it: absent or null counts are 0."""
        counts: dict[str, Any] = {k: v or 0 for k, v in (usage or {}).items() if k in cls._fields}
        return cls(**counts)

    @property
    def cache_write(self) -> int:
        return self.cache_write_5m + self.cache_write_1h

    @property
    def passes(self) -> int:
        return self.server_calls + 1

    def with_passes(self, calls: int, results: Sequence[int]) -> Usage:
        """This usage with the tools the provider ran between passes: how many, what each pass added (our
        estimates, in order), and the first pass's prompt. Each pass's prompt is the one before it and what the
        last pass added, so the prompt total is the passes times the first pass's prompt, plus each addition
        times the passes after it: where the first pass's own counts are known (a stream's first event), that
        sets what the passes added in the provider's tokens; else our estimates set the first pass."""
        if calls <= 0:
            return self._replace(first_pass=0)  # one pass: no first of several
        passes = calls + 1
        after = sum(max(0, passes - i) * tokens for i, tokens in enumerate(results, 1))
        if self.first_pass:
            billed = max(0, self.prompt_total - passes * self.first_pass)
            added = round(sum(results) * billed / after) if after else 0
            return self._replace(server_calls=calls, server_added=added)
        first = max(0, (self.prompt_total - after) // passes)
        return self._replace(server_calls=calls, server_added=sum(results), first_pass=first)

    @property
    def written_as(self) -> str | None:
        """The TTL this request paid its cache writes at ("1h" when only those), None when it wrote none."""
        if self.cache_write_1h and not self.cache_write_5m:
            return "1h"
        return "5m" if self.cache_write else None


USAGE_FIELDS = Usage._fields  # the keys of a usage in the export shape, in order


MAX_META = 256  # a response's own text, kept in every row: an upstream gets no more room than this per value
MAX_KEYS = 64  # what marks an answer (ResponseMeta.keys): its reasoning blocks and tool calls, the first kept


_CALL_REASONS = frozenset(("tool_calls", "function_call", "tool_use", "requires_action"))


class ResponseMeta(NamedTuple):
    """What a response says of itself (OTel's gen_ai.response.*): its id, the model that answered (may name
    a snapshot of the model asked for), why each choice stopped, and when it was made (unix seconds, where
    the API says: OpenAI's `created`, the Responses API's `created_at`), and the keys of what a later request
    that sends it back carries of it: its reasoning's signatures, its tool calls' ids (wire/sent_back.py)."""

    id: str | None = None
    model: str | None = None
    finish_reasons: tuple[str, ...] = ()
    created: float | None = None
    keys: tuple[str, ...] = ()

    @property
    def made_calls(self) -> bool:
        """The answer ended in tool calls (Chat's tool_calls and its older function_call, the Messages API's
        and Converse's tool_use, a Gemini interaction's requires_action)."""
        return any(r in _CALL_REASONS for r in self.finish_reasons)

    def merged(
        self,
        id: object = None,
        model: object = None,
        reasons: tuple[object, ...] = (),
        created: object = None,
        keys: tuple[str, ...] = (),
    ) -> ResponseMeta:
        """This with what one more object (a whole body, or a stream's event) says; values of another type
        ignored, and the first time said kept."""
        said = tuple(r[:MAX_META] for r in reasons if isinstance(r, str) and r)[:MAX_META]
        made = created if isinstance(created, int | float) and not isinstance(created, bool) and created > 0 else None
        return ResponseMeta(
            id=id[:MAX_META] if isinstance(id, str) and id else self.id,
            model=model[:MAX_META] if isinstance(model, str) and model else self.model,
            finish_reasons=said or self.finish_reasons,
            created=self.created if self.created is not None else made,
            keys=(self.keys + keys)[:MAX_KEYS] if keys else self.keys,
        )


NO_META = ResponseMeta()  # a response that said nothing of itself
