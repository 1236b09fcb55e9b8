"""A Claude Code projects folder spanning ~90 days, written in the log format the fixtures in
tests/data/agent_logs/claude-code use (one JSON event a line, sub-agents in <session>/subagents/), with
what it holds known by construction: which cache writes were never read, which calls found their cache
expired within the hour."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

START = datetime(2026, 8, 3, 9, 0, tzinfo=UTC)
DAYS = 90
MODELS = ("claude-sonnet-4-5-20250929", "claude-haiku-4-5-20251001")


@dataclass
class Written:
    """What the generator wrote: the facts a report of it must find."""

    folder: Path
    first: datetime
    last: datetime
    calls: int = 0
    unread_writes: int = 0        # calls whose write no later call of their lineage read before it expired
    subagent_ttl_misses: int = 0  # sub-agent calls after a 5m expiry that a 1h TTL would have covered
    models: set[str] = field(default_factory=set)


def _line(session: str, ts: datetime, n: int, model: str, read: int, write: int, sidechain: bool = False,
          agent: str | None = None) -> str:
    usage = {"input_tokens": 3, "cache_creation_input_tokens": write, "cache_read_input_tokens": read,
             "output_tokens": 180, "cache_creation": {"ephemeral_5m_input_tokens": write,
                                                      "ephemeral_1h_input_tokens": 0}}
    event = {"parentUuid": None, "isSidechain": sidechain, "type": "assistant", "sessionId": session,
             "uuid": f"{session}-{agent or 'main'}-{n}", "timestamp": ts.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
             "message": {"id": f"msg_{session[:8]}_{agent or 'm'}_{n}", "type": "message", "role": "assistant",
                         "model": model, "content": [{"type": "text", "text": "ok"}], "usage": usage}}
    if agent:
        event["agentId"] = agent
    return json.dumps(event)


def write(root: Path) -> Written:
    """Sessions every third day for DAYS days. Each: five main calls 30 s apart growing the cache, a
    20-minute pause (over the 5m TTL, under 1h: the next call writes it all again), two more calls; and a
    sub-agent whose three calls come 10 minutes apart (each one's 5m write expires unread)."""
    folder = root / "projects" / "-home-dev-months"
    folder.mkdir(parents=True)
    out = Written(root / "projects", START, START)
    for day in range(0, DAYS, 3):
        session = f"{day:08d}-0000-4000-8000-000000000000"
        model = MODELS[(day // 3) % 2]
        out.models.add(model)
        t = START + timedelta(days=day, hours=day % 7)
        lines, total = [], 0
        for n in range(7):
            if n == 5:
                t += timedelta(minutes=20)
                read, write = 0, total + 900     # expired: all written again
                out.unread_writes += 1           # the write of call 4 expired unread
            else:
                t += timedelta(seconds=30)
                read, write = total, 900 if total else 16000
            total = read + write
            lines.append(_line(session, t, n, model, read, write))
        out.unread_writes += 1                   # the session's last write: never read
        (folder / f"{session}.jsonl").write_text("\n".join(lines) + "\n")
        agent = f"a{day:06d}"
        sub = folder / session / "subagents"
        sub.mkdir(parents=True)
        at = START + timedelta(days=day, hours=day % 7, minutes=1)
        sub_lines = []
        for n in range(3):
            at += timedelta(minutes=10)
            sub_lines.append(_line(session, at, n, model, 0, 6000, sidechain=True, agent=agent))
            out.unread_writes += 1               # each sub-agent write expires before the next call
            out.subagent_ttl_misses += n > 0
        (sub / f"agent-{agent}.jsonl").write_text("\n".join(sub_lines) + "\n")
        out.calls += 10
        out.last = max(out.last, t, at)
    out.unread_writes -= 1   # the log's last call (a sub-agent's) wrote at its very end: still alive, not counted
    return out
