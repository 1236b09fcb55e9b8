"""`prefixguard report capture.db`: why is it slow, in the order an expert diagnoses it."""

from __future__ import annotations

import json
from pathlib import Path

import click

from prefixguard.cli.exits import fail
from prefixguard.cli.options import command, option, output_format
from prefixguard.schemas import versioned
from prefixguard.utils.errors import InputError, check_writable, reading


@command()
@click.argument("capture")
@option("--html", "html_out", help="Also write a self-contained HTML report.")
@option(
    "--by",
    type=click.Choice(("client", "tenant", "site", "model")),
    help="Also give the key figures (requests, hit rate, misses by cause, cost of misses, spend) for each "
    "client (user-agent family and version), tenant, call site (x-prefixguard-site) or model.",
)
@output_format()
def report(capture: str, html_out: str | None, fmt: str, by: str | None = None) -> None:
    """Diagnose a capture store (.db) or its JSONL export: TTFT vs decode, input tokens, causes of cache
    breaks, infrastructure signals, cache fields predicted vs reported."""
    from prefixguard.capture.reader import read_capture
    from prefixguard.report.by_label import by_label
    from prefixguard.report.diagnose import diagnose

    try:
        if html_out:
            check_writable(html_out)
        rows = read_capture(capture)
        with reading(capture):  # a row of an odd shape the reader let through is the capture's error
            diagnosis = diagnose(rows, capture)
            grouped = by_label(rows, by) if by else None
    except InputError as e:
        fail(str(e))
    if html_out:
        from prefixguard.report import html

        Path(html_out).write_text(html.render(diagnosis), "utf-8")
    if fmt == "json":
        doc = diagnosis.to_json() | ({"by": grouped} if grouped else {})
        print(json.dumps(versioned(doc), indent=1, default=str))
    else:
        from prefixguard.report import terminal

        terminal.render(diagnosis)
        if grouped:
            from prefixguard.report.by_label import render

            print("\n" + "\n".join(render(grouped)))
        if html_out:
            print(f"\nHTML report: {html_out}")
