"""The engine as an HTTP provider: OpenAI- and Anthropic-compatible APIs with real cache usage fields.

Each request: body -> Prompt (prefixguard's wire adapters, the same parser the proxy uses) -> token ids
(chat_template) -> the cache policy says how much of the prefix may be read -> the engine generates,
reusing at most that much of its radix tree -> usage reports what the tree really matched.

--cache-policy radix reuses any cached prefix (what vLLM or SGLang do). anthropic and openai follow
those providers' contracts (prefixguard.judge.policies), so the proxy's verdicts can be tested against an
upstream that behaves like the real one.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.exceptions import HTTPException as StarletteHTTPException

from prefixguard.engine import api_anthropic, api_openai
from prefixguard.engine.answer import endpoint_for, error_response
from prefixguard.engine.api_common import model_of
from prefixguard.engine.reading import LONE_SURROGATE_ESCAPE, READ_ERRORS, reason
from prefixguard.engine.runner import Runner
from prefixguard.engine.served import Served
from prefixguard.wire import parse_request

SHAPES = {
    "/v1/messages": (api_anthropic.Messages, api_anthropic.error),
    "/v1/chat/completions": (api_openai.Chat, api_openai.error),
    "/v1/responses": (api_openai.Responses, api_openai.error),
    "/v1/completions": (api_openai.Completions, api_openai.error),
}


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
        app.add_api_route(path, endpoint_for(served, path, shape, error), methods=["POST"])

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        """A wrong method or path on an API's route answers in that API's shape (FastAPI's own elsewhere)."""
        path = request.url.path.removesuffix("/count_tokens")
        shape, error = SHAPES.get(path, (None, None))
        if error is None:
            return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)
        served.metrics.count(shape.API, exc.status_code)
        return error_response(error, exc.status_code, f"{request.method} {request.url.path}: {exc.detail}", exc.headers)

    @app.post("/v1/messages/count_tokens")
    async def count_tokens(request: Request) -> Response:
        body = await request.body()
        try:
            prompt = parse_request(body, path="/v1/messages", headers=request.headers, count_tokens=False)
            data = json.loads(body)
            if LONE_SURROGATE_ESCAPE.search(body):
                json.dumps(data, ensure_ascii=False).encode("utf-8")
            api_anthropic.check_body(data)
            model_of(data)
            count = len(served.template.render(prompt.segments))
        except READ_ERRORS as e:
            served.metrics.invalid(api_anthropic.Messages.API)
            return error_response(api_anthropic.error, 400, reason(e))
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
