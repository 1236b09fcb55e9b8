"""The report answers a cost owner's questions (issue 30, item 4): spend, savings by caching, cost by model,
tenant and time, the date range, latency by mode, writes never read and a what-if for the 1-hour TTL;
human money and dates on a months-long log; TTFT compared like for like only. On real captures: an
imported Claude Code log of ~90 days (written in the fixtures' format), and real SQLite stores."""
from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
from helpers.cli import CliRunner
from helpers.months_log import Written, write

from prefixguard.cli import main
from prefixguard.contracts.providers import model_contract
from prefixguard.report.human import date_range, duration, usd
from prefixguard.schemas import schema
from prefixguard.capture.store import Record, Store
from prefixguard.model.usage import Usage

T0 = 1_795_000_000.0


def report_json(db: Path) -> dict:
    res = CliRunner().invoke(main, ["report", str(db), "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    jsonschema.validate(doc, schema("report"))
    return doc


@pytest.fixture(scope="module")
def months(tmp_path_factory: pytest.TempPathFactory) -> tuple[Written, Path]:
    root = tmp_path_factory.mktemp("months")
    written = write(root)
    db = root / "months.db"
    res = CliRunner().invoke(main, ["import", "claude-code", str(written.folder), "--store", str(db)])
    assert res.exit_code == 0, res.output
    return written, db


def _logged_costs(folder: Path) -> tuple[float, float, dict[str, float]]:
    """(paid, without cache, paid by model) read straight from the log lines at the contracts' prices."""
    paid = uncached = 0.0
    by_model: dict[str, float] = {}
    for path in folder.rglob("*.jsonl"):
        for line in path.read_text().splitlines():
            msg = json.loads(line)["message"]
            u, c = msg["usage"], model_contract("anthropic", msg["model"])
            w = u["cache_creation"]
            cost = c.cost(uncached=u["input_tokens"], cache_read=u["cache_read_input_tokens"],
                          write_5m=w["ephemeral_5m_input_tokens"], write_1h=w["ephemeral_1h_input_tokens"],
                          output=u["output_tokens"])
            paid += cost
            by_model[msg["model"]] = by_model.get(msg["model"], 0.0) + cost
            uncached += c.cost(uncached=u["input_tokens"] + u["cache_read_input_tokens"]
                               + u["cache_creation_input_tokens"], output=u["output_tokens"])
    return paid, uncached, by_model


def test_months_log_spend_savings_and_cost_by_model_and_day(months: tuple[Written, Path]) -> None:
    written, db = months
    m = report_json(db)["money"]
    paid, uncached, by_model = _logged_costs(written.folder)
    assert m["priced_requests"] == written.calls
    assert m["spend_usd"] == pytest.approx(paid) and m["without_cache_usd"] == pytest.approx(uncached)
    assert m["saved_usd"] == pytest.approx(uncached - paid) and m["saved_usd"] > 0
    assert {r["model"]: r["spend_usd"] for r in m["by_model"]} == pytest.approx(by_model)
    assert m["first"][:10] == written.first.date().isoformat() and m["last"][:16] == written.last.isoformat()[:16]
    over = m["over_time"]
    assert over["bucket"] == "day" and over["buckets"][0]["label"] == written.first.date().isoformat()
    assert sum(b["spend_usd"] for b in over["buckets"]) == pytest.approx(paid)
    assert sum(b["requests"] for b in over["buckets"]) == written.calls
    # tenants: the logs' sessions and sub-agents (no API key or user in a log), said so
    assert m["tenants"] == 2 * len(list(written.folder.rglob("subagents")))
    assert [b["basis"] for b in m["tenant_basis"]] == ["session (or sub-agent) in the agent's log"]
    assert m["latency"] == []                       # agents' logs time nothing


def test_months_log_writes_never_read_and_the_longer_ttl(months: tuple[Written, Path]) -> None:
    written, db = months
    m = report_json(db)["money"]
    unread = m["unread_writes"]
    assert unread["requests"] == written.unread_writes
    assert unread["cost_usd"] > unread["premium_usd"] > 0       # paid 1.25x; 0.25x of it over plain input
    sub = next(w for w in m["whatif_longer_ttl"] if w["scope"] == "sub-agents")
    # sub-agent calls 10 minutes apart: every 5m write expires, a 1h one would have been read
    assert sub["rewrites_avoided"] == written.subagent_ttl_misses
    assert sub["net_usd"] == pytest.approx(sub["with_longer_ttl_usd"] - sub["actual_usd"])
    assert sub["pays_off"] and sub["net_usd"] < 0


def test_months_log_reads_as_people_write(months: tuple[Written, Path]) -> None:
    written, db = months
    res = CliRunner().invoke(main, ["report", str(db)])
    assert res.exit_code == 0, res.output
    first, headline = res.output.splitlines()[:2]
    days = (written.last - written.first).days
    assert f"({days} days)" in first and written.first.date().isoformat() in first
    assert not re.search(r"[\d,]{4,} h\b", res.output)              # no "2,144 h"
    assert not re.search(r"\$[1-9][\d,]*\.\d{3,}", res.output)      # no "$482.3321"
    assert "top cause: cache expired between calls (TTL)" in headline and "miss_ttl_expired" not in headline
    assert "latency: no call in the capture has a timing" in res.output
    assert f"writes never read: {written.unread_writes} calls" in res.output


def _row(store: Store, i: int, ts: float, stream: bool, ttft: float, **kw: object) -> None:
    body = {"model": "gpt-4o", "stream": stream, "messages": [{"role": "user", "content": f"q{i}"}]}
    store.add(Record(id=f"r{i:02d}", ts=ts, path="/v1/chat/completions", api="openai-chat", model="gpt-4o",
                     request=json.dumps({**body, **kw}), status=200, usage=Usage(2000, 1024, 0, 0, 976, 50, True),
                     ttft_s=ttft, total_s=ttft + (1.5 if stream else 0.0), verdict="hit"))


def test_ttft_is_compared_like_for_like(tmp_path: Path) -> None:
    """Non-streaming calls first (their "first byte" is the whole answer), streaming ones later: the old
    report said "TTFT fell x0.04". Each mode is compared with itself, and latency is given per mode."""
    db = tmp_path / "mixed.db"
    with Store(db) as store:
        for i in range(24):
            _row(store, i, T0 + 10 * i, stream=i >= 12, ttft=0.08 + 0.001 * i if i >= 12 else 2.0 + 0.01 * i)
    doc = report_json(db)
    finding = doc["split"]["finding"]
    assert "fell" not in finding and "x0.0" not in finding, finding
    assert "compared over" in finding and doc["split"]["modes"] == ["non-streaming", "streaming"]
    assert all(len({m for m, v in w["ttft_p50_by_mode"].items() if v is not None}) <= 1 for w in doc["windows"])
    latency = {r["mode"]: r for r in doc["money"]["latency"]}
    assert latency["streaming"]["ttft_s"]["p50"] == pytest.approx(0.08 + 0.001 * 17.5)
    assert latency["non-streaming"]["ttft_s"]["p50"] == pytest.approx(2.0 + 0.01 * 5.5)


def test_nothing_comparable_is_said(tmp_path: Path) -> None:
    db = tmp_path / "apart.db"
    with Store(db) as store:      # two windows: each mode in one of them
        for i in range(8):
            _row(store, i, T0 + 10 * i, stream=i >= 4, ttft=0.1 if i >= 4 else 2.0)
    finding = report_json(db)["split"]["finding"]
    assert "nothing like for like to compare" in finding and "fell" not in finding, finding


def test_calls_stored_without_bodies_are_said_to_be_of_unknown_mode(tmp_path: Path) -> None:
    db = tmp_path / "nobodies.db"
    with Store(db) as store:      # the proxy's --no-bodies: nothing says whether a call streamed
        for i in range(8):
            store.add(Record(id=f"r{i}", ts=T0 + 10 * i, path="/v1/messages", api="anthropic", model="claude-sonnet-4-5",
                             status=200, usage=Usage(2000, 1024, 0, 0, 976, 50, True), ttft_s=0.2, total_s=1.0))
    doc = report_json(db)
    assert doc["split"]["mode"] == "mode unknown" and "Whether these calls streamed is unknown" in doc["split"]["finding"]
    assert [r["mode"] for r in doc["money"]["latency"]] == ["mode unknown"]


def test_tenants_named_by_the_prompt_cache_key(tmp_path: Path) -> None:
    db = tmp_path / "keys.db"
    with Store(db) as store:
        for i in range(6):
            _row(store, i, T0 + i, stream=True, ttft=0.1, prompt_cache_key=f"team-{'ab'[i % 2]}")
    m = report_json(db)["money"]
    assert sorted(r["tenant"] for r in m["by_tenant"]) == ["team-a", "team-b"]
    assert m["tenant_basis"] == [{"basis": "prompt_cache_key in the request", "requests": 6}]


def _anthropic(turns: int) -> str:
    system = [{"type": "text", "text": "You are a careful support agent. " * 600, "cache_control": {"type": "ephemeral"}}]
    messages = [{"role": "user" if k % 2 == 0 else "assistant", "content": f"turn {k}"} for k in range(turns)]
    return json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 50, "system": system, "messages": messages})


