"""`prefixguard diff A.json B.json`: does request B reuse request A's cached prefix? Where and why not.

Exit status: 0 when B reuses A's prefix, 1 when its verdict is miss_prefix_changed, 2 on any error (one
line on stderr). The verdict is the proxy's and the testing API's (prefixguard.judge.verdict.judge_pair).
"""

from __future__ import annotations

import json
from contextlib import suppress
from pathlib import Path

import click

from prefixguard.cli.exits import EXIT_FINDINGS, EXIT_OK, fail
from prefixguard.cli.options import FILE, command, compatible_options, option, output_format
from prefixguard.contracts.providers import model_contract
from prefixguard.judge.causes import DESCRIPTIONS
from prefixguard.judge.compare import Comparison
from prefixguard.judge.verdict import Verdict, VerdictName, judge_pair
from prefixguard.model import tokens
from prefixguard.model.prompt import PausedGc, Prompt
from prefixguard.schemas import versioned
from prefixguard.utils.errors import InputError, input_chunks, read_input
from prefixguard.utils.styled import GREEN, RED, printable, strong
from prefixguard.wire import MAX_BYTES, parse_request


@command()
@click.argument("a", metavar="A.json", type=FILE)
@click.argument("b", metavar="B.json", type=FILE)
@output_format(help="Human text, or one JSON object (prefixguard/schemas/diff.schema.json).")
@compatible_options
@option("--no-tokens", is_flag=True, help="Estimate token counts (bytes/4) instead of tokenizing: faster.")
def diff(a: Path, b: Path, fmt: str, no_tokens: bool) -> int:
    """Compare an earlier request A with a later request B (same session): does B reuse A's cached
    prefix? If not: where it first diverges (level, JSON pointer, byte and token offset), why (the
    cause), what must be prefilled again, what that costs, and the fix.

    Tokens follow B's provider contract, A the only request the cache has seen:
      reused_tokens     what B can read of what A wrote (breakpoints and their
                        20-block lookback, the model's minimum, 128-token steps)
      reprefill_tokens  what A had cached past that, as B renders it: written again
      cost_usd          that re-prefill priced as written, not read
    The verdict is the proxy's for B when the provider keeps its contract: a
    change that costs nothing, or that starts a new conversation, is no break.

    Exit status: 0 B reuses A's prefix, 1 the prefix breaks, 2 error.
    """
    try:
        pa = load(a, not no_tokens)
        pb = load(b, not no_tokens, like=pa)  # the parts B shares with A are A's: not made, nor held, twice
    except InputError as err:
        fail(str(err))
    with PausedGc():  # comparing walks every part of both: no collection need visit them meanwhile
        verdict, result = judge_pair(pa, pb)
    broken = verdict.verdict is VerdictName.MISS_PREFIX_CHANGED
    if fmt == "json":
        out = versioned(
            result.to_dict()
            | {
                "broken": broken,
                "reused_tokens": verdict.reused_tokens,
                "reprefill_tokens": verdict.reprefill_tokens,
                "cost_usd": verdict.cost_usd,
                "verdict": verdict.to_json(),
                "a": str(a),
                "b": str(b),
                "tokenizer": tokenizer_name(result, pb.model),
                "prices": model_contract(pb.api, pb.model).prices,
            }
        )
        print(json.dumps(out, indent=2, ensure_ascii=False))
    else:
        print(render_text(result, verdict, pa, pb))
    return EXIT_FINDINGS if broken else EXIT_OK  # 1: the prefix breaks


def load(path: Path, count_tokens: bool, like: Prompt | None = None) -> Prompt:
    """Read and parse one request file; every failure is an InputError naming the file."""
    body: bytes | str = _beside(path, like.text) if like is not None and like.text.isascii() else b""
    if not body:
        data = read_input(path, MAX_BYTES, "request file")  # bounded, and never a FIFO or a device
        body = data
        with suppress(UnicodeDecodeError):  # not UTF-8: parse_request says so, as of any request
            body = data.decode("utf-8")  # here, so that the bytes are let go before the parts are made
        del data
    return parse_request(body, source=str(path), count_tokens=count_tokens, like=like)


