"""The other Python files of a linted tree, found and parsed only when a file's code calls a function it
imports from one of them (from .prompts import system_prompt; from app.prompts import system_prompt):
the helper's return is then followed like a helper of the same file. A module is looked for next to
the importing file (relative imports) or under one of its parent folders (absolute ones); a module
that is not a file of the tree (an installed package) is not followed."""

from __future__ import annotations

import ast
import os
import re
import warnings

from prefixguard.lint.code.module import Function, Module
from prefixguard.lint.code.python import SINK_WORDS

_PARENTS = 8  # folders above the importing file where an absolute import's package may start
_MAX_BYTES = 2 * 2**20
_KEPT = 512  # helper files (and texts) held at once
_FROM_IMPORT = re.compile(r"^\s*from\s+(\.*)([\w.]*)\s+import\b", re.MULTILINE)
# A helper whose own text names none of these is not parsed: it adds no source of its own (its
# arguments still flow through the call, as through any call not followed). Most imported helpers
# are skipped this way, and most files they live in are never parsed.
_SOURCE_WORDS = re.compile(
    r"datetime|\btime\b|uuid|random|secrets|environ|getenv|dumps|\.values\(|\.keys\(|"
    r"\.items\(|\bset\(|frozenset|urandom|\bnow\(|today\("
)


class Project:
    """Helpers found across files, each file parsed once per text (for its own lint and for the files
    that import it)."""

    def __init__(self) -> None:
        self._modules: dict[tuple[str, int, int], Module | None] = {}  # by path, size, mtime
        self._texts: dict[tuple[str, int, int], str] = {}
        self._paths: dict[tuple[str, str, int], str | None] = {}
        self._trees: dict[tuple[str, int], ast.Module] = {}
        self._found: dict[tuple[tuple[str, int, int], str], tuple[Module, Function] | None] = {}

    def parse(self, path: str, text: str, keep: bool = False) -> ast.Module:
        """The file's tree: the one parsed when another file imported from it, else parsed now (kept
        for later importers only with keep: a tree's whole run of linted files is not held in memory).
        Raises SyntaxError or ValueError as ast.parse does."""
        key = (os.path.abspath(path), hash(text))
        tree = self._trees.get(key)
        if tree is None:
            with warnings.catch_warnings():  # an invalid escape in a helper file is no lint output
                warnings.simplefilter("ignore")
                tree = ast.parse(text, filename=path)
            if keep:
                self._trees[key] = tree
        return tree

    def imports_a_sender(self, importer: str, text: str) -> bool:
        here = os.path.dirname(os.path.abspath(importer))
        for dots, module in _FROM_IMPORT.findall(text):
            key = (here, module, len(dots))
            if key not in self._paths:
                self._paths[key] = _find(here, module, len(dots))
            path = self._paths[key]
            found = _stat(path) if path is not None else None
            if found is not None and SINK_WORDS.search(self._text(found)):
                return True
        return False

    def function(self, importer: str, module: str, name: str, level: int) -> tuple[Module, Function] | None:
        key = (os.path.dirname(os.path.abspath(importer)), module, level)
        if key not in self._paths:
            self._paths[key] = _find(key[0], module, level)
        path = self._paths[key]
        found = _stat(path) if path is not None else None
        if found is None:
            return None
        if (found, name) not in self._found:
            self._found[(found, name)] = self._function(found, name)
        return self._found[(found, name)]

    def _function(self, found: tuple[str, int, int], name: str) -> tuple[Module, Function] | None:
        if not self._may_return_a_source(found, name):
            return None
        parsed = self._module(found)
        fn = parsed.functions.get(name) if parsed is not None else None
        return (parsed, fn) if parsed is not None and fn is not None else None

    def _may_return_a_source(self, key: tuple[str, int, int], name: str) -> bool:
        """The text of the top-level def `name` (to the next top-level statement) names a source or an
        SDK call (a helper that sends the prompt is read for the caller's arguments)."""
        text = self._text(key)
        found = re.search(rf"^(?:async\s+)?def\s+{re.escape(name)}\b", text, re.MULTILINE)
        if found is None:
            return False
        start = text.find("\n", found.end()) + 1 or len(text)
        after = re.compile(r"^\S", re.MULTILINE).search(text, start)
        body = text[found.end() : after.start() if after is not None else len(text)]
        return bool(_SOURCE_WORDS.search(body) or SINK_WORDS.search(body))  # or it sends the prompt

    def _text(self, key: tuple[str, int, int]) -> str:
        if key not in self._texts:
            if len(self._texts) >= _KEPT:
                self._texts.clear()
            self._texts[key] = _read(key[0]) if key[1] <= _MAX_BYTES else ""
        return self._texts[key]

    def _module(self, key: tuple[str, int, int]) -> Module | None:
        if key not in self._modules and len(self._modules) >= _KEPT:  # a bound on memory, read again if need be
            self._modules.clear()
            self._found.clear()
            self._trees.clear()
        if key not in self._modules:
            self._modules[key] = None  # an import circle reads nothing through itself
            self._modules[key] = self._parse(key)
        return self._modules[key]

    def _parse(self, key: tuple[str, int, int]) -> Module | None:
        text = self._text(key)
        try:
            return Module(self.parse(key[0], text, keep=True), text, key[0], self) if text else None
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None


def _stat(path: str) -> tuple[str, int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return path, stat.st_size, stat.st_mtime_ns


def _read(path: str) -> str:
    """The file's text ("" when it cannot be read)."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().removeprefix("\ufeff")
    except (OSError, UnicodeDecodeError):
        return ""


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


PROJECT = Project()  # one per process: files are keyed by size and mtime, so a changed file is read again
