"""No stored string is parsed back into a cause, a diagnosis or a verdict: the capture keeps them typed
(capture/record.py), and the formats before schema version 6 (a cause as "a+b at /pointer", a diagnosis
as JSON text) are read in one place only, capture/legacy.py, by the store's migration and the reader of
old exports. Verdict names are VerdictName's members (judge/names.py), never literals elsewhere."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LEGACY = ROOT / "prefixguard" / "capture" / "legacy.py"

# What reading the old formats back looks like.
PARSED_BACK = {
    'a cause split at " at "': re.compile(r"""\.(r?partition|r?split)\(\s*["'] at ["']"""),
    'cause names split at "+"': re.compile(r"""\.split\(\s*["']\+["']"""),
    "PrefixChange.parse": re.compile(r"PrefixChange\.parse\b"),
    "a diagnosis read from JSON text": re.compile(r"json\.loads\([^)\n]*diagnos|Diagnosis\.from_json|from_json\("),
}
# Verdict names no other vocabulary uses, as a string literal that is no dict key.
VERDICT_LITERAL = re.compile(r"""["'](miss_prefix_changed|miss_ttl_expired|miss_server_side|miss_unexplained|"""
                             r"""not_reported|no_prefix_caching)["'](?!\s*:)""")
# judge/names.py defines them; judge/verdict.py compares a prediction's reason (Expected.reason) with them, and
# judge/policies/ writes those reasons: a vocabulary of its own ("ttl_expired") that shares some names.
VERDICT_HOMES = tuple(ROOT / "prefixguard" / "judge" / p for p in ("names.py", "verdict.py", "policies"))


def _library() -> list[Path]:
    return sorted(p for top in ("prefixguard", "engine") for p in (ROOT / top).rglob("*.py"))


def _code_lines(path: Path) -> list[tuple[int, str]]:
    """(number, line) of each line, comments cut (a comment may name a format it does not parse)."""
    return [(n, line.split("  #")[0]) for n, line in enumerate(path.read_text("utf-8").splitlines(), 1)
            if not line.lstrip().startswith("#")]


def test_no_module_but_legacy_parses_a_stored_format_back() -> None:
    found = [f"{p.relative_to(ROOT)}:{n}: {what}: {line.strip()}"
             for p in _library() if p != LEGACY for n, line in _code_lines(p)
             for what, pattern in PARSED_BACK.items() if pattern.search(line)]
    assert found == []


def test_the_legacy_reader_is_where_the_old_formats_are_read() -> None:
    """The grep above is no blind spot: the one module it lets through matches what it looks for."""
    text = LEGACY.read_text("utf-8")
    assert all(PARSED_BACK[k].search(text) for k in ('a cause split at " at "', 'cause names split at "+"'))
    assert "json.loads" in text and "split_diagnosis" in text


def test_verdict_names_are_written_as_members_of_verdict_name() -> None:
    found = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in _library()
             if not any(p == h or h in p.parents for h in VERDICT_HOMES)
             for n, line in _code_lines(p) if VERDICT_LITERAL.search(line)]
    assert found == []
