"""Codex CLI's session logs: $CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl (CODEX_HOME
defaults to ~/.codex).

Each line is {timestamp, type, payload}: `session_meta` (payload.id: the session), `turn_context`
(payload.model: the model of the turns that follow), `response_item`, `compacted` (the history was
compacted), and `event_msg`, whose payload of type `token_count` carries `info.last_token_usage` (the
call just made) and `info.total_token_usage` (the session so far): `input_tokens` (cached ones
included, as OpenAI reports them), `cached_input_tokens`, `output_tokens`. `info` is null before the
first call, and the same counts may be sent twice: a total that did not move is no new call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefixguard.importer.claude_code import count, lines, timestamp
from prefixguard.importer.turns import Turn
from prefixguard.model.usage import Usage


def usage(raw: dict[str, Any]) -> Usage:
    total = count(raw.get("input_tokens"))
    read = min(count(raw.get("cached_input_tokens")), total)
    return Usage(
        prompt_total=total,
        cache_read=read,
        uncached=total - read,
        output=count(raw.get("output_tokens")),
        reported=True,
    )


def _delta(now: dict[str, Any], before: dict[str, Any] | None) -> dict[str, Any]:
    """The last call's counts from two running totals (versions that log no last_token_usage)."""
    return {
        k: count(now.get(k)) - count((before or {}).get(k))
        for k in ("input_tokens", "cached_input_tokens", "output_tokens")
    }


def read(folder: Path, skipped: list[str]) -> list[Turn]:
    files = [folder] if folder.is_file() else sorted(p for p in folder.rglob("rollout-*.jsonl") if p.is_file())
    turns: list[Turn] = []
    for path in files:
        session, model, compacted, total = path.stem, None, False, None
        for n, obj in lines(path, skipped):
            kind, payload = obj.get("type"), obj.get("payload")
            if not isinstance(payload, dict):
                continue
            if kind == "session_meta":
                session = str(payload.get("id") or session)
            elif kind == "turn_context":
                model = payload.get("model") if isinstance(payload.get("model"), str) else model
            elif kind == "compacted" or (kind == "event_msg" and payload.get("type") == "context_compacted"):
                compacted = True
            elif kind == "event_msg" and payload.get("type") == "token_count":
                info = payload.get("info")
                ts = timestamp(obj.get("timestamp"))
                if not isinstance(info, dict) or ts is None:
                    continue
                now = info.get("total_token_usage")
                if isinstance(now, dict) and now == total:
                    continue  # the same counts sent again
                last = info.get("last_token_usage")
                if not isinstance(last, dict):
                    if not isinstance(now, dict):
                        continue
                    last = _delta(now, total)
                total = now if isinstance(now, dict) else total
                turns.append(
                    Turn(
                        tool="codex",
                        lineage=session,
                        ts=ts,
                        api="openai-responses",
                        model=model,
                        usage=usage(last),
                        ref=f"{path}:{n}",
                        compacted_before=compacted,
                    )
                )
                compacted = False
    return turns
