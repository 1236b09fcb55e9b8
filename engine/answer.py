"""One API request answered: read, checked against the model served, submitted to the engine under
its cache policy, and returned as JSON or as an SSE stream (stopped if the client leaves)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from prefixguard.engine.generation import Generation
from prefixguard.engine.reading import Unreadable, read_request
from prefixguard.engine.runner import EngineFailed, Overloaded
from prefixguard.engine.scheduler import RequestTooLarge
from prefixguard.engine.served import Served


def error_response(error: Any, status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error(status, message), status_code=status, headers=headers)


def endpoint_for(served: Served, path: str, shape: Any, error: Any) -> Any:
    async def endpoint(request: Request) -> Response:
        try:
            response = await _answer(served, request, path, shape, error)
        except Exception as e:  # a bug, not the client's: still the API's shape, and no traceback to the client
            logging.getLogger("prefixguard.engine").exception("%s %s failed", request.method, path)
            response = error_response(error, 500, f"internal error ({type(e).__name__})")
        served.metrics.count(shape.API, response.status_code)
        return response

    endpoint.__name__ = shape.API.replace("-", "_")
    return endpoint


async def _answer(served: Served, request: Request, path: str, shape: Any, error: Any) -> Response:
    body = await request.body()
    try:
        prompt, data, opts, ids = read_request(served, body, path, request.headers, shape)
    except Unreadable as e:
        served.metrics.invalid(shape.API)
        return error_response(error, 400, str(e))
    if served.serves is not None and not served.serves(prompt.model):
        return error_response(error, 404, f"model: {prompt.model} (this server does not serve it)")
    if not ids:
        served.metrics.invalid(shape.API)
        return error_response(error, 400, "at least one message (input item) is required")
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
        return error_response(error, 429, str(e), {"retry-after": f"{e.retry_after:g}"})
    except RequestTooLarge as e:  # over the model's context, or more than the whole KV pool
        return error_response(error, 413, str(e))
    except ValueError as e:
        served.metrics.invalid(shape.API)
        return error_response(error, 400, str(e))
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
        return error_response(error, 500, str(e))
    return JSONResponse(reply.body(text, generation.usage, generation.finish))


async def _disconnected(request: Request) -> None:
    """Returns when the client closes the connection (the body is already read)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
