"""A policy per contract of rules/providers.toml, chosen by its `policy` kind, and one state per
contract as the proxy, the engine server and replay keep them. Adding a provider is adding its table."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from prefixguard.contracts.providers import provider_for
from prefixguard.contracts.tables import BREAKPOINTS, COMPATIBLE, providers
from prefixguard.judge.index import Table
from prefixguard.judge.policies.anthropic import AnthropicPolicy
from prefixguard.judge.policies.base import CachePolicy
from prefixguard.judge.policies.prefix import PrefixPolicy

RADIX = "radix"  # the compatible contract's policy name: a server one runs, judged like a radix tree


def _factories() -> dict[str, Callable[[Table | None], CachePolicy]]:
    """A policy per contract of rules/providers.toml (its `policy` kind: anthropic-like breakpoints, else a
    prefix rule), "radix" for the compatible one: adding a provider is adding its table."""
    out: dict[str, Callable[[Table | None], CachePolicy]] = {}
    for name, table in providers().items():
        cls: type[AnthropicPolicy | PrefixPolicy] = AnthropicPolicy if table.policy == BREAKPOINTS else PrefixPolicy
        out[RADIX if name == COMPATIBLE else name] = partial(cls, name)
    return out


POLICIES = _factories()


def make_policy(name: str, entries: Table | None = None) -> CachePolicy:
    """A fresh policy: RADIX (the compatible contract: a server one runs) or a provider's ("anthropic",
    "openai", "deepseek", ...); its entries in `entries` (a fleet's shared index), else in this process."""
    try:
        return POLICIES[name](entries)
    except KeyError:
        raise ValueError(f"unknown cache policy {name!r} (one of {', '.join(POLICIES)})") from None


def policy_name(api: str, model: str | None, host: str | None = None) -> str:
    """The policy of the provider that serves this API shape and model (at this upstream host, if known)."""
    provider = provider_for(api, model, host)
    return provider if provider in POLICIES else RADIX


class Policies:
    """One policy state per contract, made on first use: what the proxy, the engine server and replay
    each keep. `chosen` auto (or None) judges a request by its own provider's contract."""

    def __init__(self, table: Callable[[str, float], Table] | None = None) -> None:
        self._made: dict[str, CachePolicy] = {}
        self._table = table  # a fleet's shared table for a policy's entries (name, lifetime), else in-process

    def get(
        self, chosen: str | None, api: str, model: str | None, radix: bool = True, host: str | None = None
    ) -> CachePolicy | None:
        """The state for this request; with radix=False, None for the radix policy (the caller keeps a
        real radix tree instead). host: the upstream's, where known (a provider known by its host only)."""
        name = policy_name(api, model, host) if chosen in (None, "auto") else chosen
        if name == RADIX and not radix:
            return None
        if name not in self._made:
            # kept past their end by the contract's longest TTL: the margin a shared table needs
            entries = self._table(f"p:{name}", make_policy(name).longest_ttl) if self._table else None
            self._made[name] = make_policy(name, entries)
        return self._made[name]
