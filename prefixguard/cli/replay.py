"""`prefixguard replay SOURCE --target TARGET`: what hit rate and prefill time would this traffic get?"""

from __future__ import annotations

import json
from contextlib import nullcontext
from typing import Any

import click

from prefixguard.cli.exits import UsageError, fail
from prefixguard.cli.options import (
    POLICY_HELP,
    command,
    compatible_options,
    old_name,
    option,
    output_format,
    policy_option,
)
from prefixguard.schemas import versioned
from prefixguard.utils.errors import InputError, check_writable, reading

TARGET_HELP = "sim (radix tree or provider policy, no model), engine (the in-process engine), or http://host:port"


@command()
@click.argument("source", metavar="SOURCE")
@option("--target", default="sim", help=TARGET_HELP + " [default: sim]")
@policy_option(
    None, help="sim: " + POLICY_HELP[0].lower() + POLICY_HELP[1:] + " [default: auto for a capture, else radix]"
)
@option("--page-size", type=click.IntRange(1), help="Tokens per KV page [sim: 16, Mooncake 512; engine: 16].")
@option("--capacity", "capacity_tokens", type=click.IntRange(1), help="sim: cache size in tokens (default: unbounded).")
@option("--capacity-pages", type=click.IntRange(1), help="sim: cache size in pages; engine: KV pool size.")
@option("--model", help="Model to price (and, for http, to ask for) instead of the trace's.")
@option(
    "--engine-model",
    default="tiny",
    help="engine: model preset (tiny, small, 1b), or smollm2-135m (a real model; its own tokenizer counts the "
    "tokens) [default: tiny].",
)
@option(
    "--device",
    type=click.Choice(["cpu", "cuda", "auto"]),
    help="engine: where the model runs; auto: cuda when there is a GPU, else cpu [default: cpu].",
)
@option(
    "--dtype",
    type=click.Choice(["float32", "bfloat16", "float16", "auto"]),
    help="engine: the model's precision; auto: bfloat16 on cuda, float32 on cpu [default: float32].",
)
@option(
    "--no-reuse-run",
    "baseline",
    is_flag=True,
    help="engine: also replay with prefix reuse off, side by side (measures prefill seconds saved).",
)
@old_name("--baseline", "baseline", is_flag=True)
@option(
    "--speed",
    type=click.FloatRange(0, min_open=True),
    default=1.0,
    help="Play the trace this many times faster (TTLs count on the scaled clock) [default: 1.0].",
)
@option("--ignore-timestamps", is_flag=True, help="Send requests back to back; no TTL ever expires.")
@option(
    "--concurrency", type=click.IntRange(1), default=1, help="engine/http: requests in flight at most [default: 1]."
)
@option(
    "--max-tokens",
    type=click.IntRange(1),
    default=16,
    help="engine/http: output tokens per request at most [default: 16].",
)
@option("--limit", type=click.IntRange(1), help="Replay only the first N requests.")
@option(
    "--what-if",
    type=click.Choice(["fixed"]),
    help="Replay again with prefixguard's fixes applied, side by side (sim and engine start that run cold; an "
    "http server keeps what the first run cached).",
)
@option("--header", "headers", multiple=True, metavar="'NAME: VALUE'", help="http: header to send (repeat).")
@option("--output-file", "out", help="Write per-request results (.json, or .db for SQLite).")
@old_name("--out", "out")
@output_format()
@compatible_options
@option("--progress/--no-progress", default=True, help="Progress bar (only on a terminal).")
def replay(
    source: str,
    target: str,
    policy: str | None,
    page_size: int | None,
    capacity_tokens: int | None,
    capacity_pages: int | None,
    model: str | None,
    engine_model: str,
    device: str | None,
    dtype: str | None,
    baseline: bool,
    speed: float,
    ignore_timestamps: bool,
    concurrency: int,
    max_tokens: int,
    limit: int | None,
    what_if: str | None,
    headers: tuple[str, ...],
    out: str | None,
    fmt: str,
    progress: bool,
) -> None:
    """Replay captured traffic or a public trace on a target and measure prefix reuse.

    SOURCE: a capture store (.db) or its JSONL export, a folder of request bodies, a Mooncake trace
    (hash_ids) or an LMCache agent trace (a JSONL file or a folder of them).

    Exit status: 0 done, 1 done but the target failed some requests, 2 bad input.
    """
    from prefixguard.replay import results, sources, targets
    from prefixguard.replay.fixes import Fixer
    from prefixguard.replay.player import replay as run

    try:
        if out:
            check_writable(out)
        trace = sources.load(source)
        requests = trace.requests[:limit] if limit else trace.requests
        if baseline and target != "engine":
            raise UsageError("only the engine target can turn prefix reuse off", option="--no-reuse-run")
        for name, value in (("--device", device), ("--dtype", dtype)):
            if value and target != "engine":
                raise UsageError("only the engine target runs a model", option=name)
        policy = policy or ("auto" if trace.kind == "capture" else "radix")
        make = _target_factory(
            target,
            policy=policy,
            page_size=page_size,
            capacity_tokens=capacity_tokens,
            capacity_pages=capacity_pages,
            model=model,
            engine_model=engine_model,
            device=device or "cpu",
            dtype=dtype or "float32",
            max_tokens=max_tokens,
            headers=_headers(headers),
        )
        variants = [("as_is", requests, True)]
        if baseline:
            variants.append(("no_reuse", requests, False))
        if what_if == "fixed":
            fixer = Fixer()
            variants.append(("fixed", [fixer.apply(r) for r in requests], True))
        runs = {}
        for name, reqs, reuse in variants:  # each on a fresh target: every run starts cold
            target_ = make(reuse)
            try:
                if target_.needs_bodies and any(r.body is None for r in reqs):  # before, not after, the replay
                    raise InputError(targets.NO_BODIES, source)
                # the sim and the engine read every body in this process: a body of an odd shape the trace
                # reader let through (a role that is a list) is the trace's error, named as such
                with reading(source, "a request") if not target.startswith(("http://", "https://")) else nullcontext():
                    runs[name] = run(
                        reqs,
                        target_,
                        speed=speed,
                        timestamps=not ignore_timestamps,
                        concurrency=concurrency,
                        progress=progress,
                        label=name.replace("_", " "),
                    )
            finally:
                if hasattr(target_, "close"):
                    target_.close()
    except InputError as e:
        fail(str(e))
    meta = {
        "source": str(source),
        "format": trace.kind,
        "target": target,
        "policy": policy,
        "skipped": trace.skipped,
        "requests_in_trace": len(trace.requests),
        "tokens_estimated": trace.tokens_estimated,
    }
    if out:
        results.write(out, runs, meta)
    summaries = {name: results.summarize(rows) for name, rows in runs.items()}
    if "no_reuse" in summaries:
        for name in ("as_is", "fixed"):
            if name in summaries:
                summaries[name] = results.against_baseline(summaries[name], summaries["no_reuse"])
    if fmt == "json":
        doc: dict[str, Any] = versioned({**meta, **summaries["as_is"]})
        for name in ("no_reuse", "fixed"):
            if name in summaries:
                doc[name] = summaries[name]
        print(json.dumps(doc, indent=1))
    else:
        from prefixguard.replay.show import show

        show(meta, summaries)
    if any(s["errors"] for s in summaries.values()):
        first = next(o.error for rows in runs.values() for o in rows if o.error)
        fail(f"the target failed {sum(s['errors'] for s in summaries.values())} requests; the first: {first}", code=1)


