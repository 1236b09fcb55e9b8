"""Where a replay sends its requests: `sim` (the radix tree or a provider policy, no model), `engine`
(the in-process engine: real prefill and decode), or an HTTP server (OpenAI or Anthropic shaped).

Every target turns a Request into an Outcome. Token ids come from the engine's chat template, so the
sim's tree sees exactly the prompts the engine and its server would see.
"""

from __future__ import annotations

from typing import Protocol

from prefixguard.replay.engine_target import EngineTarget
from prefixguard.replay.http_target import HttpTarget
from prefixguard.replay.outcomes import DEFAULT_PAGE_SIZE
from prefixguard.replay.rendering import NO_BODIES, parsed, prompt_of
from prefixguard.replay.results import Outcome
from prefixguard.replay.sim_target import SimTarget
from prefixguard.replay.sources import Request

# What callers (the CLI, tests, benches) import from here: each lives in the module that has its job.
__all__ = ["DEFAULT_PAGE_SIZE", "NO_BODIES", "EngineTarget", "HttpTarget", "SimTarget", "Target", "parsed", "prompt_of"]


class Target(Protocol):
    realtime: bool  # True: requests are sent at the trace's pace; False: time is only a number
    needs_bodies: bool  # True: a trace of Mooncake blocks (no request bodies) cannot be sent to it

    def run(self, req: Request, now: float) -> Outcome: ...
