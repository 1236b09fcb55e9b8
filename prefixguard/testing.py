"""Prompt-cache checks inside an app's own tests.

- `assert_prefix_stable(a, b)`: the later request `b` must reuse the cached prefix of `a`; otherwise it
  raises PrefixBroken with the explanation (cause, where, what changed, the fix). The verdict is the
  proxy's and `diff`'s (prefixguard.judge.verdict.judge_pair), with the same reused and re-prefilled tokens.
- `Recorder`: captures every request body an app sends through the anthropic or openai SDK (or any
  httpx client), by wrapping the client's transport. The SDKs moved from `httpx` to its fork `httpx2`;
  the recorder builds its transports from the module of the transport it wraps, else from `httpx2` when
  installed, else `httpx`. The wrapped transport still answers: the network by
  default, or whatever the test already uses (httpx.MockTransport, respx), so no network is needed when
  the test mocks responses. `write()` saves a capture (JSONL) that `prefixguard lint` reads in sequence
  mode; `breaks()` says where a recorded session broke its own prefix.

    recorder = Recorder()
    client = anthropic.Anthropic(http_client=recorder.http_client())
    app.run(client)
    assert not recorder.breaks(), recorder.explain()

The pytest plugin (prefixguard.pytest_plugin) gives each test a Recorder as the `prefix_recorder` fixture.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from prefixguard.capture.attribution import SITE_HEADER
from prefixguard.judge.causes import DESCRIPTIONS
from prefixguard.judge.compare import Comparison
from prefixguard.judge.session import Sessions
from prefixguard.judge.verdict import Verdict, VerdictName, judge_pair
from prefixguard.model.prompt import Prompt
from prefixguard.utils.errors import InputError
from prefixguard.wire import parse_request


class PrefixBroken(AssertionError):
    """A later request does not reuse the earlier one's cached prefix; str() explains why."""

    def __init__(self, message: str, comparison: Comparison, verdict: Verdict) -> None:
        super().__init__(message)
        self.comparison = comparison
        self.verdict = verdict


Body = dict | str | bytes | Prompt


def _prompt(body: Body, path: str | None = None) -> Prompt:
    if isinstance(body, Prompt):
        return body
    if isinstance(body, dict):
        body = json.dumps(body, ensure_ascii=False)
    return parse_request(body, path=path)  # counted as `diff` and the proxy count them


def explain(r: Comparison, v: Verdict, where: str = "") -> str:
    """A break in a few lines: the verdict, cause, where, before/after, tokens, the fix."""
    d = r.divergence
    head = f"prefix broken{where}: {DESCRIPTIONS[r.causes[0]]}" + (f" ({r.setting})" if r.setting else "")
    lines = [head, f"  verdict: {v.verdict} ({v.cause})"]
    if d is not None:
        lines.append(f"  at {d.level} level, {d.pointer} (byte {d.byte_offset:,})")
    if r.before or r.after:
        lines += [f"  before: {r.before}", f"  after:  {r.after}"]
    if r.detail:
        lines.append(f"  changed: {r.detail}")
    lines.append(f"  {v.reused_tokens:,} tokens reused, {v.reprefill_tokens:,} to prefill again")
    if r.fix:
        lines.append(f"  fix: {r.fix}")
    return "\n".join(lines)


def assert_prefix_stable(a: Body, b: Body) -> Verdict:
    """Raise PrefixBroken (an AssertionError) when request `b`, sent after `a`, does not reuse a's cached
    prefix (its verdict is miss_prefix_changed). a and b: request bodies (dict, JSON text or bytes) or
    parsed Prompts. Returns the verdict (a change that costs nothing is a note on a hit)."""
    v, r = judge_pair(_prompt(a), _prompt(b))
    if v.verdict is VerdictName.MISS_PREFIX_CHANGED:
        raise PrefixBroken(explain(r, v), r, v)
    return v


@dataclass(slots=True, kw_only=True)
class Recorded:
    path: str  # URL path the request went to
    body: bytes  # the body as sent
    prompt: Prompt