def _beside(path: Path, known: str) -> bytes | str:
    """The file's text where it begins as `known` (ASCII) does: that beginning copied from `known` and
    the rest decoded, a megabyte read at a time, so that the file's bytes and its text are never held
    whole at once beside the other body (bytes where the rest is not UTF-8: parse_request says so)."""
    same, rest = 0, list[bytes]()
    for chunk in input_chunks(path, MAX_BYTES, "request file"):
        if not rest and chunk == known[same : same + len(chunk)].encode("ascii"):
            same += len(chunk)
        else:
            rest.append(chunk)
    tail = b"".join(rest)
    del rest
    try:
        # one new string, written once: no slice of `known` made first (as known[:same] + rest would)
        return "%.*s%s" % (same, known, tail.decode("utf-8"))  # noqa: UP031  # format has no precision argument
    except UnicodeDecodeError:
        return known[:same].encode("ascii") + tail


def tokenizer_name(result: Comparison, model: str | None = None) -> str:
    return "estimate" if result.tokens_estimated else tokens.encoding_name(model)  # the model's own encoding


def _shown(text: str) -> str:
    """What the compared files say, as printed: secrets redacted, control characters escaped."""
    from prefixguard.utils.redaction import redact_text

    return printable(redact_text(text))


def render_text(r: Comparison, v: Verdict, a: Prompt, b: Prompt) -> str:
    """The verdict for people: readable in a terminal and in a plain CI log (no colour needed)."""
    r = r._replace(
        detail=_shown(r.detail),
        before=_shown(r.before),
        after=_shown(r.after),
        fix=_shown(r.fix),
        setting=r.setting and _shown(r.setting),
        model=r.model and _shown(r.model),
        extra=[_shown(x) for x in r.extra],
        divergence=r.divergence and r.divergence._replace(pointer=_shown(r.divergence.pointer)),
    )
    counted = (
        "estimated at ~4 bytes a token, no tokenizer loaded"
        if r.tokens_estimated
        else f"counted with {printable(tokenizer_name(r, b.model))}"
    )
    if b.front:
        counted += f"; {b.front:,} of them the prompt the provider adds (tool use, citations, JSON output)"
        counted += ", by its figure"
    total = b.total_tokens
    if v.verdict is not VerdictName.MISS_PREFIX_CHANGED:
        how = "whole" if not r.broken else "as far as it was cached"
        lines = [
            strong("OK", GREEN)
            + f"  B reuses A's cached prefix {how}: {v.verdict}"
            + (f" ({v.cause})" if v.cause else "" if r.broken else f" ({r.causes[0]})"),
            f"  {r.detail}." if r.detail else "",
            f"  tokens    {v.reused_tokens:,} reused of {total:,} in B, {v.reprefill_tokens:,} to prefill "
            f"again ({counted})",
        ]
        lines += [f"  note      {x}" for x in r.extra]
        return "\n".join(line for line in lines if line)
    d = r.divergence
    assert d is not None
    cause = ", ".join(r.causes)
    lines = [
        strong("BREAK", RED) + f"  B does not reuse A's cached prefix: {v.verdict} ({cause})",
        f"  {DESCRIPTIONS[r.causes[0]]}" + (f": {r.setting}" if r.causes[0] == "setting_changed" else "") + ".",
        "",
        f"  where     {d.level} level, {d.pointer} in B (byte {d.byte_offset:,}, token {d.token_offset:,})",
    ]
    if r.before or r.after:
        lines += [f"  A         {r.before}", f"  B         {r.after}"]
    if r.detail:
        lines.append(f"  changed   {r.detail}")
    share = f" ({v.reprefill_tokens / total:.0%} of B)" if total else ""
    lines += [
        f"  tokens    {v.reused_tokens:,} reused, {v.reprefill_tokens:,} to prefill again{share}; {counted}",
        f"  cost      ${v.cost_usd:.4f} more than reading them from cache, at {r.model or 'unknown model'} prices"
        f" (${v.cost_usd * 1000:,.2f} per 1,000 such requests; prices: {model_contract(b.api, b.model).prices})",
        f"  fix       {r.fix}",
    ]
    lines += [f"  also      {x}" for x in r.extra]
    return "\n".join(lines)
