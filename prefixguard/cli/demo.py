"""`prefixguard demo`: a cache break and its fix, end to end, on this machine, in about a minute.

It starts the local engine (the tiny random-weight model, on CPU) as an Anthropic- and
OpenAI-compatible server that caches the way those providers do (--policy auto), starts the
prefixguard proxy in front of it, and runs the example agent (prefixguard/cli/demo_app.py: the real anthropic
and openai SDKs) through the proxy twice as written, then twice with the fixes prefixguard suggests.
Each run is a new process, as after a restart; the demo pins each process's hash seed so that the
output is the same every time. Then it prints what the proxy's capture store holds: per-request
verdicts and causes, hit rate, TTFT, prefill time and input cost, before and after.

Every process it starts is stopped when it ends, on error and on Ctrl-C too.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from prefixguard.cli.exits import CommandError, UsageError
from prefixguard.cli.options import FILE, command, old_name, option, output_format
from prefixguard.contracts import prices
from prefixguard.judge.verdict import VerdictName
from prefixguard.schemas import versioned

APP = Path(__file__).with_name("demo_app.py")  # shipped in the package: the demo runs where it is installed
CLI = [sys.executable, "-c", "from prefixguard.cli import main; main()"]
# (phase, app flags, hash seed of each run); seeds 1 and 2 give the tool set two different orders
PHASES: tuple[tuple[str, list[str], tuple[str, str]], ...] = (
    ("before", [], ("1", "2")),
    ("after", ["--fixed"], ("3", "4")),
)
REQUESTS_PER_RUN = 8  # 4 turns with each SDK
START_TIMEOUT = 120.0
LISTENING = re.compile(r"listening on (http://[\w.:\[\]-]+)")


class DemoError(CommandError):
    """The demo could not run to its end (exit 1)."""


DEMO_MODELS = ("tiny", "smollm2-135m")  # the engine's random-weight preset, or a small real model


class Child:
    """A server subprocess: started, its URL read from its output, stopped for sure."""

    def __init__(self, name: str, args: list[str]) -> None:
        self.name = name
        self.lines: list[str] = []
        self._url: str | None = None
        self._found = threading.Event()
        # own session: a Ctrl-C reaches the demo only, which then stops its children in order
        self.proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
        )
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        for line in self.proc.stdout or ():  # keep reading so a chatty child never blocks on a full pipe
            self.lines.append(line.rstrip())
            found = LISTENING.search(line)
            if found and self._url is None:
                self._url = found.group(1)
                self._found.set()
        self._found.set()

    def url(self) -> str:
        self._found.wait(START_TIMEOUT)
        if self._url is None:
            tail = " | ".join(self.lines[-3:]) or "no output"
            raise DemoError(f"the {self.name} did not start: {tail}")
        return self._url

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@dataclass
class Phase:
    name: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    prefill_s: float = 0.0

    def summary(self) -> dict[str, Any]:
        reqs = self.requests
        prompt = sum(r["prompt_tokens"] for r in reqs)
        ttfts = [r["ttft_s"] for r in reqs if r["ttft_s"] is not None]
        return {
            "requests": reqs,
            "hit_rate": sum(r["cache_read"] for r in reqs) / prompt if prompt else 0.0,
            "prompt_tokens": prompt,
            "cache_read": sum(r["cache_read"] for r in reqs),
            "ttft_mean_s": sum(ttfts) / len(ttfts) if ttfts else None,
            "prefill_s": self.prefill_s,
            "input_cost_usd": round(sum(r["input_cost_usd"] for r in reqs), 6),
            "verdicts": dict(Counter(r["verdict"] for r in reqs)),
        }


@command()
@output_format(help="A report for people, or the numbers as JSON (prefixguard/schemas/demo.schema.json).", old=())
@old_name("--json", "fmt", flag_value="json")
@option(
    "--store", type=FILE, help="Keep the proxy's capture here (for `prefixguard report`); default: a temporary file."
)
@option(
    "--engine-model",
    type=click.Choice(DEMO_MODELS),
    default="tiny",
    help="The engine's model: tiny (random weights, fast) or smollm2-135m (a real model, its own tokenizer; "
    "about 8 minutes on 2 busy cores instead of 1, needs the engine extra) [default: tiny].",
)
def demo(fmt: str, store: Path | None, engine_model: str) -> None:
    """See what broke an agent's prompt cache, and what fixing it bought (about a minute, CPU only)."""
    if not APP.is_file():
        raise DemoError(f"{APP}: the example app is missing: reinstall prefixguard")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="prefixguard-demo-") as tmp:
        path = store or Path(tmp) / "capture.db"
        if path.exists():
            raise UsageError(f"{path}: exists; give a new file to --store")
        phases = _run(path, quiet=fmt == "json", engine_model=engine_model)
    result = {
        "before": phases[0].summary(),
        "after": phases[1].summary(),
        "causes": _causes(phases[0].requests),
        "seconds": round(time.monotonic() - started, 1),
        "provider_diagnostics": _agreement([r for p in phases for r in p.requests]),
    }
    if store:
        result["store"] = str(store)
    if fmt == "json":
        print(json.dumps(versioned(result), indent=2))
    else:
        _print(result)