class Recorder:
    """Collects the LLM request bodies sent through the clients it wraps (in order). Each request it
    sends on carries its name as the call site (the x-prefixguard-site header, unless the caller set
    one), so a proxy's capture of the test's traffic groups it by test (`report --by site`)."""

    def __init__(self, name: str = "session", *, site: bool = True) -> None:
        self.name = name
        self.site = site  # False: send every request exactly as the client made it
        self.requests: list[Recorded] = []

    def mark(self, request: Any) -> None:
        """Name this recorder as the request's call site, when the caller named none."""
        if self.site and SITE_HEADER not in request.headers:
            # a test id may hold any character; a header value is ASCII
            request.headers[SITE_HEADER] = self.name.encode("ascii", "backslashreplace").decode("ascii")

    # ------------------------------------------------------------------ hooks into httpx / the SDKs

    def transport(self, inner: Any = None) -> Any:
        """A transport that records, then hands the request to `inner` (default: the network)."""
        mod = _httpx(inner)
        return _classes(mod.__name__)[0](self, inner or mod.HTTPTransport())

    def async_transport(self, inner: Any = None) -> Any:
        mod = _httpx(inner)
        return _classes(mod.__name__)[1](self, inner or mod.AsyncHTTPTransport())

    def http_client(self, **kwargs: Any) -> Any:
        """A Client for the SDKs' `http_client=`; kwargs go to the Client (`transport`, if any, is wrapped)."""
        inner = kwargs.pop("transport", None)
        return _httpx(inner).Client(**kwargs, transport=self.transport(inner))

    def async_http_client(self, **kwargs: Any) -> Any:
        inner = kwargs.pop("transport", None)
        return _httpx(inner).AsyncClient(**kwargs, transport=self.async_transport(inner))

    def record(self, path: str, body: bytes) -> None:
        """Keep one request body if it is an LLM request prefixguard reads (others pass unrecorded)."""
        try:
            prompt = parse_request(body, path=path)
        except InputError:
            return
        self.requests.append(Recorded(path=path, body=body, prompt=prompt))

    # ------------------------------------------------------------------------------ what was recorded

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.body) for r in self.requests]

    def verdicts(self) -> list[tuple[int, int, Verdict, Comparison]]:
        """(earlier index, index, verdict, comparison) of each request against the best earlier request of
        the session (the proxy's session model), judged as the proxy and `diff` judge it. Requests to
        different APIs (Anthropic, OpenAI) never share a cache, so each API is a tenant of its own."""
        sessions = Sessions()
        out: list[tuple[int, int, Verdict, Comparison]] = []
        for i, r in enumerate(self.requests):
            if r.prompt.counts_only:
                continue
            match = sessions.observe(r.prompt, i, tenant=r.prompt.api)
            if match.prompt is None:
                continue
            v, cmp = judge_pair(match.prompt, r.prompt, cmp=match.comparison)
            out.append((match.earlier, i, v, cmp))
        return out

    def breaks(self) -> list[tuple[int, int, Comparison]]:
        """(earlier index, index, comparison) of each request whose verdict is miss_prefix_changed."""
        return [(a, b, c) for a, b, v, c in self.verdicts() if v.verdict is VerdictName.MISS_PREFIX_CHANGED]

    def explain(self) -> str:
        return "\n".join(
            explain(c, v, f" between request {a + 1} and request {b + 1} of {self.name}")
            for a, b, v, c in self.verdicts()
            if v.verdict is VerdictName.MISS_PREFIX_CHANGED
        )

    def rows(self) -> Iterator[str]:
        """Capture rows (one JSON object a line) as `prefixguard lint` reads them."""
        for r in self.requests:
            yield json.dumps({"path": r.path, "request": json.loads(r.body), "site": self.name}, ensure_ascii=False)

    def write(self, folder: str | Path) -> Path | None:
        """Write the session to folder/<name>.jsonl (nothing when nothing was recorded); returns the file."""
        if not self.requests:
            return None
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', self.name).strip('_') or 'session'}.jsonl"
        path.write_text("".join(row + "\n" for row in self.rows()), "utf-8")
        return path


def _httpx(inner: Any) -> ModuleType:
    """The httpx flavour to build with: the wrapped transport's, else httpx2 (today's SDKs), else httpx."""
    if inner is not None:
        return importlib.import_module(type(inner).__module__.partition(".")[0])
    try:
        return importlib.import_module("httpx2")
    except ImportError:
        return importlib.import_module("httpx")


@cache
def _classes(module: str) -> tuple[type, type]:
    """Recording transports (sync, async) subclassing that module's base transports."""
    mod = importlib.import_module(module)

    class Transport(mod.BaseTransport):  # type: ignore[name-defined]
        def __init__(self, recorder: Recorder, inner: Any) -> None:
            self.recorder, self.inner = recorder, inner

        def handle_request(self, request: Any) -> Any:
            if request.method == "POST":
                self.recorder.record(request.url.path, request.read())
                self.recorder.mark(request)
            return self.inner.handle_request(request)

        def close(self) -> None:
            self.inner.close()

    class AsyncTransport(mod.AsyncBaseTransport):  # type: ignore[name-defined]
        def __init__(self, recorder: Recorder, inner: Any) -> None:
            self.recorder, self.inner = recorder, inner

        async def handle_async_request(self, request: Any) -> Any:
            if request.method == "POST":
                self.recorder.record(request.url.path, await request.aread())
                self.recorder.mark(request)
            return await self.inner.handle_async_request(request)

        async def aclose(self) -> None:
            await self.inner.aclose()

    return Transport, AsyncTransport
