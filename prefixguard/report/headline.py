"""What a report leads with: the headline (hit rate, money lost to misses, the top cause and its fix), the
requests it names with their bodies, and notes on its source (rows imported from agents' logs)."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any

from prefixguard.contracts.providers import model_contract
from prefixguard.judge.causes import CAUSES, generic_fix
from prefixguard.judge.verdict import VerdictName, of_row
from prefixguard.model.usage import Usage
from prefixguard.report.human import usd

if TYPE_CHECKING:
    from prefixguard.report.findings import Diagnosis

# misses no cause explains
LOST_VERDICTS = (VerdictName.MISS_TTL_EXPIRED, VerdictName.MISS_SERVER_SIDE, VerdictName.MISS_UNEXPLAINED)
MAX_LISTED_BODY = 256 * 1024  # a listed request's body kept in the HTML report, at most


# What a cost owner reads for a verdict that heads the page as its top cause (no cause of a prefix change).
VERDICT_LABELS: dict[str, str] = {
    VerdictName.MISS_TTL_EXPIRED: "cache expired between calls (TTL)",
    VerdictName.MISS_SERVER_SIDE: "server-side misses (prefix unchanged)",
    VerdictName.MISS_UNEXPLAINED: "misses the log cannot explain",
}

TTL_FIX = (
    "Keep the cache warm: send the next request within the TTL, or write with the longer TTL where the "
    "provider sells one."
)


def headline(d: Diagnosis, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The page's first line: hit rate, money lost to misses, the top cause and its fix."""
    read = sum(w.cache_read for w in d.windows)
    total = read + sum(w.cache_write + w.uncached for w in d.windows)
    other: dict[str, float] = defaultdict(float)
    for r in rows:
        if r.get("verdict") in LOST_VERDICTS:
            other[r["verdict"]] += r.get("cost_usd") or _miss_cost(r)
    lost = sum(c.cost_usd for c in d.causes) + sum(other.values())
    top = max(
        [(c.cost_usd, c.reprefill_tokens, c.name) for c in d.causes] + [(v, 0, k) for k, v in other.items()],
        default=None,
    )
    name = top[2] if top else None
    if name is None and d.infra["ttl_expired"]:
        name = VerdictName.MISS_TTL_EXPIRED
    example = next((c.example for c in d.causes if c.name == name and c.example), None)
    fix = (
        (example or {}).get("fix")
        or (generic_fix(name) if name in CAUSES else None)
        or (TTL_FIX if name == VerdictName.MISS_TTL_EXPIRED else None)
    )
    hit = read / total if total else None
    label = VERDICT_LABELS.get(name, name) if name else None
    m = d.money
    spend, saved = m.get("spend_usd"), m.get("saved_usd")
    parts = [
        f"{usd(spend)} spent, {usd(saved or 0.0)} saved by caching" if spend is not None else None,
        f"cache hit rate {hit:.1%} of prompt tokens" if hit is not None else "no cache fields reported",
        f"{usd(lost)} lost to misses" + (f" ({'; '.join(d.prices)} prices)" if d.prices else ""),
    ]
    if label:
        parts.append(f"top cause: {label}")
    text = "; ".join(p for p in parts if p)
    return {
        "hit_rate": hit,
        "lost_usd": lost,
        "spend_usd": spend,
        "saved_usd": saved,
        "top_cause": name,
        "top_cause_label": label,
        "fix": fix,
        "text": text[:1].upper() + text[1:] + ".",
    }


def _miss_cost(row: dict[str, Any]) -> float:
    """What a miss no cause explains cost (the proxy stores no cost for those): the tokens it owed and did
    not read, paid as written (or uncached) instead of read, at the row's model prices."""
    u = Usage.of_export(row.get("usage"))
    lost = (row.get("expected_cached") or 0) - u.cache_read
    if lost <= 0:
        return 0.0
    return model_contract(row.get("api") or "", row.get("model")).reprefill_cost(lost, u.written_as)


def listed(d: Diagnosis, rows: list[dict[str, Any]], t0: float) -> dict[str, dict[str, Any]]:
    """The requests the report names (cause examples, largest gaps, queued hits): when, and their body."""
    ids = {str(c.example[k]) for c in d.causes if c.example for k in ("request", "earlier")}
    ids |= {g["request"] for g in d.fields["largest_gaps"]} | set(d.infra["queued_examples"])
    out = {}
    for r in rows:
        rid = str(r.get("id"))
        if rid not in ids:
            continue
        body = r.get("request")
        # compact: indented, json.dumps runs in Python at ~10x the time; the HTML page indents what it shows
        text = json.dumps(body, ensure_ascii=False) if isinstance(body, dict) else body
        judged = of_row(r)
        out[rid] = {
            "ts": r.get("ts"),
            "t": (r.get("ts") or t0) - t0,
            "model": r.get("model"),
            "verdict": r.get("verdict"),
            "cause": r.get("cause"),
            "source": r.get("path"),
            "reused_tokens": judged.reused_tokens if judged else None,
            "reprefill_tokens": judged.reprefill_tokens if judged else None,
            "body": text
            if text is None or len(text) <= MAX_LISTED_BODY
            else text[:MAX_LISTED_BODY] + f"\n... ({len(text):,} characters, cut)",
        }
    return out


def notes(rows: list[dict[str, Any]]) -> list[str]:
    """Rows imported from agents' logs (`prefixguard import`) hold no request: say what that means."""
    imported = Counter(
        str(r["upstream"])[len("import:") :] for r in rows if str(r.get("upstream") or "").startswith("import:")
    )
    if not imported:
        return []
    tools = ", ".join(f"{n} from {tool} logs" for tool, n in sorted(imported.items()))
    return [
        f"{tools}: no request bodies exist, so each call is judged against the call before it in its "
        "session (gaps over the TTL, compactions, model switches), and no TTFT was logged. The logs' "
        "input/output token counts are streaming placeholders in many versions: hit rates rest on the cache "
        "fields."
    ]
