"""`prefixguard proxy` and `prefixguard capture export`."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from prefixguard.cli import fail
from prefixguard.errors import InputError


@click.command()
@click.option("--upstream", "upstreams", multiple=True, required=True, metavar="[PREFIX=]URL",
              help="Where requests go, e.g. https://api.anthropic.com; repeat with a path prefix for more, "
                   "e.g. /openai=https://api.openai.com (the prefix is removed).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535),
              help="Port to listen on (0: any free port; the real one is printed).")
@click.option("--store", help="Capture store to write: an SQLite file, or a postgresql:// URL (a fleet's).")
@click.option("--index", metavar="URL", help="A fleet's shared session index (redis://HOST:6379/0); default: in this process.")
@click.option("--no-bodies", is_flag=True, help="Store fingerprints and token counts only, no request bodies.")
@click.option("--no-headers", is_flag=True, help="Do not add x-prefixguard-* headers to responses.")
@click.option("--policy", type=click.Choice(["radix", "anthropic", "openai"]),
              help="Cache policy for expectations (default: the provider's, from the API shape and model).")
@click.option("-q", "--quiet", is_flag=True, help="No console line per request.")
def proxy(upstreams: tuple[str, ...], host: str, port: int, store: str | None, index: str | None, no_bodies: bool,
          no_headers: bool, policy: str | None, quiet: bool) -> None:
    """Run a transparent reverse proxy that explains every prompt-cache hit and miss.

    Point the app's base URL at it (e.g. ANTHROPIC_BASE_URL=http://127.0.0.1:8080). Bodies pass through
    byte for byte and streams chunk by chunk; the analysis runs beside the traffic, never in its way.
    """
    from prefixguard.proxy.addon import PrefixGuard
    from prefixguard.proxy.route import Route
    from prefixguard.proxy.run import check_listen, serve

    for spec in upstreams:
        try:
            Route.parse(spec)
        except ValueError as err:
            fail(f"--upstream: {err}")
    check_listen(host, port)  # a port in use or a bad --host: one line, exit 2, before anything starts
    try:
        if store is not None:
            from prefixguard.store import check_writable_store
            check_writable_store(store)  # a foreign or broken file, a server that does not answer: here, before anything listens
        if index:
            from prefixguard.state import open_index
            open_index(index).close()  # the URL's shape and the extra; a Redis down later only degrades verdicts
    except InputError as err:
        fail(str(err))
    settings = {"prefixguard_store": str(store or ""), "prefixguard_index": index or "", "prefixguard_bodies": not no_bodies,
                "prefixguard_headers": not no_headers, "prefixguard_quiet": quiet,
                "prefixguard_policy": policy or ""}

    _console_log()

    def listening(real_port: int) -> None:
        click.echo(f"prefixguard proxy listening on http://{host}:{real_port} -> {', '.join(upstreams)}", err=True)

    try:
        serve(list(upstreams), host=host, port=port, addon=PrefixGuard(), settings=settings, on_listen=listening)
    except KeyboardInterrupt:
        pass
    except InputError as err:
        fail(str(err))
    except OSError as err:
        fail(str(err), code=1)


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


@click.group()
def capture() -> None:
    """Work with capture files written by `prefixguard proxy --store`."""


@capture.command("export")
@click.argument("db")
def export(db: str) -> None:
    """Write a capture (an SQLite file or a postgresql:// URL) as JSON lines to stdout (for `lint`
    sequence mode and `replay`)."""
    import os

    from prefixguard.store import open_capture

    try:
        with open_capture(db) as store:
            store.export(sys.stdout)
        sys.stdout.flush()
    except BrokenPipeError:  # the reader stopped (`| head -1`): what it wanted was written; not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit's flush
        sys.exit(0)
