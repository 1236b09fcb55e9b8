"""The app's own test, with prefixguard's pytest plugin: the recorder sits under the SDK's HTTP client,
the responses are mocked (no network), and `prefixguard_fail_on_break = true` (pytest.ini) fails the test
when the conversation breaks its own cached prefix."""
from __future__ import annotations

import anthropic

try:                      # the SDKs moved from httpx to its fork httpx2 (same API)
    import httpx2 as httpx
except ImportError:
    import httpx

from support_app import SupportBot


def fake_claude(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json={
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "Your order shipped yesterday."}],
        "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": 1200, "output_tokens": 8}})


def test_two_turns_share_their_prefix(prefix_recorder):
    client = anthropic.Anthropic(api_key="test", http_client=prefix_recorder.http_client(
        transport=httpx.MockTransport(fake_claude)))
    bot = SupportBot(client)
    bot.ask("Where is my order 1042?")
    bot.ask("Can I still return it?")
    assert len(prefix_recorder.requests) == 2
