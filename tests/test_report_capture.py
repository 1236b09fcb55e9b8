"""`prefixguard report` on a real capture: recorded provider traffic (requests and responses with the
providers' own cache fields) run through the proxy's analysis into a real SQLite store, then the
terminal report, the JSON and the HTML report (opened in headless Chromium)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from prefixguard.cli import main
from prefixguard.proxy.analysis import Analyzer, FlowState
from prefixguard.replay.sources import cassette_uris
from prefixguard.store import Store

CHARTS = ("ttft", "decode", "hit-rate", "inputs", "tokens", "ttft-vs-cached", "causes")


@pytest.fixture(scope="module")
def capture(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every recorded cassette about caching, one tenant, requests 20 s apart, through the proxy's analysis."""
    db = tmp_path_factory.mktemp("capture") / "capture.db"
    folders = [d for d in sorted((shared_data / "recorded").glob("*/*")) if "cache" in d.name]
    analyzer = Analyzer(store=Store(db))
    ts = 1_764_000_000.0
    for folder in folders:
        uris = cassette_uris(folder)
        for req in sorted(folder.glob("*.request.json")):
            stem = req.name.removesuffix(".request.json")
            resp = folder / f"{stem}.response.json"
            if stem not in uris or not resp.exists():
                continue
            ts += 20
            flow = FlowState(id=f"{folder.name}/{stem}", ts=ts, sent=time.monotonic(), path=uris[stem],
                             tenant="team", body=req.read_bytes())
            analyzer.request(flow)
            flow.status, flow.response = 200, resp.read_bytes()
            analyzer.finish(flow)
    return db


def test_terminal_report_walks_the_five_steps(capture: Path) -> None:
    res = CliRunner().invoke(main, ["report", str(capture)])
    assert res.exit_code == 0, res.output
    text = res.output
    steps = [text.index(f"{n}. ") for n in range(1, 6)]
    assert steps == sorted(steps)
    assert "No TTFT was recorded" in text           # cassettes keep no timings: the split is unknown, said so
    assert "before:" in text and "after:" in text and "fix:" in text


def test_json_report_numbers_come_from_the_capture(capture: Path) -> None:
    res = CliRunner().invoke(main, ["report", str(capture), "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    rows = [json.loads(line) for line in CliRunner().invoke(main, ["capture", "export", str(capture)]).output.splitlines()]
    assert doc["requests"] == len(rows) > 30
    reported = [r for r in rows if r["usage"]["reported"]]
    assert sum(w["read"] for w in doc["windows"]) == sum(r["usage"]["cache_read"] for r in reported)
    causes = {c["name"]: c for c in doc["causes"]}
    assert "system_changed" in causes and causes["system_changed"]["example"]["pointer"].startswith("/system")
    assert all(c["reprefill_tokens"] >= 0 and c["requests"] > 0 for c in doc["causes"])
    fields = doc["fields"]
    assert fields["reported_cached"] == sum(r["usage"]["cache_read"] for r in reported
                                            if r["expected_cached"] is not None)
    assert fields["not_reported"] == sum(1 for r in rows if not r["usage"]["reported"])


def chromium() -> str:
    """Debian's chromium; installed with apt when missing and running as root, within a time bound."""
    found = shutil.which("chromium") or (os.path.exists("/usr/bin/chromium") and "/usr/bin/chromium")
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("chromium is not installed and this is not root: cannot install it")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        subprocess.run(["apt-get", "install", "-y", "chromium"], env=env, capture_output=True, timeout=600)
    except subprocess.TimeoutExpired:
        pytest.skip("installing chromium took over 10 minutes")
    if not shutil.which("chromium"):
        pytest.skip("apt-get install chromium failed")
    return shutil.which("chromium")


def headless(browser: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                           "--disable-component-update", "--disable-sync", "--no-first-run",
                           f"--user-data-dir={profile}", *args], capture_output=True, text=True, timeout=120)


def test_html_report_is_self_contained_and_its_charts_render(capture: Path, tmp_path: Path) -> None:
    html = tmp_path / "report.html"
    res = CliRunner().invoke(main, ["report", str(capture), "--html", str(html)])
    assert res.exit_code == 0, res.output
    page = html.read_text()
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', page)     # no external asset
    assert all(f'data-chart="{name}"' in page for name in CHARTS)

    browser = chromium()
    dom = headless(browser, tmp_path / "profile", "--dump-dom", html.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    drawn = {m[0]: int(m[1]) for m in re.findall(r'data-chart="([a-z-]+)"[^>]*data-drawn="(\d+)"', dom.stdout)}
    assert set(drawn) == set(CHARTS)          # the page's script ran over every chart
    # Charts with data have laid-out marks; the capture holds no timings, so TTFT-based ones may be empty.
    for name in ("hit-rate", "inputs", "tokens", "causes"):
        assert drawn[name] > 0, (name, drawn)
    shot = tmp_path / "report.png"
    headless(browser, tmp_path / "profile", "--window-size=1280,2000", f"--screenshot={shot}", html.as_uri())
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
