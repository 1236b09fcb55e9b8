"""Prices come from the maintained genai-prices package (its bundled data: offline), the dated TOML table
is the fallback, and every printed cost names its source and date."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from genai_prices import Usage, calc_price
from helpers.cli import CliRunner

from prefixguard.cli import main
from prefixguard.contracts.prices import package_table
from prefixguard.contracts.providers import model_contract, provider_contract, providers

ROOT = Path(__file__).resolve().parents[1]
PAIR = [str(ROOT / "examples/requests/anthropic/volatile_content" / n) for n in ("a.json", "b.json")]


@pytest.fixture(autouse=True)
def fresh_contracts():
    _forget()   # prices are read once per model: these tests change where from
    yield
    _forget()


def _forget() -> None:
    model_contract.cache_clear()
    provider_contract.cache_clear()


@pytest.mark.parametrize("api, model, provider", [("anthropic", "claude-sonnet-4-5-20250929", "anthropic"),
                                                  ("anthropic", "claude-haiku-4-5", "anthropic"),
                                                  ("openai-chat", "gpt-4o-mini", "openai"),
                                                  ("openai-responses", "gpt-5", "openai")])
def test_costs_match_the_package_calculation(api: str, model: str, provider: str) -> None:
    contract = model_contract(api, model)
    assert contract.price_source.startswith("genai-prices ")
    assert re.fullmatch(r"20\d\d-\d\d-\d\d", contract.price_date)
    uncached, read, written, output = 3_000, 50_000, 2_000, 400
    ours = contract.cost(uncached=uncached, cache_read=read, write_5m=written if provider == "anthropic" else 0,
                         output=output)
    usage = Usage(input_tokens=uncached + read + (written if provider == "anthropic" else 0),
                  cache_read_tokens=read, output_tokens=output,
                  **({"cache_write_tokens": written} if provider == "anthropic" else {}))
    theirs = float(calc_price(usage, model, provider_id=provider).total_price)
    assert ours == pytest.approx(theirs, rel=1e-9)


def test_one_hour_writes_use_the_package_price() -> None:
    contract = model_contract("anthropic", "claude-sonnet-4-5")
    theirs = calc_price(Usage(input_tokens=10_000, cache_write_tokens=10_000, cache_write_1h_tokens=10_000),
                        "claude-sonnet-4-5",
                        provider_id="anthropic").total_price
    assert contract.cost(write_1h=10_000) == pytest.approx(float(theirs), rel=1e-9)


def test_the_toml_table_is_the_fallback_with_its_date(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREFIXGUARD_PRICES", "rules")
    c = model_contract("anthropic", "claude-sonnet-4-5")
    table = providers()["anthropic"]
    row = next(m for m in table.models if m.prefix == "claude-sonnet-4-5")
    assert (c.input_per_mtok, c.output_per_mtok) == (row.input_per_mtok, row.output_per_mtok)
    assert c.prices == f"rules/providers.toml, {table.read}"


def test_a_model_the_package_does_not_know_falls_back() -> None:
    c = model_contract("anthropic", "claude-nonexistent-9")
    assert c.price_source == "rules/providers.toml" and not c.confirmed
    local = model_contract("openai-chat", "llama-3-8b")           # a local server: no price anywhere
    assert local.provider == "compatible" and local.input_per_mtok == 0.0


def test_the_package_table_is_dated() -> None:
    source, date = package_table()
    assert source.startswith("genai-prices ") and re.fullmatch(r"20\d\d-\d\d-\d\d", date)


def test_diff_prints_the_price_source_and_date(monkeypatch: pytest.MonkeyPatch) -> None:
    res = CliRunner().invoke(main, ["diff", *PAIR])
    assert res.exit_code == 1
    cost = next(line for line in res.stdout.splitlines() if line.strip().startswith("cost"))
    source, date = package_table()
    assert f"prices: {source}, {date}" in cost
    assert json.loads(CliRunner().invoke(main, ["diff", *PAIR, "-o", "json"]).stdout)["prices"] == \
        f"{source}, {date}"
    monkeypatch.setenv("PREFIXGUARD_PRICES", "rules")
    _forget()
    res = CliRunner().invoke(main, ["diff", *PAIR])
    assert f"prices: rules/providers.toml, {providers()['anthropic'].read}" in res.stdout


def test_a_later_run_prices_from_the_disk_memo_without_importing_the_package(tmp_path: Path) -> None:
    """genai-prices costs ~0.2 s to import: what a run read from it is kept per data version and day, so
    the next run that prices the same model does not import it, and gets the same prices and label."""
    import os
    import subprocess
    import sys
    script = ("import json, sys; from prefixguard.contracts.providers import model_contract;"
              "c = model_contract('anthropic', 'claude-sonnet-4-5');"
              "print(json.dumps([c.input_per_mtok, c.output_per_mtok, c.prices, 'genai_prices' in sys.modules]))")
    env = {**os.environ, "PREFIXGUARD_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    env.pop("PREFIXGUARD_PRICES", None)
    first, second = (json.loads(subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                                               text=True, timeout=60, check=True).stdout) for _ in range(2))
    assert first[3] is True and second[3] is False
    assert first[:3] == second[:3] and first[2].startswith("genai-prices ")
    assert len([p for p in tmp_path.iterdir() if p.name.startswith("prices-")]) == 1   # one memo: this data, today


def test_reprefill_cost_is_paid_as_the_request_wrote_minus_a_read() -> None:
    """The one rule behind every miss cost (diff, report, log import): written at the TTL the request
    paid, or uncached when it wrote nothing, over what reading the same tokens would have cost."""
    from prefixguard.model.usage import Usage
    c = model_contract("anthropic", "claude-sonnet-4-5")
    read = c.cost(cache_read=1000)
    assert c.reprefill_cost(1000, "1h") == pytest.approx(c.cost(write_1h=1000) - read)
    assert c.reprefill_cost(1000, "5m") == pytest.approx(c.cost(write_5m=1000) - read)
    assert c.reprefill_cost(1000, "5m") < c.reprefill_cost(1000, "1h")
    assert c.reprefill_cost(1000, None) == pytest.approx(c.cost(uncached=1000) - read)
    assert Usage(cache_write_1h=5).written_as == "1h" and Usage(cache_write_5m=5, cache_write_1h=5).written_as == "5m"
    assert Usage(cache_read=5).written_as is None
