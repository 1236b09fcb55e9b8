"""Each equivalence of rules/equivalences.toml on a real recorded pair: the bytes differ where the
equivalence says they may, the provider read everything the earlier request wrote, and prefixguard
sees no break. An equivalence without such a pair here cannot be added to the rules."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from prefixguard.judge.compare import compare, contract_reads
from prefixguard.contracts.providers import equivalences
from prefixguard.replay.sources import cassette_uris
from prefixguard.wire import parse_request, parse_response

# name -> (recorded folder, number of the later request): its provider read all that the one before wrote
EVIDENCE = {
    "text-block-is-string": ("pydantic-ai/test_cache_test_openrouter_cache_messages_anthropic_real_api", 2),
    "breakpoint-markers": ("pydantic-ai/test_cache_test_openrouter_cache_all_settings_real_api", 2),
}


def _call(folder: Path, n: int) -> tuple[bytes, str | None, dict]:
    raw = (folder / f"{n:04d}.request.json").read_bytes()
    return raw, cassette_uris(folder).get(f"{n:04d}"), json.loads((folder / f"{n:04d}.response.json").read_bytes())


def _changed(name: str, a: dict, b: dict) -> bool:
    """Whether B differs from A in the way the equivalence allows, in a message both have."""
    for x, y in zip(a["messages"], b["messages"]):
        if name == "text-block-is-string" and isinstance(x["content"], list) != isinstance(y["content"], list):
            return True
        if name == "breakpoint-markers" and ("cache_control" in json.dumps(x)) != ("cache_control" in json.dumps(y)):
            return True
    return False


def test_every_equivalence_has_recorded_evidence() -> None:
    assert set(equivalences()) == set(EVIDENCE)


@pytest.mark.parametrize("name", sorted(EVIDENCE))
def test_equivalence_on_a_real_recorded_pair(shared_data: Path, name: str) -> None:
    folder, n = EVIDENCE[name]
    (raw_a, path, resp_a), (raw_b, _, resp_b) = (_call(shared_data / "recorded" / folder, k) for k in (n - 1, n))
    assert _changed(name, json.loads(raw_a), json.loads(raw_b))
    a, b = parse_request(raw_a, path=path), parse_request(raw_b, path=path)
    wrote, read = parse_response(json.dumps(resp_a).encode(), a.api), parse_response(json.dumps(resp_b).encode(), b.api)
    assert wrote.cache_write > 0 and read.cache_read == wrote.cache_write  # the provider rendered them alike
    result = compare(a, b)
    assert not result.broken and result.causes == ["append_only"]
    assert result.reused_tokens == contract_reads(a, a)[1] > 0  # all that A cached, by the contract too
