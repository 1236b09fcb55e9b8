"""prefixguard subcommands (proxy, engine serve) in their own processes, as a user starts them."""
from __future__ import annotations

import contextlib
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

URL = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")


def start(*args: str, log: list[str] | None = None) -> tuple[subprocess.Popen, str]:
    """A prefixguard subcommand in its own process; returns it and the URL it says it listens on.
    Every line it prints is appended to `log` when one is given."""
    script = Path(sys.executable).with_name("prefixguard")
    proc = subprocess.Popen([str(script), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in proc.stdout:
            lines.put(line)
            if log is not None:
                log.append(line)

    threading.Thread(target=pump, daemon=True).start()
    seen = []
    while True:
        try:
            line = lines.get(timeout=90)
        except queue.Empty:
            stop(proc)
            raise AssertionError(f"{args[0]} did not start: {''.join(seen)}") from None
        seen.append(line)
        if m := URL.search(line):
            return proc, m.group(1)


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def cli_proxy(args: list[str], program: str = "prefixguard", output: list[str] | None = None) -> Iterator[str]:
    """Run the proxy in a subprocess; yields its URL (the port it printed), stops it with SIGINT. What it
    printed after it started goes to `output`."""
    exe = Path(sys.executable).with_name(program)
    cmd = [str(exe), "proxy", "--port", "0", *args] if program == "prefixguard" else [str(exe), *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        yield listening(proc, program)
    finally:
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=20)
        assert proc.returncode == 0
        if output is not None:
            output += rest.splitlines()


def listening(proc: subprocess.Popen, name: str = "the proxy") -> str:
    """The URL a proxy (prefixguard's or mitmdump) says it listens on, read from its output (30 s at most)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        found = re.search(r"listening (?:on http://|at )([\d.]+:\d+)", line)
        if found:
            return f"http://{found.group(1)}"
    raise AssertionError(f"{name} did not start")


def prefixguard_on_path(bindir: Path) -> str:
    """A `prefixguard` executable in bindir that runs this interpreter's prefixguard (as an installed
    entry point would); returns a PATH with bindir first, for scripts run as a CI step runs them."""
    import os
    import shlex
    bindir.mkdir(parents=True, exist_ok=True)
    shim = bindir / "prefixguard"
    shim.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -c "
                    "'import sys; from prefixguard.cli import main; sys.argv[0] = \"prefixguard\"; main()' \"$@\"\n")
    shim.chmod(0o755)
    return f"{bindir}{os.pathsep}{os.environ['PATH']}"
