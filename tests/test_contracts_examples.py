"""examples/requests/contracts/: pairs whose read depends on the contract (GPT-5.6's implicit breakpoints,
a server's block size, a server without prefix caching). What b reads after a, by the policy and by
`prefixguard diff` (its reused tokens) with the contract's settings as flags, is what contract.json says;
the pairs are what their generator writes."""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import make_contract_examples as gen
from helpers.cli import CliRunner

from prefixguard.cli import main
from prefixguard.contracts import serving
from prefixguard.contracts.providers import compatible_settings, provider_for, providers
from prefixguard.judge.policies import make_policy, policy_name
from prefixguard.model.prompt import Prompt
from prefixguard.wire import parse_request

HERE = Path(__file__).resolve().parents[1] / "examples" / "requests" / "contracts"
PAIRS = sorted(p for p in HERE.iterdir() if (p / "contract.json").exists())


@pytest.fixture(autouse=True)
def defaults() -> Iterator[None]:
    serving.reset()
    yield
    serving.reset()


def load(pair: Path) -> tuple[Prompt, Prompt, dict]:
    a, b = (parse_request((pair / f"{x}.json").read_text()) for x in "ab")
    return a, b, json.loads((pair / "contract.json").read_text())


def reads(a: Prompt, b: Prompt, model: str | None = None, host: str | None = None) -> tuple[int, str]:
    if model:
        a.model = b.model = model
    policy = make_policy(policy_name(b.api, b.model, host))
    policy.commit(a, 0.0)
    got = policy.lookup(b, 60.0)
    return got.cache_read, got.reason


def owed(a: Prompt, says: int | str, contract: str) -> int:
    if says == "all of a":
        return a.total_tokens
    if says == "all of a, in its steps":
        step = providers()[contract].token_step
        return a.total_tokens // step * step
    if says == "whole blocks of a":
        block = compatible_settings().block_tokens
        return a.total_tokens // block * block
    return int(says)


def flags(settings: dict) -> list[str]:
    out = []
    for key, value in settings.items():
        out += [f"--no-{key}"] if value is False else [f"--{key}", str(value)]
    return out


@pytest.mark.parametrize("pair", PAIRS, ids=[p.name for p in PAIRS])
def test_b_reads_what_the_contract_says(pair: Path) -> None:
    a, b, contract = load(pair)
    serving.apply(flags=contract["settings"])
    host = contract.get("host")   # a provider known by its upstream host only (Groq)
    assert provider_for(b.api, b.model, host) == contract["contract"]
    if "mode" in contract:
        assert make_policy(contract["contract"]).mode(b) == contract["mode"]
    want = owed(a, contract["reads"], contract["contract"])
    assert 0 < want or contract["reads"] == 0
    read, reason = reads(a, b, host=host)
    assert read == want
    if contract["settings"].get("prefix-caching") is False:
        assert reason == "no_prefix_caching"
    assert reason == contract.get("reason", reason)
    if host:
        return   # `prefixguard diff` knows no upstream: the model alone names no provider known by its host
    result = CliRunner().invoke(main, ["diff", str(pair / "a.json"), str(pair / "b.json"), "--format", "json",
                                       *flags(contract["settings"])])
    assert result.exit_code in (0, 1), result.output
    assert json.loads(result.stdout)["reused_tokens"] == want


def test_the_rule_before_reads_what_these_contracts_do_not() -> None:
    """The same pairs under the rule prefixguard applied before: GPT-5's longest prefix (a timestamp
    edit near the end of the system prompt still reads most of it), and any-prefix reuse of one-token
    blocks (a two-message prefix is read)."""
    a, b, _ = load(HERE / "gpt-5.6-implicit-prefix-edited")
    assert reads(a, b, "gpt-5")[0] > 1024
    a, b, _ = load(HERE / "blocks-short-prefix")
    serving.apply(flags={"block-size": 1})
    assert reads(a, b)[0] == a.total_tokens


def test_committed_pairs_match_their_generator() -> None:
    assert {p.name for p in PAIRS} == set(gen.PAIRS)
    for pair in PAIRS:
        a, b, contract = gen.PAIRS[pair.name]
        assert [json.loads((pair / f"{x}.json").read_text()) for x in ("a", "b", "contract")] == [a, b, contract]