def _run(store: Path, *, quiet: bool, engine_model: str = "tiny") -> list[Phase]:
    say = (lambda _: None) if quiet else (lambda text: print(text, file=sys.stderr, flush=True))
    children: list[Child] = []
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the children on kill too
    try:
        say(f"starting the engine ({engine_model} model, CPU) and the proxy in front of it ...")
        engine = Child(
            "engine",
            [
                *CLI,
                "engine",
                "serve",
                "--engine-model",
                engine_model,
                "--port",
                "0",
                "--policy",
                "auto",
                "--max-tokens",
                "16",
            ],
        )
        children.append(engine)
        engine_url = engine.url()
        # --ask-diagnostics: the engine answers as the providers do, so their own diagnoses sit beside ours
        proxy = Child(
            "proxy",
            [*CLI, "proxy", "--upstream", engine_url, "--port", "0", "--store", str(store), "-q", "--ask-diagnostics"],
        )
        children.append(proxy)
        proxy_url = proxy.url()
        phases, expected = [], 0
        for name, flags, seeds in PHASES:
            phase = Phase(name=name)
            prefill_before = _prefill_seconds(engine_url)
            for run, seed in enumerate(seeds, 1):
                say(f"{name}: app run {run} of {len(seeds)} ({'with the fixes' if flags else 'as written'})")
                _run_app(proxy_url, f"demo-{name}", flags, seed)
                expected += REQUESTS_PER_RUN
                records = _wait_for_rows(store, expected)
                for turn, rec in enumerate(records[expected - REQUESTS_PER_RUN : expected], 1):
                    phase.requests.append(_request_row(rec, run, turn))
            phase.prefill_s = round(_prefill_seconds(engine_url) - prefill_before, 4)
            phases.append(phase)
        return phases
    finally:
        for child in reversed(children):
            child.stop()
        signal.signal(signal.SIGTERM, previous)


def _run_app(proxy_url: str, api_key: str, flags: list[str], seed: str) -> None:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    args = [sys.executable, str(APP), "--base-url", proxy_url, "--api-key", api_key, *flags]
    try:
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        raise DemoError("the example app took over 300 s") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise DemoError(f"the example app failed: {last}")


