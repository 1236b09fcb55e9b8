"""The library builds its records by keyword: a NamedTuple or dataclass of the project (prefixguard/,
engine/) is never called with positional arguments, so that a field added, removed or moved cannot
shift the values into the wrong fields unseen. Read from the source (ast): a call is matched to the
class by the calling module's own definitions and its imports (`from m import Name`, re-exports
followed, and `module.Name` of an imported module)."""
from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[0] == "engine":
        parts.insert(0, "prefixguard")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


FILES = {_module(p): p for top in ("prefixguard", "engine") for p in sorted((ROOT / top).rglob("*.py"))}


@cache
def _tree(module: str) -> ast.Module:
    return ast.parse(FILES[module].read_text("utf-8"), str(FILES[module]))


def _is_record(node: ast.ClassDef) -> bool:
    def name(n: ast.expr) -> str | None:
        n = n.func if isinstance(n, ast.Call) else n
        return n.attr if isinstance(n, ast.Attribute) else n.id if isinstance(n, ast.Name) else None
    return any(name(b) == "NamedTuple" for b in node.bases) or any(name(d) == "dataclass"
                                                                   for d in node.decorator_list)


def _imports(tree: ast.Module) -> dict[str, tuple[str, str | None]]:
    """Local name -> (module, name in it), name None for a module imported whole."""
    out: dict[str, tuple[str, str | None]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                whole = f"{node.module}.{alias.name}"
                out[alias.asname or alias.name] = (whole, None) if whole in FILES else (node.module, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    out[alias.asname] = (alias.name, None)
    return out


@cache
def _record(module: str, name: str, depth: int = 0) -> bool:
    """Whether `name` in `module` is a record class of the project (following re-exports)."""
    if module not in FILES or depth > 5:
        return False
    for node in _tree(module).body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return _is_record(node)
    source = _imports(_tree(module)).get(name)
    return source is not None and source[1] is not None and _record(source[0], source[1], depth + 1)


def _positional_record_calls(module: str, tree: ast.Module) -> list[str]:
    imports = _imports(tree)
    local = {n.name: _is_record(n) for n in tree.body if isinstance(n, ast.ClassDef)}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in local:
            if local[func.id]:
                found.append(f"{module}:{node.lineno}: {func.id}(...) with {len(node.args)} positional argument(s)")
            continue
        if isinstance(func, ast.Name):
            home = imports.get(func.id)
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            whole = imports.get(func.value.id)
            home = (whole[0], func.attr) if whole is not None and whole[1] is None else None
        else:
            continue
        if home is not None and home[1] is not None and _record(home[0], home[1]):
            found.append(f"{module}:{node.lineno}: {ast.unparse(func)}(...) with "
                         f"{len(node.args)} positional argument(s)")
    return found


def test_records_are_built_by_keyword() -> None:
    found = [line for m in FILES for line in _positional_record_calls(m, _tree(m))]
    assert not found, "build these records by keyword:\n" + "\n".join(found)


def test_the_check_sees_positional_records_and_passes_keywords_and_other_classes() -> None:
    probe = ast.parse("""
from prefixguard.judge.verdict import Verdict, PrefixChange   # PrefixChange: re-exported from judge.names
from prefixguard.wire import routes
from prefixguard.capture.record import Record
Verdict(1)
PrefixChange(causes=())
routes.Routed(None, None, False, "/")
Record("id", 1.0, "/")            # a plain class: id, ts, path by position is its signature
class Local(NamedTuple):
    a: int
Local(1)
""")
    found = _positional_record_calls("prefixguard.probe", probe)
    assert [line.split(": ", 1)[1].split("(")[0] for line in found] == ["Verdict", "routes.Routed", "Local"]
