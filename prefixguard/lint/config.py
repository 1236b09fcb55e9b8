"""Lint settings: [tool.prefixguard] in the nearest pyproject.toml, then the command line on top.

    [tool.prefixguard]
    select = ["PG1", "PG3"]            # codes, code prefixes or rule names; default: the error and
                                       # warning rules (info findings show only for rules named here)
    extend-select = ["tools-unsorted"]
    ignore = ["PG202"]
    exclude = ["fixtures/responses/*"]  # skipped when walking directories
    per-file-ignores = { "tests/fixtures/*.json" = ["below-minimum"] }
    extra-volatile-patterns = { order-number = 'ORD-\\d{8}' }
    fail-on = "warning"                # lowest severity that makes lint exit 1 (error | warning | info)
    block-size = 16                    # a server one runs (the compatible contract): tokens per KV block,
    min-prefix = 0                     # its minimum, whether it caches prefixes at all, or a server's
    prefix-caching = true              # name or URL to take them from (server = "vllm"; see serving.py);
    server = "http://127.0.0.1:8000"   # the command line's --block-size ... go on top

Selection is resolved like ruff's: each layer (the file, then the command line) may replace the
selection (select), add to it (extend-select) and remove from it (ignore), in that order.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from fnmatch import fnmatch
from pathlib import Path, PurePath
from types import MappingProxyType
from typing import Any, NamedTuple

from prefixguard.contracts import serving
from prefixguard.lint import catalog
from prefixguard.utils.errors import InputError, describe, read_text_input

KEYS = {"select", "extend-select", "ignore", "exclude", "per-file-ignores", "extra-volatile-patterns", "fail-on"}
# and the compatible contract's settings (a server one runs: block-size, min-prefix ...), read by serving.py
KEYS |= set(serving.KEYS)
KEYS |= {"check"}  # [tool.prefixguard.check]: `prefixguard check`'s thresholds and incidents (cli/check.py)


class Layer(NamedTuple):
    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()


class Settings(NamedTuple):
    root: Path  # per-file-ignores, exclude and fingerprints are relative to it
    enabled: frozenset[str]
    per_file_ignores: tuple[tuple[str, frozenset[str]], ...] = ()
    exclude: tuple[str, ...] = ()
    extra_patterns: Mapping[str, str] = MappingProxyType({})
    config: Path | None = None  # the pyproject.toml read, if any
    # Info findings are shown only for rules named in a selection (the default set is errors and warnings).
    info_codes: frozenset[str] = frozenset()
    fail_on: str = "warning"  # lowest severity that makes lint exit 1

    def shown(self, code: str, severity: str) -> bool:
        return severity != "info" or code in self.info_codes

    def relative(self, path: Path) -> str:
        """path relative to the root, in / form (absolute when outside it)."""
        resolved = Path(os.path.realpath(path))  # never raises on a link loop (Path.resolve does)
        try:
            return resolved.relative_to(self.root).as_posix()
        except ValueError:
            return resolved.as_posix()

    def codes_for(self, path: Path | None) -> frozenset[str]:
        if path is None:
            return self.enabled
        rel = self.relative(path)
        out = self.enabled
        for pattern, codes in self.per_file_ignores:
            if matches(rel, pattern):
                out -= codes
        return out

    def excluded(self, path: Path) -> bool:
        rel = self.relative(path)
        return any(matches(rel, p) for p in self.exclude)


def matches(rel: str, pattern: str) -> bool:
    """Glob match on the root-relative path, or on the file name for a pattern without a '/'."""
    return fnmatch(rel, pattern) or ("/" not in pattern and fnmatch(PurePath(rel).name, pattern))


def find_pyproject(start: Path) -> tuple[Path, dict[str, Any]] | None:
    """The nearest pyproject.toml at or above start that has a [tool.prefixguard] table, and its data."""
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            data = _read(candidate)
            tool = data.get("tool")
            if isinstance(tool, dict) and "prefixguard" in tool:
                return candidate, data
    return None


CONFIG_MAX_BYTES = 16 << 20  # a pyproject.toml is kilobytes; this only stops a runaway file


def _read(path: Path) -> dict[str, Any]:
    import tomllib  # only where a config file is found: a cost to every start otherwise

    text = read_text_input(path, CONFIG_MAX_BYTES, "config file")  # bounded, and never a FIFO or a device
    try:
        return tomllib.loads(text)
    except (ValueError, RecursionError) as err:  # TOMLDecodeError is one; a 4,300-digit number another
        raise InputError(f"cannot read config: {describe(err)}", str(path)) from None


def tool_table(config: Path | None, cwd: Path | None = None) -> tuple[Path | None, dict[str, Any]]:
    """[tool.prefixguard] of `config`, or of the nearest pyproject.toml that has one (empty when none)."""
    path, data = (
        (config, _read(config)) if config is not None else find_pyproject((cwd or Path.cwd()).resolve()) or (None, {})
    )
    tool = data.get("tool", {})
    table = tool.get("prefixguard", {}) if isinstance(tool, dict) else None
    if not isinstance(table, dict):
        raise InputError("[tool.prefixguard] must be a table", str(path))
    return path, table


def load(config: Path | None, cli: Layer, cwd: Path | None = None, exclude: tuple[str, ...] = ()) -> Settings:
    """Settings from a pyproject.toml (found from cwd when config is None) with the CLI layer on top;
    exclude: more patterns to skip when walking directories."""
    cwd = (cwd or Path.cwd()).resolve()
    path, data = (config, _read(config)) if config is not None else find_pyproject(cwd) or (None, {})
    table: dict[str, Any] = {}
    if path is not None:
        tool = data.get("tool", {})
        if not isinstance(tool, dict):
            raise InputError("[tool] must be a table", str(path))
        table = tool.get("prefixguard", {})
        if not isinstance(table, dict):
            raise InputError("[tool.prefixguard] must be a table", str(path))
    where = str(path) if path else "command line"
    unknown = set(table) - KEYS
    if unknown:
        raise InputError(
            f"[tool.prefixguard] unknown key '{sorted(unknown)[0]}' (known: {', '.join(sorted(KEYS))})", where
        )
    serving.apply(file=serving.layer_from_table(table, where))  # the command line's flags stay on top
    file_layer = Layer(
        select=_opt_list(table, "select", where),
        extend_select=tuple(_list(table, "extend-select", where)),
        ignore=tuple(_list(table, "ignore", where)),
    )
    try:
        enabled = _apply(catalog.default_codes(), file_layer)
        named = catalog.resolve_all((*(file_layer.select or ()), *file_layer.extend_select))
        per_file = tuple(
            (pattern, catalog.resolve_all(_strs(codes, f"per-file-ignores '{pattern}'", where)))
            for pattern, codes in _table(table, "per-file-ignores", where).items()
        )
    except ValueError as err:
        raise InputError(str(err), where) from None
    try:
        enabled = _apply(enabled, cli)
        named |= catalog.resolve_all((*(cli.select or ()), *cli.extend_select))
    except ValueError as err:
        raise InputError(f"{err} on the command line") from None
    fail_on = table.get("fail-on", "warning")
    if fail_on not in catalog.SEVERITIES:
        raise InputError(f"fail-on must be one of {', '.join(catalog.SEVERITIES)}", where)
    patterns = {str(k): v for k, v in _table(table, "extra-volatile-patterns", where).items()}
    for name, regex in patterns.items():
        if not isinstance(regex, str):
            raise InputError(f"extra-volatile-patterns '{name}' must be a string", where)
        try:
            re.compile(regex)
        except re.error as err:
            raise InputError(f"extra-volatile-patterns '{name}' is not a valid regex: {err}", where) from None
    root = path.parent.resolve() if path is not None else cwd
    return Settings(
        root=root,
        enabled=enabled,
        per_file_ignores=per_file,
        exclude=(*_list(table, "exclude", where), *exclude),
        extra_patterns=patterns,
        config=path,
        info_codes=named & enabled,
        fail_on=fail_on,
    )


def _apply(enabled: frozenset[str], layer: Layer) -> frozenset[str]:
    if layer.select is not None:
        enabled = catalog.resolve_all(layer.select)
    return (enabled | catalog.resolve_all(layer.extend_select)) - catalog.resolve_all(layer.ignore)


def _strs(value: Any, what: str, where: str) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(f"{what} must be a list of strings", where)
    return value


def _list(table: dict[str, Any], key: str, where: str) -> list[str]:
    return _strs(table.get(key, []), key, where)


def _opt_list(table: dict[str, Any], key: str, where: str) -> tuple[str, ...] | None:
    return tuple(_list(table, key, where)) if key in table else None


def _table(table: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = table.get(key, {})
    if not isinstance(value, dict):
        raise InputError(f"{key} must be a table", where)
    return value


def split_selectors(values: tuple[str, ...]) -> tuple[str, ...]:
    """--select A,B --select C -> (A, B, C)."""
    return tuple(v.strip() for value in values for v in value.split(",") if v.strip())
