"""The rule docs from the rule catalog (rules/catalog.toml), one section per rule: docs/rules.md in the
repository, and prefixguard/lint/rules.html in the package (the target of SARIF's helpUri, so it works
where prefixguard is installed, offline). `python -m prefixguard.lint.docs [PATH]` (re)writes both;
a test keeps them current."""

from __future__ import annotations

import sys
from pathlib import Path

from prefixguard.lint import catalog


def render() -> str:
    parts = [
        "# prefixguard lint rules\n",
        "Written from `rules/catalog.toml` by `python -m prefixguard.lint.docs`; do not edit by hand.\n",
        "| code | name | severity | summary |",
        "| --- | --- | --- | --- |",
    ]
    parts += [f"| [{r.code}](#{r.code.lower()}) | `{r.name}` | {r.severity} | {r.summary} |" for r in catalog.rules()]
    for r in catalog.rules():
        body = catalog.explain(r).replace("\n## ", "\n### ").removeprefix("# ")
        parts += ["", f'<a id="{r.code.lower()}"></a>', "", f"## {body}"]
    return "\n".join(parts) + "\n"


def render_html() -> str:
    """The same sections as one self-contained HTML page; each rule's anchor is its code in lower case."""
    from html import escape

    rows = "".join(
        f'<tr><td><a href="#{r.code.lower()}">{r.code}</a></td><td><code>{escape(r.name)}</code></td>'
        f"<td>{r.severity}</td><td>{escape(r.summary)}</td></tr>\n"
        for r in catalog.rules()
    )
    sections = "".join(
        f'<section id="{r.code.lower()}"><h2>{escape(r.name)} ({r.code})</h2>\n'
        f"<pre>{escape(catalog.explain(r).split(chr(10), 1)[1].strip())}</pre></section>\n"
        for r in catalog.rules()
    )
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>prefixguard lint rules</title>'
        "<style>body{font-family:sans-serif;max-width:60rem;margin:auto}pre{white-space:pre-wrap}"
        "td{padding:0 .5em;vertical-align:top}</style></head><body>\n<h1>prefixguard lint rules</h1>\n"
        "<p>Written from rules/catalog.toml by <code>python -m prefixguard.lint.docs</code>; "
        "<code>prefixguard rule CODE</code> prints one.</p>\n"
        f"<table><tr><th>code</th><th>name</th><th>severity</th><th>summary</th></tr>\n{rows}</table>\n"
        f"{sections}</body></html>\n"
    )


def main() -> None:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/rules.md")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(), "utf-8")
    catalog.RULE_DOCS.write_text(render_html(), "utf-8")


if __name__ == "__main__":
    main()