def _headers(pairs: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition(":")
        if not sep or not name.strip():
            raise UsageError(f"expected 'NAME: VALUE', got {pair!r}", option="--header")
        out[name.strip()] = value.strip()
    return out


def _target_factory(
    target: str,
    *,
    policy: str,
    page_size: int | None,
    capacity_tokens: int | None,
    capacity_pages: int | None,
    model: str | None,
    engine_model: str,
    device: str,
    dtype: str,
    max_tokens: int,
    headers: dict[str, str],
) -> Any:
    """A function making a fresh target, with prefix reuse on or off (only the engine can turn it off)."""
    from prefixguard.replay import targets

    if target == "sim":
        return lambda reuse: targets.SimTarget(
            policy, page_size=page_size, capacity_tokens=capacity_tokens, capacity_pages=capacity_pages, model=model
        )
    if target == "engine":
        from prefixguard.engine.devices import pick

        try:  # said now, not from inside a replay: CUDA asked for where there is none
            device, dtype = pick(device, dtype)
        except ValueError as e:
            raise UsageError(str(e), option="--device") from None
        return lambda reuse: targets.EngineTarget(
            engine_model,
            page_size=page_size or targets.DEFAULT_PAGE_SIZE,
            kv_pages=capacity_pages,
            prefix_reuse=reuse,
            max_tokens=max_tokens,
            device=device,
            dtype=dtype,
            model_name=model,
        )
    if target.startswith(("http://", "https://")):
        return lambda reuse: targets.HttpTarget(target, max_tokens=max_tokens, model=model, headers=headers)
    raise UsageError(f"{target!r}: {TARGET_HELP}", option="--target")
