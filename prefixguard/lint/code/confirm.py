"""Confirm code findings with the bodies the code sent: each PG6 finding names the body rule it predicts
(catalog `predicts`); the requests a prefixguard.testing.Recorder captured while the code ran are
linted with it and with the sequence-mode breaks the flow explains (as `prefixguard lint` reads a
capture), and the finding is "confirmed" when one fired on a request to its provider, else "not
reproduced".

    recorder = Recorder()
    app.client = anthropic.Anthropic(http_client=recorder.http_client())
    app.answer("Where is my order?"); app.answer("And my refund?")
    for c in confirm(recorder, ["app.py"]):
        assert c.status == "confirmed", c.finding.message
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import NamedTuple

from prefixguard.lint import catalog
from prefixguard.lint.code.place import lint_python, read_source
from prefixguard.lint.finding import Finding
from prefixguard.lint.linter import check_prompt
from prefixguard.lint.sequence import SequenceMode
from prefixguard.testing import Recorder

CONFIRMED, NOT_REPRODUCED = "confirmed", "not reproduced"
_ANY_API = frozenset({"litellm", "langchain", "ai-sdk"})  # front-ends: their requests may go to any API
# besides the predicted rule, the sequence-mode breaks (PG5xx) a flow explains when the recorded session
# broke its prefix: a changed value shows as volatile content, or as an edited system prompt or message
# (JSON written into text is changed text to the body rules, not a reordered object)
_CHANGED = frozenset({"PG501", "PG507", "PG508"})
_ALSO = {"PG601": _CHANGED, "PG602": frozenset({"PG502"}), "PG603": _CHANGED | {"PG505"}, "PG604": _CHANGED}


class Confirmation(NamedTuple):
    finding: Finding  # the code finding
    status: str  # CONFIRMED | NOT_REPRODUCED
    evidence: str  # the body finding that confirms it ("request 2: ..."), or why none does


def confirm(recorder: Recorder, paths: Iterable[str]) -> list[Confirmation]:
    """The code findings of the source files `paths` (every PG6 rule), each judged against the requests
    the recorder captured."""
    codes = catalog.resolve("PG6")
    findings = [f for path in paths for f in lint_python(path, os.path.relpath(path), read_source(path), codes)[0]]
    return judge(findings, recorder)


def judge(findings: Iterable[Finding], recorder: Recorder) -> list[Confirmation]:
    """Each code finding against the recorder's requests."""
    findings = list(findings)
    expected = {f.code: frozenset({f.data["predicts"]}) | _ALSO.get(f.code, frozenset()) for f in findings}
    body = _body_findings(recorder, frozenset().union(*expected.values()))
    out = []
    for f in findings:
        provider = str(f.data.get("provider", ""))
        seen = [
            (i, f"{code} {message}")
            for i, api, code, message in body
            if code in expected[f.code] and (provider in _ANY_API or api.startswith(provider))
        ]
        if seen:
            i, message = seen[0]
            out.append(Confirmation(finding=f, status=CONFIRMED, evidence=f"request {i + 1}: {message}"))
        else:
            why = (
                f"{f.data.get('predicts')} did not fire on {len(recorder.requests)} recorded requests"
                if recorder.requests
                else "no request was recorded"
            )
            out.append(Confirmation(finding=f, status=NOT_REPRODUCED, evidence=why))
    return out


def _body_findings(recorder: Recorder, codes: frozenset[str]) -> list[tuple[int, str, str, str]]:
    """(request index, its API, rule code, message) of the body rules among codes, on every request in
    the order sent (sequence mode compares each with the best earlier one of the same API)."""
    sequence = SequenceMode(codes)
    out = []
    for i, recorded in enumerate(recorder.requests):
        prompt = recorded.prompt
        match, hits = sequence.add(prompt, i + 1, prompt.api)
        for hit in check_prompt(prompt, codes, None, match) + hits:
            rule = catalog.get(hit.rule)
            if rule is not None:
                out.append((i, prompt.api, rule.code, hit.message))
    return out
