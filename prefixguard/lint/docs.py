"""docs/rules.md from the rule catalog (rules/catalog.toml): one section per rule, the target of the
helpUri in SARIF output. `python -m prefixguard.lint.docs [PATH]` (re)writes it; a test keeps it current."""
from __future__ import annotations

import sys
from pathlib import Path

from prefixguard.lint import catalog


def render() -> str:
    parts = ["# prefixguard lint rules\n",
             "Written from `rules/catalog.toml` by `python -m prefixguard.lint.docs`; do not edit by hand.\n",
             "| code | name | severity | summary |", "| --- | --- | --- | --- |"]
    parts += [f"| [{r.code}](#{r.code.lower()}) | `{r.name}` | {r.severity} | {r.summary} |" for r in catalog.rules()]
    for r in catalog.rules():
        body = catalog.explain(r).replace("\n## ", "\n### ").removeprefix("# ")
        parts += ["", f'<a id="{r.code.lower()}"></a>', "", f"## {body}"]
    return "\n".join(parts) + "\n"


def main() -> None:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/rules.md")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(), "utf-8")


if __name__ == "__main__":
    main()
