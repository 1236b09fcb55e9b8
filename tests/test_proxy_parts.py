"""The proxy's parts on their own: redaction, the SSE tap, verdicts, routes."""
from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

import pytest
from mitmproxy.test import tutils

from prefixguard.judge import verdict
from prefixguard.judge.compare import compare
from prefixguard.judge.policies import Expected
from prefixguard.model.usage import Usage
from prefixguard.proxy.encoding import decoded
from prefixguard.proxy.redact import REDACTED, api_keys, redact_body, redact_path, tenant_of
from prefixguard.proxy.route import Route
from prefixguard.proxy.tap import StreamTap, is_event_stream, read_stream
from prefixguard.wire import parse_request, parse_response

STREAM = "recorded/openllmetry/test_prompt_caching_test_anthropic_prompt_caching_stream_legacy/0001.response.sse"
KEY = "sk-ant-api03-abcdefghijklmnop"


def test_tenant_is_a_hash_of_the_key_whatever_header_carries_it() -> None:
    t = tenant_of({"X-Api-Key": KEY})
    assert t == tenant_of({"authorization": f"Bearer {KEY}"}) == tenant_of({"api-key": KEY})
    assert KEY not in t and len(t) == 12
    assert tenant_of({"x-api-key": KEY + "2"}) != t and tenant_of({}) == ""
    assert api_keys({"Authorization": f"Bearer {KEY}"}) == [KEY]


def test_redaction_of_paths_and_bodies() -> None:
    assert redact_path(f"/v1/messages?beta=true&key={KEY}") == f"/v1/messages?beta=true&key={REDACTED}"
    assert redact_path("/v1/messages") == "/v1/messages"
    body = json.dumps({"model": "m", "api_key": KEY, "nested": {"client_secret": "s3cr3t-value"},
                       "messages": [{"role": "user", "content": f"key {KEY}"}],
                       "thinking": {"signature": "keep-me-signature"}})
    out = redact_body(body, [KEY])
    assert KEY not in out and "s3cr3t-value" not in out and "keep-me-signature" in out
    assert list(json.loads(out)) == ["model", "api_key", "nested", "messages", "thinking"]
    clean = '{"model": "m",   "messages": []}'
    assert redact_body(clean, [KEY]) == clean  # nothing to remove: the bytes as sent
    # the quick look for credential names must not miss one in another case, dashed, or escaped
    for name in ('"Client-Secret"', '"ACCESS_TOKEN"', '"api\\u005fkey"'):
        assert "s3cr3t-value" not in redact_body(f'{{"model": "m", {name}: "s3cr3t-value"}}')


def test_tap_returns_chunks_unchanged_and_reads_usage_later(shared_data: Path) -> None:
    data = (shared_data / STREAM).read_bytes()
    tap = StreamTap()
    out = []
    for i in range(0, len(data), 97):  # cut anywhere, even inside an event
        out.append(tap(data[i:i + 97]))
        time.sleep(0.0005)
    assert tap(b"") == b"" and len(tap.chunks) == len(out)  # the end of the message is no chunk
    assert b"".join(out) == data
    stream, first = read_stream(tap.chunks, "anthropic")
    assert stream.usage() == parse_response(data, "anthropic")
    assert tap.chunks[0][0] < first <= tap.chunks[-1][0]  # the chunk that carried the first text delta


@pytest.mark.parametrize("encoding", ["gzip", "br", "zstd"])
def test_tap_reads_a_compressed_stream(shared_data: Path, encoding: str) -> None:
    """The stream and whole bodies are decoded by one path (proxy/encoding.py): br and zstd included."""
    import brotli
    from backports import zstd
    data = (shared_data / STREAM).read_bytes()
    tap = StreamTap()
    packed = {"gzip": gzip.compress, "br": brotli.compress, "zstd": zstd.compress}[encoding](data)
    for i in range(0, len(packed), 50):
        tap(packed[i:i + 50])
    usage = read_stream(tap.chunks, "anthropic", encoding)[0].usage()
    assert usage == parse_response(data, "anthropic") and usage.reported
    assert decoded(packed, encoding) == (data, True) and decoded(packed, "nosuch") == (packed, False)
    assert is_event_stream("text/event-stream; charset=utf-8") and not is_event_stream("application/json")


