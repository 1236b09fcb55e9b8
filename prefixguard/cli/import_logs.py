"""`prefixguard import claude-code [DIR]` and `prefixguard import codex [DIR]`: the session logs an agent
already wrote, as capture rows that `prefixguard report` reads (hit rate over time, TTL expiries,
compactions, model switches), without a proxy."""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import click

from prefixguard.capture.store import Record, open_store
from prefixguard.cli.options import FILE, Group, option
from prefixguard.contracts.providers import model_contract
from prefixguard.importer import claude_code, codex
from prefixguard.importer.turns import Turn, judge
from prefixguard.judge.causes import Cause
from prefixguard.judge.verdict import VerdictName
from prefixguard.model.diagnosis import NO_MISS
from prefixguard.utils.errors import InputError, check_regular_file, reading
from prefixguard.utils.styled import printable

STORE_HELP = "Capture store (SQLite) to write; rows of an earlier import of the same logs are replaced."


def _write(
    name: str, folder: Path, store: Path, reader: Callable[[Path, list[str]], list[Turn]], note: str | None
) -> None:
    if not folder.exists():
        raise InputError(f"no such folder (where {name} keeps its session logs)", str(folder))
    if store.exists():  # refused before the logs are read: a FIFO would block, a device swallow the rows
        check_regular_file(store, "capture file")
    skipped: list[str] = []
    with reading(folder, f"a {name} log line"):  # a field of an odd shape in a log: its error, not ours
        turns = reader(folder, skipped)
        if not turns:
            raise InputError(f"no {name} session log with token usage found", str(folder))
        records = judge(turns)
    with open_store(store, create=True) as db:
        for rec in records:
            db.add(rec)
    verdicts = Counter(r.verdict for r in records)
    causes = Counter(c for r in records if r.verdict == VerdictName.MISS_PREFIX_CHANGED for c in r.causes)
    read = sum(r.usage.cache_read for r in records)
    prompt = sum(r.usage.prompt_total for r in records)
    lineages = {t.lineage for t in turns}
    side = {t.lineage for t in turns if t.sidechain}
    print(
        printable(
            f"imported {len(records)} model calls of {len(lineages) - len(side)} session(s)"
            f"{f' and {len(side)} subagent(s)' if side else ''} from {folder} into {store}"
        )
    )
    lost = sum(r.cost_usd or 0 for r in records)
    prices = sorted({model_contract(r.api or "", r.model).prices for r in records if r.model})
    print(
        f"  cache hit rate {read / prompt if prompt else 0:.1%} of prompt tokens; "
        f"{verdicts[VerdictName.MISS_TTL_EXPIRED]} TTL expiries, {causes[Cause.HISTORY_COMPACTED]} misses after a "
        f"compaction, {causes[Cause.MODEL_CHANGED]} after a model switch, "
        f"{verdicts[VerdictName.MISS_UNEXPLAINED]} unexplained; misses cost ${lost:,.4f} over reading the cache "
        f"(prices: {'; '.join(prices)})"
    )
    for line in _diagnoses(records):  # the API's reasons, as the transcripts hold them
        print(printable(line))
    if note:
        print(printable(f"  note: {note}"))
    if skipped:
        print(
            printable(f"  {len(skipped)} lines were not JSON (a log being written?), first: {skipped[0]}"),
            file=sys.stderr,
        )
    print(printable(f"  next: prefixguard report {store}"))


def _diagnoses(records: list[Record]) -> list[str]:
    """The API's own miss reasons the log kept, beside our verdicts: the agreement figure (as the
    report's), then per reason the verdicts we gave those calls."""
    said: dict[str, Counter[str]] = {}
    agreements: Counter[str] = Counter()
    for rec in records:
        diag = rec.diagnosis
        if diag is None:
            continue
        reason = diag.label if diag.status != NO_MISS else "no miss"
        said.setdefault(str(reason or diag.status), Counter())[rec.verdict or "?"] += 1
        agreements[rec.agreement or "not compared"] += 1
    if not said:
        return []
    compared = sum(n for k, n in agreements.items() if k != "not compared")
    agreed = agreements["agree"] + agreements["both_clear"]
    lines = [
        f"  the API's own cache diagnostics on {sum(agreements.values())} calls: prefixguard agrees on "
        f"{agreed} of {compared} compared ({agreements['only_provider']} misses only the API saw, "
        f"{agreements['only_us']} only prefixguard, {agreements['disagree']} placed differently)"
    ]
    width = max(len(k) for k in said)
    for reason, verdicts in sorted(said.items(), key=lambda kv: (-sum(kv[1].values()), kv[0])):
        ours = ", ".join(f"{v} {n}" for v, n in verdicts.most_common())
        lines.append(f"    API: {reason:<{width}}  {sum(verdicts.values()):>4}   prefixguard: {ours}")
    return lines


@click.group("import", cls=Group)
def import_logs() -> None:
    pass  # its help is its line in `prefixguard --help` (cli/lazy.py)


def _options(f: Callable[..., None]) -> click.Command:
    """FOLDER and --store, the same for every agent."""
    f = option("--store", type=FILE, default=Path("agent-logs.db"), help=STORE_HELP + " [default: agent-logs.db]")(f)
    f = click.argument("folder", required=False, type=FILE)(f)
    return import_logs.command(f.__name__.removesuffix("_logs").replace("_", "-"))(f)


@_options
def claude_code_logs(folder: Path | None, store: Path) -> None:
    """Claude Code's logs: FOLDER defaults to ~/.claude/projects (all projects); a project's folder or one
    session's .jsonl also works."""
    _write(
        "Claude Code", folder or Path.home() / ".claude" / "projects", store, claude_code.read, claude_code.PLACEHOLDERS
    )


@_options
def codex_logs(folder: Path | None, store: Path) -> None:
    """Codex CLI's logs: FOLDER defaults to $CODEX_HOME/sessions (CODEX_HOME: ~/.codex); a day's folder or
    one rollout-*.jsonl also works."""
    home = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")
    _write("Codex", folder or home / "sessions", store, codex.read, None)
