"""The registry of single-request checks (CHECKS, filled by @check as each family module is imported)
and the helpers every family shares: quoting a value in a message, and whether the model's contract is
known."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

from prefixguard.lint.context import Context
from prefixguard.lint.finding import Hit

Check = Callable[["Context"], Iterator[Hit]]
CHECKS: dict[str, Check] = {}


def check(name: str) -> Callable[[Check], Check]:
    def register(fn: Check) -> Check:
        CHECKS[name] = fn
        return fn

    return register


def quote(text: str, limit: int = 48) -> str:
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return json.dumps(text, ensure_ascii=False)


def model_unknown(ctx: Context) -> bool:
    """No contract for this model: the body does not name it (Bedrock, Gemini: the path does) or, where
    only the listed models cache at all (Bedrock), it is not listed. Its minimum is then unknown."""
    return not ctx.contract.confirmed and (ctx.prompt.model is None or ctx.limits.listed_models_only)
