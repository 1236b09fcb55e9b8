"""Run the rules over files: find the inputs, read each request (a .json file, or each line of a
.jsonl capture), run the single-request checks and, for captures, sequence mode, and place every hit
in the file as written (line, column, snippet, fingerprint)."""

from __future__ import annotations

import errno
import glob
import json
import os
import stat
import sys
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prefixguard.contracts.providers import lint_family
from prefixguard.lint import catalog
from prefixguard.lint.checks import CHECKS, VALIDITY
from prefixguard.lint.config import Settings
from prefixguard.lint.context import Context
from prefixguard.lint.finding import Finding, Hit, fingerprint
from prefixguard.lint.position import Document, Locator, string_offset
from prefixguard.model.prompt import PausedGc, Prompt, part_finder
from prefixguard.utils.errors import InputError, NotARequest, describe
from prefixguard.wire import MAX_BYTES, parse_request

if TYPE_CHECKING:
    from prefixguard.judge.session import Match

SUFFIXES = {".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl"}
# code that builds prompts (lint.code)
CODE_SUFFIXES = {
    ".py": "python",
    **dict.fromkeys((".ts", ".tsx", ".mts", ".cts"), "typescript"),
    **dict.fromkeys((".js", ".jsx", ".mjs", ".cjs"), "javascript"),
}
VENDORED = frozenset({"node_modules", "bower_components"})  # other projects' code, installed: not walked
STDIN = "-"


class Result:
    """What a lint run found, and what it could not read."""

    __slots__ = ("findings", "errors", "empty", "skipped", "files", "requests")

    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.errors: list[str] = []  # one line each, naming the file
        self.empty: list[str] = []  # directories and globs that held no request file
        self.skipped: list[str] = []  # files (or JSONL lines) that are not request bodies we read
        self.files = 0
        self.requests = 0


def check_prompt(
    prompt: Prompt, codes: Collection[str], extra_patterns: Mapping[str, str] | None = None, match: Match | None = None
) -> list[Hit]:
    """The single-request rules among `codes` that apply to this prompt's provider, run on it. match: in
    sequence mode, the session's best earlier request (evidence of what changed). A token-counting
    request caches nothing: only the rules on what the API rejects run on it."""
    earlier = match.prompt if match is not None else None
    ctx = Context(
        prompt,
        extra_patterns,
        earlier,
        match.earlier if match is not None and earlier is not None else None,
        bool(match and match.new_conversation),
    )
    hits: list[Hit] = []
    for rule in catalog.rules():
        check = CHECKS.get(rule.name)
        if check is None or rule.code not in codes or lint_family(ctx.provider) not in rule.providers:
            continue
        if prompt.counts_only and rule.name not in VALIDITY:
            continue
        hits.extend(check(ctx))
    return hits


def discover(args: list[str], settings: Settings) -> tuple[list[str], list[str]]:
    """Files to lint (named files as they are, directories walked for request files, globs expanded),
    and the directories and globs among args that held no request file."""
    out: list[str] = []
    empty: list[str] = []
    for arg in args:
        if arg == STDIN or os.path.isfile(arg) or _capture_url(arg):
            out.append(arg)
            continue
        if os.path.lexists(arg) and not os.path.isdir(arg):
            raise InputError(_not_regular(arg), arg)
        if os.path.isdir(arg):
            found = list(_walk(Path(arg), settings))
        elif glob.has_magic(arg):
            found = []
            for name in sorted(glob.glob(arg, recursive=True)):
                if os.path.isdir(name):
                    found.extend(_walk(Path(name), settings))
                elif os.path.isfile(name):
                    found.append(name)
                elif _not_regular(name) == "symbolic link loop":
                    raise InputError("symbolic link loop", name)
            found = _distinct(found)  # `**` follows links to folders: one file may be reached by many paths
        else:
            raise InputError("no such file or directory", arg)
        out.extend(found)
        if not found:
            empty.append(arg)
    return list(dict.fromkeys(out)), empty


def _distinct(names: list[str]) -> list[str]:
    """The first path to each file (by its real path)."""
    seen: dict[str, str] = {}
    for name in names:
        seen.setdefault(os.path.realpath(name), name)
    return list(seen.values())


def _not_regular(name: str) -> str:
    """Why a path that exists is neither a file nor a directory lint can read."""
    try:
        mode = os.stat(name).st_mode
    except OSError as err:
        if err.errno == errno.ELOOP:
            return "symbolic link loop"
        return "broken symbolic link" if os.path.islink(name) else (err.strerror or str(err)).lower()
    kinds = (
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISSOCK, "a socket"),
    )
    return "not a regular file (" + next((what for test, what in kinds if test(mode)), "a special file") + ")"


