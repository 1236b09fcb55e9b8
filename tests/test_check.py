"""`prefixguard check BASE NEW`: exit 1 when caching got worse than the baseline, 0 when not, 2 on bad
input; windows, incidents, [tool.prefixguard.check], JSON (validated by its schema) and the GitHub job
summary. The acceptance runs on the demo's real capture (engine, proxy, the example app with and without
its fixes), split into two capture files with the store's own writer."""
from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest
from helpers.cli import CliRunner
from helpers.processes import prefixguard_on_path

from prefixguard.cli import main
from prefixguard.schemas import schema
from prefixguard.capture.store import Record, open_store
from prefixguard.model.usage import Usage
from prefixguard.judge.verdict import VerdictName

T0 = 1_796_256_000.0   # 2026-12-03T00:00:00Z


def run(*args: str | Path, env: dict[str, str | None] | None = None, cwd: Path | None = None) -> tuple[int, str, str]:
    old = Path.cwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        res = CliRunner().invoke(main, ["check", *map(str, args)], env=env)
    finally:
        os.chdir(old)
    return res.exit_code, res.stdout, res.stderr


def flow(n: int, ts: float, read: int, prompt: int = 1000, model: str = "claude-sonnet-4-5",
         cause: str | None = None) -> Record:
    """A record as the proxy stores one: its usage and its verdict (a miss carries its cause and cost)."""
    usage = Usage(prompt_total=prompt, cache_read=read, uncached=prompt - read, reported=True)
    if cause:
        return Record(f"r{n}", ts, "/v1/messages", api="anthropic", model=model, status=200, usage=usage,
                      verdict=VerdictName.MISS_PREFIX_CHANGED, causes=(cause,), pointer="/system/0",
                      reprefill_tokens=prompt - read, cost_usd=(prompt - read) * 2.7e-6)
    return Record(f"r{n}", ts, "/v1/messages", api="anthropic", model=model, status=200, usage=usage,
                  verdict=(VerdictName.HIT if read else VerdictName.COLD).value)


def capture(path: Path, records: list[Record]) -> Path:
    with open_store(path, create=True) as store:
        for rec in records:
            store.add(rec)
    return path


@pytest.fixture()
def good(tmp_path: Path) -> Path:
    return capture(tmp_path / "good.db", [flow(i, T0 + i, 900) for i in range(10)])


@pytest.fixture()
def worse(tmp_path: Path) -> Path:
    """A release whose hit rate fell 90% -> 60%, with a cause the baseline never had."""
    return capture(tmp_path / "worse.db", [flow(i, T0 + 100 + i, 600 if i % 2 else 900,
                                                cause="volatile_content" if i % 2 else None) for i in range(10)])


def test_a_drop_over_the_threshold_exits_1_and_a_rise_exits_0(good: Path, worse: Path) -> None:
    code, out, _ = run(good, worse)
    assert code == 1, out
    assert "FAIL  all: hit rate 90.0% -> 75.0% (-15.0 points" in out
    assert "volatile_content (5 requests)" in out
    code, out, _ = run(worse, good)
    assert code == 0 and out.rstrip().endswith("no regression"), out
    # within the threshold, and the new cause allowed: no regression
    assert run(good, worse, "--max-hit-rate-drop", "20", "--allow-new-causes")[0] == 0


def test_json_validates_and_names_each_check(good: Path, worse: Path) -> None:
    code, out, _ = run(good, worse, "-o", "json", "--max-miss-cost-increase", "50")
    doc = json.loads(out)
    jsonschema.validate(doc, schema("check"), cls=jsonschema.Draft202012Validator)
    assert code == 1 and doc["regression"] is True
    failed = {(c["name"], c["scope"]) for c in doc["checks"] if c["failed"]}
    assert failed >= {("hit_rate_drop", "all"), ("new_causes", "all"), ("miss_cost_increase", "all"),
                      ("hit_rate_drop", "claude-sonnet-4-5")}
    assert doc["new"]["summary"]["causes"]["volatile_content"]["requests"] == 5
    assert doc["base"]["summary"]["hit_rate"] == pytest.approx(0.9)


def test_windows_of_one_capture(tmp_path: Path) -> None:
    """One live store: the week before a release as the baseline, the hours after it checked."""
    one = capture(tmp_path / "live.db", [flow(i, T0 + i, 900) for i in range(10)]
                  + [flow(10 + i, T0 + 3600 + i, 300, cause="tools_reordered") for i in range(10)])
    split = str(T0 + 1800)
    assert run(one, one, "--baseline-until", split, "--since", split)[0] == 1
    assert run(one, one, "--baseline-until", split, "--until", split)[0] == 0
    code, _, err = run(one, one, "--since", str(T0 + 9000))
    assert code == 2 and "no requests in NEW's window" in err


def test_an_incident_is_kept_out_of_the_baseline(tmp_path: Path) -> None:
    """The baseline's outage broke caches with tools_reordered; a release that now reorders tools is a
    regression once the outage is marked as an incident, from the flag or from pyproject.toml."""
    base = capture(tmp_path / "base.db", [flow(i, T0 + i * 60, 900) for i in range(10)]
                   + [flow(10 + i, T0 + 7200 + i, 900, cause="tools_reordered") for i in range(3)])
    new = capture(tmp_path / "new.db", [flow(i, T0 + 9000 + i, 900, cause="tools_reordered" if i == 3 else None)
                                        for i in range(10)])
    assert run(base, new)[0] == 0
    incident = "2026-12-03..2026-12-05"   # dates: midnight UTC
    code, out, _ = run(base, new, "--exclude-incident", f"{T0 + 7000}..{T0 + 7300}", "-o", "json")
    doc = json.loads(out)
    assert code == 1 and doc["base"]["excluded_requests"] == 3
    (tmp_path / "pyproject.toml").write_text(
        "[tool.prefixguard.check]\nincidents = [{ start = %s, end = %s, note = \"provider outage\" }]\n"
        % ("2026-12-03T01:55:00Z", "2026-12-03T02:05:00Z"))
    # T0 + 7200 is 2026-12-03T02:00:00Z (TOML date-times, as written)
    code, out, _ = run(base, new, "-o", "json", cwd=tmp_path)
    doc = json.loads(out)
    assert code == 1 and doc["base"]["incidents"][0]["note"] == "provider outage", doc["base"]
    # a whole-day incident leaves no baseline: an input error, not a pass
    code, _, err = run(base, new, "--exclude-incident", incident)
    assert code == 2 and "outside its incidents" in err


