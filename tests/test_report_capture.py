"""`prefixguard report` on a real capture: recorded provider traffic (the providers' own responses, with
their cache fields) sent through the real proxy (`prefixguard proxy`, its own process) to a loopback
upstream that answers with the recordings; the proxy's SQLite store is then reported on in the
terminal, as JSON and as HTML (opened in headless Chromium)."""
from __future__ import annotations

import json
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from prefixguard.cli import main
from prefixguard.replay.sources import cassette_uris
from upstream import Upstream

CHARTS = ("ttft", "decode", "hit-rate", "inputs", "tokens", "ttft-vs-cached", "causes")
URL = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")


def start(*args: str) -> tuple[subprocess.Popen, str]:
    """A prefixguard subcommand in its own process; returns it and the URL it says it listens on."""
    script = Path(sys.executable).with_name("prefixguard")
    proc = subprocess.Popen([str(script), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
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


@pytest.fixture(scope="module")
def capture(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every recorded call of the cassettes about caching, through the proxy, in order."""
    recorded = shared_data / "recorded"
    db = tmp_path_factory.mktemp("capture") / "capture.db"
    with Upstream(recorded) as upstream:
        proxy, url = start("proxy", "--upstream", upstream.url, "--port", "0", "--store", str(db), "-q")
        try:
            for folder in sorted(recorded.glob("*/*")):
                if "cache" not in folder.name:
                    continue
                paths = cassette_uris(folder)
                for req in sorted(folder.glob("*.request.json")):
                    stem = req.name.removesuffix(".request.json")
                    answers = [folder / f"{stem}.response.{ext}" for ext in ("json", "sse")]
                    if stem not in paths or not any(a.exists() for a in answers):
                        continue            # a response kept as .txt: the upstream cannot answer it
                    headers = {"content-type": "application/json",
                               "x-replay": f"{folder.relative_to(recorded)}/{stem}"}
                    call = urllib.request.Request(url + paths[stem], req.read_bytes(), headers)
                    with urllib.request.urlopen(call, timeout=60) as resp:
                        resp.read()
        finally:
            stop(proxy)
    return db


def test_terminal_report_walks_the_five_steps(capture: Path) -> None:
    res = CliRunner().invoke(main, ["report", str(capture)])
    assert res.exit_code == 0, res.output
    text = res.output
    steps = [text.index(f"{n}. ") for n in range(1, 6)]
    assert steps == sorted(steps)
    assert "before:" in text and "after:" in text and "fix:" in text


def test_json_report_numbers_come_from_the_capture(capture: Path) -> None:
    res = CliRunner().invoke(main, ["report", str(capture), "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    export = CliRunner().invoke(main, ["capture", "export", str(capture)]).output
    rows = [json.loads(line) for line in export.splitlines()]
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


def test_the_jsonl_export_reports_the_same(capture: Path, tmp_path: Path) -> None:
    export = tmp_path / "capture.jsonl"
    export.write_text(CliRunner().invoke(main, ["capture", "export", str(capture)]).output)
    a, b = (json.loads(CliRunner().invoke(main, ["report", str(p), "--format", "json"]).output)
            for p in (capture, export))
    assert a.pop("source") != b.pop("source")
    assert a == b


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
    for name in CHARTS:
        assert drawn[name] > 0, (name, drawn)
    shot = tmp_path / "report.png"
    headless(browser, tmp_path / "profile", "--window-size=1280,2000", f"--screenshot={shot}", html.as_uri())
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
