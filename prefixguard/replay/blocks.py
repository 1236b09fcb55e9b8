"""Mooncake traces: requests as hashes of 512-token blocks, with no text. What a provider policy judges
(a Prompt of one segment per block), the API a trace is priced as, and the token ids the engine sees."""

from __future__ import annotations

from prefixguard.contracts.providers import provider_for, providers, seller
from prefixguard.model.fingerprint import chain
from prefixguard.model.prompt import Prompt, Segment
from prefixguard.replay.sources import MOONCAKE_BLOCK_TOKENS, Request
from prefixguard.wire import openai_chat


def block_prompt(req: Request, api: str, model: str | None) -> Prompt:
    """A Mooncake request as a Prompt of one segment per 512-token block, for the provider policies;
    the automatic breakpoint of a contract that caches at breakpoints on its last block."""
    segments, left = [], req.input_tokens or 0
    for i, block in enumerate(req.blocks or ()):
        n = min(MOONCAKE_BLOCK_TOKENS, left)
        left -= n
        segments.append(
            Segment("messages", f"/hash_ids/{i}", "text", "user", block, 0, 0, str(block).encode(), n, message_index=0)
        )
    contract = providers()[provider_for(api, model)]
    return Prompt(
        api,
        model,
        segments,
        auto_breakpoint=contract.default_ttl if contract.breakpointed else None,
        chain=chain(segments),
    )


def blocks_api(policy: str, model: str | None) -> str:
    """The API a text-less trace is priced and judged as: the policy's contract's, else that of the
    provider that sells the model, else OpenAI Chat's for a model no one sells (a server one runs),
    else none (no model: no price)."""
    contract = providers().get(policy) or seller(model)
    if contract is not None and contract.apis:
        return contract.apis[0]
    return openai_chat.API if model else ""


def block_ids(blocks: list[int], length: int, vocab_size: int = 100_352) -> list[int]:
    """Token ids standing for Mooncake blocks: equal blocks give equal ids, different blocks differ in
    their first two ids (so the engine's tree shares exactly the prefixes the trace shares)."""
    base = _prime_below(min(vocab_size, 99_992))  # below cl100k_base's ordinary ids and the vocabulary
    ids: list[int] = []
    for h in blocks:
        ids += [
            h % base,
            h // base % base,
            *((h * MOONCAKE_BLOCK_TOKENS + j) % base for j in range(2, MOONCAKE_BLOCK_TOKENS)),
        ]
    return ids[:length]


def _prime_below(n: int) -> int:
    """The largest prime below n (n > 2)."""
    p = n - 1
    while any(p % d == 0 for d in range(2, int(p**0.5) + 1)):
        p -= 1
    return p
