"""One session model (prefixguard/judge/session.py) for every feature: the same sequence of requests fed to
the proxy's analysis, lint's sequence mode and the report gives the same comparisons, each naming the
same earlier request and the same causes. The sequence: a session, a timestamp change, a model switch
(named model_changed, not cold), tools reordered, and a new conversation (no break)."""
from __future__ import annotations

import json
from pathlib import Path

from helpers.cli import CliRunner

from prefixguard.capture.store import open_store
from prefixguard.cli import main
from prefixguard.judge.session import Sessions
from prefixguard.proxy.analysis import Analyzer, FlowState, Response
from prefixguard.report.breaks import by_cause as _causes
from prefixguard.wire import parse_request

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "requests" / "anthropic"


def sequence() -> list[dict]:
    read = lambda case, name: json.loads((EXAMPLES / case / name).read_text())  # noqa: E731
    first, second = read("append_only", "a.json"), read("append_only", "b.json")
    switched = second | {"model": "claude-opus-4-1"}
    fresh = first | {"messages": [{"role": "user", "content": "A new question: what does ROUND_HALF_EVEN do?"}]}
    return [first, second, read("volatile_content", "b.json"), switched, read("tools_reordered", "b.json"), fresh]


def expected() -> list[tuple[int | None, list[str] | None]]:
    """(earlier line, causes when it breaks) per request, from the session model itself."""
    sessions, out = Sessions(), []
    for line, body in enumerate(sequence(), 1):
        m = sessions.observe(parse_request(json.dumps(body), path="/v1/messages"), line)
        out.append((m.earlier, m.comparison.causes if m.broken else None))
    return out


def test_the_sequence_exercises_the_session_model() -> None:
    got = expected()
    assert got[0] == (None, None) and got[1] == (1, None)
    assert [c for _, c in got[2:5]] == [["volatile_content"], ["model_changed"], ["tools_reordered"]]
    assert got[5][1] is None  # a new conversation over the same tools and system prompt


def test_proxy_lint_and_report_make_the_same_comparisons(tmp_path: Path) -> None:
    want = expected()
    # the proxy's analysis, with a real SQLite store
    store = tmp_path / "capture.db"
    analyzer = Analyzer(store=str(store))
    for line, body in enumerate(sequence(), 1):
        analyzer.request(FlowState(id=str(line), ts=float(line), sent=float(line), path="/v1/messages",
                                   body=json.dumps(body).encode()))
        analyzer.finish(Response(id=str(line), status=200, body=b"{}"))
    analyzer.close()
    with open_store(store) as db:
        records, rows = list(db.records()), list(db.rows())
    assert [int(r.previous_id) if r.previous_id else None for r in records] == [e for e, _ in want]
    assert [r.reprefill_tokens is not None for r in records] == [c is not None for _, c in want]

    # lint's sequence mode, on the same requests as a JSONL capture
    capture = tmp_path / "capture.jsonl"
    capture.write_text("".join(json.dumps({"path": "/v1/messages", "request": b}) + "\n" for b in sequence()))
    result = CliRunner().invoke(main, ["lint", str(capture), "--select", "PG5", "--format", "json"])
    found = {f["line"]: (f["data"]["earlier_line"], f["data"]["causes"]) for f in json.loads(result.stdout)["findings"]}
    assert found == {line: w for line, w in enumerate(want, 1) if w[1] is not None}

    # the report's causes, from the stored rows
    counted = {c.name: c.requests for c in _causes(rows)}
    assert counted == {c[0]: 1 for _, c in want if c is not None}
