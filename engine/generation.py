"""One request's generation: the engine's tokens as they come, turned into text (cut at a stop
sequence), SSE frames, and usage from what the radix tree really matched."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from prefixguard.engine import api_anthropic
from prefixguard.engine.api_common import sse
from prefixguard.engine.runner import EngineFailed, Stream
from prefixguard.engine.served import Served
from prefixguard.judge.policies import CachePolicy, Expected
from prefixguard.model.prompt import Prompt
from prefixguard.model.usage import Usage


def usage_of(expected: Expected | None, cached: int, prompt_total: int, output: int) -> Usage:
    """Usage from what the tree really matched. The policy says what this request writes (Anthropic:
    up to its breakpoints); tokens it expected to read but the tree no longer had are written again."""
    read = cached
    writes = dict(expected.write_by_ttl) if expected else {}
    if expected and (expected.cache_read or expected.cache_write) and expected.cache_read > read:
        ttl = expected.ttl or "5m"
        writes[ttl] = writes.get(ttl, 0) + expected.cache_read - read
    w5, w1 = writes.get("5m", 0), writes.get("1h", 0)
    return Usage(
        prompt_total=prompt_total,
        cache_read=read,
        cache_write_5m=w5,
        cache_write_1h=w1,
        uncached=prompt_total - read - w5 - w1,
        output=output,
        reported=True,
    )


class Generation:
    """One request's tokens as they come, turned into text (cut at a stop sequence) and usage."""

    def __init__(
        self,
        served: Served,
        policy: CachePolicy | None,
        prompt: Prompt,
        now: float,
        expected: Expected | None,
        stream: Stream,
        reply: Any,
    ) -> None:
        self.served, self.policy, self.prompt, self.now = served, policy, prompt, now
        self.expected, self.stream, self.reply = expected, stream, reply
        self.stops: tuple[str, ...] = reply.opts.stop
        self.prewarm = reply.opts.max_tokens == 0  # one token is computed, none is returned
        self.detok = served.template.detokenizer()
        self.held = ""  # text that may be the start of a stop sequence: not sent yet
        self.output = 0
        self.finish = "stop"
        self.usage = Usage()

    async def pieces(self) -> AsyncIterator[tuple[bool, str]]:
        """(first, text) per engine step; ends after the last. Frees the request however it ends."""
        first = True
        try:
            async for event in self.stream.events():
                if first and self.policy:
                    # the response has begun: from now on its cache writes are readable (Anthropic)
                    self.policy.commit(self.prompt, self.now)
                ids = [] if self.prewarm else event.token_ids
                self.output += len(ids)
                self.usage = usage_of(self.expected, event.cached_tokens or 0, self.stream.prompt_tokens, self.output)
                text = self.detok.feed(ids)
                if event.finished:
                    text += self.detok.flush()
                    self.finish = event.finish_reason or "stop"
                text, stopped = self._cut(text, event.finished)
                if event.finished or stopped:
                    self.served.metrics.finished(event, self.usage)
                yield first, text
                first = False
                if stopped:
                    return
        finally:
            self.stream.abort()  # a no-op once finished; frees pages and tree locks if the client left

    def _cut(self, text: str, final: bool) -> tuple[str, bool]:
        """The part of text that may be sent now, and whether a stop sequence ended the generation."""
        if not self.stops:
            return text, False
        text = self.held + text
        found = min(((text.find(s), s) for s in self.stops if s in text), default=None)
        if found:
            self.held, self.finish, self.reply.stop_sequence = "", "stop_sequence", found[1]
            return text[: found[0]], True
        keep = 0 if final else max((k for s in self.stops for k in range(1, len(s)) if text.endswith(s[:k])), default=0)
        self.held = text[len(text) - keep :]
        return text[: len(text) - keep], False

    async def text(self) -> str:
        return "".join([text async for _, text in self.pieces()])

    async def frames(self, error: Any) -> AsyncIterator[str]:
        reply = self.reply
        try:
            async for first, text in self.pieces():
                if first:
                    for frame in reply.start(self.usage):
                        yield frame
                if text:
                    yield reply.delta(text)
        except EngineFailed as e:  # the status line is sent: the error goes in the stream, shaped per API
            yield sse(error(500, str(e)), "error" if reply.API == api_anthropic.Messages.API else None)
            return
        for frame in reply.end(self.usage, self.finish):
            yield frame