def _prefill_seconds(engine_url: str) -> float:
    """Prefill compute so far, from the engine's /metrics."""
    with urllib.request.urlopen(engine_url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    found = re.search(r"^prefixguard_engine_request_prefill_time_seconds_sum ([\d.e+-]+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def _wait_for_rows(path: Path, count: int, timeout: float = 60.0) -> list[Any]:
    """The capture's records once the proxy has written `count` (its analysis runs beside the traffic)."""
    from prefixguard.capture.store import open_store
    from prefixguard.utils.errors import InputError

    deadline = time.monotonic() + timeout
    while True:
        try:
            with open_store(path) as store:
                if len(store) >= count:
                    return list(store.records())
        except (InputError, sqlite3.Error):  # not created yet, or its schema not written yet
            pass
        if time.monotonic() > deadline:
            raise DemoError(f"the proxy stored fewer than {count} requests within {timeout:.0f} s")
        time.sleep(0.1)


def _request_row(rec: Any, run: int, turn: int) -> dict[str, Any]:
    from prefixguard.contracts.providers import model_contract

    u = rec.usage
    cost = model_contract(rec.api or "", rec.model).cost(
        uncached=u.uncached, cache_read=u.cache_read, write_5m=u.cache_write_5m, write_1h=u.cache_write_1h
    )
    diagnosis = rec.diagnosis
    return {
        "run": run,
        "request": turn,
        "api": rec.api,
        "model": rec.model,
        "verdict": rec.verdict,
        "cause": rec.cause,
        "causes": list(rec.causes),
        "pointer": rec.pointer,
        "provider_says": diagnosis and diagnosis.label,
        "agreement": diagnosis and rec.agreement,
        "prompt_tokens": u.prompt_total,
        "cache_read": u.cache_read,
        "cache_write": u.cache_write,
        "ttft_s": rec.ttft_s,
        "reprefill_tokens": rec.reprefill_tokens or 0,
        "input_cost_usd": round(cost, 6),
    }


def _causes(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each cause the proxy found: how often, where, the tokens it made the engine prefill again, the fix."""
    from prefixguard.judge.causes import CAUSES, generic_fix

    found: dict[str, dict[str, Any]] = {}
    for r in requests:
        if r["verdict"] != VerdictName.MISS_PREFIX_CHANGED:  # a hit's cause is a note, an error's its reason
            continue
        where = r["pointer"]
        for name in r["causes"]:
            entry = found.setdefault(
                name,
                {
                    "cause": name,
                    "requests": 0,
                    "reprefill_tokens": 0,
                    "where": [],
                    "fix": generic_fix(name) if name in CAUSES else "",
                },
            )
            entry["requests"] += 1
            entry["reprefill_tokens"] += r["reprefill_tokens"]
            if where and where not in entry["where"]:
                entry["where"].append(where)
    return sorted(found.values(), key=lambda e: -e["reprefill_tokens"])


def _agreement(requests: list[dict[str, Any]]) -> dict[str, int]:
    """How often the engine's own diagnosis (as a provider gives it) and the proxy's agreed."""
    found = Counter(r["agreement"] for r in requests if r.get("agreement"))
    return {"compared": sum(found.values()), "agreed": found["agree"] + found["both_clear"], **found}


def _print(result: dict[str, Any]) -> None:
    """The demo's tables and findings on stdout: what came from the capture (a cause, a code place, a fix)
    goes in as text, never read as markup, and with its control characters escaped."""
    from prefixguard.utils.styled import console, printable, printable_data, strong, table

    out = console()
    before, after = result["before"], result["after"]
    rows = []
    for b, a in zip(before["requests"], after["requests"], strict=True):
        turn = (b["request"] - 1) % 4 + 1
        rows.append(
            (
                str(b["run"]),
                f"{'claude' if b['api'] == 'anthropic' else 'gpt'} turn {turn}",
                _verdict(b),
                _share(b),
                _verdict(a),
                _share(a),
            )
        )
    out.print(
        table(
            ("run", "request", "before", "", "after the fixes", " "),
            printable_data(rows),
            title="Each request of the example agent: the proxy's verdict, or what broke the cache, "
            "and the share of the prompt read from cache",
            left=(1, 2, 4),
        )
    )
    summary = (
        ("prompt tokens read from cache", f"{before['hit_rate']:.0%}", f"{after['hit_rate']:.0%}", ""),
        (
            "mean time to first token",
            _seconds(before["ttft_mean_s"]),
            _seconds(after["ttft_mean_s"]),
            _ratio(before["ttft_mean_s"], after["ttft_mean_s"]),
        ),
        (
            "engine prefill time, all requests",
            _seconds(before["prefill_s"]),
            _seconds(after["prefill_s"]),
            _ratio(before["prefill_s"], after["prefill_s"]),
        ),
        (
            f"input cost at list prices ({prices.summary()})",
            f"${before['input_cost_usd']:.4f}",
            f"${after['input_cost_usd']:.4f}",
            _ratio(before["input_cost_usd"], after["input_cost_usd"]),
        ),
    )
    out.print(table(("", "before", "after", "change"), summary, title="What fixing it bought"))
    print(strong("What broke the cache, and the fix"))
    for c in result["causes"]:
        where = ", ".join(printable(w) for w in c["where"])
        print(
            f"- {strong(printable(c['cause']))} at {where}: {c['requests']} requests, "
            f"{c['reprefill_tokens']} tokens prefilled again. {printable(c['fix'])}"
        )
    diag = result["provider_diagnostics"]
    if diag["compared"]:
        print(
            f"The provider's own cache diagnostics (the engine answers as Anthropic does) agree with "
            f"prefixguard's on {diag['agreed']} of {diag['compared']} requests compared; "
            "`prefixguard report` shows them per cause."
        )
    print(
        strong(
            f"{result['seconds']} s. The app: prefixguard/cli/demo_app.py (--fixed applies the fixes). "
            "Keep the capture with --store, then run prefixguard report on it.",
            "dim",
        )
    )


def _verdict(r: dict[str, Any]) -> str:
    """The verdict, or for a changed prefix its cause: what broke."""
    names = r["causes"]
    if r["verdict"] == VerdictName.MISS_PREFIX_CHANGED and names:
        return ", ".join(names)
    return str(r["verdict"])


def _share(r: dict[str, Any]) -> str:
    return f"{r['cache_read'] / r['prompt_tokens']:.0%}" if r["prompt_tokens"] else "-"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def _ratio(before: float | None, after: float | None) -> str:
    return f"{before / after:.1f}x less" if before and after else ""
