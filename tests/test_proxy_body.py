"""The analysis holds one copy of a request body: the prompt's text once the body is read, the bytes
only where no prompt was made (or a byte order mark opens them). What is stored is the body as sent,
whichever it kept."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from prefixguard.capture.store import open_store
from prefixguard.proxy.analysis import Analyzer, FlowState, Response

REQUEST = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 16, "system": "Be terse. \u00e9\u4e2d",
                      "messages": [{"role": "user", "content": "caf\u00e9 \u2603 hi"}]}, ensure_ascii=False).encode()


@pytest.mark.parametrize(("body", "analysed", "kept"), [
    (REQUEST, True, False),                      # read: the prompt's text is the copy
    (b"\xef\xbb\xbf" + REQUEST, True, True),      # the text leaves the mark out: the bytes stay
    (b'{"model": "claude-sonnet-4-5", "messages": [', False, True),   # no prompt: the bytes stay
    (b'{"bad \xff byte": 1}', False, True),       # not UTF-8: never decoded, kept as sent
])
def test_one_copy_is_held_and_the_body_is_stored_as_sent(tmp_path: Path, body: bytes, analysed: bool,
                                                         kept: bool) -> None:
    store = tmp_path / "capture.db"
    analyzer = Analyzer(store=str(store))
    flow = FlowState(id="f1", ts=1.0, sent=1.0, path="/v1/messages", body=body)
    analyzer.request(flow)
    assert (flow.prompt is not None) is analysed
    assert flow.body == (body if kept else b"")
    if analysed and not kept:
        assert flow.prompt is not None and flow.prompt.text.encode() == body
    analyzer.finish(Response(id="f1", status=200, body=b"{}"))
    analyzer.close()
    with open_store(store) as db:
        [rec] = list(db.records())
    assert rec.request_bytes == len(body)
    assert rec.request == body.decode("utf-8", "replace")
