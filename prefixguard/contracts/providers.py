"""Provider caching contracts read from rules/providers.toml: the one place numbers come from."""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from typing import Any, NamedTuple

from prefixguard.contracts import ruleset
from prefixguard.contracts.prices import from_package
from prefixguard.contracts.ruleset import same_family, version
from prefixguard.contracts.tables import COMPATIBLE, BreakpointCaching, Contract, EncryptedItem, ModelRow, providers
from prefixguard.utils.errors import InputError

__all__ = [
    "COMPATIBLE",
    "Contract",
    "ModelContract",
    "model_contract",
    "provider_contract",
    "provider_for",
    "providers",
]


def provider_for(api: str, model: str | None = None, host: str | None = None) -> str:
    """The contract that applies to a request: by the upstream host where it names a provider (api.groq.com),
    then a gateway's `maker/model` (OpenRouter) takes the maker's contract whatever the shape it came in,
    then the provider that sells the model on this API shape, then the shape's own provider ('anthropic',
    'openai', ...; an OpenAI-shaped request to a model no provider sells: 'compatible')."""
    tables = providers()
    bare_host = _host(host)
    if bare_host:
        for name, table in tables.items():
            if any(_names(h, bare_host) for h in table.hosts):
                return name
    cloud = cloud_of(model)
    if cloud:  # a cloud's own id for another maker's model, in that maker's shape: the cloud's contract
        return cloud
    # A gateway's ids are lowercase (OpenRouter: qwen/qwen3-coder); one with capitals is a model repository's
    # name (Hugging Face: Qwen/Qwen3-0.6B, mistralai/Mistral-7B-Instruct-v0.3), served by whoever runs it.
    maker = model.partition("/")[0] if model and "/" in model and model == model.lower() else None
    if model and maker:
        for name, table in tables.items():
            if maker in table.gateway_makers and not any(
                same_family(model, excluded) for excluded in table.gateway_excluded
            ):
                return name
    if model and "/" not in model:  # a provider's own API names its models without an owner
        for name, table in tables.items():
            if api in table.apis and table.hosts and not table.host_only and _known(table, model):
                return name
    for name, table in tables.items():  # the shape's own provider comes first in the file
        if api in table.apis:
            if table.unlisted_models and model and not _known(table, model):
                return table.unlisted_models  # an OpenAI-shaped request to a model OpenAI does not sell
            return name
    return COMPATIBLE


def cloud_of(model: str | None) -> str | None:
    """The cloud whose own id this is for a model it serves in its maker's OpenAI Chat shape (Bedrock's
    openai.gpt-oss-120b-1:0, us.openai....: the first segment, or the one after a region qualifier, is one of
    its table's invoke_chat_makers); None for any other id."""
    if not model or "." not in model or "/" in model:
        return None
    clouds = _clouds()
    return next((clouds[s] for s in model.split(".")[:2] if s in clouds), None)


@cache
def _clouds() -> dict[str, str]:
    """Each maker of a table's invoke_chat_makers -> that table (the cloud)."""
    return {maker: name for name, t in providers().items() for maker in t.invoke_chat_makers}


def _names(pattern: str, host: str) -> bool:
    """Whether a table's host names this one: itself or a subdomain of it; a `*` stands for one label
    (bedrock-mantle.*.api.aws: a region)."""
    if "*" in pattern:
        labels, wanted = host.split("."), pattern.split(".")
        return len(labels) == len(wanted) and all(w in ("*", h) for w, h in zip(wanted, labels, strict=True))
    return host == pattern or host.endswith("." + pattern)


def _host(upstream: str | None) -> str:
    """The host of an upstream ("https://api.groq.com:443" or "api.groq.com"), lowercase; "" when none."""
    if not upstream:
        return ""
    rest = upstream.partition("://")[2] or upstream
    return rest.split("/", 1)[0].rpartition("@")[2].split(":", 1)[0].lower()


def lint_family(name: str) -> str:
    """The contract whose lint rules apply to a provider's requests (its table's `lint_as`, else its own)."""
    return providers()[name].lint_as


def sold(model: str | None) -> bool:
    """Whether a provider's table knows the model (by family: claude-sonnet-4-5-2025..., gpt-4o-mini)."""
    return seller(model) is not None


def seller(model: str | None) -> Contract | None:
    """The first contract whose table knows the model (by family), None when none does."""
    return next((t for t in providers().values() if model and not t.host_only and _known(t, model)), None)


