"""The Prometheus alerting rules and the Grafana dashboard in examples/: every metric they name is one the
proxy or the engine exposes (read from their real registries), the rules pass `promtool check rules` and
fire on a synthetic hit-rate drop (`promtool test rules`), and the dashboard holds together (panels,
grid, datasource, variables) with every query valid PromQL (promtool parses each one)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import jsonschema
import pytest
import yaml

from prefixguard.capture.store import Record
from prefixguard.model.usage import Usage

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "examples" / "alerts" / "prefixguard.rules.yml"
RULE_TESTS = ROOT / "examples" / "alerts" / "prefixguard.rules.test.yml"
DASHBOARD = ROOT / "examples" / "grafana" / "prefixguard-dashboard.json"
METRIC = re.compile(r"\bprefixguard_[a-z0-9_]+\b")
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__range": "1h", "$__interval": "1m"}


@pytest.fixture(scope="module")
def promtool() -> str:
    """Debian's promtool (package prometheus), which .ci/venv-run installs where apt can. Missing: a
    failure under CI, a skip elsewhere."""
    found = shutil.which("promtool")
    if found is None:
        message = "promtool not found (apt-get install prometheus brings it; .ci/venv-run does)"
        if os.environ.get("CI"):   # a test that skips under CI proves nothing
            pytest.fail(message)
        pytest.skip(message)
    return found


def exposed() -> dict[str, set[str]]:
    """Every sample name the proxy's and the engine's registries expose, with its label names."""
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from prefixguard.engine.metrics import Metrics
    from prefixguard.telemetry.metrics import ProxyMetrics

    proxy = ProxyMetrics()
    miss = Record("r1", 0.0, "/v1/messages", api="anthropic", model="claude-sonnet-4-5", status=200,
                  usage=Usage(prompt_total=2000, cache_read=500, cache_write_5m=1500, reported=True),
                  verdict="miss_prefix_changed", causes=("volatile_content",), pointer="/system/0", reprefill_tokens=1500,
                  cost_usd=0.004, ttft_s=0.4, decode_tps=60.0)
    proxy.add(miss, lag=0.01)
    proxy.unanalysed(Record("r2", 0.0, "/v1/models", method="GET"))
    runner = SimpleNamespace(engine=SimpleNamespace(stats={"pool_pages_total": 8, "pool_pages_used": 2,
                                                           "evicted_pages": 0}),
                             in_flight=0, waiting=0, max_queue=4)
    engine = Metrics(runner)
    engine.count("anthropic", 200)
    engine.finished(SimpleNamespace(ttft=0.1, prefill_seconds=0.05, decode_tps=30.0), miss.usage)
    found: dict[str, set[str]] = {}
    for registry in (proxy.registry, engine.registry):
        for family in text_string_to_metric_families(generate_latest(registry).decode()):
            for sample in family.samples:
                found.setdefault(sample.name, set()).update(sample.labels)
    return found


def rule_exprs() -> list[str]:
    doc = yaml.safe_load(RULES.read_text())
    return [r["expr"] for g in doc["groups"] for r in g["rules"]]


def dashboard_exprs() -> list[str]:
    doc = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in doc["panels"] for t in p.get("targets", [])] + [
        v["query"]["query"] for v in doc["templating"]["list"] if v["type"] == "query"]


@pytest.mark.parametrize("source", ["rules", "dashboard"])
def test_every_metric_named_exists_with_its_labels(source: str) -> None:
    names = exposed()
    exprs = rule_exprs() if source == "rules" else dashboard_exprs()
    used = {m for e in exprs for m in METRIC.findall(e)}
    assert len(used) >= (5 if source == "rules" else 15), used
    assert used <= set(names), sorted(used - set(names))
    # the labels they group or match by are labels those metrics carry
    for expr in exprs:
        metrics = set(METRIC.findall(expr))
        carried = set().union(*(names[m] for m in metrics)) | {"le"}
        grouped = {label.strip() for by in re.findall(r"\bby \(([^)]*)\)", expr) for label in by.split(",")}
        matched = set(re.findall(r"[{,]\s*([a-z_]+)\s*[!=]~?", expr))
        assert grouped | matched <= carried, (expr, (grouped | matched) - carried)


def test_rules_pass_promtool_check(promtool: str) -> None:
    done = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "SUCCESS: 9 rules found" in done.stdout, done.stdout + done.stderr


def test_alerts_fire_on_a_synthetic_hit_rate_drop(promtool: str, tmp_path: Path) -> None:
    """promtool's unit tests: each alert quiet before the release, firing after it on the model that
    dropped (with its annotations), and not on the steady one."""
    done = subprocess.run([promtool, "test", "rules", RULE_TESTS.name], capture_output=True, text=True, timeout=120,
                          cwd=RULE_TESTS.parent)
    assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout + done.stderr
    tests = yaml.safe_load(RULE_TESTS.read_text())["tests"][0]
    fired = {t["alertname"] for t in tests["alert_rule_test"] if t["exp_alerts"]}
    assert fired == {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if "alert" in r}
    # the same test with the drop taken out must fail: the alert is driven by the drop, not by the clock
    steady = RULE_TESTS.read_text().replace("'0+900x420 378300+300x59'", "'0+900x480'")
    (tmp_path / RULE_TESTS.name).write_text(steady)
    shutil.copy(RULES, tmp_path / RULES.name)
    undone = subprocess.run([promtool, "test", "rules", RULE_TESTS.name], capture_output=True, text=True, timeout=120,
                            cwd=tmp_path)
    told = undone.stdout + undone.stderr
    assert undone.returncode != 0 and "alertname: PrefixCacheHitRateDrop" in told, told


# The structure Grafana needs of a dashboard it imports (the parts this one uses).
DASHBOARD_SCHEMA = {
    "type": "object",
    "required": ["uid", "title", "schemaVersion", "panels", "templating", "time"],
    "properties": {
        "uid": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,40}$"},
        "title": {"type": "string", "minLength": 1},
        "schemaVersion": {"type": "integer", "minimum": 30},
        "time": {"type": "object", "required": ["from", "to"]},
        "templating": {"type": "object", "required": ["list"], "properties": {"list": {"type": "array", "items": {
            "type": "object", "required": ["name", "type"],
            "properties": {"type": {"enum": ["datasource", "query", "custom", "constant", "interval"]}}}}}},
        "panels": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["id", "type", "title", "gridPos"],
            "properties": {
                "id": {"type": "integer", "minimum": 1},
                "type": {"enum": ["row", "timeseries", "stat", "gauge", "table", "bargauge"]},
                "gridPos": {"type": "object", "required": ["x", "y", "w", "h"], "properties": {
                    "x": {"type": "integer", "minimum": 0, "maximum": 23},
                    "y": {"type": "integer", "minimum": 0},
                    "w": {"type": "integer", "minimum": 1, "maximum": 24},
                    "h": {"type": "integer", "minimum": 1}}},
                "targets": {"type": "array", "items": {"type": "object", "required": ["refId", "expr"]}},
            }}},
    },
}


def test_dashboard_holds_together(promtool: str, tmp_path: Path) -> None:
    doc = json.loads(DASHBOARD.read_text())
    jsonschema.validate(doc, DASHBOARD_SCHEMA)
    panels = doc["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    cells: set[tuple[int, int]] = set()
    for p in panels:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24, p["title"]
        here = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not here & cells, f"{p['title']} overlaps another panel"
        cells |= here
        if p["type"] == "row":
            continue
        assert p["targets"] and len({t["refId"] for t in p["targets"]}) == len(p["targets"])
        for ref in [p["datasource"], *(t["datasource"] for t in p["targets"])]:
            assert ref == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
    variables = {v["name"] for v in doc["templating"]["list"]}
    used = {m for e in dashboard_exprs() for m in re.findall(r"\$(?!__)(\w+)", e)}
    assert used <= variables and "datasource" in variables
    # every query is PromQL promtool parses: each, with Grafana's variables filled in, as a recording rule
    rules = []
    for n, expr in enumerate(e for e in dashboard_exprs() if not e.startswith("label_values(")):
        for name, value in GRAFANA_VARIABLES.items():
            expr = expr.replace(name, value)
        rules.append({"record": f"dashboard:query_{n}", "expr": re.sub(r"\$\w+", ".*", expr)})
    (tmp_path / "queries.yml").write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    done = subprocess.run([promtool, "check", "rules", str(tmp_path / "queries.yml")], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
