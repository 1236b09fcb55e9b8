"""`prefixguard engine serve`: the local engine as an OpenAI- and Anthropic-compatible HTTP server."""
from __future__ import annotations

from collections.abc import Callable

import click

from prefixguard.cli.options import alias, from_alias, policy_option


@click.group()
def engine() -> None:
    """The local inference engine (PyTorch) with radix-tree prefix KV reuse."""


@engine.command()
@click.option("--engine-model", "model", default="tiny", show_default=True, callback=from_alias,
              help="The weights the engine runs: random-weight preset (tiny, small, 1b) or a real model (smollm2-135m: its own tokenizer "
              "and chat template; needs the engine extra).")
@alias("--model", "model")
@click.option("--weights", type=click.Path(exists=True),
              help="Local safetensors checkpoint folder, or a llama-architecture .gguf file.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True,
              help="0: a free port, printed on start.")
@policy_option("radix", old=("--cache-policy",))
@click.option("--device", default="cpu", show_default=True)
@click.option("--dtype", default="float32", show_default=True)
@click.option("--page-size", type=click.IntRange(1), default=1, show_default=True,
              help="Tokens per KV page; 1 makes cache reads token-exact, as the providers report them.")
@click.option("--kv-pages", type=click.IntRange(1), help="KV pool size in pages (default: 16k tokens).")
@click.option("--max-batch", type=click.IntRange(1), default=64, show_default=True)
@click.option("--max-queue", type=click.IntRange(1), default=64, show_default=True,
              help="Requests in flight before the server answers 429.")
@click.option("--max-tokens", "default_max_tokens", type=click.IntRange(1), default=64, show_default=True,
              help="Output tokens when an OpenAI request sets no limit.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random weights.")
@click.option("--served-model-name", "served_names", multiple=True, metavar="NAME",
              help="A model name requests may ask for (repeatable; '*': any). Default: the --engine-model name and "
              "every model a provider in rules/providers.toml sells (claude-..., gpt-...), so an app keeps its "
              "model name; any other name gets 404 in the provider's shape, as the providers answer.")
def serve(model: str, weights: str | None, host: str, port: int, policy: str, device: str, dtype: str,
          page_size: int, kv_pages: int | None, max_batch: int, max_queue: int, default_max_tokens: int,
          seed: int, served_names: tuple[str, ...]) -> None:
    """Serve /v1/messages, /v1/chat/completions, /v1/responses, /v1/models, /health and /metrics."""
    import uvicorn

    from prefixguard.engine.server import create_app, listen

    try:  # the port first: a taken one fails in a second, before the model loads
        sock = listen(host, port)
    except OSError as e:
        raise click.UsageError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    from prefixguard.engine.llm_engine import LLMEngine

    try:
        llm = LLMEngine(model, device=device, dtype=dtype, page_size=page_size, kv_pages=kv_pages,
                        max_batch=max_batch, seed=seed, weights=weights)
    except (ValueError, OSError, RuntimeError) as e:
        raise click.UsageError(f"cannot start the engine: {e}") from None
    app = create_app(llm, cache_policy=policy, model_name=model, max_queue=max_queue,
                     default_max_tokens=default_max_tokens, serves=_serves(model, served_names))
    bound = sock.getsockname()[1]
    click.echo(f"prefixguard engine: model {model}, cache policy {policy}, "
               f"listening on http://{host}:{bound}")
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2))
    server.run(sockets=[sock])


def _serves(model: str, names: tuple[str, ...]) -> Callable[[str | None], bool] | None:
    """The model names the server answers to: --served-model-name's, else its own and what providers sell."""
    if "*" in names:
        return None
    if names:
        return lambda asked: asked in names
    from prefixguard.contracts import sold

    return lambda asked: asked == model or sold(asked)
