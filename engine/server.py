"""The engine as an HTTP provider: OpenAI- and Anthropic-compatible APIs with real cache usage fields.

Each request: body -> Prompt (prefixguard's wire adapters, the same parser the proxy uses) -> token ids
(chat_template) -> the cache policy says how much of the prefix may be read -> the engine generates,
reusing at most that much of its radix tree -> usage reports what the tree really matched.

--cache-policy radix reuses any cached prefix (what vLLM or SGLang do). anthropic and openai follow
those providers' contracts (prefixguard.judge.policies), so the proxy's verdicts can be tested against an
upstream that behaves like the real one.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import replace
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.exceptions import HTTPException as StarletteHTTPException

from prefixguard.engine import api_anthropic, api_openai, chat_template
from prefixguard.engine.api_common import model_of, sse
from prefixguard.engine.metrics import Metrics
from prefixguard.engine.runner import EngineFailed, Overloaded, Runner, Stream
from prefixguard.engine.scheduler import RequestTooLarge
from prefixguard.judge.agreement import of_comparison
from prefixguard.judge.compare import compare
from prefixguard.judge.policies import POLICIES, CachePolicy, Expected, Policies
from prefixguard.model.diagnosis import Diagnosis
from prefixguard.model.prompt import Prompt
from prefixguard.model.usage import Usage
from prefixguard.utils.errors import InputError
from prefixguard.wire import parse_request

SHAPES = {
    "/v1/messages": (api_anthropic.Messages, api_anthropic.error),
    "/v1/chat/completions": (api_openai.Chat, api_openai.error),
    "/v1/responses": (api_openai.Responses, api_openai.error),
}


def usage_of(expected: Expected | None, cached: int, prompt_total: int, output: int) -> Usage:
    """Usage from what the tree really matched. The policy says what this request writes (Anthropic:
    up to its breakpoints); tokens it expected to read but the tree no longer had are written again."""
    read = cached
    writes = dict(expected.write_by_ttl) if expected else {}
    if expected and (expected.cache_read or expected.cache_write) and expected.cache_read > read:
        ttl = expected.ttl or "5m"
        writes[ttl] = writes.get(ttl, 0) + expected.cache_read - read
    w5, w1 = writes.get("5m", 0), writes.get("1h", 0)
    return Usage(
        prompt_total=prompt_total,
        cache_read=read,
        cache_write_5m=w5,
        cache_write_1h=w1,
        uncached=prompt_total - read - w5 - w1,
        output=output,
        reported=True,
    )


CACHE_POLICIES = ("auto", *POLICIES)
KEEP_ANSWERED = 10_000  # prompts of earlier responses kept for diagnoses (the oldest go first)


class Served:
    """What a request needs from the app: engine bridge, cache policies, metrics, defaults."""

    def __init__(self, runner: Runner, cache_policy: str, default_max_tokens: int, clock: Callable[[], float]) -> None:
        if cache_policy not in CACHE_POLICIES:
            raise ValueError(f"unknown cache policy {cache_policy!r} (one of {', '.join(CACHE_POLICIES)})")
        self.runner = runner
        self.cache_policy = cache_policy
        self.default_max_tokens = default_max_tokens
        self.clock = clock
        self.metrics = Metrics(runner)
        # the engine's prompt format: a GGUF model's tokenizer and template, else cl100k's
        self.template: chat_template.Template = getattr(runner.engine, "template", chat_template.CL100K)
        self._policies = Policies()
        self.serves: Callable[[str | None], bool] | None = None  # the model names answered (None: any)
        self._answered: OrderedDict[str, Prompt] = OrderedDict()  # response id -> its prompt, for diagnoses

    def diagnose(self, earlier_id: str, prompt: Prompt) -> Diagnosis:
        """The cache diagnosis a provider gives against an earlier response (prefixguard's comparison)."""
        earlier = self._answered.get(earlier_id)
        if earlier is None:
            return of_comparison(None, False, 0)
        return of_comparison(compare(earlier, prompt), True, earlier.total_tokens)

    def answered(self, response_id: str, prompt: Prompt) -> None:
        self._answered[response_id] = prompt
        while len(self._answered) > KEEP_ANSWERED:
            self._answered.popitem(last=False)

    def policy_for(self, prompt: Prompt) -> CachePolicy | None:
        """The contract this request is served under; None: reuse any cached prefix (radix).
        auto: the contract of the provider whose API shape and model the request names."""
        return self._policies.get(self.cache_policy, prompt.api, prompt.model, radix=False)


def create_app(
    engine: Any,
    *,
    cache_policy: str = "radix",
    model_name: str = "tiny",
    max_queue: int = 64,
    default_max_tokens: int = 64,
    clock: Callable[[], float] = time.time,
    serves: Callable[[str | None], bool] | None = None,
) -> FastAPI:
    """The ASGI app. It owns the engine thread: started on startup, stopped on shutdown.
    clock: wall time in seconds for the policies' TTLs (tests pass their own).
    serves: which model names it answers to (others get 404, as the providers answer); None: any."""
    runner = Runner(engine, max_queue=max_queue)
    served = Served(runner, cache_policy, default_max_tokens, clock)
    served.serves = serves

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runner.start()
        try:
            yield
        finally:
            runner.close()

    app = FastAPI(title="prefixguard engine", lifespan=lifespan)
    app.state.served = served

    for path, (shape, error) in SHAPES.items():
        app.add_api_route(path, _endpoint(served, path, shape, error), methods=["POST"])

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        """A wrong method or path on an API's route answers in that API's shape (FastAPI's own elsewhere)."""
        path = request.url.path.removesuffix("/count_tokens")
        shape, error = SHAPES.get(path, (None, None))
        if error is None:
            return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)
        served.metrics.count(shape.API, exc.status_code)
        return _error(error, exc.status_code, f"{request.method} {request.url.path}: {exc.detail}", exc.headers)

    @app.post("/v1/messages/count_tokens")
    async def count_tokens(request: Request) -> Response:
        body = await request.body()
        try:
            prompt = parse_request(body, path="/v1/messages", headers=request.headers, count_tokens=False)
            data = json.loads(body)
            if _LONE_SURROGATE_ESCAPE.search(body):
                json.dumps(data, ensure_ascii=False).encode("utf-8")
            api_anthropic.check_body(data)
            model_of(data)
            count = len(served.template.render(prompt.segments))
        except _READ_ERRORS as e:
            served.metrics.invalid(api_anthropic.Messages.API)
            return _error(api_anthropic.error, 400, _reason(e))
        return JSONResponse({"input_tokens": count})

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        card = {
            "id": model_name,
            "object": "model",
            "type": "model",
            "created": 0,
            "created_at": "1970-01-01T00:00:00Z",
            "display_name": model_name,
            "owned_by": "prefixguard",
        }
        return {"object": "list", "data": [card], "has_more": False, "first_id": model_name, "last_id": model_name}

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "model": model_name, "cache_policy": cache_policy, "in_flight": runner.in_flight}

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(generate_latest(served.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return app


def _error(error: Any, status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error(status, message), status_code=status, headers=headers)


def _endpoint(served: Served, path: str, shape: Any, error: Any) -> Any:
    async def endpoint(request: Request) -> Response:
        try:
            response = await _answer(served, request, path, shape, error)
        except Exception as e:  # a bug, not the client's: still the API's shape, and no traceback to the client
            logging.getLogger("prefixguard.engine").exception("%s %s failed", request.method, path)
            response = _error(error, 500, f"internal error ({type(e).__name__})")
        served.metrics.count(shape.API, response.status_code)
        return response

    endpoint.__name__ = shape.API.replace("-", "_")
    return endpoint


class Unreadable(Exception):
    """A request this server cannot parse or check: answered 400 in the API's own error shape, and counted."""


# What reading a body can raise besides InputError, whatever shape the body takes (a list where a string
# belongs, a 4,300-digit integer, nesting deeper than the recursion limit, a lone surrogate).
_READ_ERRORS = (
    InputError,
    ValueError,
    TypeError,
    KeyError,
    IndexError,
    AttributeError,
    RecursionError,
    UnicodeError,
    OverflowError,
)
_LONE_SURROGATE_ESCAPE = re.compile(rb"\\[uU][dD][89a-fA-F][0-9a-fA-F]{2}")


def _read(
    served: Served, body: bytes, path: str, headers: Any, shape: Any
) -> tuple[Prompt, dict[str, Any], Any, list[int]]:
    """(prompt, body, options, token ids) of a request, or Unreadable saying why not."""
    try:
        # count_tokens=False: the template's render counts each segment in the engine's own tokens below
        prompt = parse_request(body, path=path, headers=headers, count_tokens=False)
        data = json.loads(body)
        if _LONE_SURROGATE_ESCAPE.search(body):  # a pair is one character; a lone half cannot be answered in UTF-8
            json.dumps(data, ensure_ascii=False).encode("utf-8")
        opts = shape.options(data, served.default_max_tokens)
        if prompt.api == api_anthropic.Messages.API:
            api_anthropic.check(prompt)
        if not isinstance(prompt.model, str):
            raise InputError("'model' must be a string")
        ids = served.template.render(prompt.segments) if any(s.level == "messages" for s in prompt.segments) else []
    except _READ_ERRORS as e:
        raise Unreadable(_reason(e)) from None
    return prompt, data, opts, ids


def _reason(err: BaseException) -> str:
    """One line for the client: the input error's own words, else what kind of value broke the reading."""
    if isinstance(err, InputError):
        return str(err)
    if isinstance(err, RecursionError):
        return "the body is nested too deeply to read"
    if isinstance(err, UnicodeError):
        return "the body holds a lone surrogate (\\ud800-\\udfff), which is no character"
    if isinstance(err, ValueError) and "digits" in str(err):
        return "the body holds an integer too long to read (over 4,300 digits)"
    if isinstance(err, ValueError):
        return f"the body is not valid JSON: {str(err)[:200]}"
    return f"a field of the body has the wrong type ({type(err).__name__}: {str(err)[:200]})"


async def _answer(served: Served, request: Request, path: str, shape: Any, error: Any) -> Response:
    body = await request.body()
    try:
        prompt, data, opts, ids = _read(served, body, path, request.headers, shape)
    except Unreadable as e:
        served.metrics.invalid(shape.API)
        return _error(error, 400, str(e))
    if served.serves is not None and not served.serves(prompt.model):
        return _error(error, 404, f"model: {prompt.model} (this server does not serve it)")
    if not ids:
        served.metrics.invalid(shape.API)
        return _error(error, 400, "at least one message (input item) is required")
    now = served.clock()
    policy = served.policy_for(prompt)
    expected = policy.lookup(prompt, now) if policy else None
    try:
        stream = served.runner.submit(
            ids,
            max_tokens=max(1, opts.max_tokens),
            temperature=opts.temperature,
            stop_token_ids=served.template.stop_ids(),
            seed=opts.seed,
            reuse_limit=expected.cache_read if expected else None,
        )
    except Overloaded as e:
        return _error(error, 429, str(e), {"retry-after": f"{e.retry_after:g}"})
    except RequestTooLarge as e:  # over the model's context, or more than the whole KV pool
        return _error(error, 413, str(e))
    except ValueError as e:
        served.metrics.invalid(shape.API)
        return _error(error, 400, str(e))
    reply = shape(opts)
    earlier_id = shape.compared_with(data) if hasattr(shape, "compared_with") else None
    if earlier_id is not None and served.cache_policy != "radix":  # a provider's contract: its diagnostics too
        reply.opts = replace(opts, diagnose=True)
        reply.diagnosis = served.diagnose(earlier_id, prompt)
    served.answered(reply.id, prompt)
    generation = Generation(served, policy, prompt, now, expected, stream, reply)
    if opts.stream:
        return StreamingResponse(
            generation.frames(error), media_type="text/event-stream", headers={"cache-control": "no-cache"}
        )
    answer = asyncio.ensure_future(generation.text())
    left = asyncio.ensure_future(_disconnected(request))
    await asyncio.wait((answer, left), return_when=asyncio.FIRST_COMPLETED)
    left.cancel()
    if not answer.done():  # the client left: stop generating for it (frees its pages and locks)
        answer.cancel()
        return Response(status_code=499)
    try:
        text = answer.result()
    except EngineFailed as e:
        return _error(error, 500, str(e))
    return JSONResponse(reply.body(text, generation.usage, generation.finish))


async def _disconnected(request: Request) -> None:
    """Returns when the client closes the connection (the body is already read)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


class Generation:
    """One request's tokens as they come, turned into text (cut at a stop sequence) and usage."""

    def __init__(
        self,
        served: Served,
        policy: CachePolicy | None,
        prompt: Prompt,
        now: float,
        expected: Expected | None,
        stream: Stream,
        reply: Any,
    ) -> None:
        self.served, self.policy, self.prompt, self.now = served, policy, prompt, now
        self.expected, self.stream, self.reply = expected, stream, reply
        self.stops: tuple[str, ...] = reply.opts.stop
        self.prewarm = reply.opts.max_tokens == 0  # one token is computed, none is returned
        self.detok = served.template.detokenizer()
        self.held = ""  # text that may be the start of a stop sequence: not sent yet
        self.output = 0
        self.finish = "stop"
        self.usage = Usage()

    async def pieces(self) -> AsyncIterator[tuple[bool, str]]:
        """(first, text) per engine step; ends after the last. Frees the request however it ends."""
        first = True
        try:
            async for event in self.stream.events():
                if first and self.policy:
                    # the response has begun: from now on its cache writes are readable (Anthropic)
                    self.policy.commit(self.prompt, self.now)
                ids = [] if self.prewarm else event.token_ids
                self.output += len(ids)
                self.usage = usage_of(self.expected, event.cached_tokens or 0, self.stream.prompt_tokens, self.output)
                text = self.detok.feed(ids)
                if event.finished:
                    text += self.detok.flush()
                    self.finish = event.finish_reason or "stop"
                text, stopped = self._cut(text, event.finished)
                if event.finished or stopped:
                    self.served.metrics.finished(event, self.usage)
                yield first, text
                first = False
                if stopped:
                    return
        finally:
            self.stream.abort()  # a no-op once finished; frees pages and tree locks if the client left

    def _cut(self, text: str, final: bool) -> tuple[str, bool]:
        """The part of text that may be sent now, and whether a stop sequence ended the generation."""
        if not self.stops:
            return text, False
        text = self.held + text
        found = min(((text.find(s), s) for s in self.stops if s in text), default=None)
        if found:
            self.held, self.finish, self.reply.stop_sequence = "", "stop_sequence", found[1]
            return text[: found[0]], True
        keep = 0 if final else max((k for s in self.stops for k in range(1, len(s)) if text.endswith(s[:k])), default=0)
        self.held = text[len(text) - keep :]
        return text[: len(text) - keep], False

    async def text(self) -> str:
        return "".join([text async for _, text in self.pieces()])

    async def frames(self, error: Any) -> AsyncIterator[str]:
        reply = self.reply
        try:
            async for first, text in self.pieces():
                if first:
                    for frame in reply.start(self.usage):
                        yield frame
                if text:
                    yield reply.delta(text)
        except EngineFailed as e:  # the status line is sent: the error goes in the stream, shaped per API
            yield sse(error(500, str(e)), "error" if reply.API == api_anthropic.Messages.API else None)
            return
        for frame in reply.end(self.usage, self.finish):
            yield frame


def listen(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A listening socket for uvicorn; port 0 picks a free one (read it with getsockname). It listens
    from here on, so a client told the port before the server has started waits instead of failing."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    return sock


@contextmanager
def serve_in_thread(app: FastAPI, host: str = "127.0.0.1") -> Iterator[str]:
    """Serve an app on a free loopback port in a background thread; yields its base URL (tests, bench)."""
    import uvicorn

    sock = listen(host, 0)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        if not server.started:
            raise RuntimeError("the server did not start")
        yield f"http://{host}:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()
