"""The rule catalog (rules/catalog.toml): well formed, complete, printed by `rule` and `rules`, and its
own bad and good examples behave as they say."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers.cli import CliRunner

from prefixguard.cli import main
from prefixguard.judge.causes import CAUSES
from prefixguard.contracts.providers import providers
from prefixguard.lint import catalog
from prefixguard.lint.checks import CHECKS

# Examples that abbreviate what the rule needs (thousands of tokens, dozens of blocks, a long prompt):
# the rule tests build the real thing.
ABBREVIATED = {"PG103", "PG303", "PG403"}


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_catalog_is_well_formed():
    rules = catalog.rules()
    families = {r.code[:3] for r in rules}
    assert families == {"PG1", "PG2", "PG3", "PG4", "PG5", "PG6"}
    for r in rules:
        assert re.fullmatch(r"PG\d{3}", r.code) and re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", r.name)
        assert r.severity in catalog.SEVERITIES
        assert r.summary and r.why and r.bad and r.good and r.fix
        assert set(r.providers) <= set(providers()), r.code


def test_every_rule_is_implemented_and_named_as_the_issue_says():
    single = {r.name for r in catalog.rules() if r.cause is None and r.predicts is None}   # PG6: rules on code
    assert single == set(CHECKS) == {
        "volatile-in-prefix", "breakpoint-on-volatile", "too-many-breakpoints", "invalid-breakpoint", "ttl-order",
        "below-minimum", "lookback-exceeded", "no-breakpoint", "tools-unsorted", "unstable-key-order",
        "volatile-routing-prefix", "id-in-cached-prefix"}
    # sequence breaks: one rule per cause of the compare taxonomy (append_only is no break)
    assert set(catalog.by_cause()) == set(CAUSES) - {"append_only"}
    assert all(r.code.startswith("PG5") for r in catalog.by_cause().values())


def test_selectors():
    assert catalog.resolve("PG1") == {"PG101", "PG102", "PG103", "PG104"}
    assert catalog.resolve("pg101") == {"PG101"}
    assert catalog.resolve("ttl-order") == {catalog.get("ttl-order").code}
    assert catalog.resolve("ALL") == {r.code for r in catalog.rules()}
    for bad in ("PG9", "PG1011", "volatile", "P"):
        with pytest.raises(ValueError):
            catalog.resolve(bad)


@pytest.mark.parametrize("key", ["PG101", "volatile-in-prefix", "pg101"])
def test_rule_command(key: str):
    code, out, _ = cli("rule", key)
    assert code == 0
    assert out.startswith("# volatile-in-prefix (PG101)")
    for section in ("## Why", "## Bad", "## Good", "## Fix"):
        assert section in out
    code, out, _ = cli("rule", key, "--format", "json")
    data = json.loads(out)
    assert data["code"] == "PG101" and data["severity"] == "error" and "bad" in data


def test_rule_command_unknown_is_one_line_exit_2():
    code, _, err = cli("rule", "PG999")
    assert code == 2 and err == "prefixguard: error: unknown rule 'PG999' (see `prefixguard rules`)\n"


def test_rules_command():
    code, out, _ = cli("rules")
    lines = out.strip().split("\n")
    assert code == 0 and len(lines) == len(catalog.rules())
    assert [line.split()[0] for line in lines] == [r.code for r in catalog.rules()]
    rows = json.loads(cli("rules", "--format", "json")[1])["rules"]
    assert [r["name"] for r in rows] == [r.name for r in catalog.rules()]


@pytest.mark.parametrize("rule", [r for r in catalog.rules() if r.code not in ABBREVIATED], ids=lambda r: r.code)
def test_catalog_examples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rule: catalog.Rule):
    """`prefixguard rule X` shows a bad and a good example: the bad one triggers X, the good one does not."""
    monkeypatch.chdir(tmp_path)
    suffix = ".jsonl" if rule.cause or "\n{" in rule.bad else ".json"   # several requests: a capture
    suffix = ".py" if rule.language == "python" else suffix
    for kind, expected in (("bad", True), ("good", False)):
        path = tmp_path / f"{kind}{suffix}"
        path.write_text(getattr(rule, kind) + "\n", "utf-8")
        result = CliRunner().invoke(main, ["lint", "--format", "json", "--select", rule.code, str(path)])
        assert result.exit_code in (0, 1), result.stderr
        found = [f["code"] for f in json.loads(result.stdout)["findings"]]
        assert (rule.code in found) == expected, (rule.code, kind, found)


def test_rules_doc_is_current():
    """docs/rules.md (the SARIF helpUri target) is written from the catalog: regenerate it with
    `python -m prefixguard.lint.docs` after editing rules/catalog.toml."""
    from prefixguard.lint import docs
    current = (Path(__file__).resolve().parents[1] / "docs" / "rules.md").read_text("utf-8")
    assert current == docs.render()
    assert catalog.RULE_DOCS.read_text("utf-8") == docs.render_html()   # the copy in the package: SARIF's helpUri
    for r in catalog.rules():
        assert f'<a id="{r.code.lower()}"></a>' in current and catalog.help_uri(r.code).endswith(f"#{r.code.lower()}")
