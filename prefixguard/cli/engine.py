"""`prefixguard engine serve`: the local engine as an OpenAI- and Anthropic-compatible HTTP server."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from prefixguard.cli.exits import UsageError
from prefixguard.cli.options import Group, old_name, option, policy_option


@click.group(cls=Group)
def engine() -> None:
    pass  # its help is its line in `prefixguard --help` (cli/lazy.py)


@engine.command()
@option(
    "--engine-model",
    "model",
    default="tiny",
    help="The weights the engine runs: random-weight preset (tiny, small, 1b) or a real model "
    "(smollm2-135m: its own tokenizer and chat template; needs the engine extra) [default: tiny].",
)
@old_name("--model", "model", default="tiny")
@option("--weights", help="Local safetensors checkpoint folder, or a llama-architecture .gguf file.")
@option("--host", default="127.0.0.1", help="[default: 127.0.0.1]")
@option("--port", type=click.IntRange(0, 65535), default=8000, help="0: a free port, printed on start [default: 8000].")
@policy_option("radix", old=("--cache-policy",))
@option("--device", default="cpu", help="cpu, cuda (or cuda:N), or auto: cuda when there is a GPU [default: cpu].")
@option(
    "--dtype",
    type=click.Choice(["float32", "bfloat16", "float16", "auto"]),
    default="float32",
    help="auto: bfloat16 on cuda, float32 on cpu [default: float32].",
)
@option(
    "--attention",
    type=click.Choice(["auto", "sdpa", "triton", "flex"]),
    default="auto",
    help="Attention backend: auto is triton on cuda, sdpa on cpu; flex is PyTorch's FlexAttention over the "
    "paged KV pool [default: auto].",
)
@option(
    "--page-size",
    type=click.IntRange(1),
    default=1,
    help="Tokens per KV page; 1 makes cache reads token-exact, as the providers report them [default: 1].",
)
@option("--kv-pages", type=click.IntRange(1), help="KV pool size in pages (default: 16k tokens).")
@option("--max-batch", type=click.IntRange(1), default=64, help="[default: 64]")
@option(
    "--max-queue",
    type=click.IntRange(1),
    default=64,
    help="Requests in flight before the server answers 429 [default: 64].",
)
@option(
    "--max-tokens",
    "default_max_tokens",
    type=click.IntRange(1),
    default=64,
    help="Output tokens when an OpenAI request sets no limit [default: 64].",
)
@option("--seed", type=int, default=0, help="Seed of the random weights [default: 0].")
@option(
    "--served-model-name",
    "served_names",
    multiple=True,
    metavar="NAME",
    help="A model name requests may ask for (repeatable; '*': any). Default: the --engine-model name and "
    "every model a provider in rules/providers.toml sells (claude-..., gpt-...), so an app keeps its "
    "model name; any other name gets 404 in the provider's shape, as the providers answer.",
)
def serve(
    model: str,
    weights: str | None,
    host: str,
    port: int,
    policy: str,
    device: str,
    dtype: str,
    attention: str,
    page_size: int,
    kv_pages: int | None,
    max_batch: int,
    max_queue: int,
    default_max_tokens: int,
    seed: int,
    served_names: tuple[str, ...],
) -> None:
    """Serve /v1/messages, /v1/chat/completions, /v1/responses, /v1/models, /health and /metrics."""
    if weights and not Path(weights).exists():
        raise UsageError(f"{weights}: no such file or folder", option="--weights")
    if not weights:  # a name no weights come with: said now, not after torch has loaded (seconds)
        from prefixguard.engine.config import check_name

        try:
            check_name(model)
        except ValueError as e:
            raise UsageError(str(e), option="--engine-model") from None
    import uvicorn

    from prefixguard.engine.server import create_app, listen

    try:  # the port first: a taken one fails in a second, before the model loads
        sock = listen(host, port)
    except OSError as e:
        raise UsageError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    from prefixguard.engine.llm_engine import LLMEngine

    try:
        llm = LLMEngine(
            model,
            device=device,
            dtype=dtype,
            page_size=page_size,
            kv_pages=kv_pages,
            max_batch=max_batch,
            seed=seed,
            weights=weights,
            attention=attention,
        )
    except (ValueError, OSError, RuntimeError) as e:
        raise UsageError(f"cannot start the engine: {e}") from None
    app = create_app(
        llm,
        cache_policy=policy,
        model_name=model,
        max_queue=max_queue,
        default_max_tokens=default_max_tokens,
        serves=_serves(model, served_names),
    )
    bound = sock.getsockname()[1]
    print(f"prefixguard engine: model {model}, cache policy {policy}, listening on http://{host}:{bound}", flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2))
    server.run(sockets=[sock])


def _serves(model: str, names: tuple[str, ...]) -> Callable[[str | None], bool] | None:
    """The model names the server answers to: --served-model-name's, else its own and what providers sell."""
    if "*" in names:
        return None
    if names:
        return lambda asked: asked in names
    from prefixguard.contracts.providers import sold

    return lambda asked: asked == model or sold(asked)