def test_writes_never_read_are_found_by_prefix_and_ttl(tmp_path: Path) -> None:
    """A writes; B continues A's prefix 10 minutes later (A's 5m write expired unread) and writes it all
    again; C reads B's write and writes a little more, which nothing reads before it expires; another
    tenant's call ends the capture after that."""
    db = tmp_path / "unread.db"
    rows = [("A", 0, _anthropic(1), Usage(5000, 0, 5000, 0, 0, 20, True)),
            ("B", 600, _anthropic(3), Usage(5100, 0, 5100, 0, 0, 20, True)),
            ("C", 630, _anthropic(5), Usage(5200, 5100, 100, 0, 0, 20, True)),
            ("D", 1300, _anthropic(1), Usage(5000, 0, 0, 0, 5000, 20, True))]
    with Store(db) as store:
        for rid, dt, body, usage in rows:
            store.add(Record(id=rid, ts=T0 + dt, path="/v1/messages", api="anthropic", model="claude-sonnet-4-5",
                             tenant="other" if rid == "D" else "k1", request=body, status=200, usage=usage))
    unread = report_json(db)["money"]["unread_writes"]
    assert unread["examples"] == ["A", "C"] and unread["tokens"] == 5100
    c = model_contract("anthropic", "claude-sonnet-4-5")
    assert unread["cost_usd"] == pytest.approx(c.cost(write_5m=5100))
    assert unread["premium_usd"] == pytest.approx(c.cost(write_5m=5100) - c.cost(uncached=5100))


def test_money_and_spans_read_as_people_write() -> None:
    assert (usd(482.3321), usd(0.0585), usd(12_345.6), usd(-0.5)) == ("$482.33", "$0.0585", "$12,346", "-$0.5000")
    assert (duration(24.4), duration(89 * 86400 + 3000), duration(7200 * 1.5)) == ("24 s", "89 days", "3.0 h")
    assert date_range(T0, T0 + 24) == "2026-11-18 11:06:40 to 11:07:04 UTC (24 s)"