def _known(table: Contract, model: str) -> bool:
    """Whether the table lists the model's family, or the model is a later version of a versioned family it
    lists (gpt-6-astra after gpt-5.6): a maker's new model is its own before any table here names it."""
    if any(same_family(model, m.prefix) for m in table.models):
        return True
    have = version(model)
    listed = [v[1] for m in table.models if have and (v := version(m.prefix)) and v[0] == have[0]]
    return bool(listed) and have is not None and have[1] > max(listed)


@cache
def breakpoint_caching(name: str, model: str | None) -> BreakpointCaching | None:
    """The provider's breakpoint-caching rules where this model caches by them (OpenAI GPT-5.6 and later:
    [openai.breakpoint_caching], `since` that family version), else None (the table's own rule)."""
    rules = providers()[name].breakpoint_caching
    if not rules or not model:
        return None
    have, since = version(model), version(rules.since)
    return rules if have and since and have[0] == since[0] and have[1] >= since[1] else None


class Compatible(NamedTuple):
    """The settings of the `compatible` contract (a server one runs): what its reads can be."""

    block_tokens: int = 1  # reads are whole blocks (vLLM blocks, SGLang pages) of this many tokens
    min_tokens: int = 0  # no read below this many tokens
    prefix_caching: bool = True  # False: the server reuses no prefix (a hybrid Mamba / sliding-window model)
    source: str = "rules/providers.toml"  # where the settings came from (a flag, pyproject, a server's /metrics)


def compatible_settings() -> Compatible:
    table = providers()[COMPATIBLE]
    return Compatible(
        block_tokens=table.block_tokens,
        min_tokens=table.min_cacheable_tokens,
        prefix_caching=table.prefix_caching,
        source=table.settings_source,
    )


def server_defaults(server: str) -> Compatible:
    """The defaults of a named server (rules/providers.toml [compatible.servers.NAME]); InputError when unknown."""
    servers = providers()[COMPATIBLE].servers
    if server not in servers:
        raise InputError(f"unknown server {server!r} (one of {', '.join(sorted(servers))})")
    row = servers[server]
    return Compatible(
        block_tokens=row.block_tokens,
        min_tokens=row.min_tokens,
        prefix_caching=row.prefix_caching,
        source=f"{server} defaults ({row.source}, read {row.read})",
    )


@cache
def default_compatible() -> Compatible:
    """The compatible contract's settings as rules/providers.toml gives them (before any configure)."""
    return compatible_settings()


def configure_compatible(settings: Compatible) -> None:
    """Judge `compatible` requests by these settings from now on, in this process (a command's flags or
    [tool.prefixguard] keys). Policies made before keep the settings they were made with."""
    if settings.block_tokens < 1 or settings.min_tokens < 0:
        raise InputError(
            f"block size must be at least 1 and minimum at least 0, got {settings.block_tokens} "
            f"and {settings.min_tokens}"
        )
    default_compatible()  # read before the first change
    table = providers()[COMPATIBLE]
    providers()[COMPATIBLE] = replace(
        table,
        block_tokens=settings.block_tokens,
        token_step=settings.block_tokens,
        min_cacheable_tokens=settings.min_tokens,
        prefix_caching=settings.prefix_caching,
        settings_source=settings.source,
        default_model=replace(table.default_model, min_cacheable_tokens=settings.min_tokens),
    )
    for memo in (provider_contract, model_contract, invalidated_levels):
        memo.cache_clear()


class ModelContract(NamedTuple):
    provider: str
    model: str | None
    min_cacheable_tokens: int
    input_per_mtok: float
    output_per_mtok: float
    read_multiplier: float  # price of a cached token over the base input price
    write_multiplier: dict[str, float]  # by TTL ("5m", "1h"); OpenAI: {"default": x}
    confirmed: bool
    price_source: str = "rules/providers.toml"  # where the prices come from (prefixguard/contracts/prices.py)
    price_date: str = ""  # that source's date: printed with every cost
    # whether the provider caches this model's prompts at all (OpenAI: gpt-4o and later; Groq: four models)
    prefix_caching: bool = True
    token_step: int = 1  # a read ends on a whole step of this many tokens

    @property
    def prices(self) -> str:
        """'genai-prices 0.2.3, 2026-10-19': the source and date a printed cost names."""
        return f"{self.price_source}, {self.price_date}" if self.price_date else self.price_source

    def reprefill_cost(self, tokens: int, written_as: str | None) -> float:
        """What `tokens` prefilled again cost over reading them from cache: paid as written with that TTL
        ("5m", "1h"; "default": automatic caching) or, with None, as uncached input."""
        paid = (
            self.cost(write_1h=tokens)
            if written_as == "1h"
            else self.cost(write_5m=tokens)
            if written_as
            else self.cost(uncached=tokens)
        )
        return paid - self.cost(cache_read=tokens)

    def cost(
        self, uncached: int = 0, cache_read: int = 0, write_5m: int = 0, write_1h: int = 0, output: int = 0
    ) -> float:
        """USD for one request's tokens by class."""
        w = self.write_multiplier
        per_token = self.input_per_mtok / 1e6
        return (
            uncached * per_token
            + cache_read * per_token * self.read_multiplier
            + write_5m * per_token * w.get("5m", w.get("default", 1.0))
            + write_1h * per_token * w.get("1h", w.get("default", 1.0))
            + output * self.output_per_mtok / 1e6
        )


