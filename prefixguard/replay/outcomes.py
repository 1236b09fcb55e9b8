"""What every target builds for a request: its Outcome, with the request's own fields, priced at the
model's prices."""

from __future__ import annotations

from typing import Any

from prefixguard.contracts.providers import model_contract
from prefixguard.replay.results import Outcome
from prefixguard.replay.sources import Request

DEFAULT_PAGE_SIZE = 16  # the engine's default page: tokens per KV page


def priced(o: Outcome, api: str, model: str | None, write_1h: int = 0) -> Outcome:
    """Cost at the model's prices (rules/providers.toml), and what the same tokens cost with no cache."""
    contract = model_contract(api, model)
    o.cost_usd = contract.cost(
        uncached=o.uncached,
        cache_read=o.cache_read,
        write_5m=o.cache_write - write_1h,
        write_1h=write_1h,
        output=o.output_tokens,
    )
    o.full_cost_usd = contract.cost(uncached=o.prompt_tokens, output=o.output_tokens)
    o.prices = contract.prices
    return o


def outcome(req: Request, prompt_tokens: int, cached: int, **kw: Any) -> Outcome:
    reported = req.reported if req.reported is not None and req.reported.reported else None  # no cache field: unknown
    return Outcome(
        index=req.index,
        ts=req.ts,
        ref=req.ref,
        session=req.session,
        model=kw.pop("model", req.model),
        prompt_tokens=prompt_tokens,
        cache_read=cached,
        reported_cache_read=reported.cache_read if reported else None,
        reported_prompt=reported.prompt_total if reported else None,
        **kw,
    )
