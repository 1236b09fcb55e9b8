"""The HTML report as people read it, checked in headless Chromium (Debian's `chromium`): a headline first,
round ticks with one unit per axis, lines broken at gaps, values in tooltips, bar charts as tall as
their bars, requests listed with their time and a link to their body, snippets escaped once; and a
screenshot that is a real, non-blank PNG of the window's size."""
from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from helpers.browser import headless
from helpers.cli import CliRunner
from PIL import Image, ImageStat

from prefixguard.capture.store import Record, Store
from prefixguard.cli import main
from prefixguard.model.usage import Usage
from prefixguard.report.charts import nice_ticks
from prefixguard.report.html import plain

CLAUDE_LOGS = Path(__file__).resolve().parent / "data" / "agent_logs" / "claude-code" / "projects"
T0 = 1_795_000_000.0
WIDTH, HEIGHT = 1280, 1800


def body(now: str, tools: list[str]) -> str:
    """An Anthropic request whose cached system prompt quotes, escapes and embeds the time (a break)."""
    system = (f'Support bot for "Acme & Co" <b>bold</b> café. Now: {now}. ' + "Policy text here. " * 400)
    return json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 100,
                       "tools": [{"name": t, "description": f"{t} tool", "input_schema": {"type": "object"}}
                                 for t in tools],
                       "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
                       "messages": [{"role": "user", "content": "hi"}]})


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24 requests over 230 s in a real SQLite store (6 time windows): 12 sessions of two requests each,
    the second one re-rendering the time in the system prompt; no TTFT in the middle two windows (a gap)."""
    db = tmp_path_factory.mktemp("html") / "capture.db"
    with Store(db) as store:
        for i in range(24):
            session, second = divmod(i, 2)
            ts = T0 + i * 10
            ttft = None if 80 <= i * 10 <= 150 else 0.35 + 0.01 * i
            usage = Usage(1700, 0, 1690, 0, 10, 20, True)   # written again each time: nothing read
            store.add(Record(id=f"s{session}-r{second}", ts=ts, path="/v1/messages", api="anthropic",
                             model="claude-sonnet-4-5", tenant=f"t{session}",
                             request=body(f"2026-11-20T10:00:{i:02d}Z", ["search", "fetch"]), status=200, usage=usage,
                             ttft_s=ttft, decode_tps=80.0 + i if ttft else None, total_s=1.0,
                             verdict="cold" if not second else "miss_prefix_changed",
                             expected_cached=0 if not second else 1690))
    return db


@pytest.fixture(scope="module")
def page(capture: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    html = capture.with_suffix(".html")
    res = CliRunner().invoke(main, ["report", str(capture), "--html", str(html)])
    assert res.exit_code == 0, res.output
    dom = headless(tmp_path_factory.mktemp("profile"), "--dump-dom", html.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    return html, dom.stdout


def test_headline_comes_first(page: tuple[Path, str]) -> None:
    _, dom = page
    assert dom.index('id="headline"') < dom.index("<h2>1. ")
    headline = dom[dom.index('id="headline"'):dom.index("</section>")]
    assert "0.0%" in headline                        # nothing was read from cache
    lost = re.search(r"\$(\d+\.\d{4})", headline)
    assert lost and float(lost.group(1)) > 0
    assert "volatile_content" in headline and "Fix:" in headline
    assert "genai-prices" in headline                # the price table and its date


def test_ticks_are_round_with_one_unit_per_axis(page: tuple[Path, str]) -> None:
    _, dom = page
    for svg in re.findall(r'<svg data-chart="(?:ttft|decode|hit-rate|inputs|tokens|ttft-vs-cached)".*?</svg>', dom,
                          re.S):
        ticks = re.findall(r'<text class="tick"[^>]*>([^<]*)</text>', svg)
        assert ticks and all(re.fullmatch(r"-?[\d,]+(\.\d{1,2})?%?", t) for t in ticks), ticks
        units = re.findall(r'<text class="unit"[^>]*>([^<]*)</text>', svg)
        assert len(units) <= 2 and len(set(units)) == len(units)
    ttft = re.search(r'<svg data-chart="ttft".*?</svg>', dom, re.S).group(0)
    assert '>ms</text>' in ttft and re.search(r">time since the first request \((ms|s|min|h)\)</text>", ttft)
    assert nice_ticks(0, 139_309) == ([0, 50_000, 100_000, 150_000], 0)
    ticks, decimals = nice_ticks(0, 0.9)
    assert [round(t, 6) for t in ticks] == [0, 0.25, 0.5, 0.75, 1.0] and decimals == 2


def test_lines_break_at_gaps_and_marks_carry_their_values(page: tuple[Path, str]) -> None:
    _, dom = page
    ttft = re.search(r'<svg data-chart="ttft".*?</svg>', dom, re.S).group(0)
    assert ttft.count("<polyline") == 2           # TTFT missing in the middle: two lines, not one across
    assert ttft.count('<circle class="mark"') == 4
    tips = re.findall(r"<title>([^<]*)</title>", ttft)
    x_unit = re.search(r">time since the first request \((\w+)\)</text>", ttft).group(1)
    tip = rf"TTFT p50 \(non-streaming\): [\d.]+ ms at [\d.]+ {x_unit}"
    assert len(tips) == 4 and all(re.fullmatch(tip, t) for t in tips), tips
    drawn = dict(re.findall(r'data-chart="([a-z-]+)"[^>]*data-drawn="(\d+)"', dom))
    assert all(int(drawn[n]) > 0 for n in ("ttft", "hit-rate", "inputs", "tokens", "causes")), drawn


def test_short_charts_have_no_empty_space(page: tuple[Path, str]) -> None:
    _, dom = page
    causes = re.search(r'<svg data-chart="causes"[^>]*height="(\d+)"', dom)
    bars = re.search(r'<svg data-chart="causes".*?</svg>', dom, re.S).group(0).count('<rect class="mark"')
    assert bars == 1 and int(causes.group(1)) == 8 + 30 * bars + 8


def test_requests_are_listed_with_time_and_a_link_to_their_body(page: tuple[Path, str]) -> None:
    _, dom = page
    links = set(re.findall(r'<a class="req" href="#([^"]+)"', dom))
    assert links
    for anchor in links:
        m = re.search(rf'<details id="{anchor}">(.*?)</details>', dom, re.S)
        assert m and "<pre>" in m.group(1) and "Acme" in m.group(1)
        assert re.search(r"2026-\d\d-\d\d \d\d:\d\d:\d\d UTC", m.group(1))
    example = re.search(r'<div class="example">(.*?)</div>', dom, re.S).group(1)
    assert re.search(r'<a class="req"[^>]*>s\d-r1</a> <span class="when">[^<]*UTC \(\+[\d.]+ s\)', example)


def test_snippets_are_escaped_once(page: tuple[Path, str]) -> None:
    html, dom = page
    text = html.read_text("utf-8")
    assert "&amp;quot;" not in text and "&amp;lt;" not in text and "&amp;#" not in text
    before = re.search(r'<code class="before">([^<]*)</code>', dom).group(1)
    assert "café" in before and "\\u00e9" not in before and "2026-11-20T10:00:" in before
    assert plain('"Reply \\"OK\\""') == 'Reply "OK"' and plain('{"a": 1, "b…') == '{"a": 1, "b…'


def test_screenshot_is_a_real_picture(page: tuple[Path, str], tmp_path: Path) -> None:
    html, _ = page
    shot = tmp_path / "report.png"
    run = headless(tmp_path / "profile", f"--window-size={WIDTH},{HEIGHT}", f"--screenshot={shot}", html.as_uri())
    assert run.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", run.stderr[-2000:]
    image = Image.open(shot).convert("L")
    assert image.size == (WIDTH, HEIGHT)
    assert ImageStat.Stat(image).stddev[0] > 20                      # not blank
    top = image.crop((0, 0, WIDTH, 300))                             # the headline is drawn at the top
    assert ImageStat.Stat(top).stddev[0] > 20
    dark = sum(image.histogram()[:100])
    assert dark > 0.005 * WIDTH * HEIGHT                            # text and marks, not a pale page


def test_imported_logs_report_headline(tmp_path: Path) -> None:
    store = tmp_path / "logs.db"
    assert CliRunner().invoke(main, ["import", "claude-code", str(CLAUDE_LOGS), "--store", str(store)]).exit_code == 0
    html = tmp_path / "logs.html"
    res = CliRunner().invoke(main, ["report", str(store), "--html", str(html)])
    assert res.exit_code == 0, res.output
    dom = headless(tmp_path / "profile", "--dump-dom", html.as_uri()).stdout
    headline = dom[dom.index('id="headline"'):dom.index("</section>")]
    assert "model_changed" in headline and "one model per session" in headline
    assert "placeholders" in dom and "No body stored" in dom


HOSTILE = '"><script>document.title="owned"</script><img src=x onerror="document.title=1">'


class _Elements(HTMLParser):
    """Every element of a page, and every event-handler attribute, as a browser's parser sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.handlers: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.handlers += [name for name, _ in attrs if name.startswith("on")]


