"""The rule catalog (rules/catalog.toml): every rule as data, and selection of rules by code or name."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from prefixguard.contracts import ruleset
from prefixguard.judge.causes import generic_fix

SEVERITIES = ("error", "warning", "info")  # most severe first
_CODE = re.compile(r"PG\d{3}")
_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_PREFIX = re.compile(r"PG\d{0,3}", re.IGNORECASE)


class Rule(NamedTuple):
    code: str
    name: str
    severity: str
    providers: tuple[str, ...]
    summary: str
    why: str
    bad: str
    good: str
    fix: str
    family: str
    cause: str | None = None  # sequence rules: the compare cause they report
    variants: Mapping[str, str] = MappingProxyType({})  # named case -> severity
    predicts: str | None = None  # code rules: the body rule a request they send would break
    language: str = "json"  # the language of the bad and good examples

    def severity_of(self, variant: str | None) -> str:
        return self.variants.get(variant, self.severity) if variant else self.severity


@cache
def rules() -> tuple[Rule, ...]:
    """All rules, in code order. Raises ValueError on a malformed catalog (a packaging bug)."""
    data = _data()
    families = data["families"]
    out = []
    for row in data["rule"]:
        code, name = row["code"], row["name"]
        if not _CODE.fullmatch(code) or not _NAME.fullmatch(name):
            raise ValueError(f"rules/catalog.toml: bad code or name {code!r} {name!r}")
        severities = [row["severity"], *row.get("variants", {}).values()]
        if any(s not in SEVERITIES for s in severities):
            raise ValueError(f"rules/catalog.toml: {code} has an unknown severity")
        out.append(
            Rule(
                code=code,
                name=name,
                severity=row["severity"],
                providers=tuple(row["providers"]),
                summary=row["summary"],
                why=row["why"].strip(),
                bad=row["bad"].strip(),
                good=row["good"].strip(),
                fix=row.get("fix") or generic_fix(row["cause"]),
                family=families[code[:3]],
                cause=row.get("cause"),
                variants=dict(row.get("variants", {})),
                predicts=row.get("predicts"),
                language=row.get("language", "json"),
            )
        )
    out.sort(key=lambda r: r.code)
    if len({r.code for r in out}) != len(out) or len({r.name for r in out}) != len(out):
        raise ValueError("rules/catalog.toml: duplicate code or name")
    body_rules = {r.code for r in out if r.predicts is None}
    for r in out:
        if r.predicts is not None and r.predicts not in body_rules:
            raise ValueError(f"rules/catalog.toml: {r.code} predicts {r.predicts!r}, which is not a body rule")
    return tuple(out)


@cache
def _by_key() -> dict[str, Rule]:
    return {key: r for r in rules() for key in (r.code, r.name)}


def at_least(findings: Iterable[Any], severity: str) -> list[Any]:
    """The findings of this severity or a more severe one."""
    rank = SEVERITIES.index(severity)
    return [f for f in findings if SEVERITIES.index(f.severity) <= rank]


def default_codes() -> frozenset[str]:
    """The rules that run when nothing is selected: those of severity error or warning."""
    return frozenset(r.code for r in rules() if r.severity != "info")


@cache
def _data() -> dict[str, Any]:
    return ruleset.load("catalog.toml")


RULE_DOCS = Path(__file__).resolve().with_name("rules.html")  # shipped in the package (package-data: *.html)


def help_uri(code: str) -> str:
    """Where a rule's documentation lives (catalog.toml `help_uri`, with {docs}, {code} and {anchor})."""
    return _data()["help_uri"].format(docs=RULE_DOCS.as_uri(), code=code, anchor=code.lower())


def count_margin(tools: bool = False) -> float:
    """How far under a token minimum our count must be to count as evidence (catalog.toml `count_margin`;
    of tool definitions, `count_margin_tools`)."""
    return float(_data()["count_margin_tools" if tools else "count_margin"])


def get(key: str) -> Rule | None:
    """A rule by code (any case) or by name."""
    return _by_key().get(key.upper() if key[:2].lower() == "pg" else key)


def by_cause() -> dict[str, Rule]:
    """Sequence rules keyed by the compare cause they report."""
    return {r.cause: r for r in rules() if r.cause}


def resolve(selector: str) -> frozenset[str]:
    """Codes a selector names: "ALL", a code prefix ("PG", "PG1", "PG10", "PG101") or a rule name.

    Raises ValueError for a selector that names nothing (so a typo in config is caught, not ignored).
    """
    key = selector.strip()
    if key.upper() == "ALL":
        return frozenset(r.code for r in rules())
    if _PREFIX.fullmatch(key):
        codes = frozenset(r.code for r in rules() if r.code.startswith(key.upper()))
    else:
        rule = _by_key().get(key)
        codes = frozenset([rule.code]) if rule else frozenset()
    if not codes:
        raise ValueError(f"unknown rule selector '{selector}'")
    return codes


def resolve_all(selectors: Iterable[str]) -> frozenset[str]:
    out: frozenset[str] = frozenset()
    for s in selectors:
        out |= resolve(s)
    return out


def as_dict(r: Rule) -> dict[str, Any]:
    return {k: v for k, v in r._asdict().items() if v not in (None, {})} | {"providers": list(r.providers)}


def explain(r: Rule) -> str:
    """One rule for people, like `ruff rule`."""
    variants = "".join(f"; {sev} when {name}" for name, sev in r.variants.items())
    head = (
        f"# {r.name} ({r.code})\n\nFamily: {r.family}. Severity: {r.severity}{variants}. "
        f"Providers: {', '.join(r.providers)}."
    )
    cause = f"\nReports the compare cause `{r.cause}` in sequence mode (JSONL captures).\n" if r.cause else ""
    if r.predicts:
        cause = f"\nA rule on source code: it predicts {r.predicts} in the requests this code sends.\n"
    return (
        f"{head}\n{cause}\n{r.summary}\n\n## Why\n{r.why}\n\n## Bad\n```{r.language}\n{r.bad}\n```\n\n"
        f"## Good\n```{r.language}\n{r.good}\n```\n\n## Fix\n{r.fix}"
    )
