"""The other Python files of a linted tree, found and parsed only when a file's code calls a function it
imports from one of them (from .prompts import system_prompt; from app.prompts import system_prompt):
the helper's return is then followed like a helper of the same file. A module is looked for next to
the importing file (relative imports) or under one of its parent folders (absolute ones); a module
that is not a file of the tree (an installed package) is not followed."""
from __future__ import annotations

import ast
import os

from prefixguard.lint.code.module import Function, Module

_PARENTS = 8   # folders above the importing file where an absolute import's package may start
_MAX_BYTES = 2 * 2**20


class Project:
    """Helpers found across files, each file parsed once per change (keyed by path, size and mtime)."""

    def __init__(self) -> None:
        self._modules: dict[tuple[str, int, int], Module | None] = {}
        self._paths: dict[tuple[str, str, int], str | None] = {}

    def function(self, importer: str, module: str, name: str, level: int) -> tuple[Module, Function] | None:
        key = (os.path.dirname(os.path.abspath(importer)), module, level)
        if key not in self._paths:
            self._paths[key] = _find(key[0], module, level)
        path = self._paths[key]
        if path is None:
            return None
        parsed = self._module(path)
        fn = parsed.functions.get(name) if parsed is not None else None
        return (parsed, fn) if parsed is not None and fn is not None else None

    def _module(self, path: str) -> Module | None:
        try:
            stat = os.stat(path)
        except OSError:
            return None
        key = (path, stat.st_size, stat.st_mtime_ns)
        if key not in self._modules:
            self._modules[key] = None   # an import circle reads nothing through itself
            self._modules[key] = _parse(path, stat.st_size)
            if self._modules[key] is not None:
                self._modules[key].helpers = self  # type: ignore[union-attr]
        return self._modules[key]


def _parse(path: str, size: int) -> Module | None:
    if size > _MAX_BYTES:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        return Module(ast.parse(text, filename=path), text, path)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _find(here: str, module: str, level: int) -> str | None:
    """The file of a module imported from a file in the folder `here`."""
    parts = [p for p in module.split(".") if p]
    if level:
        for _ in range(level - 1):
            here = os.path.dirname(here)
        return _file(here, parts)
    for _ in range(_PARENTS):
        found = _file(here, parts)
        if found is not None:
            return found
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    return None


def _file(base: str, parts: list[str]) -> str | None:
    if not parts:
        return None
    stem = os.path.join(base, *parts)
    for candidate in (stem + ".py", os.path.join(stem, "__init__.py")):
        if os.path.isfile(candidate):
            return candidate
    return None


PROJECT = Project()   # one per process: a lint run reads each helper file once
