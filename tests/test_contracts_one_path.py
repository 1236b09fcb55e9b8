"""One prediction path: replay's sim (--policy auto) and the proxy's analysis expect the same cache read for
every request of every recorded source (shared/data/recorded: Anthropic, OpenAI Chat and Responses,
OpenRouter's OpenAI-compatible models, Bedrock, Gemini), fed in the same order on the same clock, each
request to the upstream its cassette recorded.

Before they shared the policy module's `predicted` / `billed` / `answered`, the sim judged requests of the
compatible contract (an OpenRouter model whose maker has no contract of its own) with the engine's radix
tree over the engine's chat-template tokens, and the proxy with the compatible policy over the provider's
scaled tokens: on such traffic the two disagreed."""
from __future__ import annotations

import json
from pathlib import Path

from prefixguard.capture.store import open_store
from prefixguard.contracts.providers import provider_for
from prefixguard.proxy.analysis import Analyzer, FlowState, Response
from prefixguard.replay import sources
from prefixguard.replay.targets import SimTarget
from prefixguard.utils.errors import InputError


def _cassettes(recorded: Path) -> list[Path]:
    return sorted(c for s in recorded.iterdir() if s.is_dir() for c in s.iterdir() if c.is_dir())


def _response(folder: Path, ref: str) -> tuple[bytes | None, list[tuple[float, bytes]] | None]:
    found = sources.response_file(folder, ref.removesuffix(".request.json"))
    if found is None:
        return None, None
    return (found.read_bytes(), None) if found.suffix == ".json" else (None, [(0.0, found.read_bytes())])


def _both(folder: Path, db: Path) -> list[tuple[str, int | None, int | None, str | None, str | None]]:
    """(request, proxy's expected read, sim's predicted read, api, model) of each request of a cassette."""
    try:
        trace = sources.load(folder)
    except InputError:
        return []
    analyzer, sim = Analyzer(store=str(db)), SimTarget("auto")
    simmed: dict[str, int] = {}
    for i, req in enumerate(trace.requests):
        body, chunks = _response(folder, req.ref)
        analyzer.request(FlowState(id=str(i), ts=float(i), sent=float(i), path=req.path or "/v1/messages", upstream=req.upstream,
                                   body=json.dumps(req.body).encode()))
        analyzer.finish(Response(id=str(i), status=200, headers_at=float(i), ended_at=float(i), body=body, chunks=chunks))
        try:
            simmed[str(i)] = sim.run(req, float(i)).cache_read
        except InputError:
            pass
    analyzer.close()
    with open_store(db) as rows:
        return [(f"{folder.name}/{r['id']}", r.get("expected_cached"), simmed.get(r["id"]), r.get("api"), r.get("model"))
                for r in rows.rows() if r.get("api")]


def test_sim_and_proxy_expect_the_same_reads_on_every_recorded_source(shared_data: Path, tmp_path: Path) -> None:
    recorded = shared_data / "recorded"
    compared, disagree, providers_seen = 0, [], set()
    for n, folder in enumerate(_cassettes(recorded)):
        for ref, proxy, sim, api, model in _both(folder, tmp_path / f"{n}.db"):
            compared += 1
            providers_seen.add(provider_for(api, model))
            if proxy != sim:
                disagree.append((ref, model, proxy, sim))
    assert compared > 500                                   # every source was read
    assert {"anthropic", "openai", "bedrock", "gemini", "compatible"} <= providers_seen
    assert disagree == []


def test_an_answer_without_cache_fields_teaches_both_alike(tmp_path: Path) -> None:
    """A server that reports its prompt total but no cache field on a request (vLLM without prompt token
    details; Bedrock's gpt-oss when it read nothing): the proxy learns the token scale and the output from
    it, and so must the sim, or the next request's expected read differs (4,572 against 4,582 on one of
    Mirascope's public cassettes)."""
    folder = tmp_path / "cassette"
    folder.mkdir()
    system = {"role": "system", "content": "Catalogue rules: shelve by subject, then author, then year. " * 80}
    turns = [[system, {"role": "user", "content": "Where do atlases go?"}]]
    turns.append([*turns[0], {"role": "assistant", "content": "Geography, by region."},
                  {"role": "user", "content": "And maps?"}])
    turns.append([*turns[1], {"role": "assistant", "content": "With the atlases."},
                  {"role": "user", "content": "Thanks."}])
    for n, (messages, total, details) in enumerate(zip(turns, (1500, 1530, 1550), (None, 1408, 1504)), 1):
        (folder / f"{n:04d}.request.json").write_text(json.dumps({"model": "Qwen/Qwen3-8B", "messages": messages}))
        usage = {"prompt_tokens": total, "completion_tokens": 6}
        if details is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": details}
        (folder / f"{n:04d}.response.json").write_text(json.dumps({"object": "chat.completion", "usage": usage,
                                                                   "choices": [{"index": 0, "message": {}}]}))
    uri = "http://127.0.0.1:8000/v1/chat/completions"  # a server one runs
    (folder / "meta.json").write_text(json.dumps({"interactions": [
        {"n": n, "method": "POST", "uri": uri, "status": 200, "request": "json", "response": "json"} for n in (1, 2, 3)]}))
    rows = _both(folder, tmp_path / "rows.db")
    assert len(rows) == 3 and all(provider_for(api, model) == "compatible" for _, _, _, api, model in rows)
    assert [(proxy, sim) for _, proxy, sim, _, _ in rows if proxy != sim] == []
    assert rows[1][1] > 1000  # the second request reads the first one's prefix


def _expected(folder: Path, db: Path, interleaved: bool) -> list[int | None]:
    """The proxy's expected read of each request of a cassette, each answer analysed before the next request
    (in order) or after it (interleaved: a stream's end reaching the analysis after the client's next request)."""
    trace = sources.load(folder)
    analyzer = Analyzer(store=str(db))
    ended: list[Response] = []
    for i, req in enumerate(trace.requests):
        body, chunks = _response(folder, req.ref)
        analyzer.request(FlowState(id=str(i), ts=float(i), sent=float(i), path=req.path or "/v1/messages",
                                   upstream=req.upstream, body=json.dumps(req.body).encode()))
        for resp in ended:
            analyzer.finish(resp)
        ended = [Response(id=str(i), status=200, headers_at=float(i), ended_at=float(i), body=body, chunks=chunks)]
        if not interleaved:
            analyzer.finish(ended.pop())
    for resp in ended:
        analyzer.finish(resp)
    analyzer.close()
    with open_store(db) as rows:
        return [r.get("expected_cached") for r in rows.rows() if r.get("api")]


def test_a_request_read_before_the_answer_before_it_is_judged_as_in_order(shared_data: Path, tmp_path: Path) -> None:
    """A request whose analysis ran before the answer before it was learnt from (the token scale that answer
    taught, the cache it wrote) gets its final verdict from the state as it stands when its own answer ends: the
    recorded sessions' expected reads are those of an analysis that saw each answer first."""
    compared = 0
    for n, folder in enumerate(c for c in _cassettes(shared_data / "recorded") if c.parent.name == "pydantic-ai"):
        try:
            ordered = _expected(folder, tmp_path / f"{n}a.db", interleaved=False)
        except InputError:
            continue
        assert _expected(folder, tmp_path / f"{n}b.db", interleaved=True) == ordered, folder.name
        compared += sum(1 for e in ordered if e)
    assert compared >= 20  # requests expected to read (21 in pydantic-ai's recordings)