def test_thresholds_from_pyproject_and_flags_on_top(tmp_path: Path, good: Path, worse: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        "[tool.prefixguard.check]\nmax-hit-rate-drop = 20\nallow-new-causes = true\n")
    assert run(good, worse, cwd=tmp_path)[0] == 0
    assert run(good, worse, "--max-hit-rate-drop", "10", cwd=tmp_path)[0] == 1
    (tmp_path / "pyproject.toml").write_text("[tool.prefixguard.check]\nmax-hit-rate-drop = \"a lot\"\n")
    code, _, err = run(good, worse, cwd=tmp_path)
    assert code == 2 and "max-hit-rate-drop must be a number" in err
    (tmp_path / "pyproject.toml").write_text("[tool.prefixguard.check]\nmax-hit-rate = 3\n")
    code, _, err = run(good, worse, cwd=tmp_path)
    assert code == 2 and "unknown key 'max-hit-rate'" in err


def test_github_job_summary(tmp_path: Path, good: Path, worse: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    code, _, _ = run(good, worse, env={"GITHUB_STEP_SUMMARY": str(summary)})
    text = summary.read_text()
    assert code == 1 and text.startswith("earlier step\n### prefixguard check: regression")
    assert "| claude-sonnet-4-5 | 10 / 10 | 90.0% / 75.0% |" in text


@pytest.mark.parametrize("args, message", [
    (["{tmp}/nothing.db", "{good}"], "no such capture file"),
    (["{tmp}/notes.txt", "{good}"], "not a capture export"),
    (["{good}", "{good}", "--since", "yesterday"], "--since: 'yesterday' is not a time"),
    (["{good}", "{good}", "--exclude-incident", "2026-12-03"], "is not a span"),
    (["{good}", "{good}", "--max-hit-rate-drop", "-1"], "is not a number of at least 0"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, good: Path, args: list[str], message: str) -> None:
    (tmp_path / "notes.txt").write_text('{"a": 1}\n')
    code, out, err = run(*(a.format(tmp=tmp_path, good=good) for a in args))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1 and not out, err


def test_no_reported_usage_is_an_input_error(tmp_path: Path, good: Path) -> None:
    blind = capture(tmp_path / "blind.db", [Record("x", T0, "/v1/messages", api="anthropic", model="m", status=200,
                                                   usage=Usage(), verdict="not_reported")])
    code, _, err = run(good, blind)
    assert code == 2 and "reported its cache fields" in err


@pytest.mark.slow
def test_demo_captures_with_and_without_the_fixes(demo_run, tmp_path: Path) -> None:
    """The acceptance: the demo's capture (through the real proxy on the local engine) split into the app
    as written and the app with its fixes; a release that undid the fixes is caught, the fixes pass."""
    with open_store(demo_run.store) as store:
        records = list(store.records())
    half = len(records) // 2   # the demo runs the app as written, then with the fixes, one after the other
    before = capture(tmp_path / "before.db", records[:half])
    after = capture(tmp_path / "after.db", records[half:])
    code, out, _ = run(after, before, "-o", "json")
    doc = json.loads(out)
    jsonschema.validate(doc, schema("check"), cls=jsonschema.Draft202012Validator)
    assert code == 1, out
    drop = next(c for c in doc["checks"] if c["name"] == "hit_rate_drop" and c["scope"] == "all")
    assert drop["failed"] and drop["base"] - drop["new"] > 0.2
    assert {"volatile_content", "tools_reordered"} <= set(doc["new"]["summary"]["causes"])
    assert run(before, after)[0] == 0
    assert run(after, after)[0] == 0
    # the same, as windows of the one capture the demo wrote
    split = str(records[half].ts)
    assert run(demo_run.store, demo_run.store, "--baseline-since", split, "--until", split)[0] == 1
    assert run(demo_run.store, demo_run.store, "--baseline-until", split, "--since", split)[0] == 0


def test_the_actions_check_step_fails_the_job_and_writes_the_summary(tmp_path: Path, good: Path, worse: Path) -> None:
    """action.yml's check step under bash, with the env GitHub gives it and `prefixguard` on PATH."""
    import subprocess

    import yaml

    root = Path(__file__).resolve().parent.parent
    step = next(s for s in yaml.safe_load((root / "action.yml").read_text())["runs"]["steps"] if s.get("id") == "check")
    path = prefixguard_on_path(tmp_path / "bin")
    summary = tmp_path / "summary.md"
    for base, new, code in ((good, worse, 1), (worse, good, 0)):
        env = {**os.environ, "PATH": path, "GITHUB_STEP_SUMMARY": str(summary),
               "PG_CHECK_BASELINE": str(base), "PG_CHECK_CAPTURE": str(new)}
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", step["run"]], env=env, capture_output=True,
                              text=True, timeout=120, cwd=tmp_path)
        assert done.returncode == code, done.stderr
    text = summary.read_text()
    assert text.count("### prefixguard check:") == 2 and "### prefixguard check: regression" in text