def _walk(root: Path, settings: Settings) -> Iterator[str]:
    """Request files under root (symbolic links to folders are not followed, so a loop cannot recur); a
    link loop among the files is bad input, a dangling link is not a request file."""

    def fail(err: OSError) -> None:
        raise InputError((err.strerror or str(err)).lower(), err.filename)

    for folder, dirs, files in os.walk(root, onerror=fail):
        dirs[:] = sorted(
            d for d in dirs if not d.startswith(".") and d not in VENDORED and not settings.excluded(Path(folder, d))
        )
        for name in sorted(files):
            path = Path(folder, name)
            if (path.suffix not in SUFFIXES and path.suffix not in CODE_SUFFIXES) or settings.excluded(path):
                continue
            if os.path.isfile(path):
                yield str(path)
            elif os.path.islink(path) and _not_regular(str(path)) == "symbolic link loop":
                raise InputError("symbolic link loop", str(path))


def lint(args: list[str], settings: Settings, count_tokens: bool = True) -> Result:
    result = Result()
    names, result.empty = discover(args, settings)
    for name in names:
        result.files += 1
        try:
            if Path(name).suffix in CODE_SUFFIXES:
                lint_code_file(name, settings, result)
            else:
                lint_file(name, settings, result, count_tokens)
        except NotARequest as err:
            result.skipped.append(str(err))
        except InputError as err:
            result.errors.append(str(err))
        except RecursionError:  # parsed, but too deep for the rules' walk over values
            result.errors.append(str(InputError("JSON nested too deeply", name)))
    result.findings = sorted((f for f in result.findings if settings.shown(f.code, f.severity)), key=Finding.sort_key)
    return result


def lint_file(name: str, settings: Settings, result: Result, count_tokens: bool = True) -> None:
    url = _capture_url(name)  # a fleet's capture store: its rows, exported, in sequence mode
    path = None if name == STDIN or url else Path(name)
    text = _export(name) if url else _read(name)
    codes = settings.codes_for(path)
    relpath = name if url else settings.relative(path) if path else STDIN
    jsonl = url or (path is not None and SUFFIXES.get(path.suffix) == "jsonl") or (path is None and _looks_jsonl(text))
    if not jsonl:
        prompt = parse_request(text, source=name, count_tokens=count_tokens)
        result.requests += 1
        doc = Document(text)
        with PausedGc():  # the checks walk every part: no collection need visit them meanwhile
            place = Placer(name, relpath, doc, _locator(prompt, _same), None)
            result.findings.extend(place(h) for h in check_prompt(prompt, codes, settings.extra_patterns))
        return
    from prefixguard.lint.sequence import SequenceMode  # JSONL only: a file of one request never pays for it

    sequence = SequenceMode(codes)
    for line_no, line in _lines(text):
        try:
            record = _record(line, f"{name}:{line_no}", count_tokens)
        except NotARequest as err:
            result.skipped.append(str(err))
            continue
        if record is None:
            continue
        prompt, to_line, tenant = record
        result.requests += 1
        place = Placer(name, relpath, Document(line), _locator(prompt, to_line), line_no)
        match, hits = sequence.add(prompt, line_no, tenant)
        hits = check_prompt(prompt, codes, settings.extra_patterns, match) + hits
        result.findings.extend(place(h) for h in hits)


def lint_code_file(name: str, settings: Settings, result: Result) -> None:
    """A Python, TypeScript or JavaScript file: the prompts its code builds (prefixguard.lint.code; loaded
    only for such a file).
    Each SDK call it judges counts as a request."""
    from prefixguard.lint.code.place import lint_python, read_source

    path = Path(name)
    findings, calls = lint_python(name, settings.relative(path), read_source(name), settings.codes_for(path))
    result.requests += calls
    result.findings.extend(findings)


def _capture_url(name: str) -> bool:
    """A fleet's capture store (a URL, not a file). prefixguard.capture.store, and sqlite3 with it, loads only for
    a name that could be one: a lint of files never pays for them."""
    if "://" not in name:
        return False
    from prefixguard.capture.store import is_capture_url

    return is_capture_url(name)


def _export(url: str) -> str:
    """A capture store's rows as the JSON lines `capture export` writes."""
    import io

    from prefixguard.capture.store import open_capture

    out = io.StringIO()
    with open_capture(url) as store:
        store.export(out)
    return out.getvalue()