@cache
def model_contract(api: str, model: str | None) -> ModelContract:
    return provider_contract(provider_for(api, model), model)


def _model_row(table: Contract, model: str | None) -> ModelRow:
    """A provider table's default_model row with the longest matching model row over it."""
    row = table.default_model
    best = max(
        (m for m in table.models if model and same_family(model, m.prefix)), key=lambda m: len(m.prefix), default=None
    )
    return (
        replace(best, confirmed=True if best.confirmed is None else best.confirmed).over(row)
        if best is not None
        else row
    )


@cache
def invalidated_levels(name: str, model: str | None) -> dict[str, str]:
    """What a change of each cache-keying setting invalidates (the first level it breaks): the
    provider's table, with the model's own row over it where its family keys the cache otherwise."""
    table = providers()[name]
    return {**table.invalidates, **(_model_row(table, model).invalidates or {})}


def thought_signature(name: str, model: str | None) -> EncryptedItem | None:
    """How the model bills a thought signature sent back (its row's `thought_signature`); None: not at all."""
    return _model_row(providers()[name], model).thought_signature


@cache
def provider_contract(name: str, model: str | None) -> ModelContract:
    """A model's contract in one provider's table (a policy forced to a provider asks this)."""
    table = providers()[name]
    row = _model_row(table, model)
    if table.read_multiplier is not None:
        read = table.read_multiplier
        writes = dict(table.write_multiplier or {})
    else:
        read = 1.0 - (row.cached_discount or 0.0)
        by_breakpoints = breakpoint_caching(name, model)  # GPT-5.6+: writes billed (cache_write_tokens)
        writes = {
            "default": by_breakpoints.write_multiplier
            if by_breakpoints
            else 1.0
            if row.write_multiplier is None
            else row.write_multiplier
        }
    minimum = table.min_cacheable_tokens if row.min_cacheable_tokens is None else row.min_cacheable_tokens
    caches = row.prefix_caching is not False
    step = max(1, row.token_step or table.token_step)
    live = from_package(table.prices_id, model)  # the maintained price table first; this file's is the fallback
    if live is not None:
        read = live.cache_read / live.input if live.cache_read is not None else read
        if live.cache_write_1h is not None:
            writes = {**writes, "1h": live.cache_write_1h / live.input}
        if live.cache_write_5m is not None:
            writes = {**writes, "5m" if "5m" in writes else "default": live.cache_write_5m / live.input}
        return ModelContract(
            provider=name,
            model=model,
            min_cacheable_tokens=minimum,
            input_per_mtok=live.input,
            output_per_mtok=live.output,
            read_multiplier=read,
            write_multiplier=writes,
            confirmed=True,
            price_source=live.source,
            price_date=live.date,
            prefix_caching=caches,
            token_step=step,
        )
    return ModelContract(
        provider=name,
        model=model,
        min_cacheable_tokens=minimum,
        input_per_mtok=row.input_per_mtok or 0.0,
        output_per_mtok=row.output_per_mtok or 0.0,
        read_multiplier=read,
        write_multiplier=writes,
        confirmed=row.confirmed is not False,
        price_source="rules/providers.toml",
        price_date=table.read,
        prefix_caching=caches,
        token_step=step,
    )


@cache
def equivalences() -> dict[str, Any]:
    """Bytes a provider renders alike (rules/equivalences.toml): name -> {apis, what, evidence, ...}."""
    return ruleset.load("equivalences.toml")


@cache
def verdict_rules() -> dict[str, Any]:
    """How verdicts judge a reported read against the prediction (rules/verdict.toml)."""
    return ruleset.load("verdict.toml")
