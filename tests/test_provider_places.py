"""Adding a provider touches at most three places, and this test lists them:

1. its adapter: a module of prefixguard/wire/ registered in wire/adapters.py, for an API shape no adapter
   reads yet (an OpenAI-compatible provider needs none);
2. its contract: a table of rules/providers.toml (parsed into prefixguard/contracts/tables.Contract);
3. its example pairs: examples/requests/contracts/<pair>/ naming it in contract.json, written by
   tests/helpers/make_contract_examples.py and run by tests/test_contracts_examples.py.

Every provider of the contract data has all three, and no other library module names a provider."""
from __future__ import annotations

import ast
import json
from pathlib import Path

from prefixguard.contracts.tables import COMPATIBLE, providers
from prefixguard.judge.policies import POLICIES, RADIX
from prefixguard.wire import adapter as adapter_protocol
from prefixguard.wire.adapters import ADAPTERS, BY_API

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "prefixguard"
PAIRS = ROOT / "examples" / "requests" / "contracts"
# Where a provider may be named: its contract's code (contracts/) and an adapter that reads the contract
# of the one provider its shape belongs to (Bedrock's default TTL, OpenAI's encrypted reasoning).
PLACES = ("prefixguard/contracts/",
          *(f"prefixguard/wire/{vars(a)['__name__'].rpartition('.')[2]}.py" for a in ADAPTERS))
# Names that are not provider names there, each with why (to move into contract data by its owner).
NOT_PROVIDERS = {
    "prefixguard/cli/demo_app.py": "the `openai` SDK package a demo app imports",
    "prefixguard/lint/code/sinks.py": "an SDK call's sink named by its provider (lint/code)",
}


def test_every_provider_has_an_adapter_a_contract_and_example_pairs() -> None:
    named = {json.loads((p / "contract.json").read_text())["contract"] for p in PAIRS.iterdir()
             if (p / "contract.json").exists()}
    apis = [a.API for a in ADAPTERS]
    assert len(apis) == len(set(apis)) == len(BY_API)       # one adapter per API shape
    for name, contract in providers().items():
        for api in contract.apis:
            assert api in BY_API, (name, api)               # its shapes' adapters are registered
        assert contract.apis or name == COMPATIBLE, name    # only a server one runs speaks no API of its own
        assert (RADIX if name == COMPATIBLE else name) in POLICIES, name   # its contract judges requests
        assert name in named, f"no example pair in {PAIRS} names {name!r}"
    assert named <= set(providers())                        # and no pair names a provider without a contract


def test_each_adapter_defines_every_member_of_the_protocol_itself() -> None:
    members = {n for n in vars(adapter_protocol.Adapter) if not n.startswith("_")}
    assert {"API", "route", "claims", "spans", "request", "usage"} <= members
    for adapter in ADAPTERS:
        assert members <= set(vars(adapter)), (vars(adapter)["__name__"], members - set(vars(adapter)))


def _literals(path: Path) -> set[str]:
    return {node.value for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)}


def test_no_other_module_names_a_provider() -> None:
    """A provider's name as a string literal outside its places: a second home for what its contract
    says. The names that are also an API shape's ("anthropic", "gemini") are the adapters' to police."""
    names = set(providers()) - set(BY_API)
    assert {"openai", "bedrock", "deepseek", COMPATIBLE} <= names
    found = {}
    for path in sorted(LIBRARY.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(PLACES) or rel in NOT_PROVIDERS:
            continue
        hits = _literals(path) & names
        if hits:
            found[rel] = sorted(hits)
    assert found == {}
    for rel in NOT_PROVIDERS:   # each exception still holds, or it is dropped from the list
        assert _literals(ROOT / rel) & names, rel
