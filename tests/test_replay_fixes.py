"""`--what-if fixed`: the same traffic with prefixguard's fixes applied reuses what the original broke."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers.cli import CliRunner

from prefixguard.cli import main
from prefixguard.judge.compare import compare
from prefixguard.replay import sources
from prefixguard.replay.fixes import Fixer
from prefixguard.wire import parse_request

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "requests"


def pair_folder(tmp_path: Path, api: str, case: str) -> Path:
    folder = tmp_path / f"{api}-{case}"
    folder.mkdir()
    shutil.copy(EXAMPLES / api / case / "a.json", folder / "0001.json")
    shutil.copy(EXAMPLES / api / case / "b.json", folder / "0002.json")
    return folder


def replay_json(folder: Path) -> dict:
    res = CliRunner().invoke(main, ["replay", str(folder), "--page-size", "1", "--what-if", "fixed",
                                    "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


@pytest.mark.parametrize("api", ["anthropic", "openai-chat"])
@pytest.mark.parametrize("case", ["volatile_content", "tools_reordered", "key_order_changed"])
def test_fixes_recover_the_broken_prefix(tmp_path: Path, api: str, case: str) -> None:
    if not (EXAMPLES / api / case).is_dir():
        pytest.skip(f"no {api} example of {case}")
    doc = replay_json(pair_folder(tmp_path, api, case))
    assert doc["requests"] == doc["fixed"]["requests"] == 2
    assert doc["fixed"]["cache_read"] > doc["cache_read"]
    # And the fixed pair no longer breaks at all, in the core's own terms.
    trace = sources.load(tmp_path / f"{api}-{case}")
    fixer = Fixer()
    a, b = (fixer.apply(r) for r in trace.requests)
    cmp = compare(*(parse_request(json.dumps(r.body), path=r.path) for r in (a, b)))
    assert not cmp.broken or cmp.causes[0] not in (case, "tools_changed"), cmp.causes


def test_fixes_cost_stable_traffic_nothing(tmp_path: Path) -> None:
    doc = replay_json(pair_folder(tmp_path, "anthropic", "append_only"))
    # Sorted keys change a few tokens of the tool definitions, not what is reused.
    assert doc["cache_read"] > 0
    assert doc["fixed"]["hit_ratio"] == pytest.approx(doc["hit_ratio"], abs=0.005)


def test_frozen_values_are_the_first_ones_seen(tmp_path: Path) -> None:
    folder = pair_folder(tmp_path, "anthropic", "volatile_content")
    a, b = sources.load(folder).requests
    fixer = Fixer()
    fa, fb = fixer.apply(a), fixer.apply(b)
    assert fa.body == a.body or json.dumps(fa.body["system"]) == json.dumps(fb.body["system"])
    assert json.dumps(fb.body["system"]) == json.dumps(fa.body["system"])
    assert a.body != fa.body or b.body != fb.body          # something was frozen
    assert b.body["messages"] == fb.body["messages"]         # the conversation itself is untouched
