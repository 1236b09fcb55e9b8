"""Provider caching contracts read from rules/providers.toml: the one place numbers come from."""
from __future__ import annotations

from functools import cache
from typing import Any, NamedTuple

from prefixguard import ruleset
from prefixguard.prices import from_package


@cache
def providers() -> dict[str, Any]:
    return ruleset.load("providers.toml")


def provider_for(api: str, model: str | None = None) -> str:
    """The contract that applies to an API shape: 'anthropic', 'openai', or 'compatible'. A gateway's
    model name `maker/model` (OpenRouter) takes the maker's contract whatever the shape it came in."""
    maker = model.partition("/")[0] if model and "/" in model else None
    for name, table in providers().items():
        if maker in table.get("gateway_makers", ()):
            return name
    for name, table in providers().items():
        if api in table.get("apis", ()):
            if name == "openai" and model and not _known(table, model):
                return "compatible"  # an OpenAI-shaped request to a model OpenAI does not sell
            return name
    return "compatible"


def sold(model: str | None) -> bool:
    """Whether a provider's table knows the model (by family: claude-sonnet-4-5-2025..., gpt-4o-mini)."""
    return bool(model) and any(_known(t, model) for t in providers().values() if isinstance(t, dict))


def _known(table: dict[str, Any], model: str) -> bool:
    return any(_same_family(model, m["prefix"]) for m in table.get("models", ()))


def _same_family(model: str, prefix: str) -> bool:
    """Whether a model id falls under a table's prefix; a gateway's `maker/` is dropped, and dots and
    dashes in version numbers match each other (claude-sonnet-4.6 is claude-sonnet-4-6). Bedrock's
    region and maker qualifiers (us.anthropic.claude-..., amazon.nova-...) are dropped too."""
    bare, want = model.rpartition("/")[2], prefix.replace(".", "-")
    return any(name.replace(".", "-").startswith(want) for name in (bare, *_unqualified(bare)))


def _unqualified(model: str) -> list[str]:
    """The id after each leading dotted qualifier: us.anthropic.claude-x -> anthropic.claude-x, claude-x."""
    parts = model.split(".")
    return [".".join(parts[k:]) for k in range(1, min(len(parts), 3))]


class ModelContract(NamedTuple):
    provider: str
    model: str | None
    min_cacheable_tokens: int
    input_per_mtok: float
    output_per_mtok: float
    read_multiplier: float            # price of a cached token over the base input price
    write_multiplier: dict[str, float]  # by TTL ("5m", "1h"); OpenAI: {"default": x}
    confirmed: bool
    price_source: str = "rules/providers.toml"   # where the prices come from (prefixguard/prices.py)
    price_date: str = ""                         # that source's date: printed with every cost

    @property
    def prices(self) -> str:
        """'genai-prices 0.2.3, 2026-10-19': the source and date a printed cost names."""
        return f"{self.price_source}, {self.price_date}" if self.price_date else self.price_source

    def reprefill_cost(self, tokens: int, written_as: str | None) -> float:
        """What `tokens` prefilled again cost over reading them from cache: paid as written with that TTL
        ("5m", "1h"; "default": automatic caching) or, with None, as uncached input."""
        paid = (self.cost(write_1h=tokens) if written_as == "1h" else
                self.cost(write_5m=tokens) if written_as else self.cost(uncached=tokens))
        return paid - self.cost(cache_read=tokens)

    def cost(self, uncached: int = 0, cache_read: int = 0, write_5m: int = 0, write_1h: int = 0,
             output: int = 0) -> float:
        """USD for one request's tokens by class."""
        w = self.write_multiplier
        per_token = self.input_per_mtok / 1e6
        return (uncached * per_token + cache_read * per_token * self.read_multiplier
                + write_5m * per_token * w.get("5m", w.get("default", 1.0))
                + write_1h * per_token * w.get("1h", w.get("default", 1.0))
                + output * self.output_per_mtok / 1e6)


@cache
def model_contract(api: str, model: str | None) -> ModelContract:
    return provider_contract(provider_for(api, model), model)


def _model_row(table: dict[str, Any], model: str | None) -> dict[str, Any]:
    """A provider table's default_model row with the longest matching model row over it."""
    row = dict(table.get("default_model", {}))
    best = max((m for m in table.get("models", ()) if model and _same_family(model, m["prefix"])),
               key=lambda m: len(m["prefix"]), default=None)
    return {**row, "confirmed": True, **best} if best is not None else row


@cache
def invalidated_levels(name: str, model: str | None) -> dict[str, str]:
    """What a change of each cache-keying setting invalidates (the first level it breaks): the
    provider's table, with the model's own row over it where its family keys the cache otherwise."""
    table = providers()[name]
    return {**table.get("invalidates", {}), **_model_row(table, model).get("invalidates", {})}


@cache
def provider_contract(name: str, model: str | None) -> ModelContract:
    """A model's contract in one provider's table (a policy forced to a provider asks this)."""
    table = providers()[name]
    row = _model_row(table, model)
    if "read_multiplier" in table:
        read = table["read_multiplier"]
        writes = dict(table["write_multiplier"])
    else:
        read = 1.0 - row.get("cached_discount", 0.0)
        writes = {"default": row.get("write_multiplier", 1.0)}
    minimum = row.get("min_cacheable_tokens", table.get("min_cacheable_tokens", 0))
    live = from_package(name, model)   # the maintained price table first; this file's is the fallback
    if live is not None:
        read = live.cache_read / live.input if live.cache_read is not None else read
        if live.cache_write_1h is not None:
            writes = {**writes, "1h": live.cache_write_1h / live.input}
        if live.cache_write_5m is not None:
            writes = {**writes, "5m" if "5m" in writes else "default": live.cache_write_5m / live.input}
        return ModelContract(name, model, minimum, live.input, live.output, read, writes, True, live.source,
                             live.date)
    return ModelContract(name, model, minimum, row.get("input_per_mtok", 0.0), row.get("output_per_mtok", 0.0),
                         read, writes, bool(row.get("confirmed", True)), "rules/providers.toml",
                         table.get("prices_read", table.get("read", "")))


@cache
def equivalences() -> dict[str, Any]:
    """Bytes a provider renders alike (rules/equivalences.toml): name -> {apis, what, evidence, ...}."""
    return ruleset.load("equivalences.toml")


@cache
def verdict_rules() -> dict[str, Any]:
    """How verdicts judge a reported read against the prediction (rules/verdict.toml)."""
    return ruleset.load("verdict.toml")
