"""OpenAI GPT-5.6 and later: caching by breakpoints, implicit (one on the latest user or tool message)
or explicit (the marked parts only), chosen per model and request ([openai.breakpoint_caching]). A read
matches exactly at a breakpoint written earlier, or (implicit) at a message end a write ran through: no
fallback to any shorter prefix, no rounding."""

from __future__ import annotations

from collections.abc import Sequence

from prefixguard.contracts.providers import breakpoint_caching
from prefixguard.contracts.tables import BreakpointCaching
from prefixguard.judge.policies.base import CachePolicy, Expected, message_ends
from prefixguard.model.prompt import Prompt

BREAKPOINT_KEY = b"x"  # breakpoint entries apart from the automatic ones of earlier models


class BreakpointModes(CachePolicy):
    """The breakpoint modes of an automatic-caching contract; `mode` says whether a request takes one."""

    minimum: int
    breakpoint_rules: BreakpointCaching | None

    def mode(self, prompt: Prompt) -> str | None:
        """ "explicit" or "implicit" where this request is cached by breakpoints (GPT-5.6+), else None."""
        if not self.breakpoint_rules:
            return None
        if prompt.settings.get("cache_mode") == "explicit":
            return "explicit"
        return "implicit" if breakpoint_caching(self.provider, prompt.model) else None

    def _breakpoints(self, prompt: Prompt, mode: str) -> tuple[list[int], list[int]]:
        """(where this request writes, where it may read) as segment indices. Explicit: the marked parts.
        Implicit: the marked parts and the latest user or tool message write; a read may end on any of
        them or on an earlier message end of the implicit_read_roles (a system prompt's, a question's)
        that an earlier request wrote through. Reads consider the latest read_lookback_breakpoints positions."""
        rules = self.breakpoint_rules
        assert rules is not None  # mode() said this request is cached by breakpoints
        marked = [i for i, s in enumerate(prompt.segments) if s.breakpoint]
        if mode == "explicit":
            writes, reads = marked, marked
        else:
            ends = message_ends(prompt, frozenset(rules.implicit_breakpoint_roles))
            readable = message_ends(prompt, frozenset(rules.implicit_read_roles))
            writes, reads = sorted({*marked, *ends[-1:]}), sorted({*marked, *ends, *readable})
        return writes[-rules.max_writes :], reads[-rules.read_lookback_breakpoints :]

    def _plan_breakpoints(
        self,
        prompt: Prompt,
        mode: str,
        chain: Sequence[bytes],
        cum: list[int],
        owner: tuple[str, str],
        now: float,
        commit: bool,
    ) -> Expected:
        """GPT-5.6 and later: entries are written at breakpoints only (at most max_writes); a read must
        match exactly at a breakpoint written earlier, with no fallback to a shorter prefix and no
        rounding; the TTL is prompt_cache_options.ttl (else the mode's default)."""
        total = prompt.total_tokens
        writes_at, reads_at = self._breakpoints(prompt, mode)
        if not writes_at and not reads_at:
            return Expected(cache_read=0, cache_write=0, uncached=total, reason="no_breakpoint")
        rules = self.breakpoint_rules
        assert rules is not None
        options = prompt.settings.get("prompt_cache_options")
        wanted = options.get("ttl") if isinstance(options, dict) else None
        ttl = rules.ttl_seconds.get(str(wanted), rules.ttl_seconds[rules.default_ttl])
        key = BREAKPOINT_KEY

        def alive(fp: bytes) -> bool:
            last = self._get((*owner, key + fp))
            return last is not None and now - last <= ttl

        hit = next((i for i in reversed(reads_at) if cum[i] >= self.minimum and alive(chain[i])), None)
        read = cum[hit] if hit is not None else 0
        writes = [i for i in writes_at if (hit is None or i > hit) and cum[i] >= self.minimum]
        written = cum[writes[-1]] - read if writes else 0
        if read:
            reason = "hit"
        elif all(cum[i] < self.minimum for i in (*writes_at, *reads_at)):
            reason = "below_minimum"
        elif any(self._get((*owner, key + chain[i])) is not None for i in reads_at):
            reason = "ttl_expired"
        else:
            reason = "cold"
        if commit:
            kept = {*writes, *([hit] if read and hit is not None else [])}
            if mode == "implicit" and writes:  # the places a later read may stop that this write ran through
                kept.update(i for i in reads_at if i < writes[-1])
            for i in kept:
                self._put((*owner, key + chain[i]), now)
        return Expected(cache_read=read, cache_write=written, uncached=total - read - written, reason=reason)
