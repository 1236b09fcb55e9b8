"""rules/providers.toml parsed once into typed records: one `Contract` per provider table.

Every reader of a provider's numbers reads these records, never the TOML: a key misspelt in code is an
AttributeError at the first test, not a silent default. A value the table leaves out takes the default
written here (what the contract means when it says nothing: no TTL, no breakpoints, no minimum).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from functools import cache
from typing import Any

from prefixguard.contracts import ruleset

# The contract of a server one runs (vLLM, SGLang, the engine): the fallback for an OpenAI-shaped request
# to a model no provider sells, and the one whose settings a command's flags change.
COMPATIBLE = "compatible"
# The `policy` kind of a contract that caches at breakpoints (written there, read by lookback).
BREAKPOINTS = "anthropic"
# The `policy` kind that reads whole prefix units (message ends), never inside one.
UNITS = "units"


@dataclass(frozen=True, slots=True, kw_only=True)
class EncryptedItem:
    """How an encrypted item is billed: chars_per_item + chars_per_token x its tokens (reasoning, compaction)."""

    chars_per_item: int
    chars_per_token: float
    dropped_before_last_user_message: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRow:
    """A model row (`[[P.models]]`) or the table's `default_model`; None: the row does not say."""

    prefix: str = ""
    min_cacheable_tokens: int | None = None
    input_per_mtok: float | None = None
    output_per_mtok: float | None = None
    cached_discount: float | None = None
    write_multiplier: float | None = None
    confirmed: bool | None = None
    invalidates: Mapping[str, str] | None = None
    prefix_caching: bool | None = None  # False: the provider caches no prompt of this model
    token_step: int | None = None  # a read ends on a whole step of this many tokens (the table's unless said)
    thought_signature: EncryptedItem | None = None  # a thought signature sent back: billed as the thoughts it holds

    def over(self, base: ModelRow) -> ModelRow:
        """This row's values over `base`'s where this row says them (a model row over default_model)."""
        said = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}
        return ModelRow(**{**{f.name: getattr(base, f.name) for f in fields(base)}, **said})


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakpointCaching:
    """OpenAI GPT-5.6 and later (`[openai.breakpoint_caching]`): breakpoints, implicit or explicit."""

    since: str
    implicit_breakpoint_roles: tuple[str, ...]
    implicit_read_roles: tuple[str, ...]  # implicit mode: message ends a later read may stop at, once written through
    max_writes: int
    read_lookback_breakpoints: int
    ttl_seconds: dict[str, float]
    default_ttl: str
    write_multiplier: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Server:
    """Defaults of a named server (`[compatible.servers.NAME]`) and where it says its own settings."""

    name: str
    block_tokens: int
    min_tokens: int = 0
    prefix_caching: bool = True
    metric: str = ""  # vLLM: the /metrics info metric whose labels hold its settings
    server_info: str = ""  # SGLang: the path of the JSON that holds them
    source: str
    read: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Contract:
    """One provider's caching contract (a table of rules/providers.toml)."""

    name: str
    apis: tuple[str, ...]
    source: str
    read: str
    policy: str  # the policy kind: BREAKPOINTS, UNITS, else a prefix rule
    lint_as: str  # whose lint rules apply to its requests
    usage_convention: str = "subset"  # "additive": read + written + uncached = the prompt total
    usage_fields: tuple[str, ...] = ()  # where an OpenAI-shaped provider reports its reads
    hosts: tuple[str, ...] = ()  # upstream hosts that name this provider
    host_only: bool = False  # named by its hosts alone: it serves other makers' models (its rows name none)
    gateway_makers: tuple[str, ...] = ()  # a gateway's maker/ names that take this contract
    gateway_excluded: tuple[str, ...] = ()  # model families under those makers served by others
    prices_id: str | None = None  # the provider's id in genai-prices (None: no price there)
    diagnostics: bool = False
    min_cacheable_tokens: int = 0
    min_per_model: bool = False  # the prefix rule's minimum is the model row's, not the table's
    token_step: int = 1
    prefill_tail_tokens: int = 0  # a read stops at least this many tokens before the prompt's end
    caches_output: bool = False
    ready_seconds: float = 0.0  # what a request wrote is read only this long after it
    stored_reasoning: bool = True  # a stored response's context (previous_*_id) holds its reasoning
    restores_reasoning: bool = False  # an answer sent back without its reasoning gets it back, read and billed
    output_calls_cached: int = 0  # of the tool calls an answer made at once, how many its cached output holds (0: all)
    tools_unrendered_under_tool_choice: tuple[str, ...] = ()  # tool_choice values that render no tools
    unrendered_blocks: tuple[str, ...] = ()  # content block types kept out of the model's prompt
    compaction_blocks: tuple[str, ...] = ()  # block types that stand for all the conversation before them
    earlier_turn_blocks: tuple[str, ...] = ()  # block types an assistant message renders in the latest turn only
    retention_seconds: dict[str, float] = field(default_factory=dict)
    default_retention: str | None = None
    ttl_seconds: dict[str, float] = field(default_factory=dict)
    default_ttl: str | None = None
    read_multiplier: float | None = None  # None: 1 - the model row's cached_discount
    write_multiplier: dict[str, float] | None = None
    max_breakpoints: int | None = None
    lookback_blocks: int | None = None
    breakpoint_ineligible_kinds: tuple[str, ...] = ()
    routing_prefix_tokens: int | None = None
    listed_models_only: bool = False
    unlisted_models: str | None = None  # the contract of a model this table does not list, on its APIs
    unit_end_roles: tuple[str, ...] = ()
    zero_counts_omitted: bool = False
    usage_marker_fields: tuple[str, ...] = ()  # usage keys only this provider sends (an omitted read known by them)
    invoke_chat_makers: tuple[str, ...] = ()  # Bedrock InvokeModel: makers whose models take a Chat body
    invoke_converse_models: tuple[str, ...] = ()  # Bedrock InvokeModel: models whose own body is Converse's
    encrypted_reasoning: EncryptedItem | None = None
    encrypted_compaction: EncryptedItem | None = None  # a compaction item: the summary it encrypts
    encrypted_result_chars_per_token: float | None = None  # a server tool result's encrypted text, billed
    breakpoint_caching: BreakpointCaching | None = None
    invalidates: dict[str, str] = field(default_factory=dict)
    default_model: ModelRow = field(default_factory=ModelRow)
    models: tuple[ModelRow, ...] = ()
    # the compatible contract only: a server's settings, and the named servers' defaults
    block_tokens: int = 1
    prefix_caching: bool = True
    settings_source: str = ""
    servers: dict[str, Server] = field(default_factory=dict)

    @property
    def breakpointed(self) -> bool:
        """Whether entries are written only at breakpoints (Anthropic's contract and Bedrock's)."""
        return self.policy == BREAKPOINTS

    @property
    def ttls(self) -> dict[str, float]:
        """How long an entry lives, by TTL or retention name (empty: no expiry)."""
        return self.ttl_seconds or self.retention_seconds


