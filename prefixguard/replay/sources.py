"""Traffic to replay, from any of the formats prefixguard reads, as one list of `Request`s.

Formats (detected from the path and the first record):
- the proxy's capture store: a SQLite file, or its JSONL export (rows with a "request" body);
- a folder of request bodies (`*.json`; recorded cassettes `NNNN.request.json` beside their
  `NNNN.response.json|sse` and a `meta.json` naming each call's URL; a call to a token-count endpoint is
  left out, as the proxy leaves it unanalysed);
- Mooncake traces: JSONL with `hash_ids` of 512-token blocks, `input_length`, `timestamp` in ms;
- LMCache agent traces: JSONL (or a folder of JSONL files) with the whole prompt as `input`,
  `session_id`, `timestamp` in microseconds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from prefixguard.capture.reader import check_row, is_sqlite, read_capture
from prefixguard.capture.store import is_capture_url, json_lines
from prefixguard.model import tokens
from prefixguard.model.usage import NO_META, USAGE_FIELDS, ResponseMeta, Usage
from prefixguard.utils.errors import InputError, check_regular_file, parse_json, read_input, reading
from prefixguard.wire import detect_api, files, gemini, parse_response, parse_response_meta, routes

MOONCAKE_BLOCK_TOKENS = 512  # the Mooncake release hashes prompts in blocks of 512 tokens
TEXT_MODEL = "tiny"  # model name sent for traces that name none: the one `engine serve` answers
# to as it starts (pass replay --model for another server's)
TEXT_PATH = "/v1/chat/completions"


@dataclass(slots=True)
class Request:
    """One request of a trace, in the trace's order."""

    index: int
    ts: float  # seconds since the trace's first request
    session: str = ""  # conversation or agent run, for grouping in reports
    tenant: str = ""  # API key owner (hashed): providers never share a cache across tenants
    model: str | None = None
    path: str | None = None  # URL path the request went to (picks the API shape)
    body: dict[str, Any] | None = None  # the request body, where the source holds one
    blocks: list[int] | None = None  # Mooncake: prefix block hashes (an id implies its whole prefix)
    input_tokens: int | None = None  # Mooncake: prompt length in tokens
    output_tokens: int | None = None  # answer length in the trace, asked for again on replay
    reported: Usage | None = None  # the provider's usage as captured (its `reported`: whether it had cache fields)
    said: ResponseMeta = NO_META  # what the answer said of itself: its id (a later request may name it), how it ended
    expected_cached: int | None = None  # what the proxy predicted at capture time
    ref: str = ""  # where it came from: row id, file name, line
    upstream: str | None = None  # where it went (scheme://host), where the source says: a provider known by its host


@dataclass(slots=True)
class Trace:
    kind: str  # "capture" | "folder" | "mooncake" | "lmcache"
    source: str
    requests: list[Request]
    skipped: int = 0  # records that cannot be replayed (e.g. captured without bodies)
    tokens_estimated: bool = False  # some counts in it are prefixguard's estimates (no tokenizer loaded)
    started: float | None = None  # when its first request was made (seconds since the epoch), where the source says


def load(path: str | Path) -> Trace:
    """Read any supported trace; raises InputError naming the file on bad input."""
    if is_capture_url(path):
        return _capture(Path(str(path)), read_capture(path))
    p = Path(path)
    if not p.exists():
        raise InputError("no such file or folder", str(p))
    with reading(p):
        return _load(p)


def _load(p: Path) -> Trace:
    if p.is_dir():
        jsonl = sorted(p.glob("*.jsonl"))
        if jsonl:
            return _lmcache(p, [r for f in jsonl for r in json_lines(f)])
        return _folder(p)
    check_regular_file(p, "trace file")  # a FIFO would block the read, a device never end
    if is_sqlite(p):
        return _capture(p, read_capture(p))
    records = list(json_lines(p))
    if not records:
        raise InputError("empty trace", str(p))
    first = records[0][1]
    if "hash_ids" in first:
        return _mooncake(p, records)
    if "input" in first and "session_id" in first:
        return _lmcache(p, records)
    if "request" in first:
        return _capture(p, [rec for _, rec in records])
    raise InputError("unknown trace format: expected capture rows, Mooncake hash_ids or LMCache input records", str(p))


