"""One typed capture record: what the proxy (and the log importer) write and every reader gets back.

A `Record` is one proxied request and what became of it. Its judgement is typed, never text to parse:
the verdict a `VerdictName`, a prefix change as its cause names (`causes`, values of `Cause`) and the
pointer where the prompt diverged (`pointer`), free text apart (`note`: a hit's note, a miss's reason,
an error, why a request was not analysed), `analysed` False for a request forwarded unread, and the
provider's own diagnosis a `Diagnosis` with our `agreement`.
`row()` builds the export shape (JSON lines) from those fields; its "cause" text is rendered, not stored.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any

from prefixguard.judge.names import PrefixChange, VerdictName
from prefixguard.model.diagnosis import Diagnosis, as_row
from prefixguard.model.usage import Usage

if TYPE_CHECKING:
    from prefixguard.judge.verdict import Verdict

# 2: tokens_estimated; 3: diagnosis; 4: degraded; 5: attribution and gen_ai.response.*;
# 6: structured causes (causes, pointer, note), analysed, and diagnosis columns (capture/columns.py migrates)
SCHEMA_VERSION = 6


class Record:
    """One proxied request and what became of it: id, ts and path, then any field by name (the others have
    defaults). A plain class: a dataclass would cost every command that reads a store ~7 ms to import."""

    id: str
    ts: float  # unix seconds when the request arrived
    path: str  # URL path and query, secrets removed
    method: str = "POST"
    upstream: str | None = None
    api: str | None = None
    model: str | None = None
    tenant: str = ""
    request: str | None = None  # redacted body text (None: --no-bodies or not captured)
    request_bytes: int = 0
    fingerprints: bytes = b""  # Prompt.chain, concatenated
    segments: list[list[Any]]  # [level, pointer, tokens] per segment; [] by default
    status: int | None = None  # HTTP status; None when no response came
    error: str | None = None  # transport error (refused, timeout, cut mid-stream)
    usage: Usage = Usage()
    ttft_s: float | None = None
    decode_tps: float | None = None
    total_s: float | None = None
    verdict: VerdictName | None = None
    causes: tuple[str, ...] = ()  # the prefix change's cause names (values of judge.causes.Cause)
    pointer: str | None = None  # where the prompt diverged from the earlier one
    note: str | None = None  # free text: a hit's note, a miss's reason, an error, why not analysed
    analysed: bool = True  # False: forwarded unread (no API shape, too large, the analysis behind)
    expected_cached: int | None = None
    expected_reason: str | None = None
    previous_id: str | None = None  # the earlier request this one was compared with
    reprefill_tokens: int | None = None
    cost_usd: float | None = None  # what the break cost, when one was found
    detail: str | None = None
    tokens_estimated: bool = False  # our token counts (expected, re-prefill) are estimates
    diagnosis: Diagnosis | None = None  # the provider's own cache diagnosis
    agreement: str | None = None  # ours beside it (judge/agreement.py): agree, disagree, ...
    degraded: bool = False  # judged without the fleet's shared index (it was down)
    client: str | None = None  # "claude-cli 2.0.14": the sender's user agent (attribution.client_of)
    route: str | None = None  # the endpoint, routes.template: no ids, no query
    site: str | None = None  # the call site the caller named (x-prefixguard-site)
    response_id: str | None = None  # what the response says of itself (OTel gen_ai.response.*)
    response_model: str | None = None
    finish_reasons: list[str] | None = None
    response_keys: list[str] | None = None  # what marks it when sent back (wire/sent_back.py): replay's sim reads them

    def __init__(self, id: str, ts: float, path: str, **fields: Any) -> None:
        self.id, self.ts, self.path, self.segments = id, ts, path, []
        for name, value in fields.items():
            if name not in RECORD_FIELDS:
                raise TypeError(f"Record has no field {name!r}")
            setattr(self, name, value)

    @property
    def change(self) -> PrefixChange | None:
        """The prefix change found, if any."""
        return PrefixChange(causes=tuple(self.causes), pointer=self.pointer) if self.causes else None

    @property
    def cause(self) -> str | None:
        """The text surfaces show: the note, else the change ("a+b at /pointer"). Rendered, never stored."""
        if self.note is not None:
            return self.note
        return str(self.change) if self.causes else None

    @property
    def diagnosis_reason(self) -> str | None:
        """The diagnosis's free text (it may quote a prompt: the proxy redacts it by this name)."""
        return self.diagnosis.reason if self.diagnosis is not None else None

    @diagnosis_reason.setter
    def diagnosis_reason(self, text: str | None) -> None:
        if self.diagnosis is not None:
            self.diagnosis = self.diagnosis._replace(reason=text)

    def judged(self, v: Verdict) -> None:
        """Take a verdict's name, change and note (judge/verdict.py), typed as the judge made them."""
        self.verdict = v.verdict
        change = v.change
        self.causes, self.pointer = (tuple(change.causes), change.pointer) if change is not None else ((), None)
        self.note = v.note

    def row(self) -> dict[str, Any]:
        """The export shape (JSON lines) that lint's sequence mode and replay read."""
        try:
            request = json.loads(self.request) if self.request is not None else None
        except (ValueError, RecursionError):
            request = self.request  # not JSON: kept as text
        u = self.usage
        return {
            "schema_version": SCHEMA_VERSION,  # the store's: a row's shape changes with it
            "id": self.id,
            "ts": self.ts,
            "method": self.method,
            "path": self.path,
            "api": self.api,
            "model": self.model,
            "tenant": self.tenant,
            "request": request,
            "status": self.status,
            "usage": {
                "prompt_total": u.prompt_total,
                "cache_read": u.cache_read,
                "cache_write_5m": u.cache_write_5m,
                "cache_write_1h": u.cache_write_1h,
                "uncached": u.uncached,
                "output": u.output,
                "reported": u.reported,
                "reasoning": u.reasoning,
                "server_calls": u.server_calls,
                "server_added": u.server_added,
                "first_pass": u.first_pass,
            },
            "timings": {"ttft_s": self.ttft_s, "decode_tps": self.decode_tps, "total_s": self.total_s},
            "verdict": None if self.verdict is None else str(self.verdict),
            "cause": self.cause,
            "causes": list(self.causes),
            "pointer": self.pointer,
            "expected_cached": self.expected_cached,
            "tokens_estimated": self.tokens_estimated,
            "degraded": self.degraded,
            "analysed": self.analysed,
            "diagnosis": as_row(self.diagnosis, self.agreement),
            # where the row came from ("import:claude-code": an agent's log, no body) and what the break cost
            "upstream": self.upstream,
            "detail": self.detail,
            "reprefill_tokens": self.reprefill_tokens,
            "cost_usd": self.cost_usd,
            # who sent it (report --by) and what the response said of itself
            "client": self.client,
            "route": self.route,
            "site": self.site,
            "response": {
                "id": self.response_id,
                "model": self.response_model,
                "finish_reasons": list(self.finish_reasons or ()),
                "keys": list(self.response_keys or ()),
            },
        }


RECORD_FIELDS = tuple(Record.__annotations__)


class Rows:
    """What every capture store gives from its records(): rows in the export shape, and the export."""

    def records(self) -> Iterator[Record]:
        raise NotImplementedError

    def rows(self) -> Iterator[dict[str, Any]]:
        """Every flow in the export shape (see Record.row)."""
        for rec in self.records():
            yield rec.row()

    def export(self, out: IO[str]) -> int:
        """Write JSON lines; returns the number of rows."""
        n = 0
        for row in self.rows():
            line = json.dumps(row, ensure_ascii=False) + "\n"
            try:
                out.write(line)
            except UnicodeEncodeError:  # a lone surrogate (an escaped \ud800) the store took: ASCII escapes keep it
                out.write(json.dumps(row) + "\n")
            n += 1
        return n