def _row(raw: Mapping[str, Any]) -> ModelRow:
    keys = {f.name for f in fields(ModelRow)}
    values: dict[str, Any] = {k: dict(v) if k == "invalidates" else v for k, v in raw.items() if k in keys}
    if "thought_signature" in values:
        values["thought_signature"] = EncryptedItem(**values["thought_signature"])
    return ModelRow(**values)


def _contract(name: str, raw: Mapping[str, Any]) -> Contract:
    """A table as a Contract: the keys the code reads, typed (the others are its documentation)."""
    simple = {f.name for f in fields(Contract)} - {
        "name",
        "default_model",
        "models",
        "servers",
        "encrypted_reasoning",
        "encrypted_compaction",
        "breakpoint_caching",
    }
    values: dict[str, Any] = {k: v for k, v in raw.items() if k in simple}
    for k, v in values.items():
        if isinstance(v, list):
            values[k] = tuple(v)
        elif isinstance(v, dict):
            values[k] = dict(v)
    rules = raw.get("breakpoint_caching")
    return Contract(
        name=name,
        **{"policy": name, "lint_as": name, **values},
        default_model=_row(raw.get("default_model", {})),
        models=tuple(_row(m) for m in raw.get("models", ())),
        servers={n: Server(name=n, **s) for n, s in raw.get("servers", {}).items()},
        encrypted_reasoning=EncryptedItem(**raw["encrypted_reasoning"]) if "encrypted_reasoning" in raw else None,
        encrypted_compaction=EncryptedItem(**raw["encrypted_compaction"]) if "encrypted_compaction" in raw else None,
        breakpoint_caching=None
        if rules is None
        else BreakpointCaching(
            since=rules["since"],
            implicit_breakpoint_roles=tuple(rules["implicit_breakpoint_roles"]),
            implicit_read_roles=tuple(rules["implicit_read_roles"]),
            max_writes=rules["max_writes"],
            read_lookback_breakpoints=rules["read_lookback_breakpoints"],
            ttl_seconds=dict(rules["ttl_seconds"]),
            default_ttl=rules["default_ttl"],
            write_multiplier=rules["write_multiplier"],
        ),
        settings_source=str(raw.get("settings_source", raw["source"])),
    )


@cache
def providers() -> dict[str, Contract]:
    """Every provider's contract by name, in the file's order (the first that fits a request wins)."""
    return {name: _contract(name, table) for name, table in ruleset.load("providers.toml").items()}
