"""`prefixguard import claude-code|codex`: agents' session logs (written here in their documented format,
tests/data/agent_logs/) become capture rows in a real SQLite store, and `report` shows hit rate over
time, TTL expiries, compactions and model switches from them."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers.cli import CliRunner

from prefixguard.cli import main
from prefixguard.contracts.providers import providers
from prefixguard.capture.store import open_store

DATA = Path(__file__).resolve().parent / "data" / "agent_logs"
CLAUDE = DATA / "claude-code" / "projects"
CODEX = DATA / "codex" / "sessions"


def imported(tmp_path: Path, tool: str, folder: Path | None, *env: tuple[str, str]) -> tuple[list[dict], str]:
    store = tmp_path / f"{tool}.db"
    args = ["import", tool] + ([str(folder)] if folder else []) + ["--store", str(store)]
    res = CliRunner().invoke(main, args, env=dict(env))
    assert res.exit_code == 0, res.output
    with open_store(store) as db:
        return list(db.rows()), res.output


def report(store: Path) -> dict:
    res = CliRunner().invoke(main, ["report", str(store), "-o", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_claude_code_turns_and_their_verdicts(tmp_path: Path) -> None:
    rows, out = imported(tmp_path, "claude-code", CLAUDE)
    main_rows = [r for r in rows if "/" not in r["tenant"]]
    side = [r for r in rows if "/" in r["tenant"]]
    # 9 API calls in the session (two of them logged as two lines each; one <synthetic> error is no call)
    assert [r["verdict"] for r in main_rows] == ["cold", "hit", "hit", "miss_ttl_expired", "hit",
                                                 "miss_prefix_changed", "hit", "miss_prefix_changed", "hit"]
    assert [r["cause"] for r in main_rows if r["verdict"] == "miss_prefix_changed"] == ["history_compacted",
                                                                                       "model_changed"]
    ttl = next(r for r in main_rows if r["verdict"] == "miss_ttl_expired")
    assert ttl["cause"] == "gap of 8m10s over the 5m TTL" and ttl["expected_cached"] == 20_000
    assert {r["model"] for r in main_rows} == {"claude-sonnet-4-5-20250929", "claude-opus-4-5-20251101"}
    # The subagent is a lineage of its own; it wrote with a 1h TTL, so 6.5 minutes later it still hits.
    assert [r["verdict"] for r in side] == ["cold", "hit"] and side[0]["usage"]["cache_write_1h"] == 6000
    assert all(r["request"] is None and r["upstream"] == "import:claude-code" for r in rows)
    assert all(r["usage"]["reported"] for r in rows)
    assert "placeholders" in out and "1 lines were not JSON" in out
    assert "prices: genai-prices" in out


def test_ttl_comes_from_the_contract_not_the_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(providers()["anthropic"].ttl_seconds, "5m", 600)   # a 10-minute TTL
    rows, _ = imported(tmp_path, "claude-code", CLAUDE)
    verdicts = [r["verdict"] for r in rows if "/" not in r["tenant"]]
    assert "miss_ttl_expired" not in verdicts and verdicts[3] == "miss_unexplained"


def test_report_shows_hit_rate_ttl_expiries_compactions_and_model_switches(tmp_path: Path) -> None:
    imported(tmp_path, "claude-code", CLAUDE)
    doc = report(tmp_path / "claude-code.db")
    assert doc["requests"] == 11
    assert [w["hit_ratio"] is not None for w in doc["windows"]] == [True] * len(doc["windows"])
    assert doc["infra"]["ttl_expired"] == 1 and doc["infra"]["ttl_expired_tokens"] == 20_000
    causes = {c["name"]: c for c in doc["causes"]}
    assert causes["history_compacted"]["reprefill_tokens"] == 20_900 - 14_000
    assert causes["model_changed"]["reprefill_tokens"] == 17_500 and causes["model_changed"]["cost_usd"] > 0
    assert doc["notes"] and "placeholders" in doc["notes"][0]
    assert any(p.startswith("genai-prices") for p in doc["prices"])


def test_codex_turns(tmp_path: Path) -> None:
    rows, _ = imported(tmp_path, "codex", CODEX)
    # info: null and a token_count sent twice are no calls
    assert [r["verdict"] for r in rows] == ["cold", "hit", "miss_ttl_expired", "hit", "miss_prefix_changed",
                                            "miss_prefix_changed"]
    assert [r["cause"] for r in rows][4:] == ["history_compacted", "model_changed"]
    assert rows[1]["usage"] == {"prompt_total": 12800, "cache_read": 11904, "cache_write_5m": 0,
                                "cache_write_1h": 0, "uncached": 896, "output": 250, "reported": True,
                                "reasoning": 0, "server_calls": 0, "server_added": 0, "first_pass": 0}
    assert rows[2]["cause"] == "gap of 19m30s over the in_memory TTL" and rows[2]["expected_cached"] == 12800
    assert [r["model"] for r in rows] == ["gpt-5-codex"] * 5 + ["gpt-5"]
    assert {r["api"] for r in rows} == {"openai-responses"}
    doc = report(tmp_path / "codex.db")
    assert doc["infra"]["ttl_expired"] == 1 and {c["name"] for c in doc["causes"]} == {"history_compacted",
                                                                                        "model_changed"}


def test_default_folders_and_reimport(tmp_path: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(CLAUDE, home / ".claude" / "projects")
    rows, _ = imported(tmp_path, "claude-code", None, ("HOME", str(home)))
    again, _ = imported(tmp_path, "claude-code", None, ("HOME", str(home)))
    assert len(rows) == len(again) == 11               # the same logs replace their rows
    codex_home = tmp_path / "codex-home"
    shutil.copytree(CODEX, codex_home / "sessions")
    rows, _ = imported(tmp_path, "codex", None, ("CODEX_HOME", str(codex_home)))
    assert len(rows) == 6


@pytest.mark.parametrize("tool", ["claude-code", "codex"])
def test_bad_folders_fail_in_one_line(tmp_path: Path, tool: str) -> None:
    for folder, message in [(tmp_path / "missing", "no such folder"), (tmp_path, "session log with token usage")]:
        res = CliRunner().invoke(main, ["import", tool, str(folder), "--store", str(tmp_path / "x.db")])
        assert res.exit_code == 2 and res.output.count("\n") == 1 and message in res.output, res.output


def test_odd_lines_do_not_break_the_import(tmp_path: Path) -> None:
    """Values of the wrong type, a folder named like a log, binary junk: skipped or counted as none."""
    folder = tmp_path / "projects" / "p"
    folder.mkdir(parents=True)
    (folder / "odd.jsonl").mkdir()
    (folder / "junk.jsonl").write_bytes(b"\xff\xfe\x00binary\n")
    lines = [{"type": "assistant", "sessionId": 7, "timestamp": "2026-11-20T10:00:00Z",
              "message": {"id": "m1", "model": ["x"], "usage": {"input_tokens": "12", "cache_read_input_tokens": None,
                                                                "cache_creation_input_tokens": -5,
                                                                "cache_creation": "oops", "output_tokens": True}}},
             {"type": "assistant", "sessionId": "s", "timestamp": 12345, "message": {"id": "m2", "usage": {}}},
             {"type": "assistant", "sessionId": "s", "timestamp": "2026-11-20T10:00:05Z",
              "message": {"id": "m3", "model": "claude-sonnet-4-5", "usage": {"cache_read_input_tokens": 2000,
                                                                             "cache_creation_input_tokens": 100}}}]
    (folder / "s.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    rows, out = imported(tmp_path, "claude-code", tmp_path / "projects")
    assert len(rows) == 2 and "1 lines were not JSON" in out
    odd = next(r for r in rows if r["tenant"] == "7")
    assert odd["model"] is None and odd["usage"]["prompt_total"] == 0
    good = next(r for r in rows if r["tenant"] == "s")
    assert good["usage"]["cache_read"] == 2000 and good["usage"]["cache_write_5m"] == 100
    assert report(tmp_path / "claude-code.db")["requests"] == 2


DIAGNOSED = DATA / "claude-code-diagnostics" / "projects"


def test_claude_code_diagnostics_beside_our_verdicts(tmp_path: Path) -> None:
    """A Claude Code log that kept the API's own cache_miss_reason per call (Anthropic's diagnostics):
    each reason is stored beside our verdict with the agreement of the two, the import says the figure,
    and the report's agreement table (the one the proxy's diagnoses fill) reads them alike."""
    rows, out = imported(tmp_path, "claude-code", DIAGNOSED)
    said = [(r["verdict"], (r["diagnosis"] or {}).get("label"), (r["diagnosis"] or {}).get("agreement")) for r in rows]
    assert said == [
        ("cold", None, None),                                         # the first call asks for nothing
        ("hit", "none", "both_clear"),
        ("miss_unexplained", "system_changed", "agree"),              # the log alone cannot place it; the API can
        ("hit", "none", "both_clear"),
        ("miss_unexplained", "tools_changed", "agree"),
        ("hit", "none", "both_clear"),
        ("hit", "messages_changed", "only_provider"),                 # 600 missed: within our tolerance
        ("miss_prefix_changed", "messages_changed", "agree"),         # our history_compacted: the messages
        ("miss_prefix_changed", "model_changed", "agree"),
        ("miss_ttl_expired", "none", "both_clear"),                   # the entry aged out; the prompt held
        ("hit", "previous_message_not_found", None)]                  # no comparison: nothing to set beside ours
    system = rows[2]
    assert system["diagnosis"]["missed_tokens"] == 5800 and system["diagnosis"]["level"] == "system"
    assert "the API says: system_changed (5,800 missed) -- agree" in system["detail"]
    assert rows[6]["detail"].endswith("the API says: messages_changed (600 missed) -- only provider")
    assert "prefixguard agrees on 8 of 9 compared (1 misses only the API saw" in out
    assert "API: system_changed" in out and "prefixguard: miss_unexplained 1" in out
    agreement = report(tmp_path / "claude-code.db")["fields"]["agreement"]
    assert (agreement["compared"], agreement["agreed"], agreement["both_clear"]) == (9, 8, 4)
    causes = {c["cause"]: c for c in agreement["causes"]}
    assert causes["tools_changed"]["agree"] == 1 and causes["history_compacted"]["agree"] == 1
    assert causes["messages_changed"]["only_provider"] == 1 and agreement["disagreements"] == []


def test_logs_without_diagnostics_store_none(tmp_path: Path) -> None:
    rows, out = imported(tmp_path, "claude-code", CLAUDE)
    assert all(r["diagnosis"] is None for r in rows) and "cache diagnostics" not in out
