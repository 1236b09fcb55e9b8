"""A request's path is routed once: the addon routes it (wire.routes.resolve) when its headers arrive,
and the route crosses to the analysis process as a plain tuple in the request's message; the analysis
parses the body with it and routes no path again (an in-process caller that gives none is routed there)."""
from __future__ import annotations

import json
import marshal
from pathlib import Path

import pytest
from mitmproxy import http

from prefixguard.capture.store import open_store
from prefixguard.proxy import addon
from prefixguard.proxy.analysis import Analyzer, FlowState, Response, packed, unpacked
from prefixguard.wire import routes

BODY = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 5,
                   "messages": [{"role": "user", "content": "hi"}]}).encode()


def _request(method: str, path: str) -> http.Request:
    return http.Request.make(method, f"http://upstream.test{path}")


def test_the_addon_routes_what_the_analysis_reads_and_nothing_else() -> None:
    assert addon._route(_request("POST", "/v1/messages?beta=true")) == ("anthropic", None, True, "/v1/messages")
    tail = addon._route(_request("POST", "/openai/deployments/my-gpt/chat/completions"))
    assert tail is not None and tail[0] == "openai-chat" and tail[3] == "/openai/deployments/my-gpt/chat/completions"
    assert addon._route(_request("GET", "/v1/messages")) is None
    assert addon._route(_request("POST", "/v1/models")) is None


def test_the_route_crosses_the_process_boundary_as_a_plain_tuple() -> None:
    routed = addon._route(_request("POST", "/v1/messages"))
    args = packed("request", id="f", ts=1.0, sent=0.0, path="/v1/messages", upstream=("http", "x", 80), fields=(),
                  routed=routed)
    flow = unpacked("request", marshal.loads(marshal.dumps(args)))
    assert flow.routed == ("anthropic", None, True, "/v1/messages")


def test_the_analysis_parses_with_the_route_it_is_given_and_routes_no_path(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    routed = addon._route(_request("POST", "/v1/messages"))
    calls: list[str | None] = []
    real = routes.resolve
    monkeypatch.setattr(routes, "resolve", lambda path: calls.append(path) or real(path))
    analyzer = Analyzer(store=str(tmp_path / "c.db"))
    analyzer.request(FlowState(id="f", ts=1.0, sent=0.0, path="/v1/messages", upstream=("http", "x", 80),
                               body=BODY, routed=routed))
    analyzer.finish(Response(id="f", status=200, headers_at=0.1, ended_at=0.2, body=b"{}"))
    assert calls == []
    analyzer.request(FlowState(id="g", ts=2.0, sent=0.0, path="/v1/messages", upstream=("http", "x", 80), body=BODY))
    analyzer.finish(Response(id="g", status=200, headers_at=0.1, ended_at=0.2, body=b"{}"))
    assert calls == ["/v1/messages"]   # no route given: routed here, once
    analyzer.close()
    with open_store(tmp_path / "c.db") as store:
        assert [(r["id"], r["api"]) for r in store.rows()] == [("f", "anthropic"), ("g", "anthropic")]