def _field(rec: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = rec.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise InputError(f"{where}: '{key}' missing or of the wrong type")
    return value


def _mooncake(p: Path, records: list[tuple[int, dict[str, Any]]]) -> Trace:
    out = []
    for i, (n, rec) in enumerate(records):
        where = f"{p}: line {n}"
        blocks = _field(rec, "hash_ids", list, where)
        length = _field(rec, "input_length", int, where)
        if length > len(blocks) * MOONCAKE_BLOCK_TOKENS:
            raise InputError(f"{where}: input_length {length} exceeds its {len(blocks)} blocks")
        out.append(
            Request(
                index=i,
                ts=_field(rec, "timestamp", (int, float), where) / 1e3,
                blocks=blocks,
                input_tokens=length,
                output_tokens=rec.get("output_length"),
                ref=f"line {n}",
            )
        )
    return Trace(kind="mooncake", source=str(p), requests=_rebased(out))


def _lmcache(p: Path, records: list[tuple[int, dict[str, Any]]]) -> Trace:
    """Each call becomes a chat request. A call whose prompt extends its session's previous prompt
    (an agent appending the tool's output) becomes that request's messages plus one user message with
    the new text, so the conversation is append-only at the message level too, as the agent sent it."""
    rows = []
    for n, rec in records:
        where = f"{p}: line {n}"
        rows.append((_field(rec, "timestamp", (int, float), where) / 1e6, _field(rec, "input", str, where), n, rec))
    rows.sort(key=lambda r: r[0])
    last: dict[str, tuple[str, list[dict[str, str]]]] = {}
    out = []
    for i, (ts, text, n, rec) in enumerate(rows):
        session = str(rec.get("session_id", ""))
        before, messages = last.get(session, ("", []))
        if before and text.startswith(before):
            messages = messages + (
                [{"role": "user", "content": text[len(before) :]}] if len(text) > len(before) else []
            )
        else:
            messages = [{"role": "user", "content": text}]
        last[session] = (text, messages)
        answer = rec.get("output")
        out.append(
            Request(
                index=i,
                ts=ts,
                session=session,
                model=TEXT_MODEL,
                path=TEXT_PATH,
                body={"model": TEXT_MODEL, "messages": messages},
                output_tokens=tokens.count(answer) if isinstance(answer, str) else None,
                ref=f"{session}:{n}",
            )
        )
    counted = any(r.output_tokens is not None for r in out)
    return Trace(
        kind="lmcache", source=str(p), requests=_rebased(out), tokens_estimated=counted and tokens.is_estimated()
    )


def _folder(p: Path) -> Trace:
    bodies = sorted(f for f in p.glob("*.json") if f.name != "meta.json" and not f.name.endswith(".response.json"))
    if not bodies:
        raise InputError("no request files (*.json) in the folder", str(p))
    index = _cassette_index(p)  # meta.json, read once
    calls = _cassette_calls(p, index)
    uris = {stem: url.path for stem, url in calls.items()}
    upstreams = {stem: f"{url.scheme}://{url.netloc}" for stem, url in calls.items() if url.netloc}
    made = _cassette_times(index)
    remember_uploads(p, uris)
    out: list[Request] = []
    skipped = 0
    for f in bodies:
        stem = f.name.removesuffix(".request.json").removesuffix(".json")
        if routes.counts_tokens(uris.get(stem)):
            skipped += 1  # a token count: no turn, no cache touched (as the proxy leaves it unanalysed)
            continue
        body = parse_json(read_input(f, what="request file"), str(f))
        if not isinstance(body, dict):
            raise InputError("a request body must be a JSON object", str(f))
        reported, said = _recorded_answer(p, stem, body, uris.get(stem))
        out.append(
            Request(
                index=len(out),
                ts=made.get(stem) or said.created or 0.0,
                model=body.get("model"),
                path=uris.get(stem),
                body=body,
                reported=reported,
                said=said,
                ref=f.name,
                upstream=upstreams.get(stem),
            )
        )
    if not out:
        raise InputError(f"all {skipped} requests are token counts: nothing to replay", str(p))
    # When each recorded answer says when it was made (the Date header the cassette kept, else the body's own
    # time), the requests keep those gaps (a cassette recorded again a year later holds two sessions,
    # openllmetry's OpenAI one); else none is told, and all are at 0.
    started = min(r.ts for r in out) if all(r.ts for r in out) else None
    if started is None:
        for r in out:
            r.ts = 0.0
    return Trace(kind="folder", source=str(p), requests=_rebased(out), skipped=skipped, started=started)


def remember_uploads(p: Path, uris: dict[str, str]) -> None:
    """Files a cassette uploads (its requests to /v1/files): later requests that send their ids are
    costed by what the files hold; so are the Gemini explicit caches it creates."""
    for stem, uri in uris.items():
        body, response = p / f"{stem}.request.txt", p / f"{stem}.response.json"
        if files.is_upload(uri) and body.exists() and response.exists():
            files.remember(read_input(body), read_input(response))
        elif gemini.is_cache_creation(uri) and response.exists():  # an explicit cache later requests name
            gemini.remember_cached(read_input(response))


def cassette_uris(p: Path) -> dict[str, str]:
    """Recorded cassettes: call number -> URL path, from meta.json."""
    return {stem: url.path for stem, url in _cassette_calls(p, _cassette_index(p)).items()}


def _cassette_times(index: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Recorded cassettes: call number -> when its answer was made (seconds since the epoch), from meta.json:
    the response's `date` header as the recorder kept it, else a `recorded_at` time; calls with neither are
    left out."""
    out = {}
    for stem, call in index.items():
        when = _moment(call.get("date"), parsedate_to_datetime) or _moment(call.get("recorded_at"), _iso)
        if when is not None:
            out[stem] = when
    return out


def _iso(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _moment(value: Any, parse: Callable[[str], datetime]) -> float | None:
    """Seconds since the epoch of a recorded time (UTC where it names no zone); None when it is not one."""
    if not isinstance(value, str):
        return None
    try:
        moment = parse(value)
    except (TypeError, ValueError, IndexError):
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _cassette_calls(p: Path, index: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Recorded cassettes: call number -> its parsed URL, from meta.json (its `index`)."""
    try:
        return {stem: urlparse(c["uri"]) for stem, c in index.items() if "uri" in c}
    except (TypeError, ValueError, AttributeError):
        raise InputError("meta.json is not a cassette index ('uri' a URL)", str(p / "meta.json")) from None


def _cassette_index(p: Path) -> dict[str, dict[str, Any]]:
    """Recorded cassettes: call number (0001 ...) -> what meta.json says of that call."""
    meta = p / "meta.json"
    if not meta.exists():
        return {}
    doc = parse_json(read_input(meta), str(meta))
    calls = doc.get("interactions") if isinstance(doc, dict) else None
    if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
        raise InputError("meta.json is not a cassette index", str(meta))
    try:
        return {f"{c['n']:04d}": c for c in calls if "n" in c}
    except (TypeError, ValueError):
        raise InputError("meta.json is not a cassette index ('n' a number)", str(meta)) from None


RESPONSE_EXTENSIONS = ("json", "sse", "txt", "bin")


def response_file(p: Path, stem: str) -> Path | None:
    """A recorded call's response beside its request: JSON, or a stream (.sse, or .txt as some
    recorders keep it, or .bin: Bedrock's binary EventStream)."""
    return next((f for f in (p / f"{stem}.response.{ext}" for ext in RESPONSE_EXTENSIONS) if f.exists()), None)


def _recorded_answer(p: Path, stem: str, body: dict[str, Any], path: str | None) -> tuple[Usage | None, ResponseMeta]:
    """The provider's usage, and what the response says of itself, from a recorded response beside the
    request, where there is one."""
    f = response_file(p, stem)
    if f is None:
        return None, NO_META
    raw = read_input(f, what="response file")
    try:
        api = detect_api(body, path)
        usage, said = parse_response(raw, api), parse_response_meta(raw, api)
    except InputError:
        return None, NO_META
    return (usage if usage.reported or usage.prompt_total else None), said  # no cache field: it still teaches the scale


def _said(response: Any) -> ResponseMeta:
    """What a captured row's response said of itself (the export's `response`): its id, model, finish reasons,
    and the keys that mark it when sent back."""
    if not isinstance(response, dict):
        return NO_META
    reasons, keys = response.get("finish_reasons"), response.get("keys")
    marks = tuple(k for k in keys if isinstance(k, str)) if isinstance(keys, list) else ()
    said = tuple(reasons) if isinstance(reasons, list) else ()
    return NO_META.merged(response.get("id"), response.get("model"), said, keys=marks)


def _capture(p: Path, rows: list[dict[str, Any]]) -> Trace:
    out: list[Request] = []
    skipped = 0
    for n, row in enumerate(rows, 1):
        check_row(row, f"{p}: row {n}")
        body = row.get("request")
        if not isinstance(body, dict) or ("api" in row and row["api"] is None):
            skipped += 1  # captured with --no-bodies, or no LLM request (the proxy could not parse it)
            continue
        usage = row.get("usage") or {}
        tenant = str(row.get("tenant") or "")
        out.append(
            Request(
                index=len(out),
                ts=float(row.get("ts") or 0.0),
                session=tenant,
                tenant=tenant,
                model=row.get("model") or body.get("model"),
                path=row.get("path"),
                body=body,
                output_tokens=usage.get("output") or None,
                reported=_usage(usage),
                said=_said(row.get("response")),
                expected_cached=row.get("expected_cached"),
                ref=str(row.get("id", "")),
                upstream=row.get("upstream") if isinstance(row.get("upstream"), str) else None,
            )
        )
    if not out and skipped:
        raise InputError(
            f"all {skipped} rows were captured without bodies or are no LLM requests: nothing to replay", str(p)
        )
    return Trace(kind="capture", source=str(p), requests=_rebased(out), skipped=skipped)


def _usage(u: dict[str, Any]) -> Usage | None:
    if not (u.get("reported") or u.get("prompt_total")):
        return None
    return Usage(**{k: u[k] for k in USAGE_FIELDS if u.get(k) is not None})  # null: not reported


def _rebased(requests: list[Request]) -> list[Request]:
    """Times relative to the first request, so --speed scales gaps, not the epoch."""
    if requests:
        t0 = min(r.ts for r in requests)
        for i, r in enumerate(requests):
            r.ts -= t0
            r.index = i
    return requests
