"""model/fingerprint.Chain: a fingerprint chain held as one buffer of 16-byte digests reads as the list of
digests that repeated link() makes (index, slice, iteration, equality, raw bytes), and costs 16 bytes a part."""

from __future__ import annotations

import json
import pickle
import random
import sys

import pytest

from prefixguard.model.fingerprint import DIGEST, Chain, chain, common_prefix, link
from prefixguard.wire import parse_request


def linked(parts: list[bytes]) -> list[bytes]:
    """The chain as a list of digests, one link() at a time."""
    out, prev = [], b""
    for part in parts:
        prev = link(prev, part)
        out.append(prev)
    return out


def random_parts(rng: random.Random, n: int) -> list[bytes]:
    return [rng.randbytes(rng.randrange(0, 40)) for _ in range(n)]


@pytest.mark.parametrize("seed", range(20))
def test_chain_reads_as_the_linked_list(seed: int) -> None:
    rng = random.Random(seed)
    parts = random_parts(rng, rng.randrange(0, 60))
    old, new = linked(parts), chain(parts)
    assert isinstance(new, Chain)
    assert new == old and list(new) == old and len(new) == len(old)
    assert bytes(new) == b"".join(old)
    assert Chain(bytes(new)) == new and Chain.of(old) == new
    for i in range(-len(old), len(old)):
        assert new[i] == old[i] and type(new[i]) is bytes
    for _ in range(30):
        start, stop = rng.randrange(-70, 70), rng.randrange(-70, 70)
        step = rng.choice([None, 1, 2, -1, 3])
        piece = new[start:stop:step]
        assert isinstance(piece, Chain) and piece == old[start:stop:step]
    for i in range(len(old)):
        assert new.holds(i, old[i])
        assert not new.holds(i, link(old[i], b"x"))
    if old:
        assert new[-1] in new and new.index(new[-1]) == len(old) - 1


@pytest.mark.parametrize("seed", range(10))
def test_append_extend_and_extend_from(seed: int) -> None:
    rng = random.Random(seed)
    a, b = linked(random_parts(rng, 25)), linked(random_parts(rng, 25))
    built = Chain()
    for fp in a:
        built.append(fp)
    assert built == a
    built.extend(Chain.of(b))
    assert built == a + b
    built.extend(b[:3])
    assert built == a + b + b[:3]
    built.extend(built)  # itself: its own digests once more
    assert built == (a + b + b[:3]) * 2
    start, stop = sorted(rng.sample(range(26), 2))
    taken = Chain.of(a[:start])
    taken.extend_from(Chain.of(b), start, stop)
    assert taken == a[:start] + b[start:stop]
    taken.extend_from(taken, 0, 2)
    assert taken == a[:start] + b[start:stop] + (a[:start] + b[start:stop])[:2]


def test_equality_order_and_errors() -> None:
    one = chain([b"a", b"b"])
    assert one == chain([b"a", b"b"]) and one != chain([b"a", b"c"]) and one != chain([b"a"])
    assert one == tuple(one) and one != [one[0]] and one != "ab" and chain([]) == [] and not chain([])
    assert one[:0] == Chain() and one[5:1] == []
    with pytest.raises(IndexError):
        one[2]
    with pytest.raises(ValueError):
        one.append(b"short")
    with pytest.raises(ValueError):
        Chain(b"x" * (DIGEST + 1))
    with pytest.raises(TypeError):
        hash(one)
    assert pickle.loads(pickle.dumps(one)) == one
    assert common_prefix(one, chain([b"a", b"c"])) == 1 and common_prefix(one, list(one)) == 2


def test_a_parsed_prompt_chain_costs_sixteen_bytes_a_part() -> None:
    n = 20000
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(n)]
    body = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 16, "messages": msgs})
    prompt = parse_request(body, count_tokens=False)
    parts = len(prompt.segments)
    assert len(prompt.chain) == parts >= n
    assert prompt.chain == linked([s.key for s in prompt.segments])
    # a list of 16-byte bytes objects costs 57 bytes a part; the buffer 16, plus its growth slack (an eighth)
    assert 16 <= sys.getsizeof(prompt.chain) / parts < 16 * 1.2
