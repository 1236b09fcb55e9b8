"""A support bot as apps write it, with a prompt-cache bug: the system prompt renders the current time,
so every request starts with a new prefix and nothing is ever read from the cache.

The fix is in fixed/support_app.py: the system prompt stays constant and the time goes into the newest
user message, after the cached prefix.
"""
from __future__ import annotations

from datetime import datetime

import anthropic

RULES = ("You are the support agent of Acme Outdoor. Answer briefly. Refunds are handled within thirty days "
         "of purchase with the original receipt; otherwise offer store credit. ") * 40


class SupportBot:
    def __init__(self, client: anthropic.Anthropic) -> None:
        self.client = client
        self.history: list[dict] = []

    def ask(self, question: str) -> str:
        self.history.append({"role": "user", "content": question})
        reply = self.client.messages.create(
            model="claude-sonnet-4-5", max_tokens=256,
            system=[{"type": "text", "text": f"{RULES}\nCurrent time: {datetime.now().isoformat()}",
                     "cache_control": {"type": "ephemeral"}}],
            messages=self.history)
        text = reply.content[0].text
        self.history.append({"role": "assistant", "content": text})
        return text
