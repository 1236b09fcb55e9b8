"""`report --by client|tenant|site|model`: the report's key figures for each value of one label, so a
capture of several clients, tenants or call sites says which of them broke the cache.

Per group: requests, hit rate (tokens read from the cache over prompt tokens, where the provider reported
them), misses by cause, what the misses cost, and spend. Verdicts and costs are the rows' stored ones (as
the proxy judged them), never judged again here; spend is each row's tokens at its model's contract prices.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from prefixguard.contracts.providers import model_contract
from prefixguard.judge.names import MISSES, miss_cause
from prefixguard.model.usage import Usage
from prefixguard.report.human import usd
from prefixguard.report.money import paid, tenant
from prefixguard.utils.styled import columns, printable

LABELS = ("client", "tenant", "site", "model")
NONE = "-"  # a row that carries no value of the label (a capture from before it, a caller that named none)


def label_of(row: dict[str, Any], label: str) -> str:
    """The row's value of one label. tenant: as the report's cost-per-tenant table names it."""
    if label == "tenant":
        return tenant(row)[0]
    value = row.get(label)
    return str(value) if value else NONE


class _Group:
    def __init__(self, value: str) -> None:
        self.value = value
        self.requests = self.prompt = self.read = 0
        self.causes: Counter[str] = Counter()
        self.miss_cost = self.spend = 0.0

    def add(self, row: dict[str, Any]) -> None:
        self.requests += 1
        u = Usage.of_export(row.get("usage"))
        if u.reported:
            self.prompt += u.prompt_total
            self.read += u.cache_read
        cause = miss_cause(row.get("verdict"), row.get("causes") or ()) if row.get("verdict") in MISSES else None
        if cause:
            self.causes[cause] += 1
            self.miss_cost += row.get("cost_usd") or 0.0
        if u.prompt_total or u.output:
            self.spend += paid(model_contract(row.get("api") or "", row.get("model")), u)

    def to_json(self, label: str) -> dict[str, Any]:
        return {
            label: self.value,
            "requests": self.requests,
            "hit_rate": self.read / self.prompt if self.prompt else None,
            "misses": sum(self.causes.values()),
            "misses_by_cause": [{"cause": c, "requests": k} for c, k in self.causes.most_common()],
            "miss_cost_usd": self.miss_cost,
            "spend_usd": self.spend,
        }


def by_label(rows: list[dict[str, Any]], label: str) -> dict[str, Any]:
    """The groups of one label, the one whose misses cost most (then the most misses) first, and a
    finding that names the group behind most prefix breaks. Rows forwarded without analysis are left out."""
    if label not in LABELS:
        raise ValueError(f"--by: no label {label!r} (one of {', '.join(LABELS)})")
    groups: dict[str, _Group] = {}
    for row in rows:
        if row.get("analysed") is False:
            continue
        value = label_of(row, label)
        groups.setdefault(value, _Group(value)).add(row)
    ordered = sorted(groups.values(), key=lambda g: (-g.miss_cost, -sum(g.causes.values()), -g.requests, g.value))
    return {"label": label, "groups": [g.to_json(label) for g in ordered], "finding": _finding(ordered, label)}


def _finding(groups: list[_Group], label: str) -> str:
    breaks = {g.value: g.causes.total() - g.causes["ttl_expired"] - g.causes["server_side"] for g in groups}
    worst = max(groups, key=lambda g: (breaks[g.value], g.miss_cost), default=None)
    if worst is None or not breaks[worst.value]:
        return f"No {label} broke the cached prefix."
    top = next(c for c, _ in worst.causes.most_common() if c not in ("ttl_expired", "server_side"))
    others = sum(breaks.values()) - breaks[worst.value]
    return (
        f"{label} {worst.value} broke the cached prefix in {breaks[worst.value]} of its {worst.requests} "
        f"requests (top cause {top}, {usd(worst.miss_cost)}); the other {label}s broke it {others} times."
    )


def render(table: dict[str, Any]) -> list[str]:
    """The text lines of the table: one line per group, then the finding."""
    label = table["label"]
    head = (label, "requests", "hit rate", "misses", "cost of misses", "spend", "causes")
    rows = [
        (
            printable(g[label]),  # a caller's header text: shown, never acted on
            f"{g['requests']}",
            f"{g['hit_rate']:.0%}" if g["hit_rate"] is not None else "-",
            f"{g['misses']}",
            usd(g["miss_cost_usd"]),
            usd(g["spend_usd"]),
            printable(", ".join(f"{c['cause']} {c['requests']}" for c in g["misses_by_cause"])) or "-",
        )
        for g in table["groups"]
    ]
    return [
        f"By {label}:",
        *columns(head, rows, indent="  ", left=(0, len(head) - 1)).split("\n"),
        printable(table["finding"]),
    ]