def _read(name: str) -> str:
    try:
        if name == STDIN:
            data = sys.stdin.buffer.read(MAX_BYTES + 1)
        elif not os.path.isfile(name):
            raise InputError(_not_regular(name), name)
        else:
            if os.path.getsize(name) > MAX_BYTES:
                raise InputError(
                    f"file is {os.path.getsize(name) / 2**20:.1f} MiB, over the {MAX_BYTES // 2**20} MiB limit", name
                )
            data = Path(name).read_bytes()
    except OSError as err:
        raise InputError((err.strerror or str(err)).lower(), name) from None
    if len(data) > MAX_BYTES:
        raise InputError(f"input over the {MAX_BYTES // 2**20} MiB limit", name)
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as err:
        raise InputError(f"not UTF-8 text (binary data?): bad byte at offset {err.start}", name) from None


def _looks_jsonl(text: str) -> bool:
    """Standard input: JSON lines when it holds more than one non-empty line that each parse alone."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) < 2:
        return False
    try:
        json.loads(lines[0])
    except ValueError:
        return False
    return True


def _lines(text: str) -> Iterator[tuple[int, str]]:
    for i, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if line.strip():
            yield i, line


def _record(line: str, source: str, count_tokens: bool) -> tuple[Prompt, Callable[[int], int], str] | None:
    """A JSONL line -> (prompt, body offset -> line offset, tenant). A line is a request body, or an
    export row of the capture store (`request` holds the body, as an object or as the text sent).
    None for a row captured without its body."""
    if '"request"' not in line:  # a bare body (the cheap test spares a second parse of every line)
        return parse_request(line, source=source, count_tokens=count_tokens), _same, ""
    try:
        row = json.loads(line)
    except ValueError as err:
        raise InputError(f"not valid JSON: {describe(err)}", source) from None
    except RecursionError:
        raise InputError("JSON nested too deeply", source) from None
    if not isinstance(row, dict) or "request" not in row or "messages" in row or "input" in row:
        return parse_request(line, source=source, count_tokens=count_tokens), _same, ""
    body = row["request"]
    if body is None:
        return None
    path = row.get("path") if isinstance(row.get("path"), str) else None
    headers = row.get("headers") if isinstance(row.get("headers"), dict) else None
    tenant = str(row.get("tenant") or "")
    start, end = Locator(line).span("/request")
    if isinstance(body, str):
        prompt = parse_request(body, path=path, headers=headers, source=source, count_tokens=count_tokens)
        return prompt, lambda o: string_offset(line, start, o), tenant
    if not isinstance(body, dict):
        raise InputError("'request' must be a JSON object or the body text", source)
    prompt = parse_request(line[start:end], path=path, headers=headers, source=source, count_tokens=count_tokens)
    return prompt, lambda o: start + o, tenant


def _same(offset: int) -> int:
    return offset


def _locator(prompt: Prompt, to_file: Callable[[int], int]) -> Locator:
    part = part_finder(prompt.segments)  # no pointer string made for each of a million parts

    def find(pointer: str) -> tuple[int, int] | None:
        seg = part(pointer)
        return None if seg is None else (seg.start, seg.end)

    return Locator(prompt.text, None, to_file, find)


class Placer:
    """Turns hits on one request into findings in its file."""

    def __init__(self, path: str, relpath: str, doc: Document, locator: Locator, record: int | None) -> None:
        self.path, self.relpath, self.doc, self.locator, self.record = path, relpath, doc, locator, record

    def __call__(self, hit: Hit) -> Finding:
        rule = catalog.get(hit.rule)
        assert rule is not None, f"a check reported an unknown rule {hit.rule!r}"
        if hit.offset is not None:
            start = end = self.locator.to_file(hit.offset)
        else:
            start, end = self.locator.file_span(hit.pointer, hit.inner)
        end = max(end, start + 1)  # a region covers at least one character
        line, col = self.doc.line_col(start)
        end_line, end_col = self.doc.line_col(end)
        snippet = self.doc.excerpt(start, end)
        if self.record is not None:  # a JSONL line: its Document holds that line only
            line, end_line = self.record, self.record + end_line - line
        return Finding(
            rule=rule,
            severity=rule.severity_of(hit.variant),
            message=hit.message,
            fix=hit.fix or rule.fix,
            path=self.path,
            pointer=hit.pointer,
            line=line,
            column=col,
            end_line=end_line,
            end_column=end_col,
            record=self.record,
            fingerprint=fingerprint(rule.code, self.relpath, hit.pointer, hit.key),
            data=dict(hit.data),
            snippet=snippet,
        )


def statistics(findings: list[Finding]) -> list[dict[str, Any]]:
    """Count of findings per rule, most frequent first."""
    counts = Counter(f.code for f in findings)
    names = {code: rule.name if (rule := catalog.get(code)) is not None else code for code in counts}
    return [
        {"code": code, "name": names[code], "count": n}
        for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