def test_hostile_text_from_the_capture_makes_no_live_element(tmp_path: Path) -> None:
    """Model, tenant, request ids, bodies and the capture's own name carry markup: the page shows it as
    text (jinja2 escapes every value), and the browser finds no element the report did not make."""
    db = tmp_path / f"cap{HOSTILE.replace('/', '_')}.db"
    with Store(db) as store:
        for i in range(6):
            session, second = divmod(i, 2)
            store.add(Record(id=f"s{session}-r{second}{HOSTILE}", ts=T0 + i * 10, path="/v1/messages",
                             api="anthropic", model="claude-sonnet-4-5" + HOSTILE, tenant=f"t{session}{HOSTILE}",
                             request=body(f"2026-11-20T10:00:{i:02d}Z{HOSTILE}", ["search", "fetch" + HOSTILE]),
                             status=200, usage=Usage(1700, 0, 1690, 0, 10, 20, True), ttft_s=0.4, total_s=1.0,
                             verdict="cold" if not second else "miss_prefix_changed",
                             expected_cached=0 if not second else 1690))
    html = tmp_path / "hostile.html"
    res = CliRunner().invoke(main, ["report", str(db), "--html", str(html)])
    assert res.exit_code == 0, res.output
    page = html.read_text("utf-8")
    parsed = _Elements()
    parsed.feed(page)
    assert parsed.tags.count("script") == 1 and "img" not in parsed.tags and not parsed.handlers
    assert "&lt;script&gt;document.title=&#34;owned&#34;&lt;/script&gt;" in page      # shown, once escaped
    dom = headless(tmp_path / "profile", "--dump-dom", html.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count("<script") == 1 and "<img" not in dom.stdout
    title = re.search(r"<head>.*?<title>(.*?)</title>", dom.stdout, re.S)
    assert title and title.group(1).startswith("prefixguard report: ")    # no script of the capture's set it
    drawn = dict(re.findall(r'data-chart="([a-z-]+)"[^>]*data-drawn="(\d+)"', dom.stdout))
    assert int(drawn["causes"]) == 1      # the page's own script still ran over its charts
