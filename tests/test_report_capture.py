"""`prefixguard report` on a real capture: recorded provider traffic (the providers' own responses, with
their cache fields) sent through the real proxy (`prefixguard proxy`, its own process) to a loopback
upstream that answers with the recordings; the proxy's SQLite store is then reported on in the
terminal, as JSON and as HTML (opened in headless Chromium)."""
from __future__ import annotations

import json
import re
import time
import urllib.request
from pathlib import Path

import pytest
from helpers.cli import CliRunner

from prefixguard.cli import main
from prefixguard.replay.sources import cassette_uris
from helpers.browser import CHARTS, headless
from helpers.processes import start, stop
from helpers.upstream import Upstream

def through_proxy(recorded: Path, folders: list[Path], db: Path, *proxy_args: str,
                  log: list[str] | None = None) -> None:
    """The recorded calls of these cassette folders, in order, through `prefixguard proxy --store db`."""
    with Upstream(recorded) as upstream:
        proxy, url = start("proxy", "--upstream", upstream.url, "--port", "0", "--store", str(db), *proxy_args,
                           log=log)
        try:
            for folder in folders:
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


@pytest.fixture(scope="module")
def capture(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every recorded call of the cassettes about caching, through the proxy, in order."""
    recorded = shared_data / "recorded"
    db = tmp_path_factory.mktemp("capture") / "capture.db"
    through_proxy(recorded, [f for f in sorted(recorded.glob("*/*")) if "cache" in f.name], db, "-q")
    return db


def test_terminal_report_walks_the_five_steps(capture: Path) -> None:
    res = CliRunner().invoke(main, ["report", str(capture)])
    assert res.exit_code == 0, res.output
    text = res.output
    steps = [text.index(f"\n{n}. ") for n in range(1, 6)]   # each step opens a line (amounts end "1. " too)
    assert steps == sorted(steps)
    assert "before:" in text and "after:" in text and "fix:" in text


def test_json_report_numbers_come_from_the_capture(capture: Path) -> None:
    res = CliRunner().invoke(main, ["report", str(capture), "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    export = CliRunner().invoke(main, ["capture", "export", str(capture)]).output
    rows = [json.loads(line) for line in export.splitlines()]
    # requests forwarded without analysis (a path of no shape read: count_tokens) are named, not counted
    unread = [r for r in rows if r["api"] is None and r["status"] is None]
    assert doc["requests"] == len(rows) - len(unread) > 30
    assert {(r["method"], r["path"]) for r in unread} <= {(u["method"], u["path"]) for u in doc["infra"]["unanalysed"]}
    reported = [r for r in rows if r["usage"]["reported"]]
    assert sum(w["cache_read"] for w in doc["windows"]) == sum(r["usage"]["cache_read"] for r in reported)
    causes = {c["name"]: c for c in doc["causes"]}
    # its example points at the system part: Anthropic's /system, or an OpenAI Chat system message first
    assert "system_changed" in causes and causes["system_changed"]["example"]["pointer"].startswith(("/system", "/messages/0/"))
    assert all(c["reprefill_tokens"] >= 0 and c["requests"] > 0 for c in doc["causes"])
    fields = doc["fields"]
    assert fields["reported_cache_read"] == sum(r["usage"]["cache_read"] for r in reported
                                            if r["expected_cached"] is not None)
    assert fields["not_reported"] == sum(1 for r in rows if not r["usage"]["reported"] and r not in unread)
    # counted by tokenizers, but a part no rule costs (Nova Pro's video: nothing, flagged as an estimate)
    estimated = [r for r in rows if r["tokens_estimated"]]
    assert doc["tokens_estimated"] is True and [r["model"] for r in estimated] == ["us.amazon.nova-pro-v1:0"]
    assert '"video"' in json.dumps(estimated[0]["request"])
    # Gemini's explicit cache: its creation went through the proxy (no row), the requests naming it are
    # predicted to read it whole, as the provider did
    named = [r for r in rows if isinstance(r["request"], dict) and "cachedContent" in r["request"]]
    assert named and all(r["usage"]["cache_read"] > 3000 and r["verdict"] == "hit" and
                         abs(r["expected_cached"] - r["usage"]["cache_read"]) <= 0.05 * r["usage"]["cache_read"]
                         for r in named)


def test_the_jsonl_export_reports_the_same(capture: Path, tmp_path: Path) -> None:
    export = tmp_path / "capture.jsonl"
    export.write_text(CliRunner().invoke(main, ["capture", "export", str(capture)]).output)
    a, b = (json.loads(CliRunner().invoke(main, ["report", str(p), "--format", "json"]).output)
            for p in (capture, export))
    assert a.pop("source") != b.pop("source")
    assert a == b


def test_html_report_is_self_contained_and_its_charts_render(capture: Path, tmp_path: Path) -> None:
    html = tmp_path / "report.html"
    res = CliRunner().invoke(main, ["report", str(capture), "--html", str(html)])
    assert res.exit_code == 0, res.output
    page = html.read_text()
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', page)     # no external asset
    assert all(f'data-chart="{name}"' in page for name in CHARTS)

    dom = headless(tmp_path / "profile", "--dump-dom", html.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    drawn = {m[0]: int(m[1]) for m in re.findall(r'data-chart="([a-z-]+)"[^>]*data-drawn="(\d+)"', dom.stdout)}
    assert set(drawn) == set(CHARTS)          # the page's script ran over every chart
    for name in CHARTS:
        assert drawn[name] > 0, (name, drawn)
    shot = tmp_path / "report.png"
    headless(tmp_path / "profile", "--window-size=1280,2000", f"--screenshot={shot}", html.as_uri())
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


def test_replay_judges_each_request_by_its_providers_contract(capture: Path) -> None:
    """A capture of Anthropic, OpenAI and OpenAI-compatible traffic: the auto policy gives each request
    exactly what its own provider's contract gives it when that provider's requests replay alone."""
    from prefixguard.judge.policies import policy_name
    from prefixguard.replay import sources
    from prefixguard.replay.results import Outcome
    from prefixguard.replay.player import replay
    from prefixguard.replay.targets import SimTarget, prompt_of

    def key(o: Outcome) -> tuple:
        return o.ref, o.prompt_tokens, o.cache_read, o.cache_write, o.uncached, o.reason

    requests = sources.load(capture).requests
    auto = {o.ref: key(o) for o in replay(requests, SimTarget("auto"), progress=False)}
    groups: dict[str, list] = {}
    for req in requests:
        prompt = prompt_of(req)
        groups.setdefault(policy_name(prompt.api, prompt.model), []).append(req)
    assert set(groups) == {"anthropic", "openai", "radix", "bedrock", "gemini"}
    for name, reqs in groups.items():
        # compatible traffic ("radix") is judged by the compatible contract's policy, as the proxy judges it;
        # replay's own `--policy radix` is the engine's radix tree, a simulation of the engine
        alone = replay(reqs, SimTarget("auto" if name == "radix" else name), progress=False)
        assert [key(o) for o in alone] == [auto[r.ref] for r in reqs], name
    res = CliRunner().invoke(main, ["replay", str(capture), "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["policy"] == "auto" and doc["cache_read"] == sum(a[2] for a in auto.values())


def test_estimated_token_counts_are_marked_from_the_proxy_to_the_report(shared_data: Path, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """PREFIXGUARD_TOKENIZER=estimate: the proxy's console line marks its own counts with ~, its store rows
    carry the flag, and the report says so in the terminal, the JSON and the HTML."""
    from prefixguard.model import tokens

    recorded = shared_data / "recorded"
    folder = recorded / "openllmetry" / "test_prompt_caching_test_anthropic_prompt_caching_legacy"
    db, log = tmp_path / "estimated.db", []
    monkeypatch.setenv("PREFIXGUARD_TOKENIZER", "estimate")   # for the proxy's process and this one
    tokens.reset()
    try:
        through_proxy(recorded, [folder], db, log=log)
        export = CliRunner().invoke(main, ["capture", "export", str(db)]).output
        rows = [json.loads(line) for line in export.splitlines()]
        assert len(rows) == 2 and all(r["tokens_estimated"] for r in rows)
        deadline = time.monotonic() + 10        # the proxy's output may still be on its way
        while time.monotonic() < deadline and sum(" exp " in line for line in log) < 2:
            time.sleep(0.05)
        lines = [line for line in log if line.startswith("prefixguard ") and " exp " in line]
        assert len(lines) == 2 and all(" exp ~" in line for line in lines), log

        html = tmp_path / "report.html"
        text = CliRunner().invoke(main, ["report", str(db), "--html", str(html)])
        assert text.exit_code == 0, text.output
        assert "are estimates" in " ".join(text.output.split())      # rich wraps lines at the terminal's width
        assert json.loads(CliRunner().invoke(main, ["report", str(db), "--format", "json"]).output)["tokens_estimated"]
        assert 'class="estimated"' in html.read_text() and "are estimates" in html.read_text()
    finally:
        monkeypatch.undo()
        tokens.reset()
    # With the tokenizer loaded again, the rows still say how they were counted.
    assert "are estimates" in " ".join(CliRunner().invoke(main, ["report", str(db)]).output.split())
