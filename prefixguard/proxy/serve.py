"""Run mitmproxy in reverse mode programmatically, with or without the prefixguard addon.

`ProxyThread` runs it on its own event loop in a background thread (tests, benchmarks, the demo);
`prefixguard proxy` runs the same thing in the foreground.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import threading
from collections.abc import Callable
from typing import Any

from mitmproxy import options
from mitmproxy.tools.dump import DumpMaster

from prefixguard.proxy.addon import PrefixGuard
from prefixguard.proxy.route import Route
from prefixguard.utils.errors import InputError
from prefixguard.utils.redaction import url_for_display


def check_listen(host: str, port: int) -> None:
    """Raise InputError naming the reason when the proxy could not listen on host:port (an address
    that does not resolve or is not this machine's, a port in use or not allowed). mitmproxy would
    only log it and exit 1 with "Error logged during startup"."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as err:
        why = getattr(err, "strerror", None) or err
        raise InputError(f"--host {host!r} is no address to listen on ({why})") from None
    for family, kind, proto, _, addr in infos:
        with socket.socket(family, kind, proto) as probe:
            if hasattr(socket, "SO_REUSEADDR") and family != getattr(socket, "AF_UNIX", None):
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio's server does
            try:
                probe.bind(addr)
            except OSError as err:
                raise InputError(f"cannot listen on {host}:{port}: {err.strerror or err}") from None


def proxy_options(upstreams: list[str], host: str, port: int) -> dict[str, Any]:
    """mitmproxy options for a reverse proxy to the upstreams (ValueError on a bad spec)."""
    routes = [Route.parse(s) for s in upstreams]
    if not routes:
        raise ValueError("give at least one --upstream")
    default = next((r for r in routes if not r.prefix), routes[0])
    # lazy: connect upstream per request, as the route may change the host. The mode names the host
    # alone: mitmproxy refuses a URL with userinfo (and would print it), and a route never sends it.
    return {
        "mode": [f"reverse:{url_for_display(default.url)}"],
        "listen_host": host,
        "listen_port": port,
        "connection_strategy": "lazy",
    }


async def start(
    upstreams: list[str],
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    addon: Any = None,
    settings: dict[str, Any] | None = None,
) -> tuple[DumpMaster, asyncio.Task, int]:
    """Start a proxy on the running loop: (master, its task, the port it listens on)."""
    wanted = proxy_options(upstreams, host, port)
    opts = options.Options()
    master = DumpMaster(opts, with_termlog=False, with_dumper=False)
    opts.update(**wanted)
    if addon is not None:
        master.addons.add(addon)
    if isinstance(addon, PrefixGuard):
        opts.update(prefixguard_upstreams=list(upstreams), **(settings or {}))
    task = asyncio.create_task(master.run())
    proxyserver = master.addons.get("proxyserver")
    while not proxyserver.listen_addrs():
        if task.done():
            task.result()  # raises what stopped it
            raise RuntimeError("mitmproxy stopped before it listened")
        await asyncio.sleep(0.01)
    return master, task, proxyserver.listen_addrs()[0][1]


def _quiet_teardown() -> None:
    """Connections still open at shutdown are cancelled; that is expected, not worth a traceback."""
    asyncio.get_running_loop().set_exception_handler(lambda loop, context: None)


class ProxyThread:
    """A proxy on a background thread. `with ProxyThread([...]) as p:` then talk to p.url."""

    def __init__(
        self,
        upstreams: list[str],
        *,
        addon: PrefixGuard | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        **settings: Any,
    ) -> None:
        self.upstreams, self.addon, self.host, self.port = upstreams, addon, host, port
        self.settings = {f"prefixguard_{k}": v for k, v in settings.items()}
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._master: DumpMaster | None = None
        self._thread = threading.Thread(target=self._run, name="mitmproxy", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _run(self) -> None:
        async def main() -> None:
            self._master, task, self.port = await start(
                self.upstreams, host=self.host, port=self.port, addon=self.addon, settings=self.settings
            )
            self._ready.set()
            await task
            _quiet_teardown()

        try:
            asyncio.run(main())
        except BaseException as err:  # noqa: BLE001 - handed to the thread that started us
            self._error = err
        finally:
            self._ready.set()

    def start(self) -> ProxyThread:
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        return self

    def stop(self) -> None:
        if self._master is not None:
            self._master.shutdown()
        self._thread.join(timeout=30)

    def __enter__(self) -> ProxyThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(
    upstreams: list[str],
    *,
    host: str,
    port: int,
    addon: PrefixGuard,
    settings: dict[str, Any],
    on_listen: Callable[[int], None],
) -> None:
    """Run in the foreground until interrupted."""

    async def main() -> None:
        master, task, real_port = await start(upstreams, host=host, port=port, addon=addon, settings=settings)
        for sig in (signal.SIGINT, signal.SIGTERM):  # stop cleanly: pending analyses finish and are stored
            asyncio.get_running_loop().add_signal_handler(sig, master.shutdown)
        on_listen(real_port)
        await task
        _quiet_teardown()

    asyncio.run(main())