def test_verdicts() -> None:
    hit = Expected(1000, 0, 10, "hit")
    cold = Expected(0, 1010, 0, "cold")
    reported = lambda read, write=0: Usage(1010, read, write, 0, 1010 - read - write, 5, True)  # noqa: E731
    assert verdict.final(hit, None, reported(1000), 200).verdict == "hit"
    assert verdict.final(hit, None, reported(0, 1000), 200).verdict == "miss_server_side"
    assert verdict.final(hit, None, reported(300), 200).verdict == "partial"
    # the contract itself reads only part of the prompt (a new conversation): reading that much is a hit
    assert verdict.final(Expected(700, 300, 10, "partial"), None, reported(700, 300), 200).verdict == "hit"
    assert verdict.final(cold, None, reported(0, 1000), 200).verdict == "cold"
    assert verdict.final(Expected(0, 0, 1010, "ttl_expired"), None, reported(0, 1000), 200).verdict == \
        "miss_ttl_expired"
    assert verdict.final(Expected(0, 0, 1010, "below_minimum"), None, reported(0), 200).verdict == "below_minimum"
    # the provider wrote it: it was not below its minimum (our token count was short)
    assert verdict.final(Expected(0, 0, 1010, "below_minimum"), None, reported(0, 1000), 200).verdict == "cold"
    assert verdict.final(hit, None, Usage(), 200).verdict == "not_reported"
    assert verdict.final(hit, None, reported(0), 503) == verdict.Verdict("error", "http 503")
    assert verdict.final(hit, None, Usage(), None, "connection reset").cause == "connection reset"
    # within the tolerance of rules/verdict.toml: our tokenizer is not the provider's
    assert verdict.final(hit, None, reported(970), 200).verdict == "hit"
    # a read where none was predicted: a cache that traffic we did not see wrote (an earlier run)
    v = verdict.final(cold, None, reported(1000), 200)
    assert v.verdict == "hit" and "not seen" in v.cause
    # ...also after a change that lost the earlier request's cache (recorded: a model switch, then 2,048 read)
    changed = compare(*(parse_request(json.dumps({"model": m, "messages": [{"role": "user", "content": "x " * 4000}]}))
                        for m in ("gpt-4o-mini", "gpt-4.1-mini")))
    v = verdict.final(Expected(0, 0, 2747, "cold"), changed, Usage(2747, 2048, 0, 0, 699, 5, True), 200)
    assert v.verdict == "hit" and "after model_changed" in v.cause and "not seen" in v.cause
    # ...unless it is a few tokens of a long prompt: 8 of 2,286 read is no hit
    assert verdict.final(cold, None, Usage(2286, 8, 0, 0, 2278, 5, True), 200).verdict == "cold"


def test_verdict_names_the_cause_of_a_changed_prefix() -> None:
    def req(stamp: str) -> bytes:
        return json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 5,
                           "system": [{"type": "text", "text": f"Now: {stamp}. You are helpful. " * 200}],
                           "messages": [{"role": "user", "content": [
                               {"type": "text", "text": "hello", "cache_control": {"type": "ephemeral"}}]}]}).encode()
    a, b = parse_request(req("2026-12-02T10:00:00Z")), parse_request(req("2026-12-02T10:05:00Z"))
    cmp = compare(a, b)
    n = b.total_tokens
    assert cmp.reused_tokens == 0 and cmp.reprefill_tokens == n  # A cached all of it, B writes all again
    v = verdict.final(Expected(0, n, 0, "cold"), cmp, Usage(n, 0, n, 0, 0, 3, True), 200)
    assert v.verdict == "miss_prefix_changed" and v.cause == "volatile_content at /system/0"
    assert verdict.early(Expected(0, n, 0, "cold"), cmp) == v
    Change = verdict.PrefixChange  # what the demo, the store and the report read: typed, never parsed back
    assert v.change == Change(("volatile_content",), "/system/0") and v.note is None
    both = Change(("tools_reordered", "model_changed"), "/tools/2")
    assert str(both) == "tools_reordered+model_changed at /tools/2"
    assert v.verdict is verdict.VerdictName.MISS_PREFIX_CHANGED
    # the provider read what an unchanged prefix would have given: the change cost nothing, a note on a hit
    v = verdict.final(Expected(0, n, 0, "cold"), cmp, Usage(n, n, 0, 0, 0, 3, True), 200)
    assert v.verdict == "hit" and v.cause.startswith("note: volatile_content at /system/0 cost nothing")
    assert v.change == Change(("volatile_content",), "/system/0") and v.note == v.cause


def test_routes_by_path_prefix() -> None:
    routes = sorted([Route.parse("https://api.anthropic.com"), Route.parse("/openai=https://api.openai.com/base")],
                    key=lambda r: -len(r.prefix))
    req = tutils.treq(path=b"/openai/v1/chat/completions")
    route = next(r for r in routes if r.matches(req.path))
    route.apply(req)
    assert (req.scheme, req.host, req.port, req.path) == ("https", "api.openai.com", 443, "/base/v1/chat/completions")
    other = tutils.treq(path=b"/v1/messages")
    assert next(r for r in routes if r.matches(other.path)).prefix == ""
    assert not Route.parse("/openai=http://x").matches("/openaix/v1")


def test_proxy_command_rejects_bad_input_in_one_line(tmp_path: Path) -> None:
    from helpers.cli import CliRunner

    from prefixguard.cli import main

    bad = CliRunner().invoke(main, ["proxy", "--upstream", "ftp://example.com", "--port", "0"])
    assert bad.exit_code == 2 and "upstream must be an http(s) URL" in bad.output
    no_dir = CliRunner().invoke(main, ["proxy", "--upstream", "http://x", "--store", str(tmp_path / "no" / "c.db")])
    assert no_dir.exit_code == 2
    assert "cannot open the capture file" in no_dir.output and "Traceback" not in no_dir.output


def test_the_pipe_to_the_analysis_names_its_fields() -> None:
    """The addon packs each step's values by name and the analysis unpacks them by the same names: a
    field renamed or reordered in FlowState or Response cannot shift values into the wrong place."""
    import dataclasses
    import marshal

    from prefixguard.proxy.analysis import WIRE, packed, unpacked
    for step, (cls, names) in WIRE.items():
        assert set(names) <= {f.name for f in dataclasses.fields(cls)}, step
    sent = packed("finish", chunks=[(1.0, b"data: x")], error=None, encoding="br", ended_at=2.5,
                  headers_at=1.5, status=200, id="f1")
    got = unpacked("finish", marshal.loads(marshal.dumps(sent)))
    assert (got.id, got.status, got.headers_at, got.ended_at, got.encoding, got.chunks) == \
        ("f1", 200, 1.5, 2.5, "br", [(1.0, b"data: x")])
    with pytest.raises(KeyError):
        packed("request", id="f1")   # a value left out is an error at the sender, not a None downstream
