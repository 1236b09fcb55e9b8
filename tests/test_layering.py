"""The import graph, read from the source (ast), keeps its layers: cli -> features -> core -> wire.

- features (lint, proxy, replay, report) import the core below them, never each other nor the CLI (nor
  integrations/, which sits at the CLI's level: entry points for other hosts);
- the core's homes import only downwards: utils <- contracts <- model <- wire <- judge <- capture
  (wire/, the providers' adapters, reads bodies into the prompt model; judgement never reads a body);
- the core and wire/ import no feature and no CLI;
- no module imports itself back through another (0 circles);
- the engine imports the core and wire/ only; it is the one place that imports torch;
- nobody imports the bare top-level names `engine` or `rules` (installed they are prefixguard.*).
Lazy imports inside functions count: they hide a dependency, they do not remove it.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FEATURES = ("lint", "proxy", "replay", "report")
HOMES = ("utils", "contracts", "model", "wire", "judge", "capture")   # lowest first
HEAVY = ("torch",)   # what only the engine may import


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[0] in ("engine", "rules"):
        parts.insert(0, "prefixguard")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, module: str) -> set[str]:
    tree = ast.parse(path.read_text("utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)  # `from pkg import module`
    return found


def layer(module: str) -> str:
    parts = module.split(".")
    if parts[0] != "prefixguard" or len(parts) == 1:
        return "outside" if parts[0] != "prefixguard" else "core"
    if parts[1] in ("cli", "integrations"):  # entry points: our commands, and hooks into other hosts (LiteLLM)
        return "cli"
    if parts[1] in FEATURES:
        return f"feature:{parts[1]}"
    if parts[1] in ("engine", "wire"):
        return parts[1]
    return "core"


def home(module: str) -> int | None:
    """The rank of a core home (HOMES), None outside them."""
    parts = module.split(".")
    return HOMES.index(parts[1]) if parts[0] == "prefixguard" and len(parts) > 1 and parts[1] in HOMES else None


GRAPH = {
    _module(p): _imports(p, _module(p))
    for top in ("prefixguard", "engine", "rules") for p in sorted((ROOT / top).rglob("*.py"))
}


def _violations(check) -> list[str]:
    return sorted(f"{m} imports {i}" for m, imports in GRAPH.items() for i in imports if check(m, i))


def test_the_graph_was_read() -> None:
    assert "prefixguard.cli" in GRAPH and "prefixguard.engine.server" in GRAPH and len(GRAPH) > 60
    assert "prefixguard.proxy.analysis" in GRAPH["prefixguard.proxy.addon"]


def test_features_never_import_a_sibling_or_the_cli() -> None:
    def bad(m: str, i: str) -> bool:
        mine, theirs = layer(m), layer(i)
        return mine.startswith("feature:") and (theirs == "cli" or (theirs.startswith("feature:") and theirs != mine))
    assert _violations(bad) == []


def test_core_and_wire_import_no_feature_no_cli_no_engine() -> None:
    def bad(m: str, i: str) -> bool:
        return layer(m) in ("core", "wire") and (layer(i) in ("cli", "engine") or layer(i).startswith("feature:"))
    assert _violations(bad) == []


def test_the_homes_import_only_downwards() -> None:
    def bad(m: str, i: str) -> bool:
        mine, theirs = home(m), home(i)
        return mine is not None and theirs is not None and theirs > mine
    assert _violations(bad) == []
    assert not [p for p in (ROOT / "prefixguard").glob("*.py")
                if p.name not in ("__init__.py", "testing.py", "pytest_plugin.py")], "a module outside the homes"
    assert all(ast.get_docstring(ast.parse((ROOT / "prefixguard" / h / "__init__.py").read_text("utf-8")))
               for h in HOMES)


def _package_modules() -> dict[str, set[str]]:
    """Each module's imports of other modules of the project (a `from pkg import name` counts only where
    name is a module)."""
    return {m: {i for i in imports if i in GRAPH and i != m and not m.startswith(i + ".")}
            for m, imports in GRAPH.items()}


def test_no_import_circles() -> None:
    graph, circles, state = _package_modules(), [], {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for i in sorted(graph[m]):
            if state.get(i) == 1:
                circles.append(" -> ".join(path[path.index(i):] + [i]))
            elif i not in state:
                visit(i, path + [i])
        state[m] = 2
    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert circles == []


def test_the_engine_imports_only_the_core_and_wire() -> None:
    def bad(m: str, i: str) -> bool:
        return layer(m) == "engine" and (layer(i) == "cli" or layer(i).startswith("feature:"))
    assert _violations(bad) == []


@pytest.mark.parametrize("heavy", HEAVY)
def test_only_the_engine_imports(heavy: str) -> None:
    assert _violations(lambda m, i: i.split(".")[0] == heavy and layer(m) != "engine") == []
    assert any(i.split(".")[0] == heavy for m, imports in GRAPH.items() if layer(m) == "engine" for i in imports)


def test_nobody_imports_the_bare_engine_or_rules() -> None:
    """Installed, they are prefixguard.engine and prefixguard.rules; a bare name works only where an
    older editable install still maps it, so tests and benches are read too."""
    assert _violations(lambda m, i: i.split(".")[0] in ("engine", "rules")) == []
    scripts = [p for top in ("tests", "bench") for p in sorted((ROOT / top).rglob("*.py"))]
    bare = sorted(f"{p.relative_to(ROOT)} imports {i}" for p in scripts for i in _imports(p, "tests.x")
                  if i.split(".")[0] in ("engine", "rules"))
    assert scripts and bare == []


def test_no_library_file_over_400_lines() -> None:
    """One concern per small file: a module that grows past this has more than one job."""
    long = sorted(f"{p.relative_to(ROOT)}: {n}" for top in ("prefixguard", "engine") for p in (ROOT / top).rglob("*.py")
                  if (n := len(p.read_text("utf-8").splitlines())) > 400)
    assert long == []
