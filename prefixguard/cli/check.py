"""`prefixguard check BASE NEW`: did caching get worse than the baseline? For CI, like lint.

Exit status: 0 no regression, 1 a regression (a check over its threshold), 2 usage or input error.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click

from prefixguard.cli.exits import EXIT_FINDINGS, EXIT_OK, UsageError, fail
from prefixguard.cli.options import FILE, command, option, output_format
from prefixguard.judge.regression import Outcome, Thresholds, Window, as_unix, compare, parse_span, parse_time, side
from prefixguard.schemas import versioned
from prefixguard.utils.errors import InputError

CONFIG_KEYS = {"max-hit-rate-drop", "max-miss-cost-increase", "allow-new-causes", "min-requests", "incidents"}


WINDOWS = (
    "time windows (ISO 8601 such as 2026-12-01T09:00Z, unix seconds, or a duration before now such as 24h "
    "or 7d; the start is included, the end is not)"
)
THRESHOLDS = "thresholds (default: [tool.prefixguard.check] of the nearest pyproject.toml, else the values shown)"


class Points(click.ParamType):
    """A finite number of at least 0 (percentage points, a percent)."""

    name = "points"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            number = float(value)
        except ValueError:
            self.fail(f"{value!r} is not a number", param, ctx)
        if not number >= 0 or number == float("inf"):
            self.fail(f"{value} is not a number of at least 0", param, ctx)
        return number


@command()
@click.argument("base", metavar="BASE", help="The baseline capture (.db store, postgresql:// URL or JSONL export).")
@click.argument("new", metavar="NEW", help="The capture to check (may be the same file as BASE, with windows).")
@output_format(
    ("text", "json", "markdown"),
    old=(),
    help="What to print (json: prefixguard/schemas/check.schema.json; markdown: as the GitHub job summary).",
)
@option("--since", metavar="TIME", group=WINDOWS, help="Check only NEW's requests from this time on.")
@option("--until", metavar="TIME", group=WINDOWS, help="Check only NEW's requests before this time.")
@option("--baseline-since", metavar="TIME", group=WINDOWS, help="Take only BASE's requests from this time on.")
@option("--baseline-until", metavar="TIME", group=WINDOWS, help="Take only BASE's requests before this time.")
@option(
    "--exclude-incident",
    multiple=True,
    metavar="START..END",
    group=WINDOWS,
    help="Leave BASE's requests in this span out of the baseline (an outage, a provider incident); "
    "repeatable, added to the incidents of [tool.prefixguard.check].",
)
@option(
    "--max-hit-rate-drop",
    type=Points(),
    metavar="POINTS",
    group=THRESHOLDS,
    help="Most the share of prompt tokens read from cache may fall, in percentage points [5].",
)
@option(
    "--max-miss-cost-increase",
    type=Points(),
    metavar="PERCENT",
    group=THRESHOLDS,
    help="Most the cost of misses per request may rise, in percent [not checked].",
)
@option(
    "--allow-new-causes",
    is_flag=True,
    default=None,
    group=THRESHOLDS,
    help="A cause of breaks the baseline did not have is no regression [it is one].",
)
@option(
    "--min-requests",
    type=click.IntRange(1),
    metavar="N",
    group=THRESHOLDS,
    help="Check a model on its own when both captures hold at least N of its requests [5].",
)
@option(
    "--config",
    "config_file",
    type=FILE,
    metavar="PYPROJECT",
    help="A pyproject.toml to read [tool.prefixguard.check] from (default: the nearest one).",
)
def check(
    base: str,
    new: str,
    fmt: str,
    since: str | None,
    until: str | None,
    baseline_since: str | None,
    baseline_until: str | None,
    exclude_incident: tuple[str, ...],
    max_hit_rate_drop: float | None,
    max_miss_cost_increase: float | None,
    allow_new_causes: bool | None,
    min_requests: int | None,
    config_file: Path | None,
) -> int:
    """Compare a capture (or a time window of one) with a baseline capture: the share of prompt tokens read
    from cache, the cost of misses, causes of breaks the baseline did not have, overall and per model.
    Every figure comes from what the proxy stored (each request's usage and verdict).

    Incidents (an outage, a provider's cache trouble) are kept out of the baseline with --exclude-incident
    START..END or in pyproject.toml:

        [tool.prefixguard.check]
        max-hit-rate-drop = 5          # percentage points
        max-miss-cost-increase = 50    # percent, per request
        allow-new-causes = false
        min-requests = 5
        incidents = [{ start = 2026-11-02T10:00:00Z, end = 2026-11-02T14:00:00Z, note = "provider outage" }]

    With GITHUB_STEP_SUMMARY set (a GitHub Actions job), the result is also appended there as markdown.

    Exit status: 0 no regression, 1 a regression, 2 usage or input error.
    """
    from prefixguard.capture.reader import read_capture
    from prefixguard.lint.config import tool_table

    try:
        settings = _settings(*tool_table(config_file))
        flags = {
            "max_hit_rate_drop": max_hit_rate_drop,
            "max_miss_cost_increase": max_miss_cost_increase,
            "allow_new_causes": allow_new_causes,
            "min_requests": min_requests,
        }
        thresholds = Thresholds()._replace(
            **{k: v for k, v in (settings["thresholds"] | {k: v for k, v in flags.items() if v is not None}).items()}
        )
        incidents = (*settings["incidents"], *(_span(s, "--exclude-incident") for s in exclude_incident))
        base_window = Window(
            start=_time(baseline_since, "--baseline-since"), end=_time(baseline_until, "--baseline-until")
        )
        new_window = Window(start=_time(since, "--since"), end=_time(until, "--until"))
        base_side = side(read_capture(base), base, base_window, incidents)
        new_side = side(read_capture(new), new, new_window)
    except InputError as err:
        fail(str(err))
    for name, s in (("BASE", base_side), ("NEW", new_side)):
        if not s.total.requests:
            fail(f"{s.source}: no requests in {name}'s window" + (" outside its incidents" if s.excluded else ""))
        if s.total.hit_rate is None:
            fail(f"{s.source}: no request in {name}'s window reported its cache fields: nothing to compare")
    outcome = compare(base_side, new_side, thresholds)
    if fmt == "json":
        print(json.dumps(versioned(outcome.to_json()), indent=2))
    elif fmt == "markdown":
        print(markdown(outcome))
    else:
        print(text(outcome))
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        try:
            with open(summary, "a", encoding="utf-8") as f:
                f.write(markdown(outcome) + "\n")
        except OSError as err:
            fail(f"GITHUB_STEP_SUMMARY {summary}: {(err.strerror or str(err)).lower()}")
    return EXIT_FINDINGS if outcome.regression else EXIT_OK


def _time(text: str | None, option: str) -> float | None:
    if text is None:
        return None
    try:
        return parse_time(text)
    except ValueError as err:
        raise UsageError(str(err), option) from None


def _span(text: str, option: str) -> Window:
    try:
        return parse_span(text)
    except ValueError as err:
        raise UsageError(str(err), option) from None


def _settings(path: Path | None, table: dict[str, Any]) -> dict[str, Any]:
    """[tool.prefixguard.check] as thresholds and incidents; a wrong key or value names the file."""
    where = str(path) if path else "command line"
    section = table.get("check", {})
    if not isinstance(section, dict):
        raise InputError("[tool.prefixguard.check] must be a table", where)
    unknown = set(section) - CONFIG_KEYS
    if unknown:
        raise InputError(
            f"[tool.prefixguard.check] unknown key '{sorted(unknown)[0]}' (known: {', '.join(sorted(CONFIG_KEYS))})",
            where,
        )
    thresholds: dict[str, Any] = {}
    for key, kind in (
        ("max-hit-rate-drop", float),
        ("max-miss-cost-increase", float),
        ("min-requests", int),
        ("allow-new-causes", bool),
    ):
        if key not in section:
            continue
        value = section[key]
        ok = (
            isinstance(value, bool)
            if kind is bool
            else (
                isinstance(value, (int, float))
                and not isinstance(value, bool)
                and value >= (1 if kind is int else 0)
                and (kind is float or isinstance(value, int))
            )
        )
        if not ok:
            raise InputError(
                f"[tool.prefixguard.check] {key} must be "
                + {bool: "true or false", int: "a whole number of at least 1", float: "a number of at least 0"}[kind],
                where,
            )
        thresholds[key.replace("-", "_")] = kind(value)
    incidents = []
    listed = section.get("incidents", [])
    if not isinstance(listed, list):
        raise InputError("[tool.prefixguard.check] incidents must be a list", where)
    for n, item in enumerate(listed, 1):
        try:
            incidents.append(_incident(item))
        except (ValueError, TypeError) as err:
            raise InputError(f"[tool.prefixguard.check] incident {n}: {err}", where) from None
    return {"thresholds": thresholds, "incidents": tuple(incidents)}


def _incident(item: Any) -> Window:
    """An incident: "START..END", or a table {start, end, note} with TOML date-times or strings."""
    if isinstance(item, str):
        return parse_span(item)
    if not isinstance(item, dict) or "start" not in item or "end" not in item:
        raise ValueError('write "START..END" or { start = ..., end = ..., note = "..." }')
    ends = [
        parse_time(v) if isinstance(v, str) else as_unix(v) if hasattr(v, "year") else None
        for v in (item["start"], item["end"])
    ]
    start, end = ends
    if start is None or end is None:
        raise ValueError("start and end must be dates, date-times or strings")
    if end <= start:
        raise ValueError("its end is not after its start")
    return Window(start=start, end=end, note=str(item.get("note") or ""))


# ------------------------------------------------------------------------------------------- output


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def text(outcome: Outcome) -> str:
    b, n = outcome.base, outcome.new
    lines = [
        f"baseline {b.source}: {b.total.requests} requests"
        + (f" ({b.excluded} in incidents left out)" if b.excluded else "")
        + f", hit rate {_rate(b.total.hit_rate)}, {b.total.misses} misses costing ${b.total.miss_cost_usd:.4f}",
        f"checked  {n.source}: {n.total.requests} requests, hit rate {_rate(n.total.hit_rate)}, "
        f"{n.total.misses} misses costing ${n.total.miss_cost_usd:.4f}",
        "",
    ]
    for c in outcome.checks:
        lines.append(f"{'FAIL' if c.failed else 'ok  '}  {c.scope}: {c.message}")
    if outcome.skipped_models:
        lines.append(
            f"not checked alone (on one side only, or under {outcome.thresholds.min_requests} requests): "
            + ", ".join(outcome.skipped_models)
        )
    failed = sum(c.failed for c in outcome.checks)
    lines += ["", f"regression: {failed} check{'s' * (failed != 1)} failed" if failed else "no regression"]
    return "\n".join(lines)


def markdown(outcome: Outcome) -> str:
    """The GitHub job summary: the verdict, the per-model table, then each check."""
    failed = [c for c in outcome.checks if c.failed]
    lines = [
        f"### prefixguard check: {'regression' if failed else 'no regression'}",
        "",
        f"Baseline `{outcome.base.source}`, checked `{outcome.new.source}`"
        + (f"; {outcome.base.excluded} baseline requests in incidents left out." if outcome.base.excluded else "."),
        "",
        "| model | requests (base / new) | hit rate (base / new) | cost of misses (base / new) |",
        "| --- | ---: | ---: | ---: |",
    ]
    rows = [("all", outcome.base.total, outcome.new.total)] + [
        (m, outcome.base.models.get(m), outcome.new.models.get(m))
        for m in sorted(set(outcome.base.models) | set(outcome.new.models))
    ]
    for name, b, n in rows:
        lines.append(
            f"| {name} | {b.requests if b else 0} / {n.requests if n else 0} | "
            f"{_rate(b.hit_rate if b else None)} / {_rate(n.hit_rate if n else None)} | "
            f"${b.miss_cost_usd if b else 0:.4f} / ${n.miss_cost_usd if n else 0:.4f} |"
        )
    lines += [
        "",
        *(f"- {':x:' if c.failed else ':white_check_mark:'} **{c.scope}**: {c.message}" for c in outcome.checks),
    ]
    return "\n".join(lines)
