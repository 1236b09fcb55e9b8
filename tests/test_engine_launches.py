"""Host work per decode step: the operators one step launches (under torch.profiler) do not grow with
the context and stay within about 40 per layer plus 40. Views and metadata ops (a slice, a
transpose) launch nothing on a GPU and are not counted; every other ATen operator the step calls is.
Exactness of the same path is tests/test_engine_correctness.py's."""
from __future__ import annotations

import collections

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from prefixguard.engine.llm_engine import LLMEngine

PER_LAYER, FIXED = 40, 40
# ATen operators that only make a new view of existing memory or read metadata: no kernel behind them.
METADATA = frozenset({
    "aten::view", "aten::slice", "aten::select", "aten::unsqueeze", "aten::squeeze", "aten::transpose",
    "aten::t", "aten::expand", "aten::as_strided", "aten::reshape", "aten::_reshape_alias", "aten::narrow",
    "aten::split", "aten::chunk", "aten::unbind", "aten::permute", "aten::alias", "aten::detach",
    "aten::detach_", "aten::lift_fresh", "aten::resolve_conj", "aten::resolve_neg", "aten::result_type",
    "aten::empty", "aten::empty_like", "aten::empty_strided", "aten::flatten", "aten::unflatten",
})


def decode_step_ops(engine: LLMEngine) -> collections.Counter:
    """The top-level ATen operators of one engine.step() that is a decode step."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        engine.step()
    ops = collections.Counter()
    for ev in prof.events():
        parent = ev.cpu_parent
        if ev.name.startswith("aten::") and (parent is None or not parent.name.startswith("aten::")):
            ops[ev.name] += 1
    return ops


def launches(ops: collections.Counter) -> int:
    return sum(n for name, n in ops.items() if name not in METADATA)


def ops_at(context: int, batch: int) -> collections.Counter:
    engine = LLMEngine("tiny", page_size=16, prefix_reuse=False, max_batch=batch)
    seqs = [engine.add_request([(7 * i + j) % 90_000 + 1 for j in range(context)], max_tokens=8) for i in range(batch)]
    while any(not s.output_ids for s in seqs):      # prefill
        engine.step()
    engine.step()                                    # one decode step to warm up
    ops = decode_step_ops(engine)
    assert all(len(s.output_ids) == 3 for s in seqs), "the profiled step was not one decode step"
    return ops


@pytest.fixture(scope="module")
def counts() -> dict[tuple[int, int], collections.Counter]:
    torch.set_num_threads(1)
    return {(ctx, b): ops_at(ctx, b) for ctx in (20, 300, 1500) for b in (1, 4)}


def test_decode_launches_do_not_grow_with_context_or_batch(counts):
    by_point = {point: launches(ops) for point, ops in counts.items()}
    assert len(set(by_point.values())) == 1, by_point
    assert len({tuple(sorted(ops.items())) for ops in counts.values()}) == 1   # the very same operators


def test_decode_launches_within_budget(counts):
    layers = LLMEngine("tiny", kv_pages=4).config.num_layers
    n = launches(counts[(300, 1)])
    assert n <= PER_LAYER * layers + FIXED, (n, counts[(300, 1)])


def test_the_count_sees_every_layer():
    """The counter itself: a model with twice the layers launches more per step (it can fail)."""
    from prefixguard.engine.config import PRESETS, with_overrides
    torch.set_num_threads(1)
    small, big = (LLMEngine(with_overrides(PRESETS["tiny"], num_layers=n), page_size=16, prefix_reuse=False)
                  for n in (2, 4))
    got = []
    for engine in (small, big):
        seq = engine.add_request(list(range(1, 40)), max_tokens=4)
        engine.step()
        engine.step()
        got.append(launches(decode_step_ops(engine)))
        assert len(seq.output_ids) == 3
    assert got[1] - got[0] >= 2 * 10, got            # each layer launches its matmuls, norms and attention
