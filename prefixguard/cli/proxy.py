"""`prefixguard proxy` and `prefixguard capture export`."""

from __future__ import annotations

import sys
from typing import Any

import click

from prefixguard.cli.exits import fail
from prefixguard.cli.options import Group, command, compatible_options, option, output_format, policy_option
from prefixguard.utils.errors import InputError


@command()
@option(
    "--upstream",
    "upstreams",
    multiple=True,
    required=True,
    metavar="[PREFIX=]URL",
    help="Where requests go, e.g. https://api.anthropic.com; repeat with a path prefix for more, "
    "e.g. /openai=https://api.openai.com (the prefix is removed).",
)
@option("--host", default="127.0.0.1", help="Address to listen on [default: 127.0.0.1].")
@option(
    "--port",
    default=8080,
    type=click.IntRange(0, 65535),
    help="Port to listen on (0: any free port; the real one is printed) [default: 8080].",
)
@option("--store", help="Capture store to write: an SQLite file, or a postgresql:// URL (a fleet's).")
@option(
    "--index", metavar="URL", help="A fleet's shared session index (redis://HOST:6379/0); default: in this process."
)
@option("--no-bodies", is_flag=True, help="Store fingerprints and token counts only, no request bodies.")
@option("--no-headers", is_flag=True, help="Do not add x-prefixguard-* headers to responses.")
@policy_option("auto")
@compatible_options
@option("-q", "--quiet", is_flag=True, help="No console line per request.")
@option(
    "--ask-diagnostics",
    is_flag=True,
    help="Ask Anthropic / OpenAI Responses for their own cache diagnosis against the tenant's previous "
    "response. CHANGES request bodies: one member is added (diagnostics.previous_message_id or "
    "prompt_cache_options.comparison_response_id); every other byte is sent as it came.",
)
@option(
    "--otlp-endpoint",
    metavar="URL",
    help="Send one OpenTelemetry span per LLM call to this OTLP/HTTP collector, e.g. http://127.0.0.1:4318.",
)
@option(
    "--metrics-port",
    type=click.IntRange(1, 65535),
    help="Serve Prometheus metrics at http://HOST:PORT/metrics (HOST: --host).",
)
def proxy(
    upstreams: tuple[str, ...],
    host: str,
    port: int,
    store: str | None,
    index: str | None,
    no_bodies: bool,
    no_headers: bool,
    policy: str | None,
    quiet: bool,
    ask_diagnostics: bool,
    otlp_endpoint: str | None = None,
    metrics_port: int | None = None,
) -> None:
    """Run a transparent reverse proxy that explains every prompt-cache hit and miss.

    Point the app's base URL at it (e.g. ANTHROPIC_BASE_URL=http://127.0.0.1:8080). Bodies pass through
    byte for byte and streams chunk by chunk; the analysis runs beside the traffic, never in its way.
    """
    from prefixguard.proxy.addon import PrefixGuard
    from prefixguard.proxy.process import analysis_nice
    from prefixguard.proxy.route import Route
    from prefixguard.proxy.serve import check_listen, serve

    for spec in upstreams:
        try:
            Route.parse(spec)
        except ValueError as err:
            fail(f"--upstream: {err}")
    check_listen(host, port)  # a port in use or a bad --host: one line, exit 2, before anything starts
    analysis_nice()  # and a bad PREFIXGUARD_ANALYSIS_NICE
    if metrics_port is not None:
        import prometheus_client  # noqa: F401 - a missing extra fails here, in one line

        check_listen(host, metrics_port)
    if otlp_endpoint:
        _check_telemetry(otlp_endpoint)
    try:
        if store is not None:
            from prefixguard.capture.store import check_writable_store

            # a foreign or broken file, a server that does not answer: here, before anything listens
            check_writable_store(store)
        if index:
            from prefixguard.judge.state import open_index

            open_index(index).close()  # the URL's shape and the extra; a Redis down later only degrades verdicts
    except InputError as err:
        fail(str(err))
    settings = {
        "prefixguard_store": str(store or ""),
        "prefixguard_index": index or "",
        "prefixguard_bodies": not no_bodies,
        "prefixguard_headers": not no_headers,
        "prefixguard_quiet": quiet,
        "prefixguard_policy": "" if policy == "auto" else policy,  # auto: each provider's own
        "prefixguard_diagnostics": ask_diagnostics,
        "prefixguard_otlp_endpoint": otlp_endpoint or "",
        "prefixguard_metrics_port": metrics_port or 0,
        "prefixguard_metrics_host": host,
    }

    _console_log()
    from prefixguard.contracts import prices
    from prefixguard.utils.redaction import url_for_display
    from prefixguard.utils.styled import printable

    def listening(real_port: int) -> None:
        shown = ", ".join(printable(url_for_display(u)) for u in upstreams)  # never an upstream's password
        print(f"prefixguard proxy listening on http://{host}:{real_port} -> {shown}", file=sys.stderr)
        print(f"prefixguard costs at list prices: {prices.summary()}", file=sys.stderr, flush=True)

    try:
        serve(
            list(upstreams),
            host=host,
            port=port,
            addon=PrefixGuard(analyzer=_analyzer_factory()),
            settings=settings,
            on_listen=listening,
        )
    except KeyboardInterrupt:
        pass
    except InputError as err:
        fail(url_for_display(str(err)))
    except OSError as err:
        fail(url_for_display(str(err)), code=1)


