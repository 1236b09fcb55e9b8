"""Claude Code's session logs: ~/.claude/projects/<project>/<session>.jsonl, and subagents' logs beside
them (<session>/subagents/agent-<id>.jsonl, or agent-<id>.jsonl in older versions).

Each line is an event: `user`, `assistant`, `system`, `summary`, ... with `timestamp`, `sessionId`,
`uuid`/`parentUuid`, `isSidechain` (and `agentId` for a subagent). An `assistant` line carries the API's
`message` with its `model` and `usage`; one API response is written as several lines (one per content
block) with the same `message.id`, so each response is counted once. A `system` line of subtype
`compact_boundary` (or a user line with `isCompactSummary`) marks a compaction. `<synthetic>` messages
(errors Claude Code wrote itself) made no API call.

Versions that ask the API for its cache diagnostics keep its answer in the message as the API sent it:
`message.diagnostics.cache_miss_reason` (null: no miss; else its `type` and `cache_missed_input_tokens`),
read by the Anthropic wire adapter into a Diagnosis.

`input_tokens` and `output_tokens` here are the streaming start's placeholders in many versions; the
cache fields (`cache_read_input_tokens`, `cache_creation_input_tokens` and its 5m/1h split) are final,
so hit rates rest on them.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from prefixguard.contracts.providers import providers
from prefixguard.importer.turns import Turn
from prefixguard.model.usage import Usage
from prefixguard.wire import anthropic

PLACEHOLDERS = (
    "Claude Code logs keep input_tokens/output_tokens from the start of the stream in many versions "
    "(placeholders, e.g. output 1): hit rates here use the cache fields, which are final; output "
    "token counts are not reliable."
)


def timestamp(value: Any) -> float | None:
    """Unix seconds of an ISO 8601 time ('2026-11-20T10:00:00.123Z'), None when it is none."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def lines(path: Path, skipped: list[str]) -> Any:
    """(line number, object) of a log; a line that is no JSON object (a write in progress) is noted, not fatal."""
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except (ValueError, RecursionError):
                skipped.append(f"{path}:{n}")
                continue
            if isinstance(obj, dict):
                yield n, obj


def count(value: Any) -> int:
    """A token count as logged; anything else (null, text, negative) counts as none."""
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else 0


def usage(raw: dict[str, Any]) -> Usage:
    written = count(raw.get("cache_creation_input_tokens"))
    found = raw.get("cache_creation")
    split: dict[str, Any] = found if isinstance(found, dict) else {}
    w1h = count(split.get("ephemeral_1h_input_tokens"))
    w5m = count(split.get("ephemeral_5m_input_tokens")) if "ephemeral_5m_input_tokens" in split else None
    if w5m is None:  # no split logged: the contract's default TTL
        w5m, w1h = (0, written) if providers()["anthropic"].default_ttl == "1h" else (max(0, written - w1h), w1h)
    read, uncached = count(raw.get("cache_read_input_tokens")), count(raw.get("input_tokens"))
    return Usage(
        prompt_total=read + w5m + w1h + uncached,
        cache_read=read,
        cache_write_5m=w5m,
        cache_write_1h=w1h,
        uncached=uncached,
        output=count(raw.get("output_tokens")),
        reported=True,
    )


def read(folder: Path, skipped: list[str]) -> list[Turn]:
    """Every API call logged under `folder` (a projects folder, one project's, or one file)."""
    files = [folder] if folder.is_file() else sorted(p for p in folder.rglob("*.jsonl") if p.is_file())
    turns: list[Turn] = []
    seen: set[str] = set()  # a resumed session's file repeats earlier responses: each counts once
    for path in files:
        compacted: set[str] = set()  # lineages with a compaction not yet followed by a call
        for n, obj in lines(path, skipped):
            kind = obj.get("type")
            sidechain = bool(obj.get("isSidechain"))
            session = str(obj.get("sessionId") or path.stem)
            lineage = f"{session}/{obj.get('agentId') or 'sidechain'}" if sidechain else session
            if (kind == "system" and obj.get("subtype") == "compact_boundary") or (
                kind == "user" and obj.get("isCompactSummary")
            ):
                compacted.add(lineage)
                continue
            message = obj.get("message")
            if kind != "assistant" or not isinstance(message, dict) or not isinstance(message.get("usage"), dict):
                continue
            model = message.get("model") if isinstance(message.get("model"), str) else None
            if model == "<synthetic>":
                continue
            key = str(message.get("id") or obj.get("requestId") or obj.get("uuid") or n)
            ts = timestamp(obj.get("timestamp"))
            if key in seen or ts is None:
                continue
            seen.add(key)
            turns.append(
                Turn(
                    tool="claude-code",
                    lineage=lineage,
                    ts=ts,
                    api="anthropic",
                    model=model,
                    usage=usage(message["usage"]),
                    ref=f"{path}:{n}",
                    sidechain=sidechain,
                    compacted_before=lineage in compacted,
                    diagnosis=anthropic.diagnosis(message),
                )
            )
            compacted.discard(lineage)
    return turns
