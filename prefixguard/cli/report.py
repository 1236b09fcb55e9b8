"""`prefixguard report capture.db`: why is it slow, in the order an expert diagnoses it."""
from __future__ import annotations

import json
from pathlib import Path

from prefixguard.cli.exits import fail
from prefixguard.cli.options import Parser, output_format
from prefixguard.errors import InputError, check_writable, reading
from prefixguard.schemas import versioned


def build(p: Parser) -> None:
    p.command(report)
    p.add_argument("capture")
    p.add_argument("--html", dest="html_out", help="Also write a self-contained HTML report.")
    output_format(p)


def report(capture: str, html_out: str | None, fmt: str) -> None:
    """Diagnose a capture store (.db) or its JSONL export: TTFT vs decode, input tokens, causes of cache
    breaks, infrastructure signals, cache fields predicted vs reported."""
    from prefixguard.capture import read_capture
    from prefixguard.report.diagnose import diagnose

    try:
        if html_out:
            check_writable(html_out)
        rows = read_capture(capture)
        with reading(capture):   # a row of an odd shape the reader let through is the capture's error
            diagnosis = diagnose(rows, capture)
    except InputError as e:
        fail(str(e))
    if html_out:
        from prefixguard.report import html
        Path(html_out).write_text(html.render(diagnosis), "utf-8")
    if fmt == "json":
        print(json.dumps(versioned(diagnosis.to_json()), indent=1, default=str))
    else:
        from prefixguard.report import terminal
        terminal.render(diagnosis)
        if html_out:
            print(f"\nHTML report: {html_out}")