def _analyzer_factory() -> Any:
    """The worker process's Analyzer, under the compatible settings this command was given (its flags):
    a picklable callable, as the worker is another process."""
    from functools import partial

    from prefixguard.contracts.providers import compatible_settings

    return partial(configured_analyzer, compatible_settings())


def configured_analyzer(compatible: Any, **settings: Any) -> Any:
    """An Analyzer that judges `compatible` requests by these settings (in the worker process)."""
    from prefixguard.contracts.providers import configure_compatible
    from prefixguard.proxy.analysis import Analyzer

    configure_compatible(compatible)
    return Analyzer(**settings)


def _check_telemetry(endpoint: str) -> None:
    """A bad URL or a missing extra: one line, exit 2, before anything listens."""
    try:
        from prefixguard.telemetry.spans import traces_url

        traces_url(endpoint)
        import opentelemetry.exporter.otlp.proto.http.trace_exporter  # noqa: F401
    except ValueError as err:
        fail(str(err))


def _console_log() -> None:
    """The addon's warnings (a failed analysis, analysis behind, a restarted analysis process) on
    stderr: mitmproxy's own log display is off in `prefixguard proxy`."""
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    log = logging.getLogger("prefixguard")
    log.addHandler(handler)
    log.setLevel(logging.WARNING)
    log.propagate = False


@click.group(cls=Group)
def capture() -> None:
    pass  # its help is its line in `prefixguard --help` (cli/lazy.py)


@capture.command("export")
@click.argument("db")
@output_format(
    ("jsonl", "otlp-json"),
    "jsonl",
    help="jsonl: one row per line (for `lint` sequence mode and `replay`); otlp-json: one OTLP/JSON "
    "trace request with a span per call (a collector's otlpjsonfile receiver, POST /v1/traces).",
)
def export_capture(db: str, fmt: str) -> None:
    """Write a capture (an SQLite file or a postgresql:// URL) to stdout, as JSON lines or as OpenTelemetry
    spans."""
    import json

    from prefixguard.capture.store import open_capture

    with open_capture(db) as store:
        if fmt == "otlp-json":
            from prefixguard.telemetry.spans import otlp_json

            sys.stdout.write(json.dumps(otlp_json(store.records()), separators=(",", ":")) + "\n")
        else:
            store.export(sys.stdout)
    sys.stdout.flush()
