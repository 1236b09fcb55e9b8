"""The settings of a self-hosted server's prefix cache (the `compatible` contract): block size, minimum and
whether it caches prefixes at all, in layers: the contract's defaults, a named server's defaults
(rules/providers.toml [compatible.servers.NAME]), what a running server says of itself, the keys of
[tool.prefixguard] (block-size, min-prefix, prefix-caching, server), then a command's flags
(--block-size, --min-prefix, --no-prefix-caching, --server). Each layer overrides only what it names.

A server says it where it exposes it: vLLM as the labels of its `vllm:cache_config_info` metric on
/metrics (block_size, enable_prefix_caching: off on some hybrid Mamba / sliding-window models), SGLang
on /get_server_info (page_size, disable_radix_cache).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from prefixguard.contracts.providers import (
    COMPATIBLE,
    Compatible,
    configure_compatible,
    default_compatible,
    providers,
    server_defaults,
)
from prefixguard.utils.errors import InputError

KEYS = ("block-size", "min-prefix", "prefix-caching", "server")  # of [tool.prefixguard]
TIMEOUT_S = 5.0
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')

_layers: dict[str, dict[str, Any]] = {"file": {}, "flags": {}}  # this process's: what was read so far


def metric_labels(text: str, name: str) -> dict[str, str] | None:
    """The labels of the first sample of metric `name` in Prometheus text exposition, or None."""
    for line in text.splitlines():
        if line.startswith(name + "{"):
            return {k: v.replace('\\"', '"').replace("\\\\", "\\") for k, v in _LABEL.findall(line.partition("}")[0])}
    return None


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in ("true", "1", "yes")


def from_metrics(text: str, source: str) -> Compatible | None:
    """vLLM's settings from its /metrics text; None when the text has no cache config metric."""
    row = providers()[COMPATIBLE].servers["vllm"]
    labels = metric_labels(text, row.metric)
    if labels is None or "block_size" not in labels:
        return None
    try:
        block = int(labels["block_size"])
    except ValueError:
        raise InputError(f"{source}: {row.metric} has block_size {labels['block_size']!r}, not a number") from None
    caching = _truthy(labels.get("enable_prefix_caching", row.prefix_caching))
    return Compatible(block_tokens=block, min_tokens=0, prefix_caching=caching, source=f"vllm {row.metric} at {source}")


def from_server_info(doc: Any, source: str) -> Compatible | None:
    """SGLang's settings from its /get_server_info JSON; None when it names no page size."""
    if not isinstance(doc, dict) or not isinstance(doc.get("page_size"), int) or isinstance(doc["page_size"], bool):
        return None
    return Compatible(
        block_tokens=doc["page_size"],
        min_tokens=0,
        prefix_caching=not _truthy(doc.get("disable_radix_cache", False)),
        source=f"sglang page_size at {source}",
    )


def _get(url: str, timeout: float) -> bytes | None:
    """The body of a GET, None on a 404 (that server exposes no such endpoint)."""
    import urllib.error  # here: a command that reads no server never pays for urllib's imports
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:  # noqa: S310 (a URL the user gave)
            return answer.read(8 * 1024 * 1024)
    except urllib.error.HTTPError as err:
        if err.code == 404:
            return None
        raise InputError(f"{url}: HTTP {err.code}") from None
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", err)
        raise InputError(f"cannot read {url}: {reason}") from None


def read_server(base_url: str, timeout: float = TIMEOUT_S) -> Compatible:
    """A running server's own settings: vLLM's /metrics, else SGLang's /get_server_info. InputError when
    it cannot be reached or says neither."""
    base = base_url.rstrip("/").removesuffix("/metrics").removesuffix("/v1")
    body = _get(base + "/metrics", timeout)
    found = from_metrics(body.decode("utf-8", "replace"), base + "/metrics") if body is not None else None
    if found is None:
        info = _get(base + providers()[COMPATIBLE].servers["sglang"].server_info, timeout)
        try:
            found = from_server_info(json.loads(info), base) if info is not None else None
        except ValueError:
            found = None
    if found is None:
        raise InputError(
            f"{base}: no cache settings found (neither vLLM's /metrics nor SGLang's /get_server_info "
            "says a block size); give --block-size"
        )
    return found


def _server(value: str) -> Compatible:
    """A server's settings: a name of rules/providers.toml, or a URL to read them from."""
    return read_server(value) if value.startswith(("http://", "https://")) else server_defaults(value)


def layer_from_table(table: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The compatible settings among [tool.prefixguard]'s keys, checked; InputError naming the key."""
    out: dict[str, Any] = {}
    for key, kind in (("block-size", int), ("min-prefix", int), ("prefix-caching", bool), ("server", str)):
        if key not in table:
            continue
        value = table[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            said = {int: "a whole number", bool: "true or false", str: "a string"}[kind]
            raise InputError(f"[tool.prefixguard] {key} must be {said}", where)
        out[key] = value
    return out


def from_pyproject(start: Path) -> dict[str, Any]:
    """The compatible settings of the nearest pyproject.toml at or above `start` that has a
    [tool.prefixguard] table (lint's rule for finding it); {} when none. A file that cannot hold the table
    is not parsed (a command's start pays a few stat calls, not a TOML parse)."""
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        try:
            data = candidate.read_bytes() if candidate.is_file() else None
        except OSError:
            data = None
        if data is None or b"tool.prefixguard" not in data:
            continue
        import tomllib

        try:
            tool = tomllib.loads(data.decode("utf-8")).get("tool")
        except (ValueError, UnicodeDecodeError):
            return {}  # lint reports a broken file; the other commands run on the defaults
        if isinstance(tool, dict) and isinstance(tool.get("prefixguard"), dict):
            return layer_from_table(tool["prefixguard"], str(candidate))
    return {}


def resolved(layers: list[Mapping[str, Any]]) -> Compatible:
    """The settings the layers give, in order, each over the ones before."""
    settings = Compatible()
    for layer in layers:
        if "server" in layer:
            settings = _server(layer["server"])
        overrides = {
            field: layer[key]
            for key, field in (
                ("block-size", "block_tokens"),
                ("min-prefix", "min_tokens"),
                ("prefix-caching", "prefix_caching"),
            )
            if key in layer
        }
        if overrides:
            settings = settings._replace(**overrides, source=f"{settings.source} with {', '.join(sorted(overrides))}")
    return settings


def apply(*, file: Mapping[str, Any] | None = None, flags: Mapping[str, Any] | None = None) -> Compatible:
    """Set this process's compatible contract from the layers read so far (a layer given here replaces
    the one read before): a config file's keys below the command line's flags."""
    if file is not None:
        _layers["file"] = dict(file)
    if flags is not None:
        _layers["flags"] = {**_layers["flags"], **flags}
    settings = resolved([_layers["file"], _layers["flags"]])
    if _layers["file"] or _layers["flags"]:
        configure_compatible(settings)
    return settings


def reset() -> None:
    """Back to the rules' defaults: no layer read."""
    _layers["file"], _layers["flags"] = {}, {}
    configure_compatible(default_compatible())
